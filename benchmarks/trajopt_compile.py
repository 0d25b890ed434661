r"""Where the compile time of an exact-Hessian trajectory optimisation goes: the rolling disk
(`cx.models.tilted_rolling_disk`, quaternion coordinates, the unit-norm row and the three
rolling rows) steered by `cx.fit.HermiteSimpson(N)` + `cx.fit.IPOPT` (issue 26; docs page
"Trajectory optimisation", section "A rolling rigid body").

Usage (from the repository root):

    python benchmarks/trajopt_compile.py     # -> benchmarks/results/trajopt_compile_cpu.{json,md}
    python benchmarks/trajopt_compile.py --N 20 --out /tmp/bench --note "..."
    python benchmarks/trajopt_compile.py --docs-rows   # the docs table's solves (~3 min)
                                                       # -> .../trajopt_compile_docs_rows_cpu.json

About 4 minutes on a loaded 2-core machine. Measured, each from cold caches
(`jax.clear_caches()`, persistent compilation cache off):

- **programs**: the three XLA programs behind IPOPT's callbacks (`values`: objective and
  constraints; `derivatives`: gradient and Jacobian values; `hessian`: the Hessian of the
  Lagrangian on its blocks), per stage (trace, lower, XLA compile: wall and process CPU
  time), their jaxpr equation counts (`benchmarks/_jaxpr.py`: recursive, and live after
  dead-code elimination) and their run time per call (median of 20), under XLA's CPU
  fusion emitters (its default) and under its LLVM IR emitters
  (`xla_cpu_use_fusion_emitters=False`, what `cx.fit` compiles its programs with on the
  CPU), and the largest difference of their outputs;
- **field**: the constrained field $f(y)$ of one collocation point alone
  ($y = (q, \dot q, u)$, 16 variables), its `jax.jacfwd`, and the Hessian of $w\cdot f$ in
  four orders of differentiation (`jacfwd(grad)`, as `hessian_values` does; `jacrev(grad)`;
  `jacfwd(jacfwd)`; `jacrev(jacfwd)`), under both emitters;
- **first solve**: `cx.fit.solve_optimal_control` of the disk problem from the straight roll
  (as `tests/fit/test_optimal_control_rigid.py`), first call (compile included) and a second
  one, under both emitters.

The machine is shared: wall times include waiting for a core (the load averages are in the
report); the process CPU time of the XLA compile is the steadier measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

if __name__ == "__main__":  # the entry point: float64 before constrax makes an array
    jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
from benchmarks._cases import require_x64  # noqa: E402
from benchmarks._jaxpr import count_equations, live_equations  # noqa: E402
from benchmarks._report import loadavg, machine_info, md_table, write_json  # noqa: E402
from benchmarks._timing import cold_compile_settings  # noqa: E402
from constrax import _compilation  # noqa: E402
from constrax.fit import _ipopt  # noqa: E402

EMITTERS = {
    "fusion emitters (XLA default)": None,
    "LLVM IR emitters (cx.fit on the CPU)": dict(_compilation._CPU_COMPILER_OPTIONS),
}

# ----------------------------------------------------------------------------------------
# The problem (as tests/fit/test_optimal_control_rigid.py).

DISK = cx.models.tilted_rolling_disk()  # m = 1, a = 0.1, I1 = ma²/4, I3 = ma²/2
BODY = cx.rigid.RigidBody(
    DISK.params["mass"],
    jnp.stack([DISK.params["I1"], DISK.params["I1"], DISK.params["I3"]]),
    cx.rigid.Quaternion(),
)
EZ = jnp.array([0.0, 0.0, 1.0])
T = 1.0


def _force(t, q, qd, p):  # drive torque about the axle, steering torque about the vertical
    tau = 1e-3 * (p["u"][0] * BODY.rotation(q)[:, 2] + p["u"][1] * EZ)
    return cx.rigid.body_force(BODY, q, torque=tau)


def disk_problem() -> cx.fit.OptimalControlProblem:
    a, v, target = DISK.params["radius"], 1.0, jnp.array([1.0, 0.1])
    R0 = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # axle along -y
    q0, qd0 = BODY.state(
        jnp.array([0.0, 0.0, a]), R0, jnp.array([v, 0.0, 0.0]), jnp.array([0.0, v / a, 0.0])
    )
    system = cx.System(DISK.system.lagrangian, DISK.system.constraints, force=_force)
    return cx.fit.OptimalControlProblem(
        system,
        {**DISK.params, "u": jnp.zeros(2)},
        control=lambda p: p["u"],
        t1=T,
        q0=q0,
        qd0=qd0,
        terminal_constraint=lambda t, q, qd, p: q[:2] - target,
        running_cost=lambda t, q, qd, u, p: u @ u,
        constraint_solver=cx.KKT(),
    )


# ----------------------------------------------------------------------------------------
# Measurements.


def cold_compile(fn, args, options) -> tuple:
    """Trace, lower, XLA-compile `jax.jit(fn)` with `options` from cold caches: the
    compiled function and `{stage: seconds}` (wall; the XLA stage also in CPU time), with
    the jaxpr's equation counts."""
    jax.clear_caches()
    t0 = time.perf_counter()
    traced = jax.jit(fn, compiler_options=options).trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    c2 = time.process_time()
    compiled = lowered.compile()
    t3, c3 = time.perf_counter(), time.process_time()
    return compiled, {
        "trace_s": t1 - t0,
        "lower_s": t2 - t1,
        "xla_s": t3 - t2,
        "xla_cpu_s": c3 - c2,
        "equations": count_equations(traced.jaxpr),
        "live_equations": live_equations(traced.jaxpr),
    }


def run_time(compiled, args, repeats: int = 20) -> float:
    jax.block_until_ready(compiled(*args))
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def _max_diff(a, b) -> float:
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def programs(nlp, log) -> list[dict]:
    """The three programs behind IPOPT's callbacks, under each emitter setting."""
    rng = np.random.default_rng(0)
    L = nlp.layout
    z, lam, sigma = rng.normal(size=L.nz), rng.normal(size=L.nc), np.asarray(1.0)
    treedef, leaves, arrays_treedef, arrays = _ipopt._split(nlp)
    static = jax.tree.unflatten(treedef, leaves)
    rows = []
    for name, program in _ipopt._PROGRAMS.items():

        def fn(arrays, *a, program=program):
            return program(eqx.combine(jax.tree.unflatten(arrays_treedef, arrays), static), *a)

        args = (arrays, z, lam, sigma) if name == "hessian" else (arrays, z)
        outputs = {}
        for emitters, options in EMITTERS.items():
            compiled, row = cold_compile(fn, args, options)
            row.update(program=name, emitters=emitters, run_ms=1e3 * run_time(compiled, args))
            outputs[emitters] = compiled(*args)
            row["loadavg"] = loadavg()
            log(row)
            rows.append(row)
        rows[-1]["max_abs_diff_to_default"] = _max_diff(*outputs.values())
    return rows


def field_variants(nlp, log) -> list[dict]:
    """The constrained field at one collocation point and its derivatives."""
    S = nlp.sizes
    rng = np.random.default_rng(1)
    y = rng.normal(size=S.s + S.nu + S.nsh)
    y[3:7] /= np.linalg.norm(y[3:7])  # a unit quaternion
    y, w = jnp.asarray(y), jnp.asarray(rng.normal(size=S.s))

    def f(y):
        return nlp.point(y, 0.3)[0]

    def phi(y):
        return w @ f(y)

    variants = {
        "f": f,
        "jacfwd(f)": jax.jacfwd(f),
        "jacfwd(grad(w.f))": jax.jacfwd(jax.grad(phi)),
        "jacrev(grad(w.f))": jax.jacrev(jax.grad(phi)),
        "jacfwd(jacfwd(w.f))": jax.jacfwd(jax.jacfwd(phi)),
        "jacrev(jacfwd(w.f))": jax.jacrev(jax.jacfwd(phi)),
    }
    rows, reference = [], None
    for name, fn in variants.items():
        for emitters, options in EMITTERS.items():
            compiled, row = cold_compile(fn, (y,), options)
            row.update(function=name, emitters=emitters, run_ms=1e3 * run_time(compiled, (y,)))
            out = compiled(y)
            if name == "jacfwd(grad(w.f))" and reference is None:
                reference = out
            if name.startswith("jac") and "w.f" in name:
                row["max_abs_diff_to_jacfwd_grad"] = _max_diff(out, reference)
            row["loadavg"] = loadavg()
            log(row)
            rows.append(row)
    return rows


def first_solves(N: int, log) -> list[dict]:
    """`solve_optimal_control` from the straight roll: first call and a second one."""
    problem = disk_problem()
    straight = cx.simulate(
        problem.system, problem.q0, problem.qd0, problem.params, t1=T,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, T, 101)),
    )  # fmt: skip
    original = _ipopt.compiler_options
    rows = []
    try:
        for emitters, options in EMITTERS.items():
            _ipopt.compiler_options = lambda backend, options=options: options
            _ipopt._jitted.cache_clear()
            jax.clear_caches()
            solve = lambda: cx.fit.solve_optimal_control(  # noqa: E731
                problem,
                straight,
                transcription=cx.fit.HermiteSimpson(N),
                coarse=None,
                progress=False,
            )
            t0, c0 = time.perf_counter(), time.process_time()
            sol = solve()
            first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
            t0 = time.perf_counter()
            sol2 = solve()
            second = time.perf_counter() - t0
            row = {
                "emitters": emitters,
                "first_s": first,
                "first_cpu_s": first_cpu,
                "second_s": second,
                "status": sol.status,
                "iterations": sol.iterations,
                "objective": sol.objective,
                "second_objective": sol2.objective,
                "loadavg": loadavg(),
            }
            log(row)
            rows.append(row)
    finally:
        _ipopt.compiler_options = original
        _ipopt._jitted.cache_clear()
    return rows


def docs_rows(log) -> list[dict]:
    """The rows of the docs' table ("A rolling rigid body"): first and second solve of each
    transcription and Hessian, with `cx.fit`'s own compiler options."""
    problem = disk_problem()
    straight = cx.simulate(
        problem.system, problem.q0, problem.qd0, problem.params, t1=T,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, T, 101)),
    )  # fmt: skip
    cases = [
        ("HermiteSimpson(20)", cx.fit.HermiteSimpson(20), "exact"),
        ("HermiteSimpson(30)", cx.fit.HermiteSimpson(30), "exact"),
        ("HermiteSimpson(20)", cx.fit.HermiteSimpson(20), "limited-memory"),
        ("DirectMultipleShooting(20, 8)", cx.fit.DirectMultipleShooting(20, 8), "limited-memory"),
    ]
    rows = []
    for name, transcription, hessian in cases:
        jax.clear_caches()
        _ipopt._jitted.cache_clear()
        solve = lambda transcription=transcription, hessian=hessian: (  # noqa: E731
            cx.fit.solve_optimal_control(
                problem,
                straight,
                transcription=transcription,
                solver=cx.fit.IPOPT(hessian=hessian),
                coarse=None,
                progress=False,
            )
        )
        t0 = time.perf_counter()
        sol = solve()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        solve()
        second = time.perf_counter() - t0
        row = {
            "transcription": name,
            "hessian": hessian,
            "first_s": first,
            "second_s": second,
            "compile_s": first - second,
            "status": sol.status,
            "iterations": sol.iterations,
            "objective": sol.objective,
            "loadavg": loadavg(),
        }
        log(row)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------
# Report.


def _f(x, fmt=".2f"):
    return "—" if x is None else format(x, fmt)


def markdown(result: dict) -> str:
    m = result["machine"]
    out = [
        "# Compile time of the rolling disk's trajectory optimisation (CPU)",
        "",
        f"- date (UTC): {m['date_utc']}; wall time of the run {result['wall_s']:.0f} s",
        f"- machine: {m['cpu_model']}, {m['cpu_cores']} cores ({m['platform']}); load "
        f"average (1, 5, 15 min) at start {m['loadavg_at_start']}, at end {m['loadavg_at_end']}",
        f"- versions: python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, diffrax "
        f"{m['diffrax']}, equinox {m['equinox']}, constrax {m['constrax']}; persistent "
        f"compilation cache: {'on' if m['persistent_compilation_cache'] else 'off'}",
        f"- problem: `cx.fit.HermiteSimpson({result['config']['N']})` of the rolling disk "
        "(tests/fit/test_optimal_control_rigid.py), exact Hessian",
    ]
    if result["note"]:
        out.append(f"- note: {result['note']}")
    out += [
        "",
        "Each compile from cold caches. Seconds; `xla cpu` is the process CPU time of the "
        "XLA compile (steadier than wall time on a shared machine). Equations: jaxpr "
        "equations counted recursively (live: after dead-code elimination).",
        "",
        "## The programs behind IPOPT's callbacks",
        "",
    ]
    header = ["program", "emitters", "equations (live)", "trace", "lower", "xla wall",
              "xla cpu", "run ms", "max diff", "load"]  # fmt: skip
    out += md_table(
        header,
        [
            [
                r["program"],
                r["emitters"],
                f"{r['equations']} ({r['live_equations']})",
                _f(r["trace_s"]),
                _f(r["lower_s"]),
                _f(r["xla_s"]),
                _f(r["xla_cpu_s"]),
                _f(r["run_ms"]),
                _f(r.get("max_abs_diff_to_default"), ".1e"),
                r["loadavg"][0],
            ]
            for r in result["programs"]
        ],  # fmt: skip
    )
    out += ["", "## The field at one collocation point (16 variables) and its derivatives", ""]
    header = ["function", "emitters", "equations (live)", "trace", "lower", "xla wall",
              "xla cpu", "run ms", "max diff to jacfwd(grad)", "load"]  # fmt: skip
    out += md_table(
        header,
        [
            [
                r["function"],
                r["emitters"],
                f"{r['equations']} ({r['live_equations']})",
                _f(r["trace_s"]),
                _f(r["lower_s"]),
                _f(r["xla_s"]),
                _f(r["xla_cpu_s"]),
                _f(r["run_ms"], ".3f"),
                _f(r.get("max_abs_diff_to_jacfwd_grad"), ".1e"),
                r["loadavg"][0],
            ]
            for r in result["field"]
        ],  # fmt: skip
    )
    out += ["", "## First solve (compile included) and a second one", ""]
    out += md_table(
        ["emitters", "first s (cpu s)", "second s", "status", "iterations", "objective", "load"],
        [
            [
                r["emitters"],
                f"{r['first_s']:.1f} ({r['first_cpu_s']:.1f})",
                f"{r['second_s']:.2f}",
                r["status"],
                r["iterations"],
                f"{r['objective']:.9g}",
                r["loadavg"][0],
            ]
            for r in result["first_solves"]
        ],  # fmt: skip
    )
    return "\n".join(out) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--N", type=int, default=20)
    ap.add_argument("--note", default="")
    ap.add_argument(
        "--docs-rows",
        action="store_true",
        help="only the docs table's solves (-> trajopt_compile_docs_rows_cpu.json)",
    )
    args = ap.parse_args(argv)
    require_x64()
    cold_compile_settings()
    start = time.perf_counter()
    machine = machine_info()
    log = lambda row: print({k: round(v, 3) if isinstance(v, float) else v  # noqa: E731
                             for k, v in row.items()}, flush=True)  # fmt: skip
    if args.docs_rows:
        rows = docs_rows(log)
        machine["loadavg_at_end"] = loadavg()
        result = {"note": args.note, "machine": machine, "rows": rows,
                  "wall_s": time.perf_counter() - start}  # fmt: skip
        write_json(os.path.join(args.out, "trajopt_compile_docs_rows_cpu.json"), result)
        return
    nlp = cx.fit.HermiteSimpson(args.N).nlp(disk_problem())
    result = {
        "config": {"N": args.N},
        "note": args.note,
        "machine": machine,
        "programs": programs(nlp, log),
        "field": field_variants(nlp, log),
        "first_solves": first_solves(args.N, log),
    }
    machine["loadavg_at_end"] = loadavg()
    result["wall_s"] = time.perf_counter() - start
    write_json(os.path.join(args.out, "trajopt_compile_cpu.json"), result)
    with open(os.path.join(args.out, "trajopt_compile_cpu.md"), "w") as fh:
        fh.write(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
