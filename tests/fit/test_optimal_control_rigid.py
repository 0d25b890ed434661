r"""Trajectory optimisation of a rigid body with exact rolling (`cx.fit` on
`cx.models.tilted_rolling_disk`: quaternion coordinates, the three rows of the rolling
contact held at every node).

What is independent of the transcription: the energy balance along the replay. The
rolling contact is ideal and scleronomic, so its reactions do no work and the energy
$E = T + V$ changes only by the work of the control torques, $\dot E = \tau\cdot\omega$.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

pytest.importorskip("cyipopt")

DISK = cx.models.tilted_rolling_disk()  # m = 1, a = 0.1, I1 = ma²/4, I3 = ma²/2
BODY = cx.rigid.RigidBody(
    DISK.params["mass"],
    jnp.stack([DISK.params["I1"], DISK.params["I1"], DISK.params["I3"]]),
    cx.rigid.Quaternion(),
)
EZ = jnp.array([0.0, 0.0, 1.0])


def _torque(q, u):
    """A drive torque u[0] about the axle (the body's e3) and a steering torque u[1]
    about the vertical, in mN m (so that ∫|u|² is of order one: IPOPT does not scale an
    objective up, and in N m the optimum is 9e-6)."""
    return 1e-3 * (u[0] * BODY.rotation(q)[:, 2] + u[1] * EZ)


def _force(t, q, qd, p):
    return cx.rigid.body_force(BODY, q, torque=_torque(q, p["u"]))


def _disk_problem(target=(1.0, 0.1), running_cost=lambda t, q, qd, u, p: u @ u):
    """The disk upright, rolling along x at 1 m/s (axle along -y), steered by `_torque` to
    the centre's `(x, y) = target` at T = 1 s with least `running_cost`."""
    a, v = DISK.params["radius"], 1.0
    R0 = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # axle along -y
    q0, qd0 = BODY.state(
        jnp.array([0.0, 0.0, a]), R0, jnp.array([v, 0.0, 0.0]), jnp.array([0.0, v / a, 0.0])
    )
    system = cx.System(DISK.system.lagrangian, DISK.system.constraints, force=_force)
    return cx.fit.OptimalControlProblem(
        system,
        {**DISK.params, "u": jnp.zeros(2)},
        control=lambda p: p["u"],
        t1=1.0,
        q0=q0,
        qd0=qd0,
        terminal_constraint=lambda t, q, qd, p: q[:2] - jnp.asarray(target),
        running_cost=running_cost,
        constraint_solver=cx.KKT(),
    )


@pytest.mark.slow
def test_rolling_disk_steered_to_a_target_point_without_slipping():
    """An upright disk rolling along x at 1 m/s (above √(ga/3) ≈ 0.57 m/s, the speed
    below which upright rolling of a uniform disk is unstable) is steered 10 cm sideways,
    to the centre's (x, y) = (1, 0.1) at T = 1 s, with least ∫|τ|²: from the uncontrolled
    straight roll as the guess, the target is met to 1e-8, the no-slip rows and the
    quaternion's unit norm at every node, the controls replay onto the nodes, and along
    the replay the energy changes by exactly the work of the control torques (the
    rolling reactions do none)."""
    T, target = 1.0, jnp.array([1.0, 0.1])
    problem = _disk_problem(target)
    straight = cx.simulate(problem.system, problem.q0, problem.qd0, problem.params, t1=T,
                           saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, T, 101)))  # fmt: skip
    sol = cx.fit.solve_optimal_control(problem, straight, transcription=cx.fit.HermiteSimpson(20))
    assert sol.success, (sol.status, sol.violated)
    assert abs(sol.objective - 9.3118) <= 1e-3  # (mN m)² s; 9.3116 at N = 30
    np.testing.assert_allclose(sol.q[-1, :2], target, atol=1e-8)
    assert sol.manifold_violation <= 1e-8
    np.testing.assert_allclose(jnp.sum(sol.q[:, 3:] ** 2, axis=1), 1.0, atol=1e-8)
    # The replay (rtol 1e-12) at the nodes: measured 2.9e-5 in q (the centre 4e-6) and
    # 1.3e-4 in qd (the quaternion's rates); fourth order (2.6e-5 at N = 30).
    ts = jnp.linspace(0.0, T, 20 * 16 + 1)
    replay = sol.replay(ts)
    assert float(jnp.max(jnp.abs(replay.q[::16] - sol.q))) <= 1e-4
    assert float(jnp.max(jnp.abs(replay.qd[::16] - sol.qd))) <= 1e-3
    # Energy balance: E(T) - E(0) = ∫ τ·ω dt = 0.0170 J (Simpson's rule on the replay's
    # grid, whose panels do not straddle the nodes where the control has kinks; converged
    # to 1e-12). Measured 1.4e-9: the replay's own error (1.1e-10 at rtol 1e-13).
    power = jax.vmap(lambda t, q, qd: _torque(q, sol.control(t)) @ BODY.angular_velocity(q, qd))(
        ts, replay.q, replay.qd
    )
    simpson = jnp.ones(ts.shape[0]).at[1:-1:2].set(4.0).at[2:-1:2].set(2.0) * (ts[1] - ts[0]) / 3
    work = float(simpson @ power)
    E = replay.energy()
    assert abs(float(E[-1] - E[0]) - work) <= 5e-9


@pytest.mark.slow  # the dense reference Hessian of the whole program compiles for ~1 min
def test_rolling_disk_ipopt_derivatives_equal_dense_autodiff_and_central_differences():
    """The values IPOPT is given for the disk (its compiled programs, with the compiler
    options `cx.fit` uses on the CPU): the Jacobian and the Hessian of the Lagrangian
    σJ + λ·c (fourth derivatives of the Lagrangian through the KKT solve) equal dense
    `jax.jacfwd` / `jax.hessian` of the whole program (compiled with XLA's defaults) to
    round-off, and the Hessian's columns equal central differences of the gradient of
    the Lagrangian."""
    from constrax.fit._ipopt import _Evaluator

    nlp = cx.fit.HermiteSimpson(2).nlp(
        _disk_problem(running_cost=lambda t, q, qd, u, p: u @ u + q[2] * qd @ qd)
    )
    L = nlp.layout
    rng = np.random.default_rng(7)
    z = 0.3 * rng.standard_normal(L.nz)
    lam = rng.standard_normal(L.nc)
    sigma = 0.7
    ev = _Evaluator(nlp, np.float64)
    J = np.zeros((L.nc, L.nz))
    np.add.at(J, (L.jac_rows, L.jac_cols), ev.jacobian(z))
    H = np.zeros((L.nz, L.nz))
    np.add.at(H, (L.hess_rows, L.hess_cols), ev.hessian(z, lam, sigma))

    def lagrangian(z):
        return sigma * nlp.objective(z) + jnp.asarray(lam) @ nlp.constraints(z)

    zj = jnp.asarray(z)
    J_ref = np.asarray(jax.jit(jax.jacfwd(nlp.constraints))(zj))
    H_ref = np.asarray(jax.jit(jax.hessian(lagrangian))(zj))
    assert np.abs(J - J_ref).max() <= 1e-12 * np.abs(J_ref).max()
    assert np.abs(H - np.tril(H_ref)).max() <= 1e-12 * np.abs(H_ref).max()
    assert np.abs(np.triu(H, 1)).max() == 0.0
    grad = jax.jit(jax.grad(lagrangian))
    H_full = H + np.tril(H, -1).T
    eps = 1e-6
    for j in rng.choice(L.nz, 12, replace=False):
        e = np.zeros(L.nz)
        e[j] = eps
        fd = (np.asarray(grad(jnp.asarray(z + e))) - np.asarray(grad(jnp.asarray(z - e)))) / (
            2 * eps
        )
        np.testing.assert_allclose(H_full[:, j], fd, atol=1e-6 * (1 + np.abs(fd).max()))
