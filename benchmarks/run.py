r"""constrax benchmarks: constrax against the same physics written out by hand in JAX.

Usage (from the repository root; see `benchmarks/README.md`):

    python benchmarks/run.py                 # full run -> benchmarks/results/cpu.{json,md}
    python benchmarks/run.py --quick         # fewer repeats and batch sizes
    python benchmarks/run.py --only snake rigid --out /tmp/bench
    python benchmarks/run.py --list          # the cases and groups
    python benchmarks/run.py --counts-only   # = python benchmarks/jaxpr_counts.py

The cases live in `benchmarks/cases/<case>.py` (constrax and hand-written side by side),
their shared settings in `benchmarks/_cases.py`, the timing in `_timing.py`, the jaxpr
counting in `_jaxpr.py`, machine information and table helpers in `_report.py`. Equation
counts alone (seconds, no timing): `python benchmarks/jaxpr_counts.py`. Run as a script (or
`python -m benchmarks.run`), it turns `jax_enable_x64` on before anything is imported that
makes an array; `main()` refuses to run without it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

if __name__ == "__main__":  # the entry point: float64 before constrax or a case makes an array
    jax.config.update("jax_enable_x64", True)

from benchmarks._cases import DT0, RolloutCase, require_x64  # noqa: E402
from benchmarks._jaxpr import case_counts  # noqa: E402
from benchmarks._report import (  # noqa: E402
    loadavg,
    machine_info,
    md_table,
    ms,
    write_json,
    yes,
)
from benchmarks._timing import (  # noqa: E402
    bench_pair,
    cold_compile_settings,
    compile_once,
    verdict,
    with_sums,
)
from benchmarks.cases import GROUPS, OTHER_CASES, ROLLOUT_CASES  # noqa: E402

CONFIGS = {
    # `batches`: batch size -> number of fixed Tsit5 steps of the batched rollout.
    "full": dict(
        repeats=15,
        grad_repeats=7,
        compile_repeats=2,
        grad_compile_repeats=1,
        batches={1: 100, 16: 100, 256: 100, 4096: 50, 16384: 20},
        batch_repeats=5,
    ),
    "quick": dict(
        repeats=5,
        grad_repeats=3,
        compile_repeats=1,
        grad_compile_repeats=1,
        batches={1: 100, 16: 100, 256: 50},
        batch_repeats=3,
    ),
}

ALL = [*ROLLOUT_CASES, *OTHER_CASES]


def select(only: list[str] | None) -> list[str]:
    """Case names selected by `--only` (case names or groups), in the suite's order."""
    if not only:
        return list(ALL)
    chosen = set()
    for name in only:
        if name in GROUPS:
            chosen.update(GROUPS[name])
        elif name in ALL:
            chosen.add(name)
        else:
            valid = ", ".join([*ALL, *GROUPS])
            raise SystemExit(f"run.py: unknown case {name!r}; valid: {valid}")
    return [c for c in ALL if c in chosen]


def _run_row(title, kind, r, v):
    a, b, d = r["constrax"], r["hand"], r.get("defaults")
    return [
        title, kind,
        f"{ms(a['cpu_min_s'])} ({ms(a['cpu_median_s'])})",
        f"{ms(b['cpu_min_s'])} ({ms(b['cpu_median_s'])})", f"{r['ratio_cpu_min']:.2f}",
        f"{ms(a['min_s'])} ({ms(a['median_s'])})",
        f"{ms(b['min_s'])} ({ms(b['median_s'])})", f"{r['ratio_min']:.2f}",
        f"≤ {v['ratio_max']}" if v else "—",
        f"{yes(v['met_cpu_time'])} / {yes(v['met_wall_time'])}" if v else "—",
        f"{ms(d['cpu_min_s'])} ({ms(d['cpu_median_s'])})" if d else "—",
        f"{r['defaults_ratio_cpu_min']:.2f}" if d else "—",
    ]  # fmt: skip


def _compile_row(title, kind, c):
    s = lambda name, stage: f"{c[name][stage]['cpu_min_s']:.2f}"
    d = "defaults_ratios" in c
    return [
        title, kind, s("constrax", "trace_lower"), s("constrax", "xla"),
        s("hand", "trace_lower"), s("hand", "xla"),
        f"{c['ratios']['trace_lower_cpu_min']:.2f}", f"{c['ratios']['xla_cpu_min']:.2f}",
        f"{c['ratios']['total_cpu_min']:.2f} ({c['ratios']['total_min']:.2f})",
        s("defaults", "total") if d else "—",
        f"{c['defaults_ratios']['total_cpu_min']:.2f}" if d else "—",
    ]  # fmt: skip


def count_rows(counts: dict, titles: dict) -> list[list]:
    """Rows `case | vf | vf VJP | acc | acc VJP`, each `constrax / hand`."""
    rows = []
    for name, c in counts.items():
        a, b = c["constrax"], c["hand"]
        cells = [f"{a[k]} / {b[k]}" if k in a else "—" for k in ("vf", "vf_vjp", "acc", "acc_vjp")]
        rows.append([titles.get(name, name), *cells])
    return rows


COUNT_HEADER = ["case", "vector field", "its VJP", "`accelerations(...).qdd`", "its VJP"]
RUN_HEADER = (
    "case | measure | constrax CPU | hand CPU | ratio CPU | constrax wall | hand wall "
    "| ratio wall | target | met (CPU / wall) | defaults CPU | defaults / hand CPU"
).split(" | ")
COMPILE_HEADER = (
    "case | measure | constrax trace+lower | constrax XLA | hand trace+lower | hand XLA "
    "| ratio trace+lower | ratio XLA | ratio total | defaults total | defaults / hand total"
).split(" | ")


def markdown(res: dict) -> str:
    m, cfg = res["machine"], res["config"]
    lines = [
        "# constrax CPU benchmarks",
        "",
        f"- date (UTC): {m['date_utc']}; mode: `{res['mode']}`; wall time of the run "
        f"{res['wall_s']:.0f} s",
        f"- machine: {m['cpu_model']}, {m['cpu_cores']} cores ({m['platform']}); load average "
        f"(1, 5, 15 min) at start {m['loadavg_at_start']}, at end {m.get('loadavg_at_end')}",
        f"- versions: python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, "
        f"diffrax {m['diffrax']}, equinox {m['equinox']}, constrax {m['constrax']}; "
        f"persistent compilation cache: {'on' if m['persistent_compilation_cache'] else 'off'}",
        f"- note: {res['note']}",
    ]
    cases = [n for n in ROLLOUT_CASES if n in res["cases"]]
    if cases:
        run_rows, comp_rows, agree = [], [], []
        for n in cases:
            r = res["cases"][n]
            title = f"{r['title']}, {r['n_steps']} steps"
            for kind in ("rollout", "gradient"):
                run_rows.append(_run_row(title, kind, r[kind]["run"], r[kind]["target"]))
                comp_rows.append(_compile_row(r["title"], kind, r[kind]["compile"]))
            ro, gr = r["rollout"], r["gradient"]
            agree.append(
                f"{r['title']} {ro['max_abs_diff']:.1e} ({ro['max_rel_diff']:.1e}), gradient "
                f"{gr['max_abs_diff']:.1e} ({gr['max_rel_diff']:.1e})"
                + (
                    f"; defaults {ro['defaults_max_abs_diff']:.1e}"
                    if "defaults_max_abs_diff" in ro
                    else ""
                )
            )
        counts = {n: res["cases"][n]["jaxpr_counts"] for n in cases}
        titles = {n: res["cases"][n]["title"] for n in cases}
        lines += [
            "",
            "## Run time",
            "",
            "Per call: minimum (median) over interleaved repeats "
            f"({cfg['repeats']} rollout, {cfg['grad_repeats']} gradient), in ms; *CPU* = "
            "process CPU time, *wall* = elapsed time; ratio = constrax / hand-written, of the "
            "minima, same run. Rollout: final state of Tsit5 fixed steps; gradient: "
            "`jax.grad` of the sum of squares of the final state with respect to the "
            "parameters. CPU time is the one to trust on a busy machine. *constrax* runs "
            "like for like (`constraint_solver=cx.KKT()`, `stabilisation=None`, the "
            "equations of the hand-written field); *defaults* is the same call with "
            "`cx.simulate`'s default `constraint_solver` and `stabilisation` (what users "
            "run; same steps and solver), in the same run.",
            "",
            *md_table(RUN_HEADER, run_rows),
            "",
            "## Compile time",
            "",
            "`jax.jit(f).trace(*args).lower()` (trace + lower) and `.compile()` (XLA), from "
            "cold caches (`jax.clear_caches()` before each, persistent cache off), in CPU s; "
            f"minimum over {cfg['compile_repeats']} interleaved repeats for rollouts, "
            f"{cfg['grad_compile_repeats']} for gradients; ratios constrax / hand, total in "
            "CPU (wall):",
            "",
            *md_table(COMPILE_HEADER, comp_rows),
            "",
            "## Jaxpr equation counts",
            "",
            "constrax / hand-written; recursive count of equations (`_jaxpr.count_equations`)"
            " of one vector-field evaluation as the rollout traces it and of its VJP (with "
            "respect to state and parameters), and of `cx.accelerations(...).qdd` as a user "
            "traces it (hand: the field's `qdd`) and of its VJP:",
            "",
            *md_table(COUNT_HEADER, count_rows(counts, titles)),
            "",
            "Max |constrax − hand-written| at t1 (relative to the largest hand-written "
            "entry): " + "; ".join(agree) + ".",
        ]
    for name, module in OTHER_CASES.items():
        if name in res["cases"]:
            lines += module.markdown(res["cases"][name], cfg)
    return "\n".join(lines) + "\n"


def bench_rollout_case(case: RolloutCase, cfg: dict) -> dict:
    """Rollout and gradient of a `RolloutCase`: compile times, run times, agreement,
    jaxpr equation counts."""
    args = case.args()
    out = {"title": case.title, "t1": case.t1, "dt0": DT0, "n_steps": round(case.t1 / DT0)}
    for kind, make, reps, creps, target in (
        ("rollout", case.rollouts, cfg["repeats"], cfg["compile_repeats"], case.rollout_target),
        ("gradient", case.gradients, cfg["grad_repeats"], cfg["grad_compile_repeats"],
         case.gradient_target),
    ):  # fmt: skip
        print(f"  {case.name} {kind}", flush=True)
        factories = {k: (lambda k=k, make=make: make()[k]) for k in make()}
        fresh = (case.name, kind) if cfg.get("fresh_process") else None
        out[kind] = bench_pair(factories, args, reps, creps, fresh)
        out[kind]["target"] = verdict(out[kind]["run"], target)
    out["jaxpr_counts"] = case_counts(case)
    return out


def warm_up() -> None:
    """Pay the process's one-time costs (backend start, lowering rules) before measuring."""
    fns = ROLLOUT_CASES["snake"].rollouts(t1=0.02)
    args = ROLLOUT_CASES["snake"].args()
    for f in fns.values():
        compile_once(f, args)


def compile_one(case: str, kind: str, contender: str) -> dict:
    """One cold compile (after `warm_up`) of `ROLLOUT_CASES[case]`'s `kind` ("rollout" or
    "gradient") for `contender`; prints `{stage: [wall, cpu]}` as one JSON line."""
    c = ROLLOUT_CASES[case]
    warm_up()
    fn = (c.rollouts if kind == "rollout" else c.gradients)()[contender]
    _, t = compile_once(fn, c.args())
    t = with_sums(t)
    print(json.dumps(t))
    return t


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and batch sizes")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    parser.add_argument("--only", nargs="*", default=None, help="case names or groups")
    parser.add_argument("--list", action="store_true", help="list the cases and groups")
    parser.add_argument(
        "--counts-only",
        action="store_true",
        help="only the jaxpr equation counts (= benchmarks/jaxpr_counts.py)",
    )
    parser.add_argument(
        "--fresh-process",
        action="store_true",
        help="time each compile of the rollout cases in a new Python process",
    )
    parser.add_argument("--compile-one", nargs=3, metavar=("CASE", "KIND", "CONTENDER"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument(
        "--note",
        default="machine shared with other jobs compiling JAX code; wall times are noisy",
        help="free-text note stored with the results",
    )
    args = parser.parse_args(argv)
    require_x64()
    if args.list:
        for name in ALL:
            case = ROLLOUT_CASES.get(name)
            print(f"{name:20s} {case.title if case else OTHER_CASES[name].__doc__.split(':')[0]}")
        for group, members in GROUPS.items():
            print(f"{group:20s} group: {' '.join(members)}")
        return {}
    if args.counts_only:
        from benchmarks import jaxpr_counts

        out = ["--out", os.path.join(args.out, "jaxpr_counts.json")]
        return jaxpr_counts.main(out + (["--only", *args.only] if args.only else []))
    cold_compile_settings()
    if args.compile_one:
        return compile_one(*args.compile_one)
    names = select(args.only)
    mode = "quick" if args.quick else "full"
    cfg = {**CONFIGS[mode], "fresh_process": args.fresh_process}
    start = time.perf_counter()
    res = {"mode": mode, "config": cfg, "note": args.note, "machine": machine_info()}
    res["cases"], res["section_wall_s"] = {}, {}
    warm_up()
    for name in names:
        print(f"{name} ...", flush=True)
        t0 = time.perf_counter()
        if name in ROLLOUT_CASES:
            res["cases"][name] = bench_rollout_case(ROLLOUT_CASES[name], cfg)
        else:
            res["cases"][name] = OTHER_CASES[name].bench(cfg)
        res["section_wall_s"][name] = time.perf_counter() - t0
    res["wall_s"] = time.perf_counter() - start
    res["machine"]["loadavg_at_end"] = loadavg()
    res["config"] = {**cfg, "batches": {str(k): v for k, v in cfg["batches"].items()}}
    write_json(os.path.join(args.out, "cpu.json"), res)
    md = markdown(res)
    with open(os.path.join(args.out, "cpu.md"), "w") as fh:
        fh.write(md)
    print(md)
    return res


if __name__ == "__main__":
    main()
