r"""How a collocation solve scales with the horizon, and where its time goes: opty's
parallel park (`benchmarks/_trajopt/park.py`) with `cx.fit.HermiteSimpson(N)` at
N = 100, 200, 500 and 1000 intervals.

Every size starts as the default mesh refinement starts a fine stage: from the solution
on a coarser grid (50 intervals; `guess=` that solution, resampled; `coarse=None`: one
solve), so that the iterations are alike and the time per iteration compares. Each size runs in a
process of its own (its peak memory is the process's maximum resident set).

Per size: the NLP (variables, constraints, Jacobian and Hessian entries), the compile (the
first solve less a warm one), iterations, the warm solve's wall time (median over
`--repeats`), the time per iteration, and the warm solve taken apart:

- IPOPT's own timing statistics (`print_timing_statistics`; CPU = user + system): its
  linear solves (`PDSystemSolverTotal`: the MUMPS factorisations and solves, for the search
  direction and for the adaptive barrier update's probing steps alike) and the function
  evaluations (IPOPT's callbacks into constrax);
- of those callbacks, the time inside the compiled JAX programs (`values`: objective and
  constraints; `derivatives`: gradient and Jacobian; `hessian`), timed around each call
  with its result on the host, and the number of calls; the rest of the callbacks is
  Python and numpy (gathering the kept entries, the ctypes copies);
- outside IPOPT: building the NLP, the guess, the solution's assembly and checks.

Usage (from the repository root):

    python benchmarks/trajopt_scaling.py   # -> benchmarks/results/trajopt_scaling_cpu.{json,md}
    python benchmarks/trajopt_scaling.py --sizes 100 200 --repeats 2 --out /tmp/bench
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script

SIZES = (100, 200, 500, 1000)
COARSE = 50
PROGRAMS = ("values", "derivatives", "hessian")


def _timed_programs(ipopt_module, clock: dict):
    """Wrap `_ipopt._jitted` so that every call of a compiled callback program is timed
    (its outputs brought to the host) and counted in `clock[name]`."""
    import jax

    original = ipopt_module._jitted

    def jitted(treedef, leaves, arrays_treedef, name):
        fn = original(treedef, leaves, arrays_treedef, name)

        def timed(*args):
            t0 = time.perf_counter()
            out = jax.block_until_ready(fn(*args))
            entry = clock.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - t0
            return out

        return timed

    ipopt_module._jitted = jitted


def measure_size(N: int, repeats: int) -> dict:
    """One size, in this process (`--one N`)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import constrax as cx
    from benchmarks._trajopt import park
    from benchmarks.trajopt_sparsity import timing
    from constrax.fit import _ipopt

    clock: dict = {}
    _timed_programs(_ipopt, clock)
    problem = park.parallel_park()
    coarse = cx.fit.solve_optimal_control(
        problem, transcription=cx.fit.HermiteSimpson(COARSE), coarse=None, progress=False
    )
    assert coarse.success, coarse.status
    log = os.path.join(tempfile.mkdtemp(), "ipopt.out")
    solver = cx.fit.IPOPT(
        options={"output_file": log, "file_print_level": 3, "print_timing_statistics": "yes"}
    )
    transcription = cx.fit.HermiteSimpson(N)
    nlp = transcription.nlp(problem)

    def solve():
        clock.clear()
        t0 = time.perf_counter()
        sol = cx.fit.solve_optimal_control(
            problem,
            coarse,
            transcription=transcription,
            solver=solver,
            coarse=None,
            progress=False,
        )
        return sol, time.perf_counter() - t0, {k: tuple(v) for k, v in clock.items()}

    first, first_wall, _ = solve()
    runs = [solve() for _ in range(repeats)]
    for sol, _, _ in runs:
        assert sol.objective == first.objective and sol.iterations == first.iterations
    walls = [w for _, w, _ in runs]
    sol, _, calls = runs[-1]
    # IPOPT's statistics: of the last solve's log (its times vary little between runs)
    stats = timing(log)
    return {
        "N": N,
        "variables": int(nlp.layout.nz),
        "constraints": int(nlp.layout.nc),
        "jacobian_entries": int(nlp.layout.jac_rows.size),
        "hessian_entries": int(nlp.layout.hess_rows.size),
        "status": sol.status,
        "success": bool(sol.success),
        "objective": float(sol.objective),
        "iterations": int(sol.iterations),
        "first_solve_s": first_wall,
        "compile_s": first_wall - statistics.median(walls),
        "solve_median_s": statistics.median(walls),
        "solve_samples_s": walls,
        "per_iteration_ms": 1e3 * statistics.median(walls) / max(sol.iterations, 1),
        "ipopt_cpu_s": {k: v["cpu"] for k, v in stats.items()},
        "ipopt_wall_s": stats["overall"]["wall"],
        "programs": {k: {"calls": n, "s": s} for k, (n, s) in calls.items()},
        "programs_s": sum(s for _, s in calls.values()),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _derived(row: dict) -> dict:
    """The parts of the warm solve: the linear solves (MUMPS), the JAX programs, the rest
    of the callbacks (Python, numpy, ctypes), the rest of IPOPT, what lies outside IPOPT."""
    cpu = row["ipopt_cpu_s"]
    functions = cpu["functions"]
    return {
        "linear_solver_s": cpu["linear_solver"],
        "programs_s": row["programs_s"],
        "callback_glue_s": functions - row["programs_s"],
        "ipopt_rest_s": cpu["overall"] - cpu["linear_solver"] - functions,
        "outside_ipopt_s": row["solve_median_s"] - row["ipopt_wall_s"],
    }


def report(result: dict) -> str:
    from benchmarks._report import machine_line, md_table

    rows, parts = [], []
    for r in result["rows"]:
        d = _derived(r)
        rows.append([
            r["N"], f"{r['variables']} / {r['constraints']}",
            f"{r['jacobian_entries']} / {r['hessian_entries']}", r["status"], r["iterations"],
            f"{r['compile_s']:.1f}", f"{r['solve_median_s']:.2f}",
            f"{r['per_iteration_ms']:.1f}", f"{r['peak_rss_mb']:.0f}",
        ])  # fmt: skip
        calls = ", ".join(f"{k} {v['calls']}" for k, v in sorted(r["programs"].items()))
        parts.append([
            r["N"], f"{r['solve_median_s']:.2f}", f"{d['linear_solver_s']:.2f}",
            f"{d['programs_s']:.2f}", f"{d['callback_glue_s']:.2f}",
            f"{d['ipopt_rest_s']:.2f}", f"{d['outside_ipopt_s']:.2f}", calls,
        ])  # fmt: skip
    return "\n".join([
        "# Collocation on a growing horizon: opty's parallel park, Hermite-Simpson (CPU)",
        "",
        machine_line(result["machine"]),
        f"- every size warm-started from the solution on {COARSE} intervals (as the default "
        "refinement's fine stages start); warm solves, medians over "
        f"{result['repeats']}; each size in a process of its own",
        "",
        *md_table(
            ["N", "variables / constraints", "Jacobian / Hessian entries", "status",
             "iterations", "compile s", "solve s", "ms / iteration", "peak memory MB"],
            rows,
        ),
        "",
        "Where the warm solve's time goes (seconds; IPOPT's parts in CPU time, user + "
        "system, from its timing statistics):",
        "",
        *md_table(
            ["N", "solve (wall)", "linear solves (MUMPS)", "JAX programs",
             "callbacks' Python and numpy", "rest of IPOPT", "outside IPOPT",
             "program calls"],
            parts,
        ),
    ])  # fmt: skip


def main(argv=None):
    from benchmarks._report import loadavg, machine_info, write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"))
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:  # a child: one size, its row as JSON on the last line
        print(json.dumps(measure_size(args.one, args.repeats)))
        return
    machine = machine_info()
    rows = []
    for N in args.sizes:
        cmd = [sys.executable, __file__, "--one", str(N), "--repeats", str(args.repeats)]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"N={N}: {rows[-1]['iterations']} iterations, {rows[-1]['solve_median_s']:.2f} s")
    machine["loadavg_at_end"] = loadavg()
    result = {"machine": machine, "repeats": args.repeats, "rows": rows}
    write_results(args.out, "trajopt_scaling_cpu", result, report(result))
    print(report(result))


if __name__ == "__main__":
    main()
