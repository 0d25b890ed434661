r"""Continuation (`cx.fit.continuation`): a homotopy over an array of the problem, each solve
warm-started from the last.

Reference nobody here derived: a unit mass moved by $d$ in $T$ from rest to rest under
$|u| \le u_\max$ can only cover $d \le u_\max T^2/4$ (bang-bang); with $|u|$ unbounded the
least effort is $12 d^2/T^3$.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from fit_problems import double_integrator

import constrax as cx

pytest.importorskip("cyipopt")

fit = cx.fit
TR = fit.HermiteSimpson(20)


def _effort(t, q, qd, u, p):
    return u @ u


def test_continuation_in_the_terminal_state_reaches_each_closed_form_optimum():
    """d = 1, 2, 4 by steps of the fixed terminal position: every step solved, the last at
    12 d²/T³ = 192, each started from the last solution."""
    problem = double_integrator(d=1.0, running_cost=_effort)
    run = fit.continuation(problem, lambda pr: pr.q1, [[1.0], [2.0], [4.0]], transcription=TR,
                           progress=False)  # fmt: skip
    assert run.reached and run.failed is None
    assert [float(v[0]) for v in run.values] == [1.0, 2.0, 4.0]
    np.testing.assert_allclose(run.value, [4.0])
    assert run.solution.success and abs(run.solution.objective - 192.0) <= 1e-8 * 192
    assert float(run.solution.q[-1, 0]) == pytest.approx(4.0, abs=1e-10)
    assert len(run.iterations) == 3


def test_a_failing_step_is_halved_and_the_last_solved_value_returned():
    """|u| <= 45 in T = 1 covers d <= 11.25: from d = 10 the step to 14 fails, halved to 12
    (infeasible) and 11 (solved); the retried 14 and its halving 12.5 fail, and the budget
    of 3 halvings is spent: stopped at 11, not reached, the last failure kept."""
    problem = double_integrator(d=10.0, running_cost=_effort, control_bounds=(-45.0, 45.0))
    run = fit.continuation(problem, lambda pr: pr.q1, [[10.0], [14.0]], transcription=TR,
                           progress=False)  # fmt: skip
    assert not run.reached
    assert [float(v[0]) for v in run.values] == [10.0, 11.0]
    np.testing.assert_allclose(run.value, [11.0])
    assert run.solution.success and float(run.solution.q[-1, 0]) == pytest.approx(11.0, abs=1e-9)
    assert run.failed is not None and not run.failed.success
    assert float(run.failed.problem.q1[0]) == 12.5
    assert len(run.iterations) == 6  # 10, 14, 12, 11, 14, 12.5


def test_continuation_in_a_bound_relaxes_to_the_target():
    """The upper control bound relaxed from 45 to 200 at d = 10 (the lower one at -200):
    the last optimum is the unbounded one, 12 d² = 1200 (|u| <= 6 d = 60), the first
    above it (the bound active while accelerating)."""
    problem = double_integrator(d=10.0, running_cost=_effort, control_bounds=(-200.0, 45.0))
    hi = problem.bounds["u"][1]
    run = fit.continuation(problem, lambda pr: pr.bounds["u"][1], [hi, hi * 2, hi * 200 / 45],
                           transcription=TR, progress=False)  # fmt: skip
    assert run.reached and abs(run.solution.objective - 1200.0) <= 1e-8 * 1200
    first = fit.solve_optimal_control(problem, transcription=TR, progress=False)
    assert first.success and first.objective > 1200.0 + 1.0


def test_bad_continuation_arguments_raise_naming_the_argument():
    problem = double_integrator(d=1.0, running_cost=_effort)
    where = lambda pr: pr.q1  # noqa: E731
    with pytest.raises(ValueError, match="`values\\[1\\]` must be a finite array of the shape"):
        fit.continuation(problem, where, [[1.0], [1.0, 2.0]], transcription=TR)
    with pytest.raises(ValueError, match="`values\\[0\\]`"):
        fit.continuation(problem, where, [[jnp.nan]], transcription=TR)
    with pytest.raises(ValueError, match="`values` is empty"):
        fit.continuation(problem, where, [], transcription=TR)
    with pytest.raises(TypeError, match="`where\\(problem\\)` must locate an array"):
        fit.continuation(problem, lambda pr: pr.t0, [0.0], transcription=TR)
    with pytest.raises(ValueError, match="`halvings`"):
        fit.continuation(problem, where, [[1.0]], halvings=-1, transcription=TR)
    bounded = double_integrator(d=20.0, running_cost=_effort, control_bounds=(-45.0, 45.0))
    with pytest.raises(ValueError, match="the first problem \\(value \\[20.0\\]\\) failed"):
        fit.continuation(bounded, where, [[20.0], [21.0]], transcription=TR, progress=False)
