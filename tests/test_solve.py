"""The saddle-point solvers: KKT, Udwadia–Kalaba (Gauss's principle) and the automatic choice."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

SOLVERS = [cx.KKT(), cx.UdwadiaKalaba(), cx.AutoSolver()]


def _random_system(seed, n=5, m=2):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(n, n))
    W = M @ M.T + n * np.eye(n)
    A = rng.normal(size=(m, n))
    f = rng.normal(size=n)
    b = rng.normal(size=m)
    return jnp.asarray(W), jnp.asarray(A), jnp.asarray(f), jnp.asarray(b)


def _reference(W, A, f, b):
    """Schur-complement solution written out with numpy (independent of the solvers)."""
    W, A, f, b = map(np.asarray, (W, A, f, b))
    Wi = np.linalg.inv(W)
    lam = np.linalg.solve(A @ Wi @ A.T, b - A @ Wi @ f)
    return Wi @ (f + A.T @ lam), lam


@pytest.mark.parametrize("solver", SOLVERS, ids=lambda s: type(s).__name__)
def test_every_solver_matches_the_schur_complement_solution_of_a_regular_saddle_system(solver):
    for seed in range(5):
        W, A, f, b = _random_system(seed)
        qdd, lam = solver.solve(solver.factor(W, A), f, b)
        qdd_ref, lam_ref = _reference(W, A, f, b)
        np.testing.assert_allclose(qdd, qdd_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(lam, lam_ref, rtol=1e-10, atol=1e-12)
        assert int(solver.rank(solver.factor(W, A))) == 2


def test_redundant_rows_leave_accelerations_unique_and_split_the_multiplier_evenly():
    W, A, f, b = _random_system(1)
    A2 = jnp.concatenate([A, A[:1]])  # the first row twice
    b2 = jnp.concatenate([b, b[:1]])
    qdd_ref, lam_ref = _reference(W, A, f, b)
    for solver in (cx.UdwadiaKalaba(), cx.AutoSolver()):
        state = solver.factor(W, A2)
        qdd, lam = solver.solve(state, f, b2)
        np.testing.assert_allclose(qdd, qdd_ref, rtol=1e-9, atol=1e-12)
        # Minimum-norm multipliers: the duplicated row's reaction is shared equally.
        np.testing.assert_allclose(lam, [lam_ref[0] / 2, lam_ref[1], lam_ref[0] / 2], rtol=1e-8)
        assert int(solver.rank(state)) == 2


def test_kkt_reports_a_singular_saddle_matrix_instead_of_returning_garbage():
    W, A, f, b = _random_system(2)
    A2 = jnp.concatenate([A, A[:1]])
    solver = cx.KKT()
    with pytest.raises(Exception, match="saddle-point matrix .* is singular"):
        jax.block_until_ready(solver.solve(solver.factor(W, A2), f, jnp.zeros(3)))


@pytest.mark.parametrize(
    "block, where", [("W", (0, 0)), ("W", (3, 1)), ("A", (0, 4)), ("A", (1, 2))]
)
def test_kkt_reports_a_non_finite_entry_anywhere_in_w_or_a(block, where):
    # The check reads only the pivots of the LU factor; a NaN anywhere in W or A reaches them.
    W, A, f, b = _random_system(3)
    if block == "W":
        W = W.at[where].set(jnp.nan)
    else:
        A = A.at[where].set(jnp.nan)
    solver = cx.KKT()
    with pytest.raises(Exception, match="saddle-point matrix .* is singular"):
        jax.block_until_ready(solver.solve(solver.factor(W, A), f, b))


def test_mass_matrix_singular_but_positive_definite_on_ker_A_is_supported():
    # W = diag(1, 1, 0); A = (0, 0, 1) removes exactly the massless direction.
    W = jnp.diag(jnp.array([1.0, 1.0, 0.0]))
    A = jnp.array([[0.3, -0.2, 1.0]])
    f = jnp.array([1.0, 2.0, 0.0])
    b = jnp.array([0.5])
    for solver in SOLVERS:
        qdd, lam = solver.solve(solver.factor(W, A), f, b)
        np.testing.assert_allclose(W @ qdd, f + A.T @ lam, atol=1e-12)
        np.testing.assert_allclose(A @ qdd, b, atol=1e-12)


@pytest.mark.parametrize("solver", SOLVERS, ids=lambda s: type(s).__name__)
def test_projection_is_the_minimum_W_norm_correction(solver):
    W, A, _, _ = _random_system(3)
    r = jnp.array([0.7, -1.1])
    delta = solver.project(solver.factor(W, A), r)
    Wi = jnp.linalg.inv(W)
    expected = Wi @ A.T @ jnp.linalg.solve(A @ Wi @ A.T, r)
    np.testing.assert_allclose(delta, expected, rtol=1e-10, atol=1e-12)


def test_udwadia_kalaba_gradient_is_finite_and_exact_at_a_rank_deficient_point():
    W, A, f, b = _random_system(4)
    _, lam_ref = _reference(W, A, f, b)

    def loss(s):
        A2 = jnp.concatenate([A, s * A[:1]])  # rank 2 for every s: a redundant row
        b2 = jnp.concatenate([b, s * b[:1]])
        solver = cx.UdwadiaKalaba()
        _, lam = solver.solve(solver.factor(W, A2), f, b2)
        return jnp.sum(lam**2)

    # Minimum-norm split of the first row's multiplier: lam_0 / (1 + s^2) and s lam_0 / (1 + s^2),
    # so d/ds sum(lam^2) = -2 s lam_0^2 / (1 + s^2)^2.
    s0 = 1.3
    g = jax.grad(loss)(s0)
    assert jnp.isfinite(g)
    np.testing.assert_allclose(g, -2 * s0 * lam_ref[0] ** 2 / (1 + s0**2) ** 2, rtol=1e-8)


def test_singular_mass_matrix_on_admissible_velocities_raises_a_clear_error():
    W = jnp.diag(jnp.array([1.0, 0.0]))
    A = jnp.zeros((0, 2))
    with pytest.raises(Exception, match="not positive definite on the admissible"):
        solver = cx.UdwadiaKalaba()
        jax.block_until_ready(solver.solve(solver.factor(W, A), jnp.ones(2), jnp.zeros(0)))
    with pytest.raises(Exception, match="saddle-point matrix .* is singular"):
        solver = cx.KKT()
        jax.block_until_ready(solver.solve(solver.factor(W, A), jnp.ones(2), jnp.zeros(0)))


def test_auto_solver_works_under_jit_and_vmap_across_regular_and_singular_points():
    W, A, f, b = _random_system(5)
    scales = jnp.array([1.0, 0.0, 1e-3])  # second row: s * A[0] -> singular at s = 0

    @eqx.filter_jit
    def solve(s):
        A2 = jnp.stack([A[0], s * A[1] + (1 - s) * A[0]])
        solver = cx.AutoSolver()
        state = solver.factor(W, A2)
        return solver.solve(state, f, A2 @ jnp.ones(5))[0], solver.rank(state)

    qdd, rank = jax.vmap(solve)(scales)
    assert jnp.all(jnp.isfinite(qdd))
    assert list(np.asarray(rank)) == [2, 1, 2]


def test_auto_solver_refuses_a_negative_mass_on_its_rank_robust_path_in_every_transform():
    # W = diag(1, -1) with a zero constraint row: the saddle matrix is singular, so the
    # rank-robust path runs, and W is not positive definite on ker A = R^2.
    W = jnp.diag(jnp.array([1.0, -1.0]))

    def loss(s):
        A = jnp.array([[0.0, 0.0]]) * s
        solver = cx.AutoSolver()
        qdd, lam = solver.solve(solver.factor(s * W, A), jnp.ones(2), jnp.zeros(1))
        return jnp.sum(qdd) + jnp.sum(lam)

    one, batch = jnp.asarray(1.0), jnp.array([1.0, 2.0])
    cases = [
        (loss, one),
        (jax.jit(loss), one),
        (jax.jit(jax.grad(loss)), one),
        (jax.jit(jax.vmap(jax.grad(loss))), batch),
        (jax.vmap(jax.jacfwd(jax.grad(loss))), batch),
    ]
    for fn, s in cases:
        with pytest.raises(Exception, match="not positive definite on the admissible"):
            jax.block_until_ready(fn(s))


def test_auto_solver_in_a_batched_cond_raises_nothing_for_the_elements_that_skip_it():
    # Under `vmap`, a `cond` with a batched predicate runs both branches for every element
    # and, inside `linearize` (diffrax's event root find), rematerialises the skipped
    # elements' branch on zero-filled residuals: W = 0 there, and the result is discarded.
    W, A, f, _ = _random_system(3)

    def event(s, taken):
        def branch():
            A2 = jnp.stack([A[0], s * A[1] + (1 - s) * A[0]])  # singular at s = 0
            solver = cx.AutoSolver()
            return solver.solve(solver.factor(W, A2), f, A2 @ jnp.ones(5))[0][0]

        return jax.lax.cond(taken, branch, lambda: jnp.zeros_like(s))

    def slope(s, taken):
        return jax.linearize(lambda s: event(s, taken), s)[1](jnp.ones_like(s))

    # The taken element regular, then singular (the rank-robust branch then runs for real).
    for scales in (jnp.array([0.5, 1.0]), jnp.array([0.0, 0.5])):
        taken = jnp.array([True, False])
        for fn in (jax.vmap(slope), jax.jit(jax.vmap(slope))):
            out = np.asarray(fn(scales, taken))
            assert out[1] == 0.0 and np.isfinite(out[0])
        fd = (event(scales[0] + 1e-6, True) - event(scales[0] - 1e-6, True)) / 2e-6
        if scales[0] != 0.0:
            np.testing.assert_allclose(out[0], fd, rtol=1e-6, atol=1e-9)


# A pseudo-inverse cutoff so coarse that the rank-robust path drops a regular element's
# weaker row: there its answer differs from KKT's by O(1), so that which path an element's
# result came from is told by its value, not by its last bits (the two paths agree to
# round-off at the default cutoff, and the bits of one path may differ by an ulp between
# programs XLA compiles differently).
_COARSE_RTOL = 0.9


def _auto_and_own_path(W, A2, f, b, r):
    """AutoSolver's (qdd, lam, projection) and the same from the solver of the element's
    own path, KKT where it is regular and UdwadiaKalaba where it is singular, with a
    pseudo-inverse cutoff that makes the two paths' answers differ (`_COARSE_RTOL`)."""
    out = []
    solvers = (
        cx.AutoSolver(rtol=_COARSE_RTOL),
        cx.KKT(throw=False),
        cx.UdwadiaKalaba(rtol=_COARSE_RTOL),
    )
    for solver in solvers:
        state = solver.factor(W, A2)
        out.append((*solver.solve(state, f, b), solver.project(state, r)))
    return out


def test_auto_solver_gives_each_batch_element_the_result_of_its_own_path():
    # A batch mixing regular and singular elements (the rank-robust branch is then taken
    # for the whole batch) and an all-regular batch (it is not): every element must get
    # exactly KKT's answer where it is regular and UdwadiaKalaba's where it is singular,
    # in solve and in project, and the gradient must be finite with KKT's on the regular
    # elements.
    W, A, f, _ = _random_system(7)
    r = jnp.array([0.3, -0.2])

    def rows(s):
        return jnp.stack([A[0], s * A[1] + (1 - s) * A[0]])  # singular at s = 0

    def run(s):
        A2 = rows(s)
        return _auto_and_own_path(W, A2, f, A2 @ jnp.ones(5), r)

    for scales in (jnp.array([1.0, 0.0, 0.5]), jnp.array([1.0, 0.7, 0.5])):
        auto, kkt, uk = jax.jit(jax.vmap(run))(scales)
        for i, s in enumerate(np.asarray(scales)):
            own, other = (uk, kkt) if s == 0.0 else (kkt, uk)
            for a, o, x in zip(auto, own, other, strict=True):
                np.testing.assert_allclose(a[i], o[i], rtol=1e-12, atol=1e-12)
                if s != 0.0:  # the other path's answer is far: the value tells the path
                    assert np.max(np.abs(np.asarray(x[i]) - np.asarray(o[i]))) > 1e-3

    def loss(s, solver):
        A2 = rows(s)
        state = solver.factor(W, A2)
        qdd, lam = solver.solve(state, f, A2 @ jnp.ones(5))
        return jnp.sum(qdd**2) + jnp.sum(lam) + jnp.sum(solver.project(state, r))

    scales = jnp.array([1.0, 0.0, 0.5])
    g_auto = jax.vmap(jax.grad(lambda s: loss(s, cx.AutoSolver())))(scales)
    g_kkt = jax.vmap(jax.grad(lambda s: loss(s, cx.KKT(throw=False))))(scales)
    assert np.all(np.isfinite(np.asarray(g_auto)))
    regular = np.array([0, 2])
    np.testing.assert_allclose(g_auto[regular], g_kkt[regular], rtol=1e-12)


@pytest.mark.parametrize("n, m", [(5, 2), (16, 4)], ids=["substitution", "lapack"])
def test_auto_solver_gradients_stay_finite_beside_an_exactly_singular_element(n, m):
    # An element whose rows are exactly dependent (a zero or tiny pivot) gets the
    # rank-robust answer; its discarded KKT solves run on its LU with unit pivots, and must
    # leave no NaN in the batch's gradient, by the written-out substitutions (n + m <= 16)
    # and by LAPACK's solves (above). The regular elements' gradients are KKT's.
    W, A, f, _ = _random_system(11 + n, n, m)
    r = jnp.linspace(-0.5, 0.5, m)

    def loss(s, solver):
        A2 = A.at[-1].set(s * A[-1] + (1 - s) * A[0])  # the last row = the first at s = 0
        state = solver.factor(W, A2)
        qdd, lam = solver.solve(state, f, A2 @ jnp.ones(n))
        return jnp.sum(qdd**2) + jnp.sum(lam) + jnp.sum(solver.project(state, r))

    scales = jnp.array([1.0, 0.0, 0.5])
    g_auto = jax.jit(jax.vmap(jax.grad(lambda s: loss(s, cx.AutoSolver()))))(scales)
    g_kkt = jax.vmap(jax.grad(lambda s: loss(s, cx.KKT(throw=False))))(scales)
    assert np.all(np.isfinite(np.asarray(g_auto)))
    np.testing.assert_allclose(g_auto[np.array([0, 2])], g_kkt[np.array([0, 2])], rtol=1e-10)


def test_only_a_least_squares_answer_is_checked_for_consistency():
    # `consistency_rtol` asks a rank-robust solver whether its answer misses A qdd = b. A
    # regular saddle system has an exact solution, and AutoSolver's LU answer is returned
    # unchecked even at rtol = 0, which its rounding-level residual would fail; where the
    # rows are dependent and contradict each other (b = (1, -1) on a repeated row), the
    # least-squares answer of AutoSolver and UdwadiaKalaba raises, in a batch with a
    # regular element too. KKT accepts the argument and returns its exact answer.
    from constrax._solve import inconsistent

    W, A, f, b = _random_system(13)
    A2 = jnp.stack([A[0], A[0]])
    b2 = jnp.array([1.0, -1.0])

    def solve(solver, A, b, rtol):
        return solver.solve(solver.factor(W, A), f, b, consistency_rtol=rtol)[0]

    auto = cx.AutoSolver()
    qdd = jax.jit(solve, static_argnums=0)(auto, A, b, 0.0)
    assert bool(inconsistent(A, qdd, b, 0.0)[1])  # rounding: rtol = 0 would flag it
    np.testing.assert_allclose(qdd, solve(auto, A, b, None), rtol=1e-14)
    np.testing.assert_allclose(qdd, solve(cx.KKT(), A, b, 0.0), rtol=1e-12)

    batched = jax.jit(jax.vmap(lambda A, b: solve(auto, A, b, 0.05)))
    for solver in (auto, cx.UdwadiaKalaba()):
        for fn in (solve, jax.jit(solve, static_argnums=0)):
            with pytest.raises(Exception, match="rows are inconsistent"):
                jax.block_until_ready(fn(solver, A2, b2, 0.05))
    with pytest.raises(Exception, match="rows are inconsistent"):
        jax.block_until_ready(batched(jnp.stack([A, A2]), jnp.stack([b, b2])))
    # The same batch of consistent rows (b = A qd) passes.
    qd = jnp.ones(5)
    out = batched(jnp.stack([A, A2]), jnp.stack([A @ qd, A2 @ qd]))
    assert np.all(np.isfinite(np.asarray(out)))


def _primitives(jaxpr) -> set[str]:
    out = set()
    for eqn in jaxpr.eqns:
        out.add(eqn.primitive.name)
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            out |= _primitives(sub)
    return out


def _check_gradient_and_projection(solver, W, A, f, b, forward_mode=False):
    """The derivative of a scalar of the solution along a scaling of (W, A) (reverse mode,
    and forward mode if asked) against central differences of the Schur-complement
    reference, and a projection that meets the rows."""

    def loss(x):
        qdd, lam = solver.solve(solver.factor(x * W, x * A), f, b)
        return jnp.sum(jnp.sin(qdd)) + jnp.sum(lam**2)

    def loss_ref(x):
        qdd, lam = _reference(x * W, x * A, f, b)
        return np.sum(np.sin(qdd)) + np.sum(lam**2)

    h = 1e-6
    fd = (loss_ref(1.0 + h) - loss_ref(1.0 - h)) / (2 * h)
    np.testing.assert_allclose(jax.jit(jax.grad(loss))(1.0), fd, rtol=1e-7)
    if forward_mode:
        np.testing.assert_allclose(jax.jacfwd(loss)(1.0), fd, rtol=1e-7)
    r = jnp.linspace(-1.0, 1.0, A.shape[0])
    delta = solver.project(solver.factor(W, A), r)
    np.testing.assert_allclose(A @ delta, r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solver", [cx.KKT(), cx.UdwadiaKalaba()], ids=lambda s: type(s).__name__)
@pytest.mark.parametrize(
    "n, m", [(1, 1), (3, 1), (4, 2), (7, 2), (10, 5), (12, 4), (14, 4), (17, 2)]
)
def test_small_saddle_systems_solved_by_written_out_substitutions_match_numpy(solver, n, m):
    # Up to 16 x 16 the triangular solves of the factors (KKT's LU of the saddle matrix;
    # UdwadiaKalaba's Cholesky factor of the n x n augmented mass matrix) are substitutions
    # in jax.numpy (no LAPACK triangular solve is traced), above it LAPACK's (whose batched
    # form can deadlock jaxlib 0.10's CPU thread pool: docs page "Sharp bits"): either way
    # the answer, its gradient under jit and vmap, and a projection equal the
    # Schur-complement reference and central differences.
    from constrax._solve import SUBSTITUTION_MAX_SIZE

    W, A, f, b = _random_system(n + 10 * m, n, m)

    def solve(W, A, f, b):
        return solver.solve(solver.factor(W, A), f, b)

    size = n + m if isinstance(solver, cx.KKT) else n
    prims = _primitives(jax.make_jaxpr(solve)(W, A, f, b).jaxpr)
    assert ("triangular_solve" in prims) == (size > SUBSTITUTION_MAX_SIZE), prims
    qdd, lam = jax.jit(solve)(W, A, f, b)
    qdd_ref, lam_ref = _reference(W, A, f, b)
    np.testing.assert_allclose(qdd, qdd_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-12, atol=1e-12)

    # A batch of scaled systems, and the gradient of a scalar of the solution with respect
    # to every input against central differences.
    scales = jnp.array([0.5, 1.0, 2.0])
    batched = jax.jit(jax.vmap(lambda s: solve(s * W, A, f, b)[0]))(scales)
    for s, row in zip(np.asarray(scales), np.asarray(batched), strict=True):
        np.testing.assert_allclose(row, _reference(s * W, A, f, b)[0], rtol=1e-12, atol=1e-12)

    _check_gradient_and_projection(solver, W, A, f, b)


def test_default_solver_programs_trace_no_lapack_triangular_solve_on_small_systems():
    # jaxlib 0.10's batched LAPACK triangular solve can deadlock XLA's CPU thread pool
    # (docs page "Sharp bits", "A compiled program that never returns"): the default
    # solver's accelerations of the snake cart (both branches of `AutoSolver`), a batch of
    # their state Jacobians, their gradient and those of `UdwadiaKalaba` trace none.
    model = cx.models.snake_cart()
    qs = jnp.stack([model.q0, model.q0 + 0.1])
    qds = jnp.stack([model.qd0, model.qd0 + 0.2])
    for solver in (cx.AutoSolver(), cx.UdwadiaKalaba()):

        def qdd(q, qd, solver=solver):
            return cx.accelerations(
                model.system, 0.0, q, qd, model.params, constraint_solver=solver
            ).qdd

        programs = {
            "accelerations": (qdd, (model.q0, model.qd0)),
            "vmap(jacfwd)": (jax.vmap(jax.jacfwd(qdd, argnums=(0, 1))), (qs, qds)),
            "grad": (jax.grad(lambda q, qd: jnp.sum(qdd(q, qd) ** 2)), (model.q0, model.qd0)),
        }
        for name, (fn, args) in programs.items():
            prims = _primitives(jax.make_jaxpr(fn)(*args).jaxpr)
            assert "triangular_solve" not in prims, (type(solver).__name__, name)


@pytest.mark.parametrize("solver", [cx.KKT(), cx.AutoSolver()], ids=lambda s: type(s).__name__)
def test_one_large_saddle_system_is_solved_by_lapack_and_a_batch_by_substitution(solver):
    """Above `ONE_SYSTEM_LAPACK_MIN_SIZE` unknowns an LU solve that is not batched is
    LAPACK's (no batch: it cannot deadlock; it costs less there), and one under `vmap` is
    the written-out substitution (no batched LAPACK triangular solve reaches jaxlib 0.10);
    both give the reference's answer, and so do the gradient, the forward-mode Jacobian and
    the projection."""
    from constrax._solve import ONE_SYSTEM_LAPACK_MIN_SIZE

    n, m = 22, 3
    assert n + m > ONE_SYSTEM_LAPACK_MIN_SIZE
    W, A, f, b = _random_system(n + 10 * m, n, m)

    def solve(W, A, f, b):
        return solver.solve(solver.factor(W, A), f, b)

    qdd, lam = jax.jit(solve)(W, A, f, b)
    qdd_ref, lam_ref = _reference(W, A, f, b)
    np.testing.assert_allclose(qdd, qdd_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-12, atol=1e-12)
    scales = jnp.array([0.5, 1.0, 2.0])
    batched = jax.vmap(lambda s: solve(s * W, A, f, b)[0])
    for s, row in zip(np.asarray(scales), np.asarray(jax.jit(batched)(scales)), strict=True):
        np.testing.assert_allclose(row, _reference(s * W, A, f, b)[0], rtol=1e-12, atol=1e-12)
    if jax.default_backend() == "cpu":
        one = jax.jit(solve).lower(W, A, f, b).compile().as_text()
        many = jax.jit(batched).lower(scales).compile().as_text()
        assert "trsm" in one and "trsm" not in many

    _check_gradient_and_projection(solver, W, A, f, b, forward_mode=True)


def _two_free_bodies(constraints):
    """Two free bodies in (position, unit quaternion) coordinates, 14 of them, with springs
    to the origin."""
    body = cx.rigid.RigidBody(1.0, jnp.array([1.0, 2.0, 3.0]), name="body")

    def L(t, q, qd, p):
        spring = 0.5 * (q[:3] @ q[:3] + q[7:10] @ q[7:10])
        return body.kinetic_energy(q[:7], qd[:7]) + body.kinetic_energy(q[7:], qd[7:]) - spring

    rng = np.random.default_rng(0)
    q, qd = rng.normal(size=14), rng.normal(size=14)
    for s in (3, 10):
        q[s : s + 4] /= np.linalg.norm(q[s : s + 4])
        qd[s : s + 4] -= (q[s : s + 4] @ qd[s : s + 4]) * q[s : s + 4]
    return cx.System(L, constraints), jnp.asarray(q), jnp.asarray(qd)


def test_auto_solver_is_kkt_where_every_row_is_a_unit_quaternion():
    """Rows that cannot lose rank (`cx.UnitQuaternion`s of distinct quaternions): the
    default `AutoSolver()` is `KKT()`, the same program (equation for equation) and the
    same accelerations, in a rollout's gradient too. With any other row, or quaternions
    that overlap, the rank-robust switch stays."""
    from constrax._solve import for_rows

    quats = [cx.UnitQuaternion(3, "a"), cx.UnitQuaternion(10, "b")]
    system, q, qd = _two_free_bodies(quats)
    assert for_rows(cx.AutoSolver(), quats) == cx.KKT()
    assert for_rows(cx.AutoSolver(switch_rtol=1e-8), quats) == cx.KKT(pivot_rtol=1e-8)
    other = cx.Holonomic(lambda t, q, p: q[0] - 0.3, name="x")
    for rows in (quats + [other], [cx.UnitQuaternion(3), cx.UnitQuaternion(5)], []):
        assert for_rows(cx.AutoSolver(), rows) == cx.AutoSolver()
    assert for_rows(cx.UdwadiaKalaba(), quats) == cx.UdwadiaKalaba()

    def final(v, solver, system=system):
        tr = cx.simulate(system, q, v, t1=0.05, constraint_solver=solver)
        return jnp.sum(tr.q[-1] ** 2)

    def count(f):
        def walk(jaxpr):
            return sum(
                1 + sum(walk(sub) for sub in jax.extend.core.jaxprs_in_params(e.params))
                for e in jaxpr.eqns
            )

        return walk(jax.make_jaxpr(jax.grad(f))(qd).jaxpr)

    auto, kkt = (lambda v: final(v, cx.AutoSolver())), (lambda v: final(v, cx.KKT()))
    assert count(auto) == count(kkt)
    np.testing.assert_allclose(jax.jit(jax.grad(auto))(qd), jax.jit(jax.grad(kkt))(qd), rtol=1e-12)
    # The same norms as `cx.Holonomic` rows: AutoSolver keeps its switch, a larger program.
    norms = [
        cx.Holonomic(lambda t, q, p, s=s: q[s : s + 4] @ q[s : s + 4] - 1.0, name=f"norm{s}")
        for s in (3, 10)
    ]
    holonomic = _two_free_bodies(norms)[0]
    assert count(lambda v: final(v, cx.AutoSolver(), holonomic)) > count(
        lambda v: final(v, cx.KKT(), holonomic)
    )
    acc = cx.accelerations(system, 0.0, q, qd)
    np.testing.assert_allclose(
        acc.qdd,
        cx.accelerations(system, 0.0, q, qd, constraint_solver=cx.UdwadiaKalaba()).qdd,
        rtol=1e-10,
        atol=1e-10,
    )
