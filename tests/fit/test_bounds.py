r"""Bounds that vary along the horizon (`OptimalControlProblem(control_bounds=lambda t: ...)`,
`q_bounds`, `qd_bounds` as functions of time).

References nobody here derived: the least-effort rest-to-rest motion of a unit mass by $d$
in $T$, $u^*(t) = (6d/T^2)(1 - 2t/T)$, $q^*(t) = d(3s^2 - 2s^3)$ with $s = t/T$, cost
$12d^2/T^3$. Hermite–Simpson and multiple shooting represent it exactly (a cubic $q$, a
linear $u$), so the bounds below change nothing of it only if they are imposed at the right
times: a control bound $u(t) = u^*(t)$ that fixes it, and a ceiling $q \le q^*(t)$ that the
optimum touches everywhere.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from fit_problems import double_integrator

import constrax as cx

pytest.importorskip("cyipopt")

fit = cx.fit
T, D = 1.0, 1.0
OPTIMUM = 12 * D**2 / T**3


def _u_star(t):
    return 6 * D / T**2 * (1 - 2 * t / T)


def _q_star(t):
    s = t / T
    return D * (3 * s**2 - 2 * s**3)


def _effort(t, q, qd, u, p):
    return u @ u


@pytest.mark.parametrize(
    "transcription", [fit.HermiteSimpson(10), fit.DirectMultipleShooting(10)], ids=["HS", "DMS"]
)
def test_a_control_fixed_along_the_horizon_by_its_bounds_is_the_closed_form_optimum(
    transcription,
):
    """lower = upper = u*(t) at every node (and midpoint): the controls are u*(t_k), and
    they reach the terminal state only if each node's bound is that of its own time."""
    problem = double_integrator(d=D, T=T, running_cost=_effort,
                                control_bounds=lambda t: (_u_star(t), _u_star(t)))  # fmt: skip
    sol = fit.solve_optimal_control(problem, transcription=transcription, progress=False)
    assert sol.success
    np.testing.assert_allclose(np.asarray(sol.u)[:, 0], _u_star(np.asarray(sol.ts)), atol=1e-9)
    assert abs(sol.objective - OPTIMUM) <= 1e-8 * OPTIMUM
    np.testing.assert_allclose(np.asarray(sol.q)[:, 0], _q_star(np.asarray(sol.ts)), atol=1e-9)


def test_a_moving_ceiling_the_optimum_touches_everywhere_leaves_it_unchanged():
    """q <= q*(t): the optimum lies on the ceiling at every node and midpoint; a ceiling
    read at shifted times would cut it (the cost would rise)."""
    problem = double_integrator(d=D, T=T, running_cost=_effort,
                                q_bounds=lambda t: (None, _q_star(t)))  # fmt: skip
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(10), progress=False)
    assert sol.success and abs(sol.objective - OPTIMUM) <= 1e-6 * OPTIMUM
    assert np.all(np.asarray(sol.q)[:, 0] <= _q_star(np.asarray(sol.ts)) + 1e-7)
    # The same ceiling lowered by 1 % in the middle cuts the optimum: the bound is active.
    lower = lambda t: (None, _q_star(t) - 0.01 * jnp.sin(jnp.pi * t / T))  # noqa: E731
    cut = double_integrator(d=D, T=T, running_cost=_effort, q_bounds=lower)
    sol = fit.solve_optimal_control(cut, transcription=fit.HermiteSimpson(10), progress=False)
    assert sol.success and sol.objective > OPTIMUM * (1 + 1e-4)


def test_bounds_along_the_horizon_are_the_tightest_of_a_function_and_the_constant():
    problem = double_integrator(d=D, T=T, running_cost=_effort,
                                control_bounds=lambda t: (-1.0 - t, 2.0 * t + 1.0))  # fmt: skip
    B = problem.bounds_at([0.0, 0.5, 1.0])
    np.testing.assert_array_equal(B["u"][0][:, 0], [-1.0, -1.5, -2.0])
    np.testing.assert_array_equal(B["u"][1][:, 0], [1.0, 2.0, 3.0])
    assert np.all(np.isinf(B["q"][0])) and B["q"][0].shape == (3, 1)


def test_bad_bound_functions_raise_naming_the_argument_and_the_time():
    def make(**kw):
        return double_integrator(d=D, T=T, running_cost=_effort, **kw)

    with pytest.raises(ValueError, match=r"`control_bounds\(t\)`: the lower bound must be a scalar "
                                         r"or have shape \(1,\), got \(2,\)"):  # fmt: skip
        make(control_bounds=lambda t: (jnp.zeros(2), None))
    with pytest.raises(ValueError, match=r"`q_bounds\(t\)`: lower bound > upper bound at t = 1"):
        make(q_bounds=lambda t: (t, 1.0 - t + 0.5))
    with pytest.raises(ValueError, match=r"`qd_bounds\(t\)`: the upper bound is NaN at t = 0.5"):
        make(qd_bounds=lambda t: (None, jnp.where(t == 0.5, jnp.nan, 1.0)))
    with pytest.raises(ValueError, match=r"`control_bounds\(t\)` must return a pair"):
        make(control_bounds=lambda t: t)
    with pytest.raises(ValueError, match="`control_bounds` as a function of time needs a fixed"):
        make(control_bounds=lambda t: (-1.0, 1.0), t1_bounds=(0.5, 2.0))
    with pytest.raises(ValueError, match=r"`q1`\[0\] = 1.0 lies outside q_bounds"):
        make(q_bounds=lambda t: (None, 0.5 * t))  # the fixed final position above the ceiling
    with pytest.raises(ValueError, match="pass a function t -> \\(lower, upper\\)"):
        make(control_bounds=(np.zeros((11, 1)), None))  # per-node arrays: the function form
