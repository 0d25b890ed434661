r"""`solve_optimal_control`: transcribe an `OptimalControlProblem`, solve the nonlinear
program, and report honestly what was reached (docs page "Trajectory optimisation")."""

import dataclasses
import time
from collections.abc import Callable
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._custom_types import Params
from .._simulate import simulate
from .._solve import AutoSolver
from .._system import System
from .._tolerances import violation_tolerance as default_violation_tolerance
from .._trajectory import Trajectory
from ._advice import advice
from ._collocation import HermiteSimpson
from ._ipopt import IPOPT
from ._ocp import OptimalControlProblem
from ._transcription import AbstractTranscription


class OptimalControlSolution(eqx.Module):
    r"""What `solve_optimal_control` returns.

    - `success`: the solver converged **and** the independent check passed: every
      constraint and bound holds to `violation_tolerance`. Never true at a non-solution.
    - `status`, `message`: the solver's verdict (e.g. `"solved"`,
      `"infeasible_problem_detected"`, `"maximum_iterations_exceeded"`).
    - `iterations`, `objective`.
    - `constraint_violation`: the largest violation of any constraint or bound;
      `violated`: the names and values of the worst (at most 5) above the tolerance.
    - `manifold_violation`: $\max_k |(g, c)(t_k, q_k, \dot q_k)|$ over the nodes.
    - `terminal_error`: the largest violation at $t_1$ (fixed terminal state and
      `terminal_constraint`).
    - `ts` `(N+1,)`, `q`, `qd` `(N+1, n)`, `mu` (vakonomic, else `None`), `u` `(N+1, nu)`:
      the node values; `t_mid`, `u_mid`: the interval midpoints and their controls.
    - `t1`: the final time; `params`: the parameter pytree at the solution (optimised
      parameters in place, the control leaf holding `u[0]`).
    - `z`, `multipliers`: the decision vector and the constraint multipliers (a warm start
      for another solve of the same transcription: pass the solution as `guess`).
    - `stages`: one `cx.fit.Stage` per solve of a mesh refinement (`coarse=`), the
      coarsest first and this solution's last (`transcription`, `status`, `success`,
      `iterations`, `objective`, `constraint_violation`, `seconds`); `iterations` above is
      the last stage's.
    - `advice`: where the solve failed, what the failure looks like (infeasible, out of
      iterations, badly scaled) and what to try next; `""` on success.
    """

    problem: OptimalControlProblem
    transcription: AbstractTranscription
    success: bool = eqx.field(static=True)
    status: str = eqx.field(static=True)
    message: str = eqx.field(static=True)
    iterations: int = eqx.field(static=True)
    objective: float = eqx.field(static=True)
    constraint_violation: float = eqx.field(static=True)
    violated: tuple = eqx.field(static=True)
    manifold_violation: float = eqx.field(static=True)
    terminal_error: float = eqx.field(static=True)
    violation_tolerance: float = eqx.field(static=True)
    ts: Float[Array, " N1"]
    q: Float[Array, "N1 n"]
    qd: Float[Array, "N1 n"]
    mu: Float[Array, "N1 m"] | None
    u: Float[Array, "N1 nu"]
    t_mid: Float[Array, " N"]
    u_mid: Float[Array, "N nu"]
    t1: Float[Array, ""]
    params: Params
    z: np.ndarray
    multipliers: np.ndarray
    stages: tuple = eqx.field(static=True, default=())
    advice: str = eqx.field(static=True, default="")

    def control(self, t: Float[Array, ""]) -> Float[Array, " nu"]:
        r"""The transcription's control at time `t`: on each interval the quadratic
        through $u_k$, $u_{k+1/2}$, $u_{k+1}$ (held at the end values outside
        $[t_0, t_1]$)."""
        ts = self.ts
        N = ts.shape[0] - 1
        t = jnp.clip(t, ts[0], ts[-1])
        k = jnp.clip(jnp.searchsorted(ts, t, side="right") - 1, 0, N - 1)
        s = (t - ts[k]) / (ts[k + 1] - ts[k])
        a, m, b = self.u[k], self.u_mid[k], self.u[k + 1]
        # Lagrange basis on s = 0, 1/2, 1.
        return a * (2 * s - 1) * (s - 1) + m * 4 * s * (1 - s) + b * s * (2 * s - 1)

    def replay(self, ts=None, **simulate_options) -> Trajectory:
        """`cx.simulate` of the system driven by `control(t)` from the solution's initial
        state (default tolerances `rtol = atol = 1e-12` and no stabilisation, so that the
        replay measures the transcription, not the integrator; saved at the nodes): what
        the controls do when applied to the exact dynamics. The saddle-point solve is the
        problem's if it is rank-robust, else `cx.AutoSolver()` (the same LU solve where
        the constraint rows have full rank), so that a replay through a singular
        configuration does not stop where the integrator steps onto it."""
        pr = self.problem
        system = pr.system
        control = self.control

        def force(t, q, qd, p):
            return system.force(t, q, qd, eqx.tree_at(pr.control, p, control(t)))

        replayed = System(
            system.lagrangian, system.constraints, force=force, dynamics=system.dynamics
        )
        options = dict(
            stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
            stabilisation=None,
            constraint_solver=(
                pr.constraint_solver if pr.constraint_solver.rank_robust else AutoSolver()
            ),
            prescription=pr.prescription,
            max_steps=100_000,
        )
        if self.mu is not None:
            options["mu0"] = self.mu[0]
        options.update(simulate_options)
        ts = self.ts if ts is None else jnp.asarray(ts)
        return simulate(
            replayed,
            self.q[0],
            self.qd[0],
            self.params,
            t0=float(self.ts[0]),
            t1=float(self.t1),
            saveat=diffrax.SaveAt(ts=ts),
            **options,
        )

    def replay_error(self, **simulate_options) -> float:
        """$\\max_k |(q, \\dot q)_\\text{replay}(t_k) - (q_k, \\dot q_k)|$ over the nodes."""
        traj = self.replay(**simulate_options)
        err = jnp.concatenate([traj.q - self.q, traj.qd - self.qd], axis=1)
        return float(jnp.max(jnp.abs(err)))


def _interp(t_new, t_old, values):
    values = np.asarray(values, np.float64)
    return np.stack([np.interp(t_new, t_old, col) for col in values.T], axis=1)


def _sampler(ts, values):
    """`t -> values` by linear interpolation in `ts` (sorted)."""
    ts, values = np.asarray(ts, np.float64), np.asarray(values, np.float64)
    order = np.argsort(ts)
    return lambda t: _interp(np.asarray(t), ts[order], values[order])


def _guess(nlp, transcription, guess) -> tuple[np.ndarray, np.ndarray | None]:
    """The starting decision vector (and multipliers, for a warm start)."""
    pr, S = nlp.problem, nlp.sizes
    # Samples of (q, qd[, mu]); the transcription's coordinates are made from them.
    n, s, nu = pr.n, pr.state_size, S.nu
    pad = lambda X: np.concatenate([X, np.zeros((X.shape[0], s - X.shape[1]))], axis=1)
    if isinstance(guess, OptimalControlSolution):
        if guess.z.shape == (nlp.layout.nz,) and guess.transcription == transcription:
            return np.asarray(guess.z), np.asarray(guess.multipliers)
        # Resampled on this grid, the old horizon stretched onto the new guess of t1.
        stretch = (float(pr.t1) - pr.t0) / (float(guess.t1) - pr.t0)
        ts = pr.t0 + (np.asarray(guess.ts) - pr.t0) * stretch
        tm = pr.t0 + (np.asarray(guess.t_mid) - pr.t0) * stretch
        X = np.concatenate([np.asarray(guess.q), np.asarray(guess.qd)], axis=1)
        if guess.mu is not None:
            X = np.concatenate([X, np.asarray(guess.mu)], axis=1)
        U = np.concatenate([np.asarray(guess.u), np.asarray(guess.u_mid)])
        X_at = _sampler(ts, pad(X))
        return nlp.from_samples(X_at, _sampler(np.concatenate([ts, tm]), U)), None
    if isinstance(guess, Trajectory):
        X = np.concatenate([np.asarray(guess.q), np.asarray(guess.qd)], axis=1)
        if guess.mu is not None and s > 2 * n:
            X = np.concatenate([X, np.asarray(guess.mu)], axis=1)
        zero_u = lambda t: np.zeros((np.size(t), nu))
        return nlp.from_samples(_sampler(guess.ts, pad(X)), zero_u), None
    if callable(guess):

        def sample(t, which):
            rows = [tuple(np.asarray(a, np.float64) for a in guess(ti)) for ti in np.asarray(t)]
            if any(len(r) != 3 for r in rows):
                raise ValueError("`guess(t)` must return (q, qd, u)")
            shapes = {tuple(a.shape for a in r) for r in rows}
            if shapes != {((n,), (n,), (nu,))}:
                raise ValueError(
                    f"`guess(t)` must return q ({n},), qd ({n},), u ({nu},); got shapes "
                    f"{sorted(shapes)}"
                )
            if which == "u":
                return np.stack([r[2] for r in rows])
            return pad(np.stack([np.concatenate(r[:2]) for r in rows]))

        return nlp.from_samples(lambda t: sample(t, "x"), lambda t: sample(t, "u")), None
    if guess is not None:
        raise TypeError(
            "`guess` must be None (linear interpolation between the fixed initial and "
            "terminal states), a cx.Trajectory, a previous OptimalControlSolution or a "
            f"function t -> (q, qd, u); got {type(guess).__name__}"
        )
    # Linear interpolation between the fixed end states (constant where one is free).
    ends = []
    for a, b in ((pr.q0, pr.q1), (pr.qd0, pr.qd1)):
        a = b if a is None else a
        b = a if b is None else b
        a = np.zeros(n) if a is None else np.asarray(a)
        b = np.zeros(n) if b is None else np.asarray(b)
        ends.append((a, b))
    mu = np.zeros(s - 2 * n) if pr.mu0 is None else np.asarray(pr.mu0)
    span = float(pr.t1) - pr.t0

    def X_at(t):
        tau = (np.asarray(t) - pr.t0) / span
        x = [a + np.outer(tau, b - a) for a, b in ends]
        return np.concatenate(x + [np.tile(mu, (tau.shape[0], 1))], axis=1)

    u0 = np.asarray(pr.control(pr.params), np.float64)
    return nlp.from_samples(X_at, lambda t: np.tile(u0, (np.size(t), 1))), None


def _perturbed(nlp, z: np.ndarray, size: float, seed: int) -> np.ndarray:
    """`z` with its states and controls moved by `size` times a seeded standard normal
    (relative to each variable's magnitude, at least `size`), kept within the bounds."""
    if size == 0.0:
        return z
    L = nlp.layout
    rng = np.random.default_rng(seed)
    moved = np.zeros(L.nz, bool)
    moved[: L.offsets["V"]] = True  # states and controls, not nu or shared variables
    dz = size * np.maximum(1.0, np.abs(z)) * rng.standard_normal(L.nz)
    lo, hi = nlp.variable_bounds()
    return np.where(moved, np.clip(z + dz, lo, hi), z)


def _violations(nlp, z: np.ndarray, c: np.ndarray):
    lo, hi = nlp.variable_bounds()
    cl, cu = nlp.constraint_bounds()
    vc = np.maximum(np.maximum(cl - c, c - cu), 0.0)
    vz = np.maximum(np.maximum(lo - z, z - hi), 0.0)
    return vc, vz


class Stage(NamedTuple):
    """One solve of a staged `solve_optimal_control` (`OptimalControlSolution.stages`)."""

    transcription: AbstractTranscription
    status: str
    success: bool
    iterations: int
    objective: float
    constraint_violation: float
    seconds: float  # wall time of the stage: building, compiling and solving


# `coarse="auto"`: a collocation problem of more than this many intervals, started from
# anything but a solution of itself, is solved on coarser grids first, each at most
# `_AUTO_FACTOR` times coarser than the next, the coarsest of `_AUTO_INTERVALS` intervals
# (docs page "Trajectory optimisation", section "Mesh refinement").
_AUTO_INTERVALS = 100
_AUTO_FACTOR = 5

# The IPOPT options of a solve started from a solution resampled on its grid (a stage after
# the first, or `guess=` a solution of another transcription), unless the user's
# `IPOPT(options=...)` sets one of them: IPOPT's default barrier parameter (mu_init = 0.1)
# pushes every variable away from its bounds again and throws the near-optimal start away.
# Parallel parking (opty's gallery problem) from HermiteSimpson(100)'s solution on
# HermiteSimpson(500): 309 iterations with the defaults, 51 with these (2026-12-02).
WARM_OPTIONS = {"mu_init": 1e-6, "warm_start_init_point": "yes"}
_BARRIER_OPTIONS = ("mu_init", "mu_strategy", "warm_start_init_point")


def _on_nodes(problem, n: int) -> bool:
    """Whether a grid of `n` intervals has a node at every point constraint's time."""
    return all(abs(tau * n - round(tau * n)) <= 1e-9 * n for tau in problem.point_taus)


def _coarse_chain(problem, transcription, coarse, guess) -> tuple[AbstractTranscription, ...]:
    """The coarser transcriptions solved before `transcription`, coarsest first."""
    name = transcription.size_name
    N = getattr(transcription, name)
    if isinstance(coarse, str):
        if coarse != "auto":
            raise ValueError(f"`coarse` must be 'auto', None or a sequence of ints, got {coarse!r}")
        if isinstance(guess, OptimalControlSolution) or name != "intervals":
            return ()
        sizes, n = [], N
        while n > _AUTO_INTERVALS:
            # The coarsest grid at most `_AUTO_FACTOR` times coarser that keeps a node at
            # every point constraint's time.
            n = next(
                (m for m in range(max(_AUTO_INTERVALS, -(-n // _AUTO_FACTOR)), n)
                 if _on_nodes(problem, m)),
                None,
            )  # fmt: skip
            if n is None:
                break
            sizes.insert(0, n)
    elif coarse is None:
        return ()
    else:
        try:
            sizes = list(coarse)
        except TypeError:
            raise TypeError(
                f"`coarse` must be 'auto', None or a sequence of ints, got {coarse!r}"
            ) from None
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
            raise TypeError(f"`coarse` must hold ints ({name}), got {coarse!r}")
        if sizes != sorted(set(sizes)) or (sizes and not (0 < sizes[0] and sizes[-1] < N)):
            raise ValueError(
                f"`coarse` must be increasing numbers of {name} between 1 and the "
                f"transcription's {N} (exclusive), got {coarse!r}"
            )
    return tuple(dataclasses.replace(transcription, **{name: n}) for n in sizes)


def _warm(solver: IPOPT, transcription, start) -> IPOPT:
    """`solver` with `WARM_OPTIONS` where `start` is a solution resampled on another grid
    and the user set none of IPOPT's barrier options."""
    if not isinstance(start, OptimalControlSolution) or start.transcription == transcription:
        return solver
    options = solver.options or {}
    if any(k in options for k in _BARRIER_OPTIONS):
        return solver
    return dataclasses.replace(solver, options={**WARM_OPTIONS, **options})


def _label(transcription) -> str:
    return f"{type(transcription).__name__}({getattr(transcription, transcription.size_name)})"


def solve_optimal_control(
    problem: OptimalControlProblem,
    guess=None,
    *,
    transcription: AbstractTranscription = HermiteSimpson(),
    solver: IPOPT = IPOPT(),
    coarse="auto",
    violation_tolerance: float | None = None,
    jitter: float = 1e-2,
    starts: int = 1,
    seed: int = 0,
    progress: bool | None = None,
    callback: Callable[[int, float, float], bool | None] | None = None,
) -> OptimalControlSolution:
    r"""Solve a trajectory optimisation problem by direct collocation and an NLP solver.

    **Arguments:**

    - `problem`: a `cx.fit.OptimalControlProblem`.
    - `guess`: the starting point: `None` (linear interpolation between the fixed initial
      and terminal states, the control at its value in `problem.params`), a `cx.Trajectory`
      (e.g. a `cx.simulate` of a hand-made control), a previous `OptimalControlSolution`
      (a warm start with its multipliers when the transcription is the same, else
      resampled, and solved with IPOPT's barrier started small: `mu_init=1e-6`,
      `warm_start_init_point="yes"`, unless `solver.options` sets `mu_init`, `mu_strategy`
      or `warm_start_init_point`; nothing is recompiled), or a function
      `t -> (q, qd, u)`.
    - `transcription`: `cx.fit.HermiteSimpson(intervals=50)` (default),
      `cx.fit.Trapezoidal(intervals=50)` or
      `cx.fit.DirectMultipleShooting(segments=20, steps=8)`.
    - `solver`: `cx.fit.IPOPT()` (default).
    - `coarse`: mesh refinement. A sequence of increasing sizes (intervals or segments)
      solves the problem on those coarser grids first, each stage started from the last
      successful one's solution resampled (a warm start as for `guess=` a solution), the
      given transcription
      last; a failed stage is reported in `stages` and the next starts from the last
      success, or from `guess`. `"auto"` (default): a collocation transcription of more
      than 100 intervals started from anything but a solution is solved on 100 intervals
      first, then on grids at most 5 times finer each (500: 100 then 500; 1000: 100, 200,
      1000; each grid the coarsest that keeps a node at every point constraint's time).
      `None`: one solve. Each size compiles once.
    - `jitter`: the default guess (`guess=None`) is moved by this relative amount of
      seeded noise (states and controls): a symmetric guess such as a straight line of a
      nonholonomic vehicle is a point where the linearised constraints give no control
      authority (the knife edge cannot move sideways to first order), a stationary point
      of the infeasibility from which no Newton-type solver moves. `0` keeps it exact.
    - `starts`: solve from this many guesses (the first as above, the others perturbed
      by `jitter` with seeds `seed + 1, ...`, at least `1e-2`) and keep the best
      successful solution (or the least infeasible one); compiled once for all. With
      `coarse`, the first stage's.
    - `violation_tolerance`: the largest constraint or bound violation a solution may
      leave to be reported as `success` (default `None`: `1e-8`, or `100 eps` of the
      problem's dtype where that is larger, `1.2e-5` in float32; docs page "Precision").
    - `progress`: `None` (default): a line on stderr (stage, iteration, objective,
      infeasibility, seconds) once a solve has run 5 s, then every 5 s and at its end;
      `True`: a tqdm bar from the first iteration (lines where tqdm is not installed);
      `False`: silent.
    - `callback(iteration, objective, infeasibility)`: called every iteration; return
      `True` to stop.

    **Returns:** an `OptimalControlSolution` (`success`, `status`, the trajectory, the
    violations, `stages`, `advice` when it failed, `replay()`).

    **Example:** a unit mass moved by $d = 1$ in $T = 1$, rest to rest, with least
    effort (the optimum is $12 d^2/T^3$):

    ```python
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, force=lambda t, q, qd, p: p["u"])
    problem = cx.fit.OptimalControlProblem(
        system, {"u": jnp.zeros(1)}, control=lambda p: p["u"], t1=1.0,
        q0=jnp.zeros(1), qd0=jnp.zeros(1), q1=jnp.ones(1), qd1=jnp.zeros(1),
        running_cost=lambda t, q, qd, u, p: u @ u)
    sol = cx.fit.solve_optimal_control(problem, transcription=cx.fit.HermiteSimpson(10))
    sol.success, sol.objective, sol.constraint_violation   # True, 12.0, ~1e-16
    traj = sol.replay()           # the controls applied to the exact dynamics
    ```
    """
    if not isinstance(problem, OptimalControlProblem):
        raise TypeError(f"`problem` must be a cx.fit.OptimalControlProblem, got {problem!r}")
    if not isinstance(transcription, AbstractTranscription):
        raise TypeError(
            f"`transcription` must be e.g. cx.fit.HermiteSimpson(50), got {transcription!r}"
        )
    if not isinstance(solver, IPOPT):
        raise TypeError(f"`solver` must be cx.fit.IPOPT(...), got {solver!r}")
    if solver.hessian == "exact" and not transcription.exact_hessian:
        raise ValueError(
            f"{type(transcription).__name__} has no exact Hessian: use "
            "cx.fit.IPOPT(hessian='limited-memory')"
        )
    if not isinstance(starts, int) or starts < 1:
        raise ValueError(f"`starts` must be a positive int, got {starts!r}")
    if not (isinstance(jitter, int | float) and jitter >= 0):
        raise ValueError(f"`jitter` must be a number >= 0, got {jitter!r}")
    if progress not in (None, True, False):
        raise ValueError(f"`progress` must be None, True or False, got {progress!r}")
    if violation_tolerance is None:
        violation_tolerance = default_violation_tolerance(np.asarray(problem.t1).dtype)
    elif not (isinstance(violation_tolerance, int | float) and violation_tolerance > 0):
        raise ValueError(
            f"`violation_tolerance` must be a positive number or None, got {violation_tolerance!r}"
        )
    chain = (*_coarse_chain(problem, transcription, coarse, guess), transcription)
    stages, start = [], guess
    for i, tr in enumerate(chain):
        began = time.perf_counter()
        sol = _solve(
            problem,
            tr,
            start,
            _warm(solver, tr, start),
            violation_tolerance,
            jitter=jitter,
            starts=starts if i == 0 else 1,
            seed=seed,
            progress=(progress, _label(tr) if len(chain) > 1 else "constrax.fit (IPOPT)"),
            callback=callback,
        )
        stages.append(
            Stage(
                tr,
                sol.status,
                sol.success,
                sol.iterations,
                sol.objective,
                sol.constraint_violation,
                time.perf_counter() - began,
            )  # fmt: skip
        )
        if sol.success:
            start = sol
    stages = tuple(stages)
    return dataclasses.replace(sol, stages=stages, advice=advice(sol, stages))


def _solve(
    problem, transcription, guess, solver, violation_tolerance, *, jitter, starts, seed,
    progress, callback,
) -> OptimalControlSolution:  # fmt: skip
    """One solve of `problem` on `transcription` (the best of `starts`)."""
    nlp = transcription.nlp(problem)
    z0, lam0 = _guess(nlp, transcription, guess)
    if not np.all(np.isfinite(z0)):
        names = nlp.variable_names()
        bad = [names[i] for i in np.flatnonzero(~np.isfinite(z0))[:5]]
        raise ValueError(f"`guess` holds non-finite values at {', '.join(bad)}")
    if guess is None:
        z0 = _perturbed(nlp, z0, float(jitter), seed)
    best = None
    for i in range(starts):
        zi = z0 if i == 0 else _perturbed(nlp, z0, max(float(jitter), 1e-2), seed + i)
        res = solver.minimise(
            nlp,
            zi,
            progress=progress[0],
            label=progress[1],
            callback=callback,
            multipliers0=lam0 if i == 0 else None,
        )
        sol = _solution(problem, transcription, nlp, res, violation_tolerance)
        rank = (not sol.success, sol.constraint_violation if not sol.success else sol.objective)
        if best is None or rank < best[0]:
            best = (rank, sol)
    return best[1]


def _solution(problem, transcription, nlp, res, violation_tolerance) -> OptimalControlSolution:
    z, c, objective = res.z, res.constraints_at_z, res.objective_at_z
    vc, vz = _violations(nlp, z, c)
    worst = float(max(vc.max(initial=0.0), vz.max(initial=0.0)))
    # The names of the worst violations (built only when there are any: a few thousand
    # strings).
    items = []
    if vc.max(initial=0.0) > violation_tolerance:
        cn = nlp.constraint_names()
        items += [(vc[i], cn[i]) for i in np.argsort(-vc)[:5] if vc[i] > violation_tolerance]
    if vz.max(initial=0.0) > 0:
        vn = nlp.variable_names()
        items += [(vz[i], f"bound on {vn[i]}") for i in np.argsort(-vz)[:5] if vz[i] > 0]
    X, shared = (np.asarray(a) for a in nlp.nodes(z))
    U, U_mid = (np.asarray(a) for a in nlp.controls(z))
    t1 = nlp.final_time(jnp.asarray(shared))
    ts = problem.t0 + jnp.asarray(nlp.taus()) * (t1 - problem.t0)
    params = problem.params_at(nlp.parameters(jnp.asarray(shared)), jnp.asarray(U[0]))
    Q, Qd, Mu = nlp.coordinates.nodes(problem, ts, X, params)
    # The constraint rows at the nodes (node 0: fixed and checked at construction, or a
    # row of the boundary block), and those the coordinates hold by construction.
    manifold = float(np.abs(nlp.manifold_residuals(c)).max(initial=0.0))
    rows, names = nlp.coordinates.unimposed(problem, ts, Q, Qd, params)
    if rows.size:
        manifold = max(manifold, float(np.abs(rows).max()))
        bad = np.argwhere(np.abs(rows) > violation_tolerance)
        items += [(abs(rows[k, i]), f"constraint {names[i]} at node {k}") for k, i in bad]
        worst = max(worst, float(np.abs(rows).max()))
    violated = tuple(f"{name}: {v:.3g}" for v, name in sorted(items, reverse=True)[:5])
    term = [np.abs(nlp.terminal_residuals(c))]
    for value, got in ((problem.q1, Q[-1]), (problem.qd1, Qd[-1])):
        if value is not None:
            term.append(np.abs(got - np.asarray(value)))
    terminal = float(np.concatenate(term).max(initial=0.0))
    success = bool(res.solved and worst <= violation_tolerance and np.isfinite(objective))
    return OptimalControlSolution(
        problem=problem,
        transcription=transcription,
        success=success,
        status=res.status,
        message=res.message,
        iterations=res.iterations,
        objective=objective,
        constraint_violation=worst,
        violated=violated,
        manifold_violation=manifold,
        terminal_error=terminal,
        violation_tolerance=float(violation_tolerance),
        ts=ts,
        q=jnp.asarray(Q),
        qd=jnp.asarray(Qd),
        mu=None if Mu is None else jnp.asarray(Mu),
        u=jnp.asarray(U),
        t_mid=0.5 * (ts[:-1] + ts[1:]),
        u_mid=jnp.asarray(U_mid),
        t1=jnp.asarray(t1),
        params=params,
        z=z,
        multipliers=res.multipliers,
    )
