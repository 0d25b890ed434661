"""Bad input to `cx.fit.OptimalControlProblem` / `cx.fit.solve_optimal_control`: refused
before the solve naming the argument or the leaf at fault, or solved with tolerances that
follow the dtype.

References nobody here derived: the knife-edge parking optimum 0.21846 of single shooting
through `cx.simulate` (the project's issue on trajectory optimisation) and the knife edge's
coordinates (x, y, theta: three).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
from constrax import models

pytest.importorskip("cyipopt")

fit = cx.fit
PARKING_OPTIMUM = 0.21846


def _knife_force(t, q, qd, p):
    u, th = p["u"], q[2]
    return jnp.stack([u[0] * jnp.cos(th), u[0] * jnp.sin(th), u[1]])


def _parking(**kw):
    knife = models.knife_edge()
    system = cx.System(knife.system.lagrangian, knife.system.constraints, force=_knife_force)
    options = dict(
        control=lambda p: p["u"],
        t1=5.0,
        q0=jnp.zeros(3),
        qd0=jnp.zeros(3),
        q1=jnp.array([0.0, 1.0, 0.0]),
        qd1=jnp.zeros(3),
        running_cost=lambda t, q, qd, u, p: u @ u,
    )
    options.update(kw)
    params = {**knife.params, "u": jnp.zeros(2), "w": jnp.zeros(2)}
    return fit.OptimalControlProblem(system, params, **options)


def test_a_control_leaf_the_force_does_not_read_is_refused_naming_the_leaf():
    match = r"`control` locates params\['w'\], which the system's force does not read"
    with pytest.raises(ValueError, match=match):  # the goal as a terminal cost
        _parking(
            control=lambda p: p["w"],
            q1=None,
            qd1=None,
            terminal_cost=lambda t, q, qd, p: 100.0 * (q[1] - 1.0) ** 2,
        )
    with pytest.raises(ValueError, match=match):  # the terminal state fixed
        _parking(control=lambda p: p["w"])


@pytest.mark.parametrize("name", ["q0", "qd0", "q1", "qd1"])
def test_a_state_of_the_wrong_length_is_named_against_the_systems_coordinates(name):
    with pytest.raises(
        ValueError,
        match=rf"`{name}` must have shape \(n,\) = \(3,\), the system's number of coordinates",
    ):
        _parking(**{name: jnp.zeros(4)})


def test_float32_parking_succeeds_with_the_default_tolerances():
    """The docs' parking in float32: solved, `success`, at the float64 optimum."""
    with jax.enable_x64(False):
        problem = _parking()
        assert problem.t1.dtype == jnp.float32
        sol = fit.solve_optimal_control(problem)
    assert sol.success and sol.status == "solved", (sol.status, sol.violated)
    assert abs(sol.objective - PARKING_OPTIMUM) <= 5e-3 * PARKING_OPTIMUM
    assert sol.violation_tolerance >= sol.constraint_violation


def test_a_bad_violation_tolerance_or_ipopt_tolerance_is_refused_naming_it():
    problem = _parking()
    with pytest.raises(ValueError, match=r"`violation_tolerance` must be a positive number"):
        fit.solve_optimal_control(problem, violation_tolerance=-1.0)
    with pytest.raises(ValueError, match=r"`tol` must be a positive number or None"):
        fit.IPOPT(tol=0.0)


@pytest.mark.parametrize(
    "transcription",
    [fit.HermiteSimpson(4), fit.DirectMultipleShooting(4, 2)],
    ids=["collocation", "multiple-shooting"],
)
def test_a_float64_solve_after_a_float32_one_of_the_same_sizes_succeeds(transcription):
    """The layouts are cached by the problem's sizes; one made under x64 off once served
    the float64 problem after it, whose indexing then failed (int32 against int64 indices):
    the README's parking after the float32 one of this file."""
    mass = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, force=lambda t, q, qd, p: p["u"])

    def solve():
        problem = fit.OptimalControlProblem(
            mass, {"u": jnp.zeros(1)}, control=lambda p: p["u"], t1=1.0,
            q0=jnp.zeros(1), qd0=jnp.zeros(1), q1=jnp.ones(1), qd1=jnp.zeros(1),
            running_cost=lambda t, q, qd, u, p: u @ u,
        )  # fmt: skip
        return fit.solve_optimal_control(problem, transcription=transcription)

    with jax.enable_x64(False):
        single = solve()
    with jax.enable_x64(True):  # also where the process runs with x64 off
        double = solve()
    assert single.success and double.success
    assert single.q.dtype == jnp.float32 and double.q.dtype == jnp.float64
    np.testing.assert_allclose(double.objective, 12.0, rtol=1e-8)  # 12 d^2 / T^3
