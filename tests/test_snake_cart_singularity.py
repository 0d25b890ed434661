r"""The snake cart of Briggs (2016), §1.2, driven through its singular configurations.

At $\phi = \pm\pi/2$ the two wheel rows (1.2.1) coincide: $A$ drops from rank 2 to rank 1,
the multipliers of (1.2.3) are no longer unique (1.2.4), and a plain KKT solve breaks.
The motion itself stays well defined (Gauss's principle / Udwadia–Kalaba). A steering
torque $\tau = 0.3\sin t$ from $\phi_0 = 1.2$, $\dot\phi_0 = 0.5$ with $J_w = 0.05$ gives
$\ddot\phi = \tau/(2J_w) = 3\sin t$ ($\phi$ is decoupled: its column of $A$ is zero), so
$\phi(t) = 1.2 + 0.5t + 3(t - \sin t)$ sweeps from 1.2 to 11.28 in 3 s and crosses
$\pi/2 + k\pi$ four times ($k = 0..3$).

Checks: the run completes; velocity residual $\le 10^{-8}$; energy balance
$E(t) - E(0) = \int_0^t Q\cdot\dot q\,dt$; agreement with an independent fixed-step RK4
written here (hand-typed mass matrix and rows, $W$-orthogonal velocity projection after
every step); rank diagnostics; KKT error; finite Auto/UK accelerations at the singular
point and the two-sided limit of the accelerations.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

PARAMS = dict(m_b=1.0, m_w=0.2, J_b=0.1, J_w=0.05, l=1.0, tau_amp=0.3, tau_freq=1.0)
T1 = 3.0
TS = np.linspace(0.0, T1, 3001)  # fine save grid, h = 1e-3, for the quadrature
RTOL = 1e-10  # adaptive tolerance of the constrax runs (rtol = atol)


# The model zoo's snake cart: Lagrangian, wheel rows (1.2.1) and steering torque
# tau_amp sin(tau_freq t) = 0.3 sin t.
SNAKE = cx.models.snake_cart().system
wheels = SNAKE.constraints[0].omega


def _p():
    return {k: jnp.asarray(v) for k, v in PARAMS.items()}


def admissible(phi, s=1.3, th=0.4, phd=0.7):
    r"""A state on $\ker A$: body-frame velocity $(s\ell\cos\phi, 0)$, $\dot\theta = 2s\sin\phi$
    (the instantaneous centre of rotation of two wheels steered at $\theta\pm\phi$)."""
    l = PARAMS["l"]
    xb, thd = s * l * np.cos(phi), 2 * s * np.sin(phi)
    q = jnp.array([0.2, -0.1, th, phi])
    qd = jnp.array([xb * np.cos(th), xb * np.sin(th), thd, phd])
    return q, qd


def initial_state():
    # phi0 = 1.2, phid0 = 0.5, s chosen so that the body moves at a moderate speed.
    return admissible(1.2, s=0.6, th=0.3, phd=0.5)


@eqx.filter_jit
def _run(q0, qd0, p, stabilisation):
    traj = cx.simulate(
        SNAKE,
        q0,
        qd0,
        p,
        t1=T1,
        saveat=diffrax.SaveAt(ts=jnp.asarray(TS)),
        stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=RTOL),
        stabilisation=stabilisation,
    )
    return (
        traj.q,
        traj.qd,
        traj.stats["num_steps"],
        traj.constraint_residual().velocity,
        traj.energy(),
    )


_RUNS = {}


def run(kind):
    if kind not in _RUNS:
        stab = cx.Projection(10.0, 10.0) if kind == "projection" else None
        q0, qd0 = initial_state()
        _RUNS[kind] = jax.tree_util.tree_map(np.asarray, _run(q0, qd0, _p(), stab))
    return _RUNS[kind]


def _crossings(phi):
    """Number of crossings of phi = pi/2 + k pi (zeros of cos phi)."""
    c = np.cos(phi)
    return int(np.sum(np.sign(c[1:]) != np.sign(c[:-1])))


# ----------------------------------------------------------------------------------------
# Independent reference: fixed-step RK4 with the W-orthogonal velocity projection.


def _reference_rk4(q0, qd0, h, n_steps, save_every):
    P = PARAMS
    m = P["m_b"] + 2 * P["m_w"]
    J = P["J_b"] + 2 * P["J_w"] + 0.5 * P["l"] ** 2 * P["m_w"]
    Minv = jnp.diag(jnp.array([1 / m, 1 / m, 1 / J, 1 / (2 * P["J_w"])]))
    hl = 0.5 * P["l"]

    def rows(q):
        th, ph = q[2], q[3]
        return jnp.array(
            [
                [-jnp.sin(th + ph), jnp.cos(th + ph), hl * jnp.cos(ph), 0.0],
                [jnp.sin(th - ph), -jnp.cos(th - ph), hl * jnp.cos(ph), 0.0],
            ]
        )

    def rows_dot(q, qd):  # d/dt of the rows above, by hand
        th, ph, thd, phd = q[2], q[3], qd[2], qd[3]
        return jnp.array(
            [
                [
                    -jnp.cos(th + ph) * (thd + phd),
                    -jnp.sin(th + ph) * (thd + phd),
                    -hl * jnp.sin(ph) * phd,
                    0.0,
                ],
                [
                    jnp.cos(th - ph) * (thd - phd),
                    jnp.sin(th - ph) * (thd - phd),
                    -hl * jnp.sin(ph) * phd,
                    0.0,
                ],
            ]
        )

    def pinv_solve(S, r):
        return jnp.linalg.pinv(S, rtol=1e-14) @ r

    def rhs(t, y):
        q, qd = y
        A = rows(q)
        Q = jnp.array([0.0, 0.0, 0.0, 0.3 * jnp.sin(t)])
        a = Minv @ Q
        lam = pinv_solve(A @ Minv @ A.T, -rows_dot(q, qd) @ qd - A @ a)
        return qd, a + Minv @ A.T @ lam

    def project(q, qd):
        A = rows(q)
        return qd - Minv @ A.T @ pinv_solve(A @ Minv @ A.T, A @ qd)

    def step(carry, i):
        q, qd = carry
        t = i * h
        k1 = rhs(t, (q, qd))
        k2 = rhs(t + h / 2, (q + h / 2 * k1[0], qd + h / 2 * k1[1]))
        k3 = rhs(t + h / 2, (q + h / 2 * k2[0], qd + h / 2 * k2[1]))
        k4 = rhs(t + h, (q + h * k3[0], qd + h * k3[1]))
        q = q + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        qd = qd + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        return (q, project(q, qd)), None

    def block(carry, j):
        carry, _ = jax.lax.scan(step, carry, j * save_every + jnp.arange(save_every))
        return carry, carry[0]

    _, qs = jax.lax.scan(block, (q0, qd0), jnp.arange(n_steps // save_every))
    return np.concatenate([np.asarray(q0)[None], np.asarray(qs)])


# ----------------------------------------------------------------------------------------


def test_phi_crosses_the_singular_configurations_at_least_three_times():
    q = run("projection")[0]
    assert _crossings(q[:, 3]) >= 3
    # phi is decoupled: phi(t) = 1.2 + 0.5 t + 3 (t - sin t) in closed form.
    np.testing.assert_allclose(q[:, 3], 1.2 + 0.5 * TS + 3 * (TS - np.sin(TS)), atol=1e-8)


@pytest.mark.parametrize("kind", ["projection", "none"])
def test_run_through_singularities_stays_on_the_constraints(kind):
    q, qd, steps, vel_res, _ = run(kind)
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(qd))
    assert _crossings(q[:, 3]) >= 3
    assert np.max(np.abs(vel_res)) <= 1e-8
    print(f"snake cart, stabilisation={kind}: {int(steps)} steps")


def test_projection_takes_fewer_steps_than_no_stabilisation():
    # Measured (rtol = atol = 1e-10): about 280 steps with Projection(10, 10) against
    # about 1000 without stabilisation.
    assert run("projection")[2] < run("none")[2]


def _cumulative_simpson(y, h):
    """Cumulative composite Simpson integral of samples `y` at even indices."""
    out = np.zeros((len(y) + 1) // 2)
    pieces = h / 3 * (y[0:-2:2] + 4 * y[1:-1:2] + y[2::2])
    out[1:] = np.cumsum(pieces)
    return out


def test_energy_balance_equals_work_of_the_steering_torque():
    q, qd, _, _, E = run("projection")
    power = 0.3 * np.sin(TS) * qd[:, 3]  # Q . qd
    work = _cumulative_simpson(power, TS[1] - TS[0])
    dE = E[::2] - E[0]
    scale = np.max(np.abs(dE))
    assert scale > 1.0  # the torque does substantial work
    np.testing.assert_allclose(dE, work, rtol=0, atol=1e-6 * scale)


def test_matches_independent_rk4_with_velocity_projection():
    q0, qd0 = initial_state()
    h_ref = 2.5e-4  # 12000 RK4 steps; save every 1e-3
    ref = _reference_rk4(q0, qd0, h_ref, 12000, 4)
    ref_coarse = _reference_rk4(q0, qd0, 2 * h_ref, 6000, 2)
    # Richardson: the RK4 error at h_ref is ~1/15 of the difference from 2 h_ref.
    rk4_err = np.max(np.abs(ref - ref_coarse)) / 15
    assert rk4_err < 1e-9  # measured: 6e-11
    # Tolerance: the adaptive solve takes ~280 steps at rtol = atol = 1e-10 on O(1)
    # positions, so its global error is at most ~3e-8 if local errors add up in the worst
    # case; the reference is 30x more accurate than the bound used here (rk4_err above).
    # Measured difference: 8e-11 with Projection, 3e-10 without stabilisation.
    for kind in ["projection", "none"]:
        np.testing.assert_allclose(run(kind)[0], ref, rtol=0, atol=1e-8, err_msg=kind)


# ----------------------------------------------------------------------------------------
# The singular configuration itself.


SINGULAR = [np.pi / 2, -np.pi / 2, 3 * np.pi / 2]
REGULAR = [0.0, 0.3, 1.2, -1.0, 2.0, np.pi / 2 - 1e-3]


@jax.jit
@jax.vmap
def _at_states(q, qd):
    p = _p()
    rank = cx.constraint_rank(SNAKE, 0.0, q, qd, p)
    out = {"rank": rank.rank, "sv": rank.singular_values}
    for label, solver in [("auto", cx.AutoSolver()), ("uk", cx.UdwadiaKalaba())]:
        acc = cx.accelerations(SNAKE, 0.0, q, qd, p, constraint_solver=solver)
        out[label] = (acc.qdd, acc.multipliers, acc.rank)
    A = cx.constraint_jacobian(SNAKE, 0.0, q, qd, p)
    _, cdot = jax.jvp(lambda q_: wheels(0.0, q_, p) @ qd, (q,), (qd,))
    out["A"], out["cdot"] = A, cdot
    return out


_STATES = {}


def at_states():
    if not _STATES:
        states = [admissible(ph) for ph in SINGULAR + REGULAR]
        qs = jnp.stack([s[0] for s in states])
        qds = jnp.stack([s[1] for s in states])
        _STATES.update(jax.tree_util.tree_map(np.asarray, _at_states(qs, qds)))
    return _STATES


def test_constraint_rank_drops_to_one_at_singular_steering():
    r = at_states()
    k = len(SINGULAR)
    np.testing.assert_array_equal(r["rank"][:k], 1)
    assert np.all(r["sv"][:k, 1] < 1e-12 * r["sv"][:k, 0])


def test_constraint_rank_is_two_elsewhere():
    r = at_states()
    np.testing.assert_array_equal(r["rank"][len(SINGULAR) :], 2)


_kkt_qdd = jax.jit(
    lambda q, qd, p: cx.accelerations(SNAKE, 0.0, q, qd, p, constraint_solver=cx.KKT()).qdd
)


def test_kkt_raises_singular_saddle_point_at_singular_steering():
    q, qd = admissible(np.pi / 2)
    with pytest.raises(Exception, match=r"saddle-point matrix .* is singular"):
        jax.block_until_ready(_kkt_qdd(q, qd, _p()))


@pytest.mark.parametrize("solver", ["auto", "uk"])
def test_auto_and_udwadia_kalaba_are_finite_and_report_rank_one_at_singular_steering(solver):
    r = at_states()
    k = len(SINGULAR)
    qdd, lam, rank = (x[:k] for x in r[solver])
    assert np.all(np.isfinite(qdd)) and np.all(np.isfinite(lam))
    np.testing.assert_array_equal(rank, 1)
    # The accelerations keep the velocity on the constraints: A qdd = -c_bias.
    np.testing.assert_allclose(np.einsum("kij,kj->ki", r["A"][:k], qdd), -r["cdot"][:k], atol=1e-12)


def test_auto_and_udwadia_kalaba_agree_at_regular_steering():
    r = at_states()
    k = len(SINGULAR)
    np.testing.assert_allclose(r["auto"][0][k:], r["uk"][0][k:], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(r["auto"][2][k:], 2)


_accel = jax.jit(
    jax.vmap(lambda q, qd, p: cx.accelerations(SNAKE, 0.0, q, qd, p).qdd, in_axes=(0, 0, None))
)


def test_accelerations_have_the_same_limit_from_both_sides_of_the_singularity():
    eps = np.array([1e-2, 1e-3, 1e-4, 1e-5, 1e-6])
    phis = np.concatenate([np.pi / 2 + eps, np.pi / 2 - eps, [np.pi / 2]])
    states = [admissible(ph) for ph in phis]
    qs = jnp.stack([s[0] for s in states])
    qds = jnp.stack([s[1] for s in states])
    a = np.asarray(_accel(qs, qds, _p()))
    k = len(eps)
    plus, minus, at = a[:k], a[k : 2 * k], a[-1]
    gap = np.max(np.abs(plus - minus), axis=1)
    # The two sides approach each other linearly in eps ...
    assert np.all(gap[1:] < gap[:-1] / 5)
    assert gap[-1] < 1e-4 * np.max(np.abs(at))
    # ... and the common limit is Gauss's (Udwadia–Kalaba) motion at the singular point.
    np.testing.assert_allclose(plus[-1], at, atol=1e-5 * np.max(np.abs(at)))
    np.testing.assert_allclose(minus[-1], at, atol=1e-5 * np.max(np.abs(at)))


# ----------------------------------------------------------------------------------------
# Gradients through the crossings, with simulate's defaults (Projection stabilisation,
# AutoSolver, adaptive Tsit5 at rtol = atol = 1e-8).


def _admissible_jnp(phi, s=0.6, th=0.3, phd=0.5):
    """`admissible` in jnp, differentiable in the initial steering angle `phi`."""
    l = PARAMS["l"]
    xb, thd = s * l * jnp.cos(phi), 2 * s * jnp.sin(phi)
    q = jnp.stack([0.2, -0.1, th, phi])
    qd = jnp.stack([xb * jnp.cos(th), xb * jnp.sin(th), thd, phd])
    return q, qd


def _final_xy(theta):
    """`x(T1) + y(T1)` of a default `simulate` from phi0 = theta["phi0"] with the torque
    amplitude theta["tau_amp"]: four crossings of phi = pi/2 + k pi on the way."""
    q0, qd0 = _admissible_jnp(theta["phi0"])
    p = {**_p(), "tau_amp": theta["tau_amp"]}
    q = cx.simulate(SNAKE, q0, qd0, p, t1=T1).q[-1]
    return q[0] + q[1]


def test_default_gradient_through_four_crossings_matches_central_differences():
    # Without the default Projection, AD gives d/dtau_amp = -214 against +0.785 by central
    # differences here (measured at consistency_rtol=None; docs/concepts/gradients.md).
    theta = {"phi0": jnp.asarray(1.2), "tau_amp": jnp.asarray(PARAMS["tau_amp"])}
    assert _crossings(1.2 + 0.5 * TS + 3 * (TS - np.sin(TS))) >= 3  # phi(t) in closed form
    grad = eqx.filter_jit(jax.grad(_final_xy))(theta)
    f = eqx.filter_jit(_final_xy)
    h = 1e-5
    for key in theta:
        up = f({**theta, key: theta[key] + h})
        down = f({**theta, key: theta[key] - h})
        fd = (up - down) / (2 * h)
        assert abs(float(fd)) > 1e-2, (key, fd)  # a real dependence
        np.testing.assert_allclose(grad[key], fd, rtol=1e-6, err_msg=key)
