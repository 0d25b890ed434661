r"""Trajectory optimisation by direct collocation (`cx.fit.OptimalControlProblem`,
`cx.fit.HermiteSimpson`, `cx.fit.IPOPT`).

References nobody here derived: the cart-pole swing-up of Kelly (SIAM Review 2017) solved
independently with CasADi + IPOPT on the hand-derived equations of motion (trapezoidal
collocation, 58.8967 at N = 100 and 58.8134 at N = 400; Richardson-extrapolated
58.8078), the knife-edge parking optimum of single shooting through `cx.simulate`
(0.21846, the project's issue on trajectory optimisation), dense autodiff and central
differences for the sparse derivatives, and the d'Alembert = vakonomic identity on
holonomic constraints.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fit_problems import crossings, double_integrator, snake_steering

import constrax as cx
from constrax import models

pytest.importorskip("cyipopt")

fit = cx.fit


# ---------------------------------------------------------------------------------------
# Problems.


def _knife_force(t, q, qd, p):
    u, th = p["u"], q[2]
    return jnp.stack([u[0] * jnp.cos(th), u[0] * jnp.sin(th), u[1]])


def _knife_basis(t, q, p):
    """The knife edge's rolling directions (quasi-velocities: along the blade, the turn)."""
    c, s = jnp.cos(q[2]), jnp.sin(q[2])
    return jnp.array([[c, 0.0], [s, 0.0], [0.0, 1.0]])


KNIFE = models.knife_edge()
KNIFE_SYSTEM = cx.System(KNIFE.system.lagrangian, KNIFE.system.constraints, force=_knife_force)


def _effort(t, q, qd, u, p):
    return u @ u


def parking(**kw):
    options = dict(
        control=lambda p: p["u"],
        t1=5.0,
        q0=jnp.zeros(3),
        qd0=jnp.zeros(3),
        q1=jnp.array([0.0, 1.0, 0.0]),
        qd1=jnp.zeros(3),
        running_cost=_effort,
    )
    options.update(kw)
    return fit.OptimalControlProblem(KNIFE_SYSTEM, {**KNIFE.params, "u": jnp.zeros(2)}, **options)


def _cart_pole_lagrangian(t, q, qd, p):
    x, th = q
    xd, thd = qd
    m1, m2, l, g = p["m1"], p["m2"], p["l"], p["g"]
    v2 = (xd + l * jnp.cos(th) * thd) ** 2 + (l * jnp.sin(th) * thd) ** 2
    return 0.5 * m1 * xd**2 + 0.5 * m2 * v2 + m2 * g * l * jnp.cos(th)


CART_POLE = cx.System(
    _cart_pole_lagrangian, force=lambda t, q, qd, p: jnp.stack([p["u"][0], jnp.zeros_like(t)])
)
CART_POLE_PARAMS = dict(
    m1=jnp.array(1.0), m2=jnp.array(0.3), l=jnp.array(0.5), g=jnp.array(9.81), u=jnp.zeros(1)
)
CART_POLE_REFERENCE = 58.8078  # CasADi + IPOPT, trapezoidal, extrapolated (module docstring)


def cart_pole(**kw):
    options = dict(
        control=lambda p: p["u"],
        t1=2.0,
        q0=jnp.zeros(2),
        qd0=jnp.zeros(2),
        q1=jnp.array([1.0, jnp.pi]),
        qd1=jnp.zeros(2),
        running_cost=_effort,
        control_bounds=(-20.0, 20.0),
        q_bounds=([-2.0, -jnp.inf], [2.0, jnp.inf]),
    )
    options.update(kw)
    return fit.OptimalControlProblem(CART_POLE, CART_POLE_PARAMS, **options)


# ---------------------------------------------------------------------------------------
# The nonlinear program's derivatives.


def _dense(nlp, z, lam, sigma):
    L = nlp.layout
    J = np.zeros((L.nc, L.nz))
    np.add.at(J, (L.jac_rows, L.jac_cols), np.asarray(nlp.jacobian_values(z)))
    H = np.zeros((L.nz, L.nz))
    np.add.at(H, (L.hess_rows, L.hess_cols), np.asarray(nlp.hessian_values(z, lam, sigma)))
    return J, H


@pytest.mark.slow  # the dense reference Hessian of the whole program compiles for ~1 min
@pytest.mark.parametrize(
    "transcription",
    [
        fit.HermiteSimpson(3),
        fit.Trapezoidal(3),
        fit.DirectMultipleShooting(3, 2),
        fit.Trapezoidal(3, velocity_basis=_knife_basis),
        fit.DirectMultipleShooting(3, 2, velocity_basis=_knife_basis),
    ],
    ids=[
        "hermite-simpson",
        "trapezoidal",
        "multiple-shooting",
        "trapezoidal-quasi-velocities",
        "multiple-shooting-quasi-velocities",
    ],
)
def test_sparse_jacobian_and_hessian_equal_dense_autodiff_and_finite_differences(transcription):
    """Every branch of the NLP (free final time, an optimised parameter, running and
    terminal costs, terminal and path constraints, a free initial velocity so the node-0
    manifold rows are in): the block-sparse values equal dense `jax.jacfwd`/`jax.hessian`
    of the whole program to round-off, and the Jacobian equals central differences."""

    def force(t, q, qd, p):
        return _knife_force(t, q, qd, p) * jnp.array([1.0, 1.0, p["k"]])

    system = cx.System(KNIFE.system.lagrangian, KNIFE.system.constraints, force=force)
    problem = fit.OptimalControlProblem(
        system,
        {**KNIFE.params, "u": jnp.zeros(2), "k": jnp.array(1.3)},
        control=lambda p: p["u"],
        t1=5.0,
        t1_bounds=(1.0, 9.0),
        parameters=lambda p: p["k"],
        q0=jnp.zeros(3),
        q1=jnp.array([0.0, 1.0, 0.0]),
        running_cost=lambda t, q, qd, u, p: u @ u + 0.1 * q[2] ** 2 * qd @ qd + t * u[0],
        terminal_cost=lambda t, q, qd, p: t * qd @ qd,
        terminal_constraint=lambda t, q, qd, p: jnp.array([qd[0] * q[2]]),
        path_constraint=lambda t, q, qd, u, p: jnp.array([u @ u - 4.0, q[1] * qd[2] * t]),
    )
    nlp = transcription.nlp(problem)
    L = nlp.layout
    rng = np.random.default_rng(1)
    z = jnp.asarray(0.5 * rng.standard_normal(L.nz)).at[-1].set(4.0)
    lam = jnp.asarray(rng.standard_normal(L.nc))
    J, H = _dense(nlp, z, lam, 0.7)
    J_ref = np.asarray(jax.jacfwd(nlp.constraints)(z))
    H_ref = np.asarray(jax.hessian(lambda z: 0.7 * nlp.objective(z) + lam @ nlp.constraints(z))(z))
    assert np.abs(J - J_ref).max() <= 1e-12 * np.abs(J_ref).max()
    assert np.abs(H - np.tril(H_ref)).max() <= 1e-12 * np.abs(H_ref).max()
    assert np.abs(np.triu(H, 1)).max() == 0.0  # lower triangle only, as IPOPT reads it
    eps = 1e-6
    cols = rng.choice(L.nz, 8, replace=False)
    for j in cols:
        e = jnp.zeros(L.nz).at[j].set(eps)
        fd = (nlp.constraints(z + e) - nlp.constraints(z - e)) / (2 * eps)
        np.testing.assert_allclose(J[:, j], fd, atol=1e-6 * (1 + np.abs(fd).max()))
    g_fd = (nlp.objective(z + e) - nlp.objective(z - e)) / (2 * eps)
    assert abs(float(jax.grad(nlp.objective)(z)[cols[-1]]) - float(g_fd)) <= 1e-6 * (
        1 + abs(float(g_fd))
    )


def test_ipopt_callbacks_return_the_programs_values_at_every_point_they_are_asked_for():
    """The callbacks IPOPT reads share one program per pair (objective and constraints;
    gradient and Jacobian) and keep the last point's values: asked in any order, at points
    that alternate, or at a point whose buffer was overwritten in place, each returns the
    NLP's own value at the point it is given (float64, contiguous), never a stale one."""
    from constrax.fit._ipopt import _Evaluator

    nlp = fit.HermiteSimpson(4).nlp(parking())
    L = nlp.layout
    rng = np.random.default_rng(3)
    z1, z2 = (0.5 * rng.standard_normal(L.nz) for _ in range(2))
    lam = rng.standard_normal(L.nc)
    reference = {
        "objective": jax.jit(lambda z: nlp.objective(z)),
        "constraints": jax.jit(lambda z: nlp.constraints(z)),
        "gradient": jax.jit(jax.grad(lambda z: nlp.objective(z))),
        "jacobian": jax.jit(lambda z: nlp.jacobian_values(z)),
    }
    ev = _Evaluator(nlp, np.float64)
    buffer = z1.copy()
    order = [
        ("constraints", z1), ("objective", z1), ("objective", z2), ("constraints", z1),
        ("gradient", z2), ("jacobian", z2), ("jacobian", z1), ("gradient", z1),
        ("objective", z2), ("constraints", buffer),
    ]  # fmt: skip
    for name, z in order:
        got = getattr(ev, name)(z)
        want = np.asarray(reference[name](jnp.asarray(z)))
        assert np.asarray(got).dtype == np.float64 and np.asarray(got).flags.c_contiguous
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13, err_msg=name)
    buffer[:] = z2  # the array last asked for, overwritten in place
    for name in ("constraints", "objective"):
        want = np.asarray(reference[name](jnp.asarray(z2)))
        np.testing.assert_allclose(getattr(ev, name)(buffer), want, rtol=1e-13, atol=1e-13)
    H = ev.hessian(z1, lam, 0.7)
    want = np.asarray(nlp.hessian_values(z1, lam, 0.7))
    np.testing.assert_allclose(H, want, rtol=1e-13, atol=1e-13)
    assert H.dtype == np.float64 and H.shape == L.hess_rows.shape


# ---------------------------------------------------------------------------------------
# Reference problems.


def test_double_integrator_minimum_effort_equals_the_closed_form_12_d2_over_T3():
    """A unit mass moved by d in T, rest to rest, min ∫u²: u = 6d/T²(1 - 2t/T), whose
    linear-in-time control the piecewise-quadratic transcription holds exactly, so the
    optimum 12 d²/T³ is met to round-off, and so is the replay."""
    d, T = 1.5, 2.0
    problem = double_integrator(d, T, running_cost=_effort)
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(6))
    assert sol.success
    assert abs(sol.objective - 12 * d**2 / T**3) <= 1e-9
    np.testing.assert_allclose(sol.u[:, 0], 6 * d / T**2 * (1 - 2 * sol.ts / T), atol=1e-8)
    assert sol.replay_error() <= 1e-8


def test_users_ipopt_options_override_constraxs_mumps_ordering():
    """`cx.fit.IPOPT` sets MUMPS's approximate-minimum-degree ordering; IPOPT's own default
    (7, MUMPS chooses) given in `options` reaches the same optimum, and an ordering IPOPT
    does not have is refused naming the option (the user's options are never skipped)."""
    d, T = 1.5, 2.0
    problem = double_integrator(d, T, running_cost=_effort)
    tr = fit.HermiteSimpson(6)
    ours = fit.solve_optimal_control(problem, transcription=tr)
    theirs = fit.solve_optimal_control(
        problem, transcription=tr, solver=fit.IPOPT(options={"mumps_pivot_order": 7})
    )
    assert ours.success and theirs.success
    assert abs(theirs.objective - ours.objective) <= 1e-12
    with pytest.raises(ValueError, match="refused the option 'mumps_pivot_order'"):
        fit.solve_optimal_control(
            problem, transcription=tr, solver=fit.IPOPT(options={"mumps_pivot_order": 99})
        )


def test_knife_edge_parallel_parking_reaches_the_optimum_from_the_linear_guess():
    """Rest to rest, sideways by 1 in 5 s, min ∫|u|²: the optimum 0.21846 of single
    shooting through cx.simulate to 0.5 %, the no-slip rows at every node to 1e-8, and
    the controls replayed through the exact dynamics land on the collocated states."""
    problem = parking()
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(100))
    assert sol.success and sol.status == "solved", (sol.status, sol.violated)
    assert abs(sol.objective - 0.21846) <= 5e-3 * 0.21846
    assert sol.constraint_violation <= 1e-8 and sol.manifold_violation <= 1e-8
    assert sol.terminal_error <= 1e-8
    assert float(jnp.max(jnp.abs(sol.q[:, 1]))) >= 1.0 - 1e-8
    assert sol.replay_error() <= 1e-6  # fourth order: 3e-6 at N = 50, 2e-7 at N = 100
    # The exact straight-line guess is a stationary point of the infeasibility (no
    # sideways authority to first order): reported as such, never as success.
    exact = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(100), jitter=0.0)
    assert not exact.success and exact.status != "solved"
    assert exact.constraint_violation > 1e-3
    assert any("collocation" in v for v in exact.violated)


def test_multiple_shooting_parks_the_knife_edge_at_the_collocation_optimum():
    """Direct multiple shooting (25 segments of 8 Tsit5 steps, L-BFGS Hessian): the same
    optimum as collocation and single shooting, the rows at every node, and a replay of
    its piecewise-linear controls that lands on the nodes to the integrator's accuracy."""
    sol = fit.solve_optimal_control(
        parking(),
        transcription=fit.DirectMultipleShooting(25, 8),
        solver=fit.IPOPT(hessian="limited-memory"),
    )
    assert sol.success, (sol.status, sol.violated)
    assert abs(sol.objective - 0.21846) <= 5e-3 * 0.21846
    assert sol.manifold_violation <= 1e-8 and sol.constraint_violation <= 1e-8
    np.testing.assert_allclose(sol.u_mid, 0.5 * (sol.u[:-1] + sol.u[1:]), atol=1e-15)
    assert sol.replay_error() <= 1e-7


def test_cart_pole_swing_up_matches_the_casadi_reference():
    """Kelly's swing-up, min ∫u²: within 0.05 % of the independent CasADi optimum, the
    force bound respected; a warm start from the solution (its constraint multipliers
    included) takes under half the iterations of the cold start."""
    problem = cart_pole()
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(25))
    assert sol.success, (sol.status, sol.violated)
    assert abs(sol.objective - CART_POLE_REFERENCE) <= 5e-4 * CART_POLE_REFERENCE
    assert float(jnp.max(jnp.abs(sol.u))) <= 20.0 + 1e-8
    np.testing.assert_allclose(sol.q[-1], [1.0, np.pi], atol=1e-12)
    warm = fit.solve_optimal_control(problem, sol, transcription=fit.HermiteSimpson(25))
    assert warm.success and warm.iterations < sol.iterations / 2
    assert abs(warm.objective - sol.objective) <= 1e-9 * sol.objective


def _trapezoidal_double_integrator_qp(d, T, N):
    """The trapezoidal transcription of the double integrator written out by hand as an
    equality-constrained QP in (x_k, v_k, u_k), k = 0..N, solved by its KKT system:
    min h Σ w_k u_k² (w = 1/2 at the ends, else 1) s.t. x_{k+1} - x_k = h/2 (v_k + v_{k+1}),
    v_{k+1} - v_k = h/2 (u_k + u_{k+1}), rest to rest from 0 to d."""
    h, K = T / N, N + 1
    n = 3 * K
    x, v, u = (lambda k, j=j: j * K + k for j in range(3))
    rows, b = [], []
    for k in range(N):
        for a, c in ((x, v), (v, u)):
            row = np.zeros(n)
            row[[a(k + 1), a(k)]] = 1.0, -1.0
            row[[c(k), c(k + 1)]] -= h / 2
            rows.append(row)
            b.append(0.0)
    for index, value in ((x(0), 0.0), (v(0), 0.0), (x(N), d), (v(N), 0.0)):
        row = np.zeros(n)
        row[index] = 1.0
        rows.append(row)
        b.append(value)
    A, b = np.array(rows), np.array(b)
    w = np.ones(K)
    w[[0, -1]] = 0.5
    Q = np.zeros((n, n))
    Q[2 * K :, 2 * K :] = np.diag(2 * h * w)
    kkt = np.block([[Q, A.T], [A, np.zeros((A.shape[0], A.shape[0]))]])
    sol = np.linalg.solve(kkt, np.concatenate([np.zeros(n), b]))
    z = sol[:n]
    return 0.5 * z @ Q @ z, z[2 * K :]


def test_trapezoidal_double_integrator_is_the_hand_written_qp_and_converges_at_second_order():
    """Trapezoidal collocation of the double integrator (rest to rest by d in T, min ∫u²):
    the optimum and the node controls equal those of the same discretisation written out
    by hand as a QP and solved by its KKT system, and the optimum approaches the closed
    form 12 d²/T³ at second order (the error falls four-fold when N doubles)."""
    d, T = 1.5, 2.0
    exact = 12 * d**2 / T**3
    errors = []
    for N in (5, 10):
        sol = fit.solve_optimal_control(
            double_integrator(d, T, running_cost=_effort), transcription=fit.Trapezoidal(N)
        )
        assert sol.success, (sol.status, sol.violated)
        cost, u = _trapezoidal_double_integrator_qp(d, T, N)
        assert abs(sol.objective - cost) <= 1e-9 * cost
        np.testing.assert_allclose(sol.u[:, 0], u, atol=1e-7)
        np.testing.assert_allclose(sol.u_mid, 0.5 * (sol.u[:-1] + sol.u[1:]), atol=1e-15)
        errors.append(sol.objective - exact)
    assert 3.5 <= errors[0] / errors[1] <= 4.5, errors


def test_trapezoidal_cart_pole_equals_casadis_trapezoidal_optimum():
    """Kelly's swing-up on 50 trapezoidal intervals: the optimum of the same transcription
    built independently in CasADi from Kelly's closed-form equations and solved by IPOPT
    (59.14776, `benchmarks/trajopt.py`), here from the Lagrangian, to the 7 digits
    recorded; the force bound held and the upright target reached; and a Hermite–Simpson
    solve on the same grid started from it reaches the optimum of CasADi's Hermite–Simpson
    (separated form, 58.8076422, `benchmarks/trajopt.py`), the fourth-order optimum."""
    sol = fit.solve_optimal_control(cart_pole(), transcription=fit.Trapezoidal(50))
    assert sol.success, (sol.status, sol.violated)
    assert abs(sol.objective - 59.14776) <= 1e-5
    assert float(jnp.max(jnp.abs(sol.u))) <= 20.0 + 1e-8
    np.testing.assert_allclose(sol.q[-1], [1.0, np.pi], atol=1e-12)
    # Refined by Hermite–Simpson from the trapezoidal solution (resampled onto its grid):
    # the fourth-order optimum.
    fine = fit.solve_optimal_control(cart_pole(), sol, transcription=fit.HermiteSimpson(50))
    assert fine.success, (fine.status, fine.violated)
    assert abs(fine.objective - 58.8076422) <= 1e-6
    assert abs(fine.objective - CART_POLE_REFERENCE) <= 5e-4 * CART_POLE_REFERENCE


def test_trapezoidal_parks_the_knife_edge_on_the_manifold_near_the_optimum():
    """Parking on 100 trapezoidal intervals: within 0.5 % of the optimum 0.21846, above it
    (a second-order discretisation of the same problem), the no-slip row at every node to
    1e-8, and the replay of the piecewise-linear controls on the nodes to the
    transcription's accuracy (second order: far looser than Hermite–Simpson's 2e-7)."""
    sol = fit.solve_optimal_control(parking(), transcription=fit.Trapezoidal(100))
    assert sol.success and sol.status == "solved", (sol.status, sol.violated)
    assert 0.21846 < sol.objective <= 1.005 * 0.21846
    assert sol.manifold_violation <= 1e-8 and sol.terminal_error <= 1e-8
    assert sol.replay_error() <= 2e-3


def test_infeasible_and_unconverged_runs_are_never_reported_as_success():
    """A force bound too small to swing the pole up in 2 s: IPOPT's infeasibility status,
    `success` false, the violated rows named. An iteration cap: its status, not success."""
    weak = cart_pole(control_bounds=(-0.5, 0.5))
    sol = fit.solve_optimal_control(weak, transcription=fit.HermiteSimpson(25))
    assert not sol.success
    assert sol.status in ("infeasible_problem_detected", "restoration_failed")
    assert sol.constraint_violation > 1e-3
    assert sol.violated and all(":" in v for v in sol.violated)
    capped = fit.solve_optimal_control(
        cart_pole(), transcription=fit.HermiteSimpson(25), solver=fit.IPOPT(max_iter=2)
    )
    assert not capped.success and capped.status == "maximum_iterations_exceeded"


@pytest.mark.slow
def test_minimum_time_cart_pole_saturates_the_force_bound():
    """Free final time, |u| <= 20, min t1: shorter than the 2 s of the effort problem,
    bang-bang (the bound reached), and the replay lands on the collocated states."""
    problem = cart_pole(
        running_cost=None, terminal_cost=lambda t, q, qd, p: t, t1_bounds=(0.1, 10.0)
    )
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(40))
    assert sol.success, (sol.status, sol.violated)
    assert 0.5 < float(sol.t1) < 2.0 and abs(sol.objective - float(sol.t1)) <= 1e-12
    assert float(jnp.max(jnp.abs(sol.u))) >= 20.0 - 1e-6
    assert sol.replay_error() <= 0.1


@pytest.mark.slow
def test_optimised_parameter_goes_to_its_bound_when_it_lowers_the_cost():
    """The cart's mass optimised with the controls, bounded to [0.5, 2]: a lighter cart
    needs less force, so the optimum sits on the lower bound, below the fixed-mass cost."""
    problem = cart_pole(parameters=lambda p: p["m1"], parameter_bounds=(0.5, 2.0))
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(25))
    assert sol.success, (sol.status, sol.violated)
    assert abs(float(sol.params["m1"]) - 0.5) <= 1e-6
    assert sol.objective < CART_POLE_REFERENCE


def _pendulum(prescription, **kw):
    def L(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd - p["m"] * p["g"] * q[1]

    rod = cx.Holonomic(lambda t, q, p: q @ q - p["l"] ** 2, name="rod")
    force = lambda t, q, qd, p: jnp.stack([p["u"][0], jnp.zeros_like(t)])
    system = cx.System(L, [rod], force=force)
    params = dict(m=jnp.array(1.0), g=jnp.array(9.81), l=jnp.array(1.0), u=jnp.zeros(1))
    return fit.OptimalControlProblem(
        system,
        params,
        control=lambda p: p["u"],
        t1=2.0,
        q0=jnp.array([0.0, -1.0]),
        qd0=jnp.zeros(2),
        q1=jnp.array([1.0, 0.0]),
        qd1=jnp.zeros(2),
        running_cost=_effort,
        prescription=prescription,
        **kw,
    )


@pytest.mark.slow
def test_vakonomic_and_dalembert_optima_agree_on_a_holonomic_pendulum():
    """For holonomic constraints the two prescriptions have the same motions: the same
    optimal swing (to the collocation's round-off), with the rod's position and velocity
    rows at every node to 1e-9 under both."""
    sols = [
        fit.solve_optimal_control(
            _pendulum(pres, **kw), transcription=fit.HermiteSimpson(15), violation_tolerance=1e-9
        )
        for pres, kw in ((cx.DAlembert(), {}), (cx.Vakonomic(), dict(mu0=jnp.zeros(1))))
    ]
    for sol in sols:
        assert sol.success, (sol.status, sol.violated)
        assert sol.manifold_violation <= 1e-9
        np.testing.assert_allclose(jnp.sum(sol.q**2, axis=1), 1.0, atol=1e-9)
    assert sols[1].mu is not None and sols[0].mu is None
    assert abs(sols[0].objective - sols[1].objective) <= 1e-7 * sols[0].objective
    np.testing.assert_allclose(sols[0].u, sols[1].u, atol=1e-5)


# ---------------------------------------------------------------------------------------
# Bad input: clear errors naming the argument.


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(control_bounds=(1.0, -1.0)), "control_bounds.*lower bound > upper"),
        (dict(q_bounds=([0.0, 0.0, 0.0], [1.0, jnp.nan, 1.0])), "q_bounds.*NaN"),
        (dict(control_bounds=(jnp.zeros(3), 1.0)), "control_bounds.*shape"),
        (dict(t1_bounds=(-1.0, 9.0)), "t1_bounds.*must be > t0"),
        (dict(t1_bounds=(6.0, 9.0)), "t1.*within t1_bounds"),
        (dict(q1=jnp.zeros(4)), "`q1` must have shape \\(n,\\) = \\(3,\\), the system.s number"),
        (dict(qd0=jnp.array([0.0, 1.0, 0.0])), "initial state violates.*no_side_slip"),
        (dict(q1=jnp.array([0.0, jnp.nan, 0.0])), "q1.*non-finite"),
        (dict(running_cost=lambda t, q, qd, u, p: u), "running_cost.*scalar"),
        (dict(q_bounds=(-0.5, 0.5)), "q1.*outside q_bounds.*infeasible"),
        (dict(control=lambda p: p["m"]), "control.*shape \\(nu,\\)"),
        (dict(parameter_bounds=(0.0, 1.0)), "parameter_bounds.*needs `parameters="),
        (dict(mu0=jnp.zeros(1)), "mu0.*vakonomic"),
        (dict(t1=-1.0), "t1 > t0"),
    ],
)
def test_bad_problem_arguments_raise_naming_the_argument(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        parking(**kw)


def test_dynamics_that_fail_at_a_trial_point_make_ipopt_step_back_and_at_the_start_raise():
    """The vakonomic knife edge by multiple shooting: IPOPT's first step overflows the
    integration of a segment, where the saddle-point solve's check fails. IPOPT is told the
    evaluation failed and cuts its step back; a run that then ends unsolved (one iteration
    allowed) says so, naming the check. The same check failing at the starting point raises,
    naming it."""
    problem = parking(prescription=cx.Vakonomic(), mu0=jnp.zeros(1))
    transcription = fit.DirectMultipleShooting(4, 1)
    sol = fit.solve_optimal_control(
        problem, transcription=transcription, solver=fit.IPOPT(max_iter=1)
    )
    assert not sol.success and sol.status == "maximum_iterations_exceeded"
    assert "could not be evaluated at 1 trial point(s)" in sol.message
    assert "saddle-point matrix" in sol.message
    huge = lambda t: (jnp.zeros(3), jnp.full(3, 1e160), jnp.zeros(2))  # noqa: E731
    with pytest.raises(RuntimeError, match="failed at the starting point: constrax: the saddle"):
        fit.solve_optimal_control(problem, huge, transcription=transcription)


def test_iterates_stuck_against_points_where_the_dynamics_fail_stop_unsolved_saying_so():
    """A particle drawn towards x = 2 by its cost, behind a wall at x = 1 where its Pfaffian
    row vanishes (for x >= 1 the saddle matrix under `cx.KKT()` is singular): IPOPT steps
    back from every trial point beyond the wall, the iterates press against it, and after
    10 consecutive iterations that stepped back the solve stops, unsolved, with its own
    status and the check named, at iterates that stayed behind the wall."""
    wall = cx.Pfaffian(lambda t, q, p: jnp.array([0.0, jnp.maximum(1.0 - q[0], 0.0)]))
    system = cx.System(
        lambda t, q, qd, p: 0.5 * qd @ qd,
        [wall],
        force=lambda t, q, qd, p: jnp.array([p["u"][0], 0.0]),
    )
    problem = fit.OptimalControlProblem(
        system,
        {"u": jnp.zeros(1)},
        control=lambda p: p["u"],
        t1=2.0,
        q0=jnp.zeros(2),
        qd0=jnp.zeros(2),
        running_cost=lambda t, q, qd, u, p: u @ u + 10.0 * (q[0] - 2.0) ** 2,
        constraint_solver=cx.KKT(),
    )
    sol = fit.solve_optimal_control(problem, transcription=fit.Trapezoidal(10))
    assert not sol.success
    assert sol.status == "dynamics_not_evaluable"
    assert "stepped back in 10 consecutive iterations" in sol.message
    assert "saddle-point matrix" in sol.message
    assert 0.9 < float(jnp.max(sol.q[:, 0])) < 1.0


def test_bad_solve_arguments_raise_naming_the_argument():
    problem = parking()
    with pytest.raises(TypeError, match="guess"):
        fit.solve_optimal_control(problem, guess="linear")
    with pytest.raises(ValueError, match="guess.*non-finite.*q\\[0\\] at node 0"):
        fit.solve_optimal_control(
            problem, guess=lambda t: (jnp.full(3, jnp.nan), jnp.zeros(3), jnp.zeros(2))
        )
    with pytest.raises(
        ValueError, match="guess\\(t\\)` must return q \\(3,\\), qd \\(3,\\), u \\(2,\\)"
    ):
        fit.solve_optimal_control(problem, guess=lambda t: (jnp.zeros(3), jnp.zeros(3), 0.0))
    with pytest.raises(ValueError, match="intervals"):
        fit.HermiteSimpson(0)
    with pytest.raises(ValueError, match="intervals"):
        fit.Trapezoidal(2.5)
    with pytest.raises(ValueError, match="hessian"):
        fit.IPOPT(hessian="bfgs")
    with pytest.raises(ValueError, match="starts"):
        fit.solve_optimal_control(problem, starts=0)
    with pytest.raises(ValueError, match="force"):
        fit.OptimalControlProblem(
            KNIFE.system,
            {**KNIFE.params, "u": jnp.zeros(2)},
            control=lambda p: p["u"],
            t1=1.0,
            q0=jnp.zeros(3),
            qd0=jnp.zeros(3),
        )


@pytest.mark.slow
def test_snake_cart_steered_through_two_singular_crossings_with_less_effort():
    """The snake cart's steering torque, min ∫τ², to the pose its default torque
    τ = 0.3 sin t reaches in 3 s through two singular configurations (φ = ±π/2, where the
    wheel rows coincide): the rank-robust solver at the nodes, a solution that crosses
    both singularities with the wheel rows held to 1e-8 and less effort than the default
    torque's (which is feasible), replaying onto its nodes."""
    model, problem, reference = snake_steering(3.0, points=301)
    assert crossings(reference.q[:, 3]) == 2
    tau = model.params["tau_amp"] * jnp.sin(model.params["tau_freq"] * reference.ts)
    default_effort = float(jnp.trapezoid(tau**2, reference.ts))
    sol = fit.solve_optimal_control(problem, reference, transcription=fit.HermiteSimpson(40))
    assert sol.success, (sol.status, sol.violated)
    assert crossings(sol.q[:, 3]) == 2
    assert sol.manifold_violation <= 1e-8 and sol.terminal_error <= 1e-8
    assert sol.objective < default_effort
    assert sol.replay_error() <= 1e-3
    # The same solution of a problem posed with the (default) KKT solve replays through the
    # crossings too: `replay` integrates with a rank-robust solve whatever the problem's,
    # where a KKT solve stops at a stage next to the singular configuration.
    posed_with_kkt = eqx.tree_at(lambda s: s.problem.constraint_solver, sol, cx.KKT())
    assert posed_with_kkt.replay_error() == pytest.approx(sol.replay_error(), rel=1e-6)
    with pytest.raises(Exception, match="saddle-point matrix"):
        posed_with_kkt.replay_error(constraint_solver=cx.KKT())


def test_a_failed_check_inside_the_solve_names_the_iteration_and_the_check(caplog):
    """Under `cx.KKT()` a node on the snake cart's singular configuration (φ = π/2, where
    the wheel rows coincide) makes the saddle matrix singular inside IPOPT's first
    evaluation, at the starting point: the error says so in one line, not XLA's wrapped
    callback traceback, and JAX does not log that traceback for each failing callback
    either."""
    model = models.snake_cart()
    force = lambda t, q, qd, p: jnp.stack([0 * t, 0 * t, 0 * t, p["u"][0]])
    system = cx.System(model.system.lagrangian, model.system.constraints, force=force)
    q0 = jnp.array([0.0, 0.0, 0.0, 1.2])
    problem = fit.OptimalControlProblem(
        system,
        {**model.params, "u": jnp.zeros(1)},
        control=lambda p: p["u"],
        t1=1.0,
        q0=q0,
        qd0=jnp.zeros(4),
        running_cost=_effort,
        constraint_solver=cx.KKT(),
    )
    singular = jnp.array([0.0, 0.0, 0.0, np.pi / 2])
    guess = lambda t: (q0 + t * (singular - q0), jnp.zeros(4), jnp.zeros(1))
    with pytest.raises(RuntimeError, match=r"failed at the starting point: constrax: the saddle"):
        fit.solve_optimal_control(problem, guess, transcription=fit.HermiteSimpson(4))
    assert not [r for r in caplog.records if "callback failed" in r.getMessage()]
