r"""Trajectory optimisation on quasi-velocities (`velocity_basis=` of `cx.fit.HermiteSimpson`,
`cx.fit.Trapezoidal` and `cx.fit.DirectMultipleShooting`): node states $(q, v)$ with
$\dot q = S(q) v$.

References nobody here derived: the knife edge's reduced equations $\dot v = u_0/m$,
$\dot\omega = u_1/I$ (Neimark & Fufaev 1972; the model CasADi and opty are given by hand in
`benchmarks/trajopt.py`), the parking optimum 0.21846 of single shooting through
`cx.simulate`, the same problem in the default coordinates, and central differences.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fit_problems import crossings, snake_steering
from test_optimal_control import KNIFE, _knife_basis as knife_basis, _pendulum, parking

import constrax as cx

pytest.importorskip("cyipopt")

fit = cx.fit


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_spd_solve_inverts_spd_matrices_and_its_derivatives_are_the_inverses(k):
    """`spd_solve` (unrolled up to `SMALL_SPD`, LAPACK above) solves random SPD systems to
    round-off against numpy's general solve, batched under `jit` and `vmap`; its forward
    derivative in the matrix is the closed form d(A^-1 b) = -A^-1 dA A^-1 b, its gradient
    in the right-hand side A^-1 c; a matrix with a negative eigenvalue gives NaN, not a
    number."""
    from constrax.fit._coordinates import spd_solve

    rng = np.random.default_rng(k)
    B = rng.standard_normal((8, k, k))
    A = B @ np.swapaxes(B, 1, 2) + 0.1 * np.eye(k)
    b = rng.standard_normal((8, k))
    x = jax.jit(jax.vmap(spd_solve))(jnp.asarray(A), jnp.asarray(b))
    np.testing.assert_allclose(x, np.linalg.solve(A, b[..., None])[..., 0], rtol=1e-10)
    dA = rng.standard_normal((k, k))
    dA = dA + dA.T
    _, dx = jax.jvp(lambda M: spd_solve(M, jnp.asarray(b[0])), (jnp.asarray(A[0]),), (dA,))
    want = -np.linalg.solve(A[0], dA @ np.linalg.solve(A[0], b[0]))
    np.testing.assert_allclose(dx, want, rtol=1e-8, atol=1e-12)
    # Reverse mode: the gradient of c . A^-1 b in b is A^-1 c (A symmetric).
    c = rng.standard_normal(k)
    g = jax.grad(lambda v: jnp.asarray(c) @ spd_solve(jnp.asarray(A[0]), v))(jnp.asarray(b[0]))
    np.testing.assert_allclose(g, np.linalg.solve(A[0], c), rtol=1e-8, atol=1e-12)
    indefinite = np.diag(np.r_[-1.0, np.ones(k - 1)])
    assert np.isnan(np.asarray(spd_solve(jnp.asarray(indefinite), jnp.ones(k)))).any()


def _field_at_random_points(nlp, seed: int):
    """`(ts, X, U, F)`: six seeded standard-normal node states `X` and controls `U` at
    uniform times in [0, 5], and the node-state field `F` there, under `jit` and `vmap`."""
    shared = jnp.zeros(0)
    rng = np.random.default_rng(seed)
    X = jnp.asarray(rng.standard_normal((6, nlp.sizes.s)))
    U = jnp.asarray(rng.standard_normal((6, nlp.sizes.nu)))
    ts = jnp.asarray(rng.uniform(0, 5, 6))
    F = jax.jit(jax.vmap(lambda t, x, u: nlp.field(t, x, u, shared)))(ts, X, U)
    return ts, X, U, F


def _assert_state_jacobian_is_central_differences(nlp, t, x, u, atol):
    """`jax.jacfwd` (under `jit`) of the node-state field in the state at `(t, x, u)`
    against central differences (step 1e-6), column by column."""
    shared = jnp.zeros(0)
    field = lambda x: nlp.field(t, x, u, shared)  # noqa: E731
    J = jax.jit(jax.jacfwd(field))(x)
    eps = 1e-6
    for j in range(x.shape[0]):
        e = jnp.zeros(x.shape[0]).at[j].set(eps)
        np.testing.assert_allclose(J[:, j], (field(x + e) - field(x - e)) / (2 * eps), atol=atol)


def test_knife_edge_quasi_velocity_rates_are_push_over_mass_and_torque_over_inertia():
    r"""$\dot v = S^+(\ddot q - \dot S v)$ from the library's accelerations equals the hand
    reduction $(u_0/m, u_1/I)$, with $\dot q = S v$, at random states, under `jit` and
    `vmap`; its derivative in the state equals central differences."""
    nlp = fit.HermiteSimpson(2, velocity_basis=knife_basis).nlp(parking())
    m, inertia = float(KNIFE.params["m"]), float(KNIFE.params["I"])
    ts, X, U, F = _field_at_random_points(nlp, seed=0)
    S = jax.vmap(lambda x: knife_basis(0.0, x[:3], None))(X)
    np.testing.assert_allclose(F[:, :3], jnp.einsum("kij,kj->ki", S, X[:, 3:]), atol=1e-14)
    np.testing.assert_allclose(F[:, 3], U[:, 0] / m, rtol=1e-12)
    np.testing.assert_allclose(F[:, 4], U[:, 1] / inertia, rtol=1e-12)
    _assert_state_jacobian_is_central_differences(nlp, ts[0], X[0], U[0], atol=1e-8)


def test_knife_edge_parks_at_the_optimum_on_quasi_velocities_with_a_hand_reduced_size():
    """Hermite–Simpson on (q, v): 7 unknowns per point and 10 equations per interval, the
    size of the hand-reduced model (the default coordinates: 8 and 13, and a projection
    multiplier per interval); the optimum 0.21846 to 0.5 %, the no-slip row, not a row of
    the program, holding at every node of the solution to 1e-8, and the replay through
    the exact dynamics on the nodes to 1e-6."""
    N = 50
    transcription = fit.HermiteSimpson(N, velocity_basis=knife_basis)
    nlp = transcription.nlp(parking())
    assert nlp.layout.nz == (2 * N + 1) * (5 + 2) and nlp.layout.nc == N * 10
    sol = fit.solve_optimal_control(parking(), transcription=transcription)
    assert sol.success and sol.status == "solved", (sol.status, sol.violated)
    assert abs(sol.objective - 0.21846) <= 5e-3 * 0.21846
    assert sol.manifold_violation <= 1e-8 and sol.terminal_error <= 1e-8
    side_slip = jnp.sin(sol.q[:, 2]) * sol.qd[:, 0] - jnp.cos(sol.q[:, 2]) * sol.qd[:, 1]
    assert float(jnp.max(jnp.abs(side_slip))) <= 1e-12
    assert sol.replay_error() <= 1e-6


def test_multiple_shooting_on_quasi_velocities_parks_at_the_optimum_with_a_reduced_size():
    """Direct multiple shooting on (q, v): node states of 5 entries (the default
    coordinates: 6, and a projection multiplier per segment), the segments integrated by
    Maggi's equations; the optimum 0.21846 to 0.5 %, the no-slip row, not a row of the
    program, holding at every node to round-off, and the replay of the piecewise-linear
    controls through the exact dynamics on the nodes to the integrator's accuracy."""
    N = 25
    transcription = fit.DirectMultipleShooting(N, 8, velocity_basis=knife_basis)
    nlp = transcription.nlp(parking())
    assert nlp.layout.nz == (N + 1) * (5 + 2) and nlp.layout.nc == N * 5
    sol = fit.solve_optimal_control(
        parking(), transcription=transcription, solver=fit.IPOPT(hessian="limited-memory")
    )
    assert sol.success and sol.status == "solved", (sol.status, sol.violated)
    assert abs(sol.objective - 0.21846) <= 5e-3 * 0.21846
    side_slip = jnp.sin(sol.q[:, 2]) * sol.qd[:, 0] - jnp.cos(sol.q[:, 2]) * sol.qd[:, 1]
    assert float(jnp.max(jnp.abs(side_slip))) <= 1e-12
    assert sol.replay_error() <= 1e-7


def test_trapezoidal_parking_on_quasi_velocities_is_casadis_hand_reduced_program():
    """The trapezoid on (q, v) with v = (forward speed, turn rate) has the unknowns and the
    equations of CasADi's trapezoidal parking model (`benchmarks/trajopt.py`, the
    constraint eliminated by hand): from the same perturbed straight-line start it
    reaches CasADi's optimum 0.2192962 (CasADi + IPOPT, N = 50, seven digits) in CasADi's
    12 iterations."""
    N = 50
    rng = np.random.default_rng(0)  # CasADi's start: the line, then relative noise 1e-2
    X = np.zeros((5, N + 1))
    X[:3] = np.outer([0.0, 1.0, 0.0], np.linspace(0.0, 1.0, N + 1))
    X = X + 1e-2 * np.maximum(1.0, np.abs(X)) * rng.standard_normal(X.shape)
    X[:, 0], X[:, -1] = 0.0, [0.0, 1.0, 0.0, 0.0, 0.0]
    U = 1e-2 * rng.standard_normal((2, N + 1))

    def guess(t):
        k = int(round(t / 5.0 * N))
        x, y, th, v, om = X[:, k]
        return np.array([x, y, th]), np.array([v * np.cos(th), v * np.sin(th), om]), U[:, k]

    transcription = fit.Trapezoidal(N, velocity_basis=knife_basis)
    sol = fit.solve_optimal_control(parking(), guess, transcription=transcription)
    assert sol.success, (sol.status, sol.violated)
    assert round(sol.objective, 7) == 0.2192962
    assert sol.iterations == 12


def test_vakonomic_knife_edge_on_quasi_velocities_moves_by_the_librarys_vakonomic_equations():
    r"""Under `cx.Vakonomic()` the node state is $(q, v, \mu)$: its rates are $(Sv, \dot v,
    \dot\mu)$ with $S\dot v + \dot S v$ and $\dot\mu$ the library's vakonomic
    accelerations and multiplier rates at $(q, Sv, \mu)$ (which differ from d'Alembert's
    there), at random states under `jit` and `vmap`; the derivative in the state equals
    central differences."""
    problem = parking(prescription=cx.Vakonomic(), mu0=jnp.zeros(1))
    nlp = fit.HermiteSimpson(2, velocity_basis=knife_basis).nlp(problem)
    assert nlp.sizes.s == 3 + 2 + 1
    assert nlp.coordinates.state_names(problem)[-1] == "mu[0]"
    ts, X, U, F = _field_at_random_points(nlp, seed=1)
    for t, x, u, f in zip(ts, X, U, F, strict=True):
        q, v, mu = x[:3], x[3:5], x[5:]
        S = knife_basis(t, q, None)
        _, dS = jax.jvp(lambda q, t=t: knife_basis(t, q, None), (q,), (S @ v,))
        p = {**KNIFE.params, "u": u}
        acc = cx.accelerations(problem.system, t, q, S @ v, p, prescription=cx.Vakonomic(), mu=mu)
        dalembert = cx.accelerations(problem.system, t, q, S @ v, p)
        assert float(jnp.max(jnp.abs(acc.qdd - dalembert.qdd))) > 1e-3
        np.testing.assert_allclose(f[:3], S @ v, atol=1e-14)
        np.testing.assert_allclose(S @ f[3:5] + dS @ v, acc.qdd, atol=1e-12)
        np.testing.assert_allclose(f[5:], acc.mu_dot, atol=1e-12)
    _assert_state_jacobian_is_central_differences(nlp, ts[0], X[0], U[0], atol=1e-7)


@pytest.mark.slow
def test_vakonomic_parking_on_quasi_velocities_has_the_optimum_of_the_default_coordinates():
    """The vakonomic knife edge parked with mu0 = 0: Hermite–Simpson (N = 20) and multiple
    shooting (10 segments of 4 Tsit5 steps) on (q, v, mu) reach the optima of the same
    transcriptions in the default coordinates (q, qd, mu), to the discretisation error of
    each (the two differ by 3.7e-6 and 7.2e-8 relative), with mu(0) held at zero and the
    no-slip row at every node to 1e-10. Multiple shooting's first step overflows the
    integration (IPOPT is told so and steps back: it solves)."""
    problem = parking(prescription=cx.Vakonomic(), mu0=jnp.zeros(1))
    for make in (
        lambda b: fit.HermiteSimpson(20, velocity_basis=b),
        lambda b: fit.DirectMultipleShooting(10, 4, velocity_basis=b),
    ):
        sols = [
            fit.solve_optimal_control(problem, transcription=make(b)) for b in (None, knife_basis)
        ]
        for sol in sols:
            assert sol.success, (sol.status, sol.violated)
            assert sol.mu is not None and float(sol.mu[0, 0]) == 0.0
            assert sol.manifold_violation <= 1e-10
        assert abs(sols[0].objective - sols[1].objective) <= 1e-5 * sols[0].objective


@pytest.mark.slow
def test_holonomic_pendulum_on_its_angular_rate_has_the_optimum_of_cartesian_velocities():
    """The rod's velocity row held by S = (-y, x), the position row (with its projection
    multiplier) imposed at the nodes: the same optimal swing as the default coordinates,
    to the collocation's discretisation error (the two differ by 6.9e-5 relative at
    N = 15), the rod's rows at every node to 1e-9."""
    basis = lambda t, q, p: jnp.stack([-q[1], q[0]])[:, None]  # noqa: E731
    sols = [
        fit.solve_optimal_control(
            _pendulum(cx.DAlembert()),
            transcription=fit.HermiteSimpson(15, velocity_basis=b),
            violation_tolerance=1e-9,
        )
        for b in (None, basis)
    ]
    for sol in sols:
        assert sol.success, (sol.status, sol.violated)
        assert sol.manifold_violation <= 1e-9
        np.testing.assert_allclose(jnp.sum(sol.q**2, axis=1), 1.0, atol=1e-9)
        np.testing.assert_allclose(jnp.sum(sol.q * sol.qd, axis=1), 0.0, atol=1e-9)
    assert abs(sols[0].objective - sols[1].objective) <= 2e-4 * sols[0].objective


@pytest.mark.parametrize(
    "basis, kw, match",
    [
        (
            lambda t, q, p: jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]),
            {},
            "node 0 of the initial guess.*no_side_slip.*span the kernel",
        ),
        (
            lambda t, q, p: jnp.stack([jnp.cos(q[2]), jnp.sin(q[2]), 0.0 * q[2]])[:, None],
            {},
            "1 columns, but the kernel.*n - rank = 3 - 1 = 2",
        ),
        (lambda t, q, p: jnp.eye(2), {}, "must return an \\(n, k\\) = \\(3, k\\)"),
        (knife_basis, dict(qd_bounds=(-1.0, 1.0)), "qd_bounds.*path_constraint"),
    ],
    ids=["not-in-kernel", "too-few-columns", "shape", "qd-bounds"],
)
def test_a_velocity_basis_that_does_not_fit_the_problem_is_refused_naming_why(basis, kw, match):
    for transcription in (
        fit.Trapezoidal(4, velocity_basis=basis),
        fit.DirectMultipleShooting(2, 1, velocity_basis=basis),
    ):
        with pytest.raises(ValueError, match=match):
            fit.solve_optimal_control(parking(**kw), transcription=transcription)


def test_a_solved_program_whose_basis_breaks_the_velocity_rows_is_not_a_success():
    """A constant basis (forward along x, turn) fits the knife edge only at θ = 0, where
    the guess lies (so the guess's check passes); driven to x = 1 with a quarter turn, IPOPT
    solves its program, but the no-slip row fails at the solution's nodes: the status
    says `solved`, `success` says no, and the row is named."""
    constant = lambda t, q, p: jnp.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])  # noqa: E731
    problem = parking(q1=jnp.array([1.0, 0.0, 0.5]))

    def guess(t):  # the line in x at θ = 0
        return np.array([t / 5.0, 0.0, 0.0]), np.array([0.2, 0.0, 0.0]), np.zeros(2)

    sol = fit.solve_optimal_control(
        problem, guess, transcription=fit.Trapezoidal(20, velocity_basis=constant)
    )
    assert sol.status == "solved"
    assert not sol.success
    assert sol.manifold_violation > 1e-3 and sol.constraint_violation > 1e-3
    assert any("no_side_slip" in v for v in sol.violated), sol.violated


def test_velocity_basis_must_be_callable():
    for transcription in (fit.Trapezoidal, fit.DirectMultipleShooting):
        with pytest.raises(TypeError, match="velocity_basis.*function"):
            transcription(4, velocity_basis="S")


# ---------------------------------------------------------------------------------------
# The snake cart through singular configurations (Briggs 2016, §1.2).


def snake_basis(t, q, p):
    r"""A smooth basis of the closure of the snake cart's distribution: the body moves
    along $(\cos\phi\cos\theta, \cos\phi\sin\theta, \tfrac2\ell\sin\phi)$ (the rotation
    about the instantaneous centre, scaled by $\cos\phi$ so that it stays finite at
    $\phi = \pm\pi/2$, where it is the turn on the spot) and the steering turns freely;
    full column rank everywhere."""
    th, ph = q[2], q[3]
    c, z = jnp.cos(ph), jnp.zeros_like(ph)
    return jnp.array(
        [[c * jnp.cos(th), z], [c * jnp.sin(th), z], [2.0 / p["l"] * jnp.sin(ph), z], [z, z + 1.0]]
    )


def test_snake_cart_on_a_smooth_basis_follows_simulate_through_seven_singularcrossings():
    """Maggi's equations on the smooth basis, integrated with diffrax under the default
    torque for 10 s (seven crossings of φ = ±π/2, where the wheel rows coincide), land
    where `cx.simulate` of the constrained system (rank-robust saddle-point solve) does,
    to 1e-8: the quasi-velocity field is the library's dynamics, also through the
    singular configurations."""
    import diffrax

    T = 10.0
    model, problem, reference = snake_steering(T)
    assert crossings(reference.q[:, 3]) == 7
    nlp = fit.HermiteSimpson(4, velocity_basis=snake_basis).nlp(problem)
    amp, w = model.params["tau_amp"], model.params["tau_freq"]
    S0 = snake_basis(0.0, model.q0, model.params)
    v0 = jnp.linalg.lstsq(S0, model.qd0)[0]
    field = lambda t, x, args: nlp.field(t, x, jnp.atleast_1d(amp * jnp.sin(w * t)), jnp.zeros(0))  # noqa: E731
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, T, 0.01,
        jnp.concatenate([model.q0, v0]),
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-11), max_steps=100_000,
    )  # fmt: skip
    q, v = sol.ys[-1, :4], sol.ys[-1, 4:]
    np.testing.assert_allclose(q, reference.q[-1], atol=1e-8)
    np.testing.assert_allclose(snake_basis(T, q, model.params) @ v, reference.qd[-1], atol=1e-8)


def test_snake_cart_steered_through_seven_singular_crossings_on_quasi_velocities():
    """The steering problem over 10 s (seven crossings, where collocation in the default
    coordinates does not converge at N = 80–120: `benchmarks/results/trajopt_singular_cpu.md`)
    on the smooth basis: solved, still seven crossings, the wheel rows at every node to
    1e-8, less effort than the default torque's (feasible), and the replay through the
    exact dynamics on the nodes."""
    model, problem, reference = snake_steering(10.0)
    amp, w = model.params["tau_amp"], model.params["tau_freq"]
    ts = reference.ts
    default_effort = float(jnp.trapezoid((amp * jnp.sin(w * ts)) ** 2, ts))
    sol = fit.solve_optimal_control(
        problem, reference, transcription=fit.HermiteSimpson(80, velocity_basis=snake_basis)
    )
    assert sol.success, (sol.status, sol.violated)
    assert crossings(sol.q[:, 3]) == 7
    assert sol.manifold_violation <= 1e-8 and sol.terminal_error <= 1e-8
    assert sol.objective < default_effort
    assert sol.replay_error() <= 1e-3
