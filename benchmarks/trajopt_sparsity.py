r"""IPOPT on the structural nonzeros against IPOPT on the dense derivative blocks
(`cx.fit.IPOPT(sparsity="sampled")` against `sparsity="blocks"`, the default), and the dense
blocks passed through `cyipopt`'s own callbacks instead of IPOPT's C interface (what
`cx.fit.IPOPT` did before 2026-11-27: the same IPOPT library, the same evaluations; `cyipopt`
copies the Jacobian and Hessian values into IPOPT's arrays one Python-level index at a
time), the IPOPT library CasADi's wheel bundles (`cx.fit.IPOPT(library=...)`: IPOPT
3.14.19 with MUMPS 5.8.2, against `cyipopt-wheels`' 3.14.11 with MUMPS 5.5.1; skipped
without CasADi), and MUMPS left to choose its fill-reducing ordering (IPOPT's default,
`mumps_pivot_order=7`, against `cx.fit.IPOPT`'s approximate minimum degree, 0),
interleaved in one process on the problems of `benchmarks/trajopt.py`.

Usage (from the repository root):

    python benchmarks/trajopt_sparsity.py  # -> benchmarks/results/trajopt_sparsity_cpu.{json,md}
    python benchmarks/trajopt_sparsity.py --repeats 5 --out /tmp/bench

Per problem and variant: the entries IPOPT is given, the solve's objective, iterations,
violation and the largest difference of the multipliers between the two structures; the
wall time of `cx.fit.solve_optimal_control` (compile excluded: a first solve of each is
discarded) and IPOPT's own timing statistics (`print_timing_statistics`: CPU time, user +
system, of the whole algorithm, of the search direction — the MUMPS factorisations and
solves — and of the function evaluations), each the median over `--repeats` solves taken in
rotating order. CPU times are less disturbed than wall times by other jobs on a shared
machine. Also the cost of sampling the structure (once per problem; warm programs).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
from benchmarks import trajopt  # noqa: E402
from benchmarks._report import loadavg, machine_info, md_table, write_json  # noqa: E402
from constrax.fit import _ipopt, _ipopt_c  # noqa: E402

# name: (IPOPT(sparsity=...), through cyipopt's callbacks, another IPOPT library, options)
VARIANTS = {
    "blocks": ("blocks", False, None, {}),
    "sampled": ("sampled", False, None, {}),
    "blocks, cyipopt's callbacks": ("blocks", True, None, {}),
    "blocks, CasADi's IPOPT library": ("blocks", False, "casadi", {}),
    "blocks, MUMPS's automatic ordering": ("blocks", False, None, {"mumps_pivot_order": 7}),
}


def casadi_ipopt() -> str | None:
    """The `libipopt.so` CasADi's wheel bundles, if CasADi is installed."""
    try:
        import casadi
    except ImportError:
        return None
    found = sorted(pathlib.Path(casadi.__file__).parent.glob("libipopt.so*"))
    return str(found[0]) if found else None


STRUCTURES = tuple(k for k, v in VARIANTS.items() if v[2] is None or casadi_ipopt())
TIMERS = {
    "overall": "OverallAlgorithm",
    "search_direction": "ComputeSearchDirection",
    "linear_solver": "PDSystemSolverTotal",
    "functions": "Function Evaluations",
    "jacobian": "Equality constraint Jacobian",
    "hessian": "Lagrangian Hessian",
}


def timing(path: str) -> dict:
    """IPOPT's timing statistics from its output file: CPU (user + system) and wall s."""
    text = open(path).read()
    out = {}
    for key, label in TIMERS.items():
        m = re.search(
            re.escape(label) + r"\.*:\s+([\d.]+) \(sys:\s+([\d.]+) wall:\s+([\d.]+)\)", text
        )
        out[key] = {"cpu": float(m[1]) + float(m[2]), "wall": float(m[3])}
    return out


def cyipopt_solve(
    n,
    lo,
    hi,
    m,
    cl,
    cu,
    jac,
    hess,
    callbacks,
    x0,
    options,
    multipliers0=None,
    library_path=None,
    optional=frozenset(),
):
    """`_ipopt_c.solve` through `cyipopt.Problem` (its callbacks read `callbacks`; cyipopt's
    IPOPT knows every option `optional` names)."""
    import cyipopt

    problem_obj = type(
        "Callbacks",
        (),
        {
            "objective": staticmethod(callbacks.objective),
            "gradient": staticmethod(callbacks.gradient),
            "constraints": staticmethod(callbacks.constraints),
            "jacobian": staticmethod(callbacks.jacobian),
            "hessian": staticmethod(callbacks.hessian),
            "jacobianstructure": staticmethod(lambda: jac),
            "hessianstructure": staticmethod(lambda: hess),
            "intermediate": staticmethod(
                lambda _, it, obj, inf_pr, *r: callbacks.intermediate(it, obj, inf_pr)
            ),
        },
    )()
    problem = cyipopt.Problem(n=n, m=m, problem_obj=problem_obj, lb=lo, ub=hi, cl=cl, cu=cu)
    for key, value in options.items():
        problem.add_option(key, value)
    kw = {} if multipliers0 is None else {"lagrange": multipliers0}
    x, info = problem.solve(np.asarray(x0, np.float64), **kw)
    return x, float(info["obj_val"]), int(info["status"]), np.asarray(info["mult_g"])


def solve(problem, transcription, variant: str, log: str):
    structure, through_cyipopt, library, options = VARIANTS[variant]
    solver = cx.fit.IPOPT(
        sparsity=structure,
        library=casadi_ipopt() if library == "casadi" else None,
        options={
            **{k: v for k, v in trajopt.IPOPT_OPTIONS.items() if k == "mu_strategy"},
            "output_file": log,
            "file_print_level": 3,
            "print_timing_statistics": "yes",
            **options,
        },
        tol=trajopt.IPOPT_OPTIONS["tol"],
        constr_viol_tol=trajopt.IPOPT_OPTIONS["constr_viol_tol"],
    )
    c_solve = _ipopt_c.solve
    _ipopt_c.solve = cyipopt_solve if through_cyipopt else c_solve
    try:
        t0 = time.perf_counter()
        sol = cx.fit.solve_optimal_control(
            problem, transcription=transcription, solver=solver, coarse=None, progress=False
        )
        return sol, time.perf_counter() - t0
    finally:
        _ipopt_c.solve = c_solve


def run_case(name: str, problem, N: int, repeats: int, log: str) -> dict:
    tr = cx.fit.HermiteSimpson(N)
    nlp = tr.nlp(problem)
    L = nlp.layout
    first = {s: solve(problem, tr, s, log)[0] for s in STRUCTURES}  # compiles
    # The sampling, once per problem (the programs compiled by now).
    ev = _ipopt._Evaluator(nlp, np.float64)
    lo, hi = nlp.variable_bounds()
    _ipopt._STRUCTURES.clear()
    t0 = time.perf_counter()
    S = _ipopt._sampled(ev, L, lo, hi, hessian=True)
    sampling_s = time.perf_counter() - t0
    samples = {s: {"wall": [], **{k: [] for k in TIMERS}} for s in STRUCTURES}
    for r in range(repeats):
        k = r % len(STRUCTURES)
        for s in STRUCTURES[k:] + STRUCTURES[:k]:
            sol, wall = solve(problem, tr, s, log)
            samples[s]["wall"].append(wall)
            for k, v in timing(log).items():
                samples[s][k].append(v["cpu"])
    med = {s: {k: statistics.median(v) for k, v in samples[s].items()} for s in STRUCTURES}
    a = first["blocks"]
    return {
        "problem": name,
        "N": N,
        "nz": L.nz,
        "nc": L.nc,
        "jacobian_entries": {
            s: int(S.jac_kept.size if VARIANTS[s][0] == "sampled" else L.jac_rows.size)
            for s in STRUCTURES
        },
        "hessian_entries": {
            s: int(S.hess_kept.size if VARIANTS[s][0] == "sampled" else L.hess_rows.size)
            for s in STRUCTURES
        },
        "sampling_s": sampling_s,
        "solutions": {
            s: {
                "objective": sol.objective,
                "status": sol.status,
                "iterations": sol.iterations,
                "violation": sol.constraint_violation,
            }
            for s, sol in first.items()
        },
        "objective_difference": max(abs(a.objective - o.objective) for o in first.values()),
        "multiplier_difference": max(_multiplier_difference(a, o) for o in first.values()),
        "median": med,
        "samples": samples,
    }


def _multiplier_difference(a, b) -> float:
    la, lb = np.asarray(a.multipliers), np.asarray(b.multipliers)
    return float(np.abs(la - lb).max() / max(1.0, np.abs(la).max()))


def markdown(rows: list[dict], meta: dict) -> str:
    head = [
        "problem",
        "N",
        "variant",
        "Jacobian / Hessian entries",
        "objective",
        "iter",
        "wall s",
        "IPOPT CPU s",
        "search direction CPU s",
        "function evaluations CPU s",
    ]
    table = []
    for r in rows:
        for s in STRUCTURES:
            m, sol = r["median"][s], r["solutions"][s]
            table.append(
                [
                    r["problem"],
                    str(r["N"]),
                    s,
                    f"{r['jacobian_entries'][s]} / {r['hessian_entries'][s]}",
                    f"{sol['objective']:.10g}",
                    str(sol["iterations"]),
                    f"{m['wall']:.3f}",
                    f"{m['overall']:.3f}",
                    f"{m['search_direction']:.3f}",
                    f"{m['functions']:.3f}",
                ]
            )
    lines = [
        "# IPOPT on the structural nonzeros against the dense blocks, through cyipopt's "
        "callbacks, CasADi's IPOPT library, and MUMPS's automatic ordering (CPU)",
        "",
        f"- date (UTC): {meta['date']}; load average at start {meta['load_start']}, "
        f"at end {meta['load_end']}",
        f"- machine: {meta['machine']['cpu_model']}, {meta['machine']['cpu_cores']} cores; "
        f"jax {meta['machine']['jax']}",
        f"- medians over {meta['repeats']} solves each, the variants in rotating order; "
        "CPU = user + system seconds from IPOPT's timing statistics",
        "",
        *md_table(head, table),
        "",
    ]
    for r in rows:
        lines.append(
            f"- {r['problem']} N={r['N']}: objectives differ from the blocks' by at most "
            f"{r['objective_difference']:.1e}, multipliers by "
            f"{r['multiplier_difference']:.1e} (relative); sampling the "
            f"structure {1e3 * r['sampling_s']:.1f} ms (once per problem)"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    load_start = loadavg()
    log = os.path.join(tempfile.mkdtemp(), "ipopt.txt")
    cases = [
        ("parking", trajopt.parking_problem(), 50),
        ("parking", trajopt.parking_problem(), 100),
        ("parking", trajopt.parking_problem(), 400),
        ("cart-pole", trajopt.cartpole_problem(), 50),
    ]
    rows = []
    for name, problem, N in cases:
        rows.append(run_case(name, problem, N, args.repeats, log))
        print(name, N, {s: rows[-1]["median"][s] for s in STRUCTURES}, flush=True)
    meta = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_start": load_start,
        "load_end": loadavg(),
        "machine": machine_info(),
        "repeats": args.repeats,
    }
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "trajopt_sparsity_cpu.json"), {"meta": meta, "rows": rows})
    with open(os.path.join(args.out, "trajopt_sparsity_cpu.md"), "w") as f:
        f.write(markdown(rows, meta))
    print(markdown(rows, meta))


if __name__ == "__main__":
    main()
