r"""The shared harness of `benchmarks/trajopt.py`: IPOPT's options and the replay tolerance
of both sides, and the constrax runs (cold compiles of the programs behind IPOPT's
callbacks, timed solves, one row each) on any of its problems.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import constrax as cx
from constrax.fit import _ipopt
from constrax.fit._optimal_control import _guess

try:
    import casadi as ca
except ImportError:  # optional
    ca = None


IPOPT_OPTIONS = dict(tol=1e-9, constr_viol_tol=1e-10, mu_strategy="adaptive")
REPLAY_TOL = 1e-12  # as OptimalControlSolution.replay: no stabilisation


def compile_callbacks(nlp, z0: np.ndarray, repeats: int, hessian: bool = True) -> dict:
    """Trace + lower and XLA compile of the programs behind IPOPT's callbacks (`values`:
    objective and constraints; `derivatives`: gradient and Jacobian; `hessian`, only when
    IPOPT uses it), from cold caches."""
    z = np.asarray(z0, np.float64)
    lam = np.ones(nlp.layout.nc)
    one = np.asarray(1.0)
    treedef, leaves, arrays_treedef, arrays = _ipopt._split(nlp)
    jitted = lambda name: _ipopt._jitted(treedef, leaves, arrays_treedef, name)
    calls = {
        "values": (jitted("values"), (arrays, z)),
        "derivatives": (jitted("derivatives"), (arrays, z)),
    }
    if hessian:
        calls["hessian"] = (jitted("hessian"), (arrays, z, lam, one))
    samples = []
    for _ in range(repeats):
        per = {}
        for name, (fn, args) in calls.items():
            jax.clear_caches()
            t0 = time.perf_counter()
            lowered = fn.lower(*args)
            t1 = time.perf_counter()
            lowered.compile()
            t2 = time.perf_counter()
            per[name] = {"trace_lower_s": t1 - t0, "xla_s": t2 - t1}
        per["total_trace_lower_s"] = sum(v["trace_lower_s"] for v in per.values())
        per["total_xla_s"] = sum(
            v["xla_s"] for k, v in per.items() if isinstance(v, dict) and "xla_s" in v
        )
        samples.append(per)
    jax.clear_caches()
    tot = [s["total_trace_lower_s"] + s["total_xla_s"] for s in samples]
    return {
        "samples": samples,
        "trace_lower_min_s": min(s["total_trace_lower_s"] for s in samples),
        "xla_min_s": min(s["total_xla_s"] for s in samples),
        "total_min_s": min(tot),
        "total_median_s": statistics.median(tot),
    }


def run_constrax(
    name: str,
    problem,
    N: int,
    repeats: int,
    jitter: float = 1e-2,
    compile_repeats=None,
    transcription=None,
    hessian: str = "exact",
) -> dict:
    transcription = cx.fit.HermiteSimpson(N) if transcription is None else transcription
    solver = cx.fit.IPOPT(
        tol=IPOPT_OPTIONS["tol"], constr_viol_tol=IPOPT_OPTIONS["constr_viol_tol"], hessian=hessian
    )  # mu_strategy adaptive is IPOPT()'s default
    nlp = transcription.nlp(problem)
    z0, _ = _guess(nlp, transcription, None)
    compile_ = compile_callbacks(
        nlp, z0, repeats if compile_repeats is None else compile_repeats, hessian == "exact"
    )

    def solve():
        t0 = time.perf_counter()
        sol = cx.fit.solve_optimal_control(
            problem,
            transcription=transcription,
            solver=solver,
            jitter=jitter,
            coarse=None,
            progress=False,
        )
        return sol, time.perf_counter() - t0

    sol, first = solve()
    walls = []
    for _ in range(repeats):
        s, w = solve()
        walls.append(w)
        assert s.objective == sol.objective and s.iterations == sol.iterations
    t0 = time.perf_counter()
    replay = sol.replay_error()
    replay_s = time.perf_counter() - t0
    row = _row(name, N, transcription, jitter, sol, walls)
    row["transcription"] += "" if hessian == "exact" else ", L-BFGS"
    row.update(
        {
            "first_solve_s": first,
            "first_minus_warm_s": first - statistics.median(walls),
            "compile": compile_,
            "replay_error": replay,
            "replay_wall_s_with_compile": replay_s,
            "nlp_variables": int(nlp.layout.nz),
            "nlp_constraints": int(nlp.layout.nc),
        }
    )
    if problem.free_time:
        row["t1"] = float(sol.t1)
        row["max_abs_u"] = float(jnp.max(jnp.abs(jnp.concatenate([sol.u, sol.u_mid]))))
    return row, sol


def _row(name, N, transcription, jitter, sol, walls) -> dict:
    """The fields every constrax row has: what was solved, the result, the solve times."""
    kind = ""
    if isinstance(transcription, cx.fit.DirectMultipleShooting):
        kind = " (shooting)"
    elif isinstance(transcription, cx.fit.Trapezoidal):
        kind = " (trapezoidal)"
    if getattr(transcription, "velocity_basis", None) is not None:
        kind = kind[:-1] + ", quasi-velocities)" if kind else " (quasi-velocities)"
    return {
        "problem": name,
        "N": N,
        "contender": "constrax" + kind,
        "transcription": _describe(transcription),
        "guess": f"linear + jitter {jitter:g}" if jitter else "linear (exact)",
        "objective": sol.objective,
        "success": sol.success,
        "status": sol.status,
        "iterations": sol.iterations,
        "solve_min_s": min(walls),
        "solve_median_s": statistics.median(walls),
        "solve_samples_s": walls,
        "max_violation": sol.constraint_violation,
        "manifold_violation": sol.manifold_violation,
    }


def _describe(transcription) -> str:
    if isinstance(transcription, cx.fit.DirectMultipleShooting):
        where = (
            "rows at the nodes"
            if transcription.velocity_basis is None
            else "on quasi-velocities (q, v), qd = S(q) v"
        )
        return (
            f"multiple shooting ({transcription.segments} x {transcription.steps} Tsit5 steps), "
            + where
        )
    if getattr(transcription, "velocity_basis", None) is not None:
        scheme = (
            "trapezoidal" if isinstance(transcription, cx.fit.Trapezoidal) else "Hermite-Simpson"
        )
        return f"{scheme} on quasi-velocities (q, v), qd = S(q) v"
    if isinstance(transcription, cx.fit.Trapezoidal):
        return "trapezoidal, rows at the nodes"
    return "Hermite-Simpson (separated), rows at the nodes"


def run_constrax_again(
    name, problem, N, repeats, jitter, transcription=None, guess=None, guess_name=None
) -> dict:
    """Another guess on an already compiled structure (no compile measurement)."""
    transcription = cx.fit.HermiteSimpson(N) if transcription is None else transcription
    solver = cx.fit.IPOPT(
        tol=IPOPT_OPTIONS["tol"], constr_viol_tol=IPOPT_OPTIONS["constr_viol_tol"]
    )
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sol = cx.fit.solve_optimal_control(
            problem,
            guess,
            transcription=transcription,
            solver=solver,
            jitter=jitter,
            coarse=None,
            progress=False,
        )
        walls.append(time.perf_counter() - t0)
    row = {
        **_row(name, N, transcription, jitter, sol, walls),
        "replay_error": sol.replay_error() if sol.success else None,
    }
    if guess_name is not None:
        row["guess"] = guess_name
    return row
