r"""Trajectory optimisation on a peer's own problem: opty's gallery "Parallel Park a Car"
(opty 1.5.0; `benchmarks/_trajopt/park.py`) solved by opty as its users write it
(sympy.physics.mechanics, backward Euler on N + 1 nodes, IPOPT through cyipopt) and by
constrax (`cx.fit.HermiteSimpson(N)`, the constrained car, `cx.fit.IPOPT`), at N = 100,
200 and 500 intervals.

Starts: each tool's own default (opty: the gallery's guess; constrax: `guess=None`, with
its default mesh refinement) and the shared one (opty's guess, given to constrax as a
function `t -> (q, qd, u)`; constrax's refinement then starts from it).

Per row: status, IPOPT iterations (constrax: summed over its stages, each listed),
objective, time to first result (the whole first call: opty's sympy derivation, code
generation and Cython build, then the solve; constrax's first call, compiles included),
build/compile (opty: everything before `solve`; constrax: the first call minus a second
identical one), solve (opty: `solve`; constrax: the second call, compiled), and the replay
miss: the controls (opty's node controls interpolated linearly, constrax's
piecewise-quadratic control) applied from rest to the exact constrained dynamics
(`cx.simulate`, rtol = atol = 1e-12): the distance from the spot at 30 s.

Usage (from the repository root; opty needs `pip install cyipopt-wheels cython` then
`pip install opty --no-deps`, and is skipped with a note without it):

    python benchmarks/trajopt_opty.py            # -> benchmarks/results/trajopt_opty_cpu.{json,md}
    python benchmarks/trajopt_opty.py --sizes 100 --out /tmp/bench
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script

import jax  # noqa: E402

if __name__ == "__main__":  # the entry point: float64 before constrax makes an array
    jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
from benchmarks._cases import require_x64  # noqa: E402
from benchmarks._report import (  # noqa: E402
    loadavg,
    machine_info,
    machine_line,
    md_table,
    write_results,
)
from benchmarks._trajopt import park  # noqa: E402


def constrax_row(N: int, start: str) -> dict:
    problem = park.parallel_park()
    guess = None if start == "default" else park.opty_guess
    run = lambda: cx.fit.solve_optimal_control(  # noqa: E731
        problem, guess, transcription=cx.fit.HermiteSimpson(N), progress=False
    )
    t = time.perf_counter()
    sol = run()
    first = time.perf_counter() - t
    t = time.perf_counter()
    again = run()
    solve = time.perf_counter() - t
    assert again.objective == sol.objective  # the same solve, compiled
    return {
        "tool": "constrax",
        "N": N,
        "start": start,
        "status": sol.status,
        "success": sol.success,
        "iterations": sum(s.iterations for s in sol.stages),
        "stages": [[s.transcription.intervals, s.iterations, s.status] for s in sol.stages],
        "objective": sol.objective,
        "first_result_s": first,
        "build_s": first - solve,
        "solve_s": solve,
        "replay_miss_m": park.replay_miss(sol.control),
    }


def opty_row(N: int) -> dict:
    t = time.perf_counter()
    prob, guess, names = park.opty_problem(N + 1)
    build = time.perf_counter() - t
    t = time.perf_counter()
    solution, info = prob.solve(guess)
    solve = time.perf_counter() - t
    ts, U = park.opty_controls(prob, solution, names)

    def control(t):
        return jax.numpy.stack([jax.numpy.interp(t, ts, U[:, j]) for j in range(2)])

    return {
        "tool": "opty",
        "N": N,
        "start": "default",
        "status": info["status_msg"].decode()
        if isinstance(info["status_msg"], bytes)
        else str(info["status_msg"]),  # fmt: skip
        "success": info["status"] == 0,
        "iterations": len(prob.obj_value) - 1,  # its intermediate callback: iteration 0 on
        "objective": float(info["obj_val"]),
        "first_result_s": build + solve,
        "build_s": build,
        "solve_s": solve,
        "replay_miss_m": park.replay_miss(control),
    }


def report(result: dict) -> str:
    rows = []
    for r in result["rows"]:
        stages = ", ".join(f"{n}: {i}" for n, i, _ in r.get("stages", [])) or "—"
        rows.append([r["tool"], r["N"], r["start"], r["status"], r["iterations"], stages,
                     f"{r['objective']:.7g}", f"{r['first_result_s']:.1f}", f"{r['build_s']:.1f}",
                     f"{r['solve_s']:.2f}", f"{r['replay_miss_m']:.2g}"])  # fmt: skip
    lines = [
        "# Parallel parking (opty's gallery problem): constrax against opty",
        "",
        machine_line(result["machine"]),
        f"- opty: {result['opty']}",
        "",
        *md_table(
            [
                "tool",
                "N",
                "start",
                "status",
                "iterations",
                "stages (N: iterations)",
                "objective",
                "first result s",
                "build/compile s",
                "solve s",
                "replay miss m",
            ],
            rows,
        ),  # fmt: skip
        "",
        "N: intervals (opty: N + 1 nodes). Start `default`: opty's gallery guess for opty, "
        "`guess=None` for constrax; `opty`: opty's guess given to constrax. Time to first "
        "result: opty's derivation, code generation and build, then its solve; constrax's first "
        "call. Replay miss: the controls applied from rest to the exact constrained dynamics, the "
        "distance from the spot at 30 s.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 500])
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    require_x64()
    machine = machine_info()
    try:
        import opty

        opty_version = opty.__version__
    except ImportError:
        opty_version = None
    rows = []
    for N in args.sizes:
        if opty_version is not None:
            rows.append(opty_row(N))
            print(rows[-1], flush=True)
        for start in ("default", "opty"):
            rows.append(constrax_row(N, start))
            print(rows[-1], flush=True)
    machine["loadavg_at_end"] = loadavg()
    result = {
        "machine": machine,
        "opty": opty_version or "not installed: its rows are skipped",
        "rows": rows,
    }
    write_results(args.out, "trajopt_opty_cpu", result, report(result))
    print(report(result))


if __name__ == "__main__":
    main()
