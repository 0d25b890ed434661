r"""Constraints at intermediate times (`OptimalControlProblem(point_constraints=...)`, opty's
"instance constraints"), and a state fixed in part at $t_0$.

References nobody here derived: the least-effort motion of a unit mass, rest to rest over
a distance $d$ in a time $T$, costs $12 d^2/T^3$ with the control $u = (6 - 12 t/T) d/T^2$
(the Euler–Lagrange equation $u'' = 0$ with four boundary values); the derivatives of the
whole program by dense `jax.jacfwd` / `jax.hessian`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

pytest.importorskip("cyipopt")

fit = cx.fit
MASS = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, force=lambda t, q, qd, p: p["u"])


def _problem(n=1, t1=2.0, **kwargs):
    kwargs = {"q0": jnp.zeros(n), "qd0": jnp.zeros(n), **kwargs}
    return fit.OptimalControlProblem(
        MASS,
        {"u": jnp.zeros(n)},
        control=lambda p: p["u"],
        t1=t1,
        running_cost=lambda t, q, qd, u, p: u @ u,
        **kwargs,
    )


def _waypoint(q1=1.0):
    return [(1.0, lambda t, q, qd, u, p: q - q1)]


@pytest.mark.parametrize(
    "transcription",
    [fit.HermiteSimpson(10), fit.DirectMultipleShooting(segments=10, steps=4)],
    ids=["hermite-simpson", "multiple-shooting"],
)
def test_a_waypoint_halfway_splits_the_rest_to_rest_optimum_into_two_of_twelve(transcription):
    """Rest at 0 at t = 0 and t = 2, through q = 1 at t = 1: the problem is convex and
    symmetric about t = 1, so the optimum passes the waypoint at rest and is two
    rest-to-rest motions of d = T = 1, each of cost 12 with u = 6 - 12 t on the first.
    Both transcriptions hold cubic states and quadratic (or exactly integrated) controls,
    so the figures are exact to the solver's tolerance."""
    problem = _problem(q1=jnp.zeros(1), qd1=jnp.zeros(1), point_constraints=_waypoint())
    sol = fit.solve_optimal_control(problem, transcription=transcription)
    assert sol.success, sol.message
    np.testing.assert_allclose(sol.objective, 24.0, rtol=1e-8)
    ts, k = np.asarray(sol.ts), 5
    assert ts[k] == pytest.approx(1.0)
    np.testing.assert_allclose(sol.q[k], [1.0], atol=1e-9)
    np.testing.assert_allclose(sol.qd[k], [0.0], atol=1e-8)
    first = ts <= 1.0
    np.testing.assert_allclose(sol.u[first, 0], 6.0 - 12.0 * ts[first], atol=1e-7)
    np.testing.assert_allclose(sol.u[~first, 0], -18.0 + 12.0 * ts[~first], atol=1e-7)
    # without the waypoint the mass stays at rest: the constraint did the work
    free = fit.solve_optimal_control(
        _problem(q1=jnp.zeros(1), qd1=jnp.zeros(1)), transcription=transcription
    )
    assert free.success and abs(free.objective) < 1e-10


def test_an_initial_state_fixed_in_part_leaves_the_free_coordinate_where_it_costs_nothing():
    """`q0=None` with `point_constraints` at t0 fixing q[0] only: a planar mass brought to
    rest at (1, 1) at t = 1 starts at q[0] = 0 and, free to choose q[1], starts there at 1,
    so only the first coordinate moves: cost 12 (d = T = 1)."""
    problem = _problem(
        n=2,
        t1=1.0,
        q0=None,
        q1=jnp.ones(2),
        qd1=jnp.zeros(2),
        point_constraints=[(0.0, lambda t, q, qd, u, p: q[0])],
    )
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(10))
    assert sol.success, sol.message
    np.testing.assert_allclose(sol.objective, 12.0, rtol=1e-8)
    np.testing.assert_allclose(sol.q[0], [0.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(sol.u[:, 1], 0.0, atol=1e-8)


def test_point_constraint_rows_are_named_by_constraint_time_and_node():
    problem = _problem(
        point_constraints=[(1.0, lambda t, q, qd, u, p: q - 1.0), (2.0, lambda t, q, qd, u, p: u)]
    )
    names = fit.HermiteSimpson(4).nlp(problem).constraint_names()
    assert "point_constraints[0][0] at t = 1 (node 2)" in names
    assert "point_constraints[1][0] at t = 2 (node 4)" in names


@pytest.mark.parametrize(
    "transcription",
    [fit.HermiteSimpson(4), fit.DirectMultipleShooting(4, 2)],
    ids=["collocation", "multiple-shooting"],  # the trapezoid's layout is the collocation one
)
def test_the_derivative_blocks_hold_the_point_constraints_derivatives(transcription):
    """At a random point, the program's Jacobian and Hessian-of-the-Lagrangian values,
    placed on the transcription's block structure, equal dense `jax.jacfwd` and
    `jax.hessian` of the whole program, with point constraints at the first node, an
    interior node (its state and its control) and the last node."""
    points = [
        (0.0, lambda t, q, qd, u, p: qd[0] + u[0] ** 2),
        (1.0, lambda t, q, qd, u, p: jnp.stack([q[0] * u[0], jnp.sin(qd[0])])),
        (2.0, lambda t, q, qd, u, p: q[0] * qd[0] + u[0]),
    ]
    problem = _problem(q0=None, qd0=None, q1=jnp.zeros(1), point_constraints=points)
    nlp = transcription.nlp(problem)
    L = nlp.layout
    z = np.random.default_rng(0).normal(size=L.nz)
    lam = np.random.default_rng(1).normal(size=L.nc)
    J = np.zeros((L.nc, L.nz))
    np.add.at(J, (L.jac_rows, L.jac_cols), np.asarray(jax.jit(lambda z: nlp.jacobian_values(z))(z)))
    np.testing.assert_allclose(J, jax.jit(jax.jacfwd(lambda z: nlp.constraints(z)))(z), atol=1e-12)
    if transcription.exact_hessian:
        H = np.zeros((L.nz, L.nz))
        values = jax.jit(lambda z: nlp.hessian_values(z, lam, 0.7))(z)
        np.add.at(H, (L.hess_rows, L.hess_cols), np.asarray(values))
        lagrangian = lambda z: 0.7 * nlp.objective(z) + lam @ nlp.constraints(z)
        np.testing.assert_allclose(H, np.tril(jax.jit(jax.hessian(lagrangian))(z)), atol=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"point_constraints": [(2.5, lambda t, q, qd, u, p: q)]}, ValueError,
         r"point_constraints\[0\]`: the time 2.5 lies outside the horizon "
         r"\[t0, t1\] = \[0.0, 2.0\]"),
        ({"point_constraints": [(float("nan"), lambda t, q, qd, u, p: q)]}, ValueError,
         r"point_constraints\[0\]`: the time nan lies outside"),
        ({"point_constraints": lambda t, q, qd, u, p: q}, TypeError,
         r"`point_constraints` must be a sequence of pairs \(t, c\)"),
        ({"point_constraints": [(1.0, 3.0)]}, TypeError,
         r"`point_constraints\[0\]` must be a pair \(t, c\)"),
        ({"point_constraints": [(1.0, lambda t, q, qd, u, p: jnp.eye(2))]}, ValueError,
         r"point_constraints\[0\] \(t = 1\).*must return a scalar or shape \(k,\), "
         r"got shape \(2, 2\)"),
        ({"point_constraints": [(1.0, lambda t, q, qd, u, p: q)], "t1_bounds": (1.5, 3.0)},
         ValueError, r"`point_constraints` need a fixed final time"),
        # a state fixed in part at a coordinate the system does not have
        ({"point_constraints": [(0.0, lambda t, q, qd, u, p: q[3])]}, IndexError,
         r"point_constraints\[0\] \(t = 0\): c\(t, q, qd, u, p\)` indexes an argument out of "
         r"its range .*index 3 is out of bounds for axis 0 with size 1"),
    ],
    ids=["outside", "nan", "not-a-sequence", "not-a-function", "matrix", "free-time", "index"],
)  # fmt: skip
def test_bad_point_constraints_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        _problem(**kwargs)


def test_a_point_constraint_off_the_grid_names_the_nearest_nodes():
    problem = _problem(point_constraints=[(0.33, lambda t, q, qd, u, p: q)])
    with pytest.raises(ValueError, match=r"point_constraints\[0\]` at t = 0.33 is not a node of "
                       r"the HermiteSimpson grid of 10 intervals of 0.2 from t0 = 0 \(the nearest "
                       r"nodes are t = 0.2 and 0.4\)"):  # fmt: skip
        fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(10))


def test_a_terminal_constraint_reading_a_coordinate_the_system_lacks_is_refused():
    """JAX clamps an out-of-range index (`q[1]` of one coordinate reads `q[0]`); the
    problem names the function instead of imposing the row on another coordinate."""
    with pytest.raises(IndexError, match=r"`terminal_constraint\(t, q, qd, p\)` indexes an "):
        _problem(terminal_constraint=lambda t, q, qd, p: q[1] - 1.0)


def test_point_constraints_that_contradict_each_other_fail_and_are_named():
    """q(1) = 1 and q(1) = 2 cannot both hold: the solve is not `success`, its violation is
    above the tolerance, and the violated rows are the point constraints at node 5."""
    points = [(1.0, lambda t, q, qd, u, p: q - 1.0), (1.0, lambda t, q, qd, u, p: q - 2.0)]
    problem = _problem(q1=jnp.zeros(1), qd1=jnp.zeros(1), point_constraints=points)
    sol = fit.solve_optimal_control(
        problem, transcription=fit.HermiteSimpson(10), solver=fit.IPOPT(max_iter=50)
    )
    assert not sol.success
    assert sol.constraint_violation > sol.violation_tolerance
    assert sol.constraint_violation >= 0.5 - 1e-6  # the two rows differ by 1 at one point
    assert any("point_constraints[" in v and "(node 5)" in v for v in sol.violated), sol.violated
