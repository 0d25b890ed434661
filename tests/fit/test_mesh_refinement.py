r"""Mesh refinement (`coarse=`), the progress report and the advice of a failed solve
(`cx.fit.solve_optimal_control`).

References nobody here derived: the closed-form minimum effort $12 d^2/T^3$ of the double
integrator, and opty 1.5.0's optimum of its own gallery problem, parallel parking
(3.2022690e5 on 501 nodes, backward Euler; `fit_problems.parallel_park`).
"""

import sys

import jax.numpy as jnp
import numpy as np
import pytest
from fit_problems import OPTY_PARK_OPTIMUM, double_integrator, parallel_park
from test_optimal_control import cart_pole

import constrax as cx
from constrax.fit import _progress

pytest.importorskip("cyipopt")

fit = cx.fit


def _effort(t, q, qd, u, p):
    return u @ u


def _intervals(sol):
    return [s.transcription.intervals for s in sol.stages]


def test_each_coarse_stage_solves_and_the_finest_reaches_the_closed_form_optimum():
    """coarse=(5, 20) before HermiteSimpson(60): three stages, coarsest first, each solved
    at the closed form 12 d²/T³ (Hermite–Simpson is exact on the cubic optimum); the
    solution's iterations are its last stage's."""
    problem = double_integrator(d=2.0, running_cost=_effort)
    sol = fit.solve_optimal_control(
        problem, transcription=fit.HermiteSimpson(60), coarse=(5, 20), progress=False
    )
    assert sol.success, sol.advice
    assert _intervals(sol) == [5, 20, 60]
    for stage in sol.stages:
        assert stage.success and stage.status == "solved"
        assert abs(stage.objective - 48.0) <= 1e-8 * 48
        assert stage.constraint_violation <= 1e-8 and stage.seconds > 0
    assert sol.iterations == sol.stages[-1].iterations
    assert sol.advice == ""
    assert sol.transcription == fit.HermiteSimpson(60)


def test_auto_refinement_starts_from_100_intervals_and_keeps_point_constraint_nodes():
    """coarse='auto': none at 100 intervals or from a solution; 500 intervals start from
    100, 1000 from 100 and 200; a point constraint at t = 0.02 keeps a node on every
    grid (100 has one there), one at t = 0.004 allows none of 100..249 below 250. A
    callback that stops each stage at once keeps the test to the compiles."""
    stop = lambda *args: True  # noqa: E731
    run = lambda problem, N, **kw: fit.solve_optimal_control(  # noqa: E731
        problem, transcription=fit.HermiteSimpson(N), callback=stop, progress=False, **kw
    )
    problem = double_integrator(d=1.0, running_cost=_effort)
    assert _intervals(run(problem, 100)) == [100]
    assert _intervals(run(problem, 500)) == [100, 500]
    assert _intervals(run(problem, 1000)) == [100, 200, 1000]
    assert _intervals(run(problem, 500, coarse=None)) == [500]
    at = lambda t: double_integrator(  # noqa: E731
        d=1.0, running_cost=_effort, point_constraints=[(t, lambda t, q, qd, u, p: q - 0.5)]
    )
    assert _intervals(run(at(0.02), 500)) == [100, 500]
    assert _intervals(run(at(0.004), 250)) == [250]
    stopped = run(problem, 500)
    assert [s.status for s in stopped.stages] == ["user_requested_stop"] * 2
    assert "callback stopped" in stopped.advice


def test_a_failed_coarse_stage_is_reported_and_the_fine_solve_starts_from_the_guess():
    """A force bound too weak to swing the pole up: the coarse stage fails, the fine
    stage starts from the original guess (the same iterates as a solve without `coarse`),
    and the advice names the infeasibility, the violated rows and the failed stage."""
    weak = cart_pole(control_bounds=(-0.5, 0.5))
    direct = fit.solve_optimal_control(weak, transcription=fit.HermiteSimpson(25), progress=False)
    sol = fit.solve_optimal_control(
        weak, transcription=fit.HermiteSimpson(25), coarse=(10,), progress=False
    )
    assert [s.success for s in sol.stages] == [False, False]
    assert sol.iterations == direct.iterations and sol.objective == direct.objective
    assert sol.status == direct.status
    if sol.status == "infeasible_problem_detected":
        assert "looks infeasible" in sol.advice
    assert sol.violated[0].split(":")[0] in sol.advice
    assert "coarse stage(s) on 10 intervals failed" in sol.advice
    assert "starts=" in sol.advice


def test_an_iteration_cap_advises_a_coarser_solve_and_a_better_guess():
    capped = fit.solve_optimal_control(
        cart_pole(),
        transcription=fit.HermiteSimpson(25),
        solver=fit.IPOPT(max_iter=2),
        progress=False,
    )
    assert capped.status == "maximum_iterations_exceeded" and not capped.success
    assert "after 2 iterations" in capped.advice and "coarse=(5,)" in capped.advice


def test_progress_prints_iterations_and_the_verdict_on_stderr_only_when_asked(monkeypatch, capfd):
    """`progress=None` prints once a solve has run `_AFTER_S` seconds (0 here): the
    iteration, objective and infeasibility, and a last line with the status; `False` is
    silent; `True` without tqdm prints lines from the start."""
    problem = double_integrator(d=1.0, running_cost=_effort)
    tr = fit.HermiteSimpson(10)
    fit.solve_optimal_control(problem, transcription=tr, progress=False)
    assert capfd.readouterr().err == ""
    monkeypatch.setattr(_progress, "_AFTER_S", 0.0)
    sol = fit.solve_optimal_control(problem, transcription=tr)
    err = capfd.readouterr().err
    assert "iteration 0, objective" in err and "infeasibility" in err
    assert f"solved after {sol.iterations} iterations" in err
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # as without tqdm
    monkeypatch.setattr(_progress, "_AFTER_S", 1e9)
    fit.solve_optimal_control(problem, transcription=tr, progress=True)
    assert "solved after" in capfd.readouterr().err


def test_bad_refinement_and_progress_arguments_raise_naming_the_argument():
    problem = double_integrator(d=1.0, running_cost=_effort)
    tr = fit.HermiteSimpson(20)
    for coarse, match in [
        ("fine", "`coarse` must be 'auto'"),
        ((10, 5), "increasing"),
        ((5, 20), "between 1 and the transcription's 20"),
        ((0,), "between 1"),
        ((2.5,), "`coarse` must hold ints"),
        (7, "`coarse` must be 'auto', None or a sequence"),
    ]:
        with pytest.raises((TypeError, ValueError), match=match):
            fit.solve_optimal_control(problem, transcription=tr, coarse=coarse)
    with pytest.raises(ValueError, match="`progress`"):
        fit.solve_optimal_control(problem, transcription=tr, progress="yes")


@pytest.mark.slow
def test_parallel_parking_at_500_intervals_solves_from_the_naive_guess_by_refinement():
    """opty's parallel park on HermiteSimpson(500) from `guess=None` (one solve of it does
    not converge in 3000 iterations): solved through 100 intervals, at opty's optimum to
    1e-4 (a first-order transcription on its 501 nodes against ours); the warm start of the
    fine stage takes under a third of the iterations of IPOPT's default barrier from the
    same resampled solution (51 against 309, measured 2026-12-02)."""
    problem = parallel_park()
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(500), progress=False)
    assert sol.success, sol.advice
    assert _intervals(sol) == [100, 500] and all(s.success for s in sol.stages)
    assert abs(sol.objective - OPTY_PARK_OPTIMUM) <= 1e-4 * OPTY_PARK_OPTIMUM
    assert float(np.max(np.abs(np.asarray(sol.q[:, 3])))) <= np.pi / 4 + 1e-9
    np.testing.assert_allclose(sol.q[-1], jnp.array([0.0, 2.0, 0.0, 0.0]), atol=1e-8)
    coarse = fit.solve_optimal_control(
        problem, transcription=fit.HermiteSimpson(100), progress=False
    )
    cold = fit.solve_optimal_control(
        problem,
        coarse,
        transcription=fit.HermiteSimpson(500),
        solver=fit.IPOPT(options={"mu_init": 0.1}),  # IPOPT's default: a cold barrier
        progress=False,
    )
    assert 3 * sol.stages[-1].iterations < cold.iterations
