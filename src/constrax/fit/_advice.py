"""What a failed `solve_optimal_control` says to try next (`OptimalControlSolution.advice`;
docs page "Trajectory optimisation", section "When a solve fails")."""

import numpy as np

# A variable this large at the last iterate is named in the advice of a solve that failed
# in a way bad scaling causes (IPOPT scales the rows and the objective by their gradients at
# the start, not the variables).
_LARGE = 1e4

_GUESS = (
    "a guess nearer a feasible motion (guess= a cx.simulate of a hand-made control, or a "
    "function t -> (q, qd, u) through the poses you expect), more starts (starts=5)"
)


def _size(sol) -> tuple[str, int]:
    tr = sol.transcription
    return tr.size_name, getattr(tr, tr.size_name)


def _coarser(sol) -> str:
    name, N = _size(sol)
    if N <= 10:
        return ""
    return f"a coarser solve first (coarse=({max(N // 5, 5)},)), "


def _large_variable(sol) -> str:
    z = np.abs(np.asarray(sol.z))
    if z.size == 0 or not np.isfinite(z).all() or z.max() < _LARGE:
        return ""
    i = int(np.argmax(z))
    names = sol.transcription.nlp(sol.problem).variable_names()
    return (
        f" The largest variable at the last iterate is {names[i]} = {sol.z[i]:.3g}: a problem "
        "stated in units where states, controls and times are of order 1 converges more "
        "reliably."
    )


def advice(sol, stages=()) -> str:
    """A sentence or three on why `sol` failed and what to try next; `""` on success."""
    if sol.success:
        return ""
    worst = "; ".join(sol.violated[:3]) or "none above the tolerance"
    v = f"the largest violation is {sol.constraint_violation:.3g} (worst: {worst})"
    failed = [s for s in stages[:-1] if not s.success]
    prefix = ""
    if failed:
        sizes = ", ".join(str(getattr(s.transcription, s.transcription.size_name)) for s in failed)
        prefix = f"The coarse stage(s) on {sizes} {_size(sol)[0]} failed too. "
    status = sol.status
    if status == "solved":
        text = (
            f"IPOPT met its tolerances but {v}, above violation_tolerance = "
            f"{sol.violation_tolerance:.3g}: tighten cx.fit.IPOPT(constr_viol_tol=...), or "
            "raise violation_tolerance if this violation is acceptable."
        )
    elif status == "infeasible_problem_detected":
        text = (
            f"The problem looks infeasible from this start: IPOPT converged to a local "
            f"minimum of the constraint violation, where {v}. Check that the fixed states, "
            "bounds and constraints can hold together (a final time long enough under the "
            "control bounds, bounds that contain the fixed states); if they can, try "
            f"{_coarser(sol)}{_GUESS}, or continuation from an easier version of the problem "
            "(cx.fit.continuation)."
        )
    elif status in ("maximum_iterations_exceeded", "maximum_cputime_exceeded",
                    "maximum_walltime_exceeded"):  # fmt: skip
        text = (
            f"IPOPT stopped at its limit after {sol.iterations} iterations; {v}. Try "
            f"{_coarser(sol)}{_GUESS}, or continuation (cx.fit.continuation); raise "
            "cx.fit.IPOPT(max_iter=...) only if the infeasibility was still falling "
            "(progress=True shows it)."
        )
    elif status in ("restoration_failed", "search_direction_becomes_too_small",
                    "error_in_step_computation"):  # fmt: skip
        text = (
            f"IPOPT could not make progress ({status}); {v}. This is typical of a badly "
            "scaled problem or of a start where the constraints' Jacobian loses rank (a "
            f"symmetric guess: keep jitter > 0). Try {_coarser(sol)}{_GUESS}."
        )
        text += _large_variable(sol)
    elif status == "dynamics_not_evaluable":
        text = (
            "The line search kept stepping back from points where the dynamics cannot be "
            "evaluated (see message): bound the coordinates away from there (q_bounds), use "
            "a rank-robust constraint_solver (cx.AutoSolver()), or start elsewhere."
        )
    elif status == "solved_to_acceptable_level":
        text = (
            f"IPOPT stopped at its acceptable tolerances, not the desired ones; {v}. Solve "
            "again from this solution (guess=sol), or raise cx.fit.IPOPT(options="
            "{'acceptable_iter': 0}) to insist on the desired tolerances."
        )
    elif status == "user_requested_stop":
        text = f"The callback stopped the solve; {v}."
    else:
        text = f"IPOPT stopped with {status}; {v}."
    return prefix + text
