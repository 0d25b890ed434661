r"""`python -m constrax.showcase [--out DIR] [--quick]`: constrax on its built-in models.

Runs, in order, on the models of `constrax.models` and bodies built with `cx.rigid`:

1. d'Alembert vs vakonomic: the same nonholonomic system under both prescriptions:
   different motions, zero vs non-zero virtual work of the reactions on admissible
   displacements, both conserving the energy here.
2. the snake cart (J. Briggs, *Degeneracy of velocity constraints in rigid body
   systems*, 2016, §1.2) driven through its singular configurations
   $\phi = \pm\pi/2$, where the constraint distribution drops rank;
3. a ball rolling on a turntable: its closed (circular) orbit;
4. a pushed ball that skids, rolls, then slides as Coulomb friction decides
   (`cx.rigid.simulate_contacts`), its switching times against their closed forms;
5. a parameter identification by gradient through whole trajectories;
6. a trajectory optimisation of the controls of a nonholonomic vehicle by direct
   collocation and IPOPT (a lane change of the dynamic car), with and without a
   forward-speed floor and a steering-angle bound, each solution's status reported and
   its controls replayed through `cx.simulate`;
7. a batched Monte-Carlo rollout (thousands of snake carts with random steering),
   sharded over every visible device, with its throughput.

Each section writes its PNG figure(s) into the output folder; `summary.md` and
`summary.json` collect the measured figures. The folder is named at the end.
Full mode takes about 4 minutes on 2 CPU cores; `--quick` is a smaller version of
every section (used by the tests), nearly all of it compile time: it compiles with XLA's
fast settings (`QUICK_XLA_FLAGS`, unless `XLA_FLAGS` sets an optimisation level), which
cut XLA's compile of the largest program (rolling or sliding) by a third and change the
results only by rounding (the throughputs a quick run measures are those of less optimised
programs). `QUICK_WALL_S` says what it measured.
"""

import argparse
import importlib
import json
import os
import sys
import time
import traceback

# (key, module in constrax._showcase, title)
SECTIONS = (
    ("dalembert_vs_vakonomic", "dalembert_vakonomic", "d'Alembert vs vakonomic"),
    ("snake_cart", "snake_cart", "Snake cart through its singular configurations"),
    ("turntable", "turntable", "Ball on a turntable"),
    ("friction_modes", "friction", "Rolling or sliding"),
    ("parameter_identification", "identification", "Parameter identification"),
    ("trajectory_optimisation", "trajopt", "Trajectory optimisation"),
    ("batched_rollouts", "batched", "Batched Monte-Carlo rollouts"),
)

DEFAULT_OUT = "constrax-showcase"

# XLA's fast compile for `--quick` (as the docs build's tutorials and the tests use).
QUICK_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
# `--quick` on 2 CPU cores (AMD EPYC, jax 0.10.2, 2026-11-28), the machine shared with other
# jobs (load average 3-4): 130 s wall, 91 s CPU time; the code before the fast compile and
# the rolling-or-sliding section's quick mode, right after in the same conditions: 139 s
# wall, 129 s CPU (118 s wall on an idle machine). On idle cores, about its CPU time.
QUICK_WALL_S = "130 s measured on 2 shared CPU cores; about 90 s on idle ones"


def use_quick_xla_flags() -> bool:
    """Add `QUICK_XLA_FLAGS` to `XLA_FLAGS` unless it sets an optimisation level; True if
    added. Effective only before JAX starts its backend (the first array made)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {QUICK_XLA_FLAGS}".strip()
    return True


def _fmt(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} = {_fmt(x)}" for k, x in v.items())
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | tuple):
        if len(v) > 8:
            return f"[{len(v)} values]"
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def write_summary(outdir: str, results: dict, meta: dict) -> None:
    """Write `summary.json` and `summary.md` for the sections' `results`."""
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump({"meta": meta, **results}, f, indent=2, default=str)
    lines = [
        "# constrax showcase",
        "",
        f"constrax {meta['constrax_version']}, JAX {meta['jax_version']} on "
        f"{meta['devices']} × {meta['platform']}; mode: {meta['mode']}; "
        f"total wall time {meta['wall_s']:.1f} s.",
        "",
    ]
    titles = {key: title for key, _, title in SECTIONS}
    for key, res in results.items():
        lines += [f"## {titles.get(key, key)}", ""]
        if res.get("status") != "ok":
            lines += [f"**failed:** `{res.get('error', '?')}`", ""]
            continue
        figures = [v for k, v in res.items() if k.startswith("figure")]
        lines += ["| quantity | value |", "|---|---|"]
        for k, v in res.items():
            if k == "status" or k.startswith("figure"):
                continue
            lines.append(f"| `{k}` | {_fmt(v)} |")
        lines.append("")
        for fig in figures:
            for name in fig if isinstance(fig, list | tuple) else [fig]:
                lines += [f"![{key}]({name})", ""]
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("\n".join(lines))


def run_showcase(outdir: str = DEFAULT_OUT, quick: bool = False, sections=None) -> dict:
    """Run the showcase sections (all by default) into `outdir`; return the summary dict.

    **Arguments:** `outdir` the output folder (created); `quick` the reduced mode;
    `sections` an optional list of section keys (see `SECTIONS`).

    **Returns:** `{"meta": ..., <section>: {"status": "ok", <figures>...}, ...}`.
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    import constrax

    keys = [k for k, _, _ in SECTIONS]
    if sections is not None:
        unknown = [s for s in sections if s not in keys]
        if unknown:
            raise ValueError(f"unknown showcase section {unknown[0]!r}; valid: {', '.join(keys)}")
    chosen = [s for s in SECTIONS if sections is None or s[0] in sections]
    os.makedirs(outdir, exist_ok=True)
    results = {}
    t0 = time.perf_counter()
    # No progress bar over the sections: each prints its own start and end lines, which a
    # bar would interleave with (and leave fragments of in a log).
    for key, module, title in chosen:
        print(f"[showcase] {title} ...", flush=True)
        ts, cs = time.perf_counter(), time.process_time()
        try:
            mod = importlib.import_module(f"constrax._showcase.{module}")
            res = mod.run(outdir, quick=quick)
            results[key] = {
                "status": "ok",
                **res,
                "section_wall_s": time.perf_counter() - ts,
                "section_cpu_s": time.process_time() - cs,
            }
        except Exception as e:  # noqa: BLE001 - a failed section is reported, the rest still run
            traceback.print_exc()
            results[key] = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:500]}
        print(
            f"[showcase] {title}: {results[key]['status']} ({time.perf_counter() - ts:.1f} s)",
            flush=True,
        )
    meta = {
        "constrax_version": constrax.__version__,
        "jax_version": jax.__version__,
        "platform": jax.devices()[0].platform,
        "devices": jax.device_count(),
        "mode": "quick" if quick else "full",
        "wall_s": time.perf_counter() - t0,
    }
    write_summary(outdir, results, meta)
    return {"meta": meta, **results}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="constrax-showcase",
        description="Run constrax on its built-in models; write figures and summary.md/json.",
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"reduced sizes and XLA's fast compile ({QUICK_WALL_S})",
    )
    parser.add_argument(
        "--sections",
        nargs="+",
        default=None,
        metavar="KEY",
        help="run only these sections: " + ", ".join(k for k, _, _ in SECTIONS),
    )
    args = parser.parse_args(argv)
    if args.quick:
        use_quick_xla_flags()
    try:
        summary = run_showcase(args.out, quick=args.quick, sections=args.sections)
    except ValueError as e:
        parser.error(str(e))
    failed = [k for k, v in summary.items() if k != "meta" and v.get("status") != "ok"]
    out = os.path.abspath(args.out)
    print(
        f"\nconstrax showcase: {len(summary) - 1 - len(failed)} section(s) ok"
        + (f", failed: {', '.join(failed)}" if failed else "")
        + f"; total {summary['meta']['wall_s']:.1f} s"
    )
    print(f"Figures, summary.md and summary.json are in: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
