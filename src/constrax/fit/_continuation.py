r"""`continuation`: a homotopy from an easy problem to a hard one, each solve warm-started
from the last (docs page "Trajectory optimisation", section "Continuation")."""

from collections.abc import Callable, Sequence
from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._ocp import OptimalControlProblem
from ._optimal_control import OptimalControlSolution, solve_optimal_control


class Continuation(NamedTuple):
    """What `cx.fit.continuation` returns."""

    solution: OptimalControlSolution  # at `value`: the last value solved
    value: np.ndarray  # the last value solved
    reached: bool  # whether `value` is the target, `values[-1]`
    values: tuple  # every value solved, in order (with the intermediate ones inserted)
    iterations: tuple  # IPOPT's iterations of each solve, failed ones included
    failed: OptimalControlSolution | None  # the last failed solve, if any


def continuation(
    problem: OptimalControlProblem,
    where: Callable[[OptimalControlProblem], object],
    values: Sequence,
    guess=None,
    *,
    halvings: int = 3,
    **options,
) -> Continuation:
    r"""Solve `problem` with the array `where(problem)` set to each of `values` in turn,
    each solve started from the last solution (its decision vector and multipliers:
    nothing is recompiled, the array being data).

    A step that fails is halved (the value midway between the last solved one and the
    failed one is solved first) up to `halvings` times for each of `values`; when it still
    fails, the continuation stops and returns the last value solved (`reached=False`).

    **Arguments:**

    - `problem`: a `cx.fit.OptimalControlProblem`.
    - `where`: `problem -> array` locating what varies: a parameter
      (`lambda pr: pr.params["spin"]`), a fixed state (`lambda pr: pr.q1`), the final time
      (`lambda pr: pr.t1`) or a bound (`lambda pr: pr.bounds["u"][1]`, the upper control
      bound).
    - `values`: the values, from the one whose problem is easy to the target, each of the
      shape of `where(problem)`.
    - `guess`: the first solve's guess (as `solve_optimal_control`).
    - `halvings`: how many times a failed step is halved before stopping.
    - `options`: the keyword arguments of `solve_optimal_control` (`transcription`,
      `solver`, `coarse`, ...), the same for every solve.

    **Returns:** a `cx.fit.Continuation`: `solution` at `value` (the last solved),
    `reached`, the `values` solved, the `iterations` of every solve and the last `failed`
    solve. A first problem that fails raises `ValueError` (with its status and advice).

    **Example:** a unit mass moved from rest to rest by `d = 1, 2, 4` in one second, each
    solve started from the last (the optimum of the last is $12 d^2 = 192$):

    ```python
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, force=lambda t, q, qd, p: p["u"])
    problem = cx.fit.OptimalControlProblem(
        system, {"u": jnp.zeros(1)}, control=lambda p: p["u"], t1=1.0,
        q0=jnp.zeros(1), qd0=jnp.zeros(1), q1=jnp.ones(1), qd1=jnp.zeros(1),
        running_cost=lambda t, q, qd, u, p: u @ u)
    run = cx.fit.continuation(problem, lambda pr: pr.q1, [[1.0], [2.0], [4.0]],
                              transcription=cx.fit.HermiteSimpson(10))
    run.reached, run.value, run.solution.objective   # True, [4.], 192.0
    ```
    """
    if not isinstance(problem, OptimalControlProblem):
        raise TypeError(f"`problem` must be a cx.fit.OptimalControlProblem, got {problem!r}")
    if not isinstance(halvings, int) or halvings < 0:
        raise ValueError(f"`halvings` must be a non-negative int, got {halvings!r}")
    if "guess" in options:
        raise TypeError("pass `guess` positionally or by name once")
    try:
        leaf = where(problem)
    except Exception as e:  # noqa: BLE001 - re-raised with the argument named
        raise ValueError(f"`where(problem)` failed: {e!r}") from e
    if not eqx.is_array(leaf):
        raise TypeError(
            f"`where(problem)` must locate an array of the problem (a parameter, q1, t1, a "
            f"bound), got {type(leaf).__name__}"
        )
    shape, dtype = np.shape(leaf), np.asarray(leaf).dtype
    values = list(values)
    if not values:
        raise ValueError("`values` is empty")
    targets = []
    for i, v in enumerate(values):
        v = np.asarray(v, np.float64)
        if v.shape != shape or not np.all(np.isfinite(v)):
            raise ValueError(
                f"`values[{i}]` must be a finite array of the shape of `where(problem)`, "
                f"{shape}; got {v!r}"
            )
        targets.append(v)

    def at(v):
        return eqx.tree_at(where, problem, jnp.asarray(v, dtype))

    sol = solve_optimal_control(at(targets[0]), guess, **options)
    iterations = [sum(s.iterations for s in sol.stages) or sol.iterations]
    if not sol.success:
        raise ValueError(
            f"`continuation`: the first problem (value {targets[0].tolist()}) failed: "
            f"{sol.status}. {sol.advice}"
        )
    last, solved, failed = targets[0], [targets[0]], None
    for target in targets[1:]:
        budget = halvings
        while True:
            step = target
            while True:
                attempt = solve_optimal_control(at(step), sol, **options)
                iterations.append(attempt.iterations)
                if attempt.success:
                    break
                failed = attempt
                if budget == 0:
                    return Continuation(sol, last, False, tuple(solved), tuple(iterations), failed)
                budget -= 1
                step = last + 0.5 * (step - last)
            sol, last = attempt, step
            solved.append(step)
            if step is target:
                break
    return Continuation(sol, last, True, tuple(solved), tuple(iterations), failed)
