r"""What XLA's compile flags save on the test suite: one fixed subset of the tests, timed under
each setting, a fresh persistent compilation cache each run.

    python -m benchmarks.suite_flags [--out benchmarks/results]

The subset (`SUBSET`: the step projection, the vakonomic prescription and the MJCF importer,
55 tests) is run with `pytest -n 2`, with `CONSTRAX_TEST_FAST_COMPILE=0` (so that
`tests/conftest.py` adds nothing) and `XLA_FLAGS` set to each row of `SETTINGS`: XLA's
defaults, the LLVM IR emitters with LLVM's expensive passes off, and those with XLA's
optimisation level 0 as well (what `tests/conftest.py` uses). Wall time of the whole pytest
run, one run per setting. Writes `suite_flags_cpu.{json,md}`.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script

from benchmarks._report import loadavg, machine_info, md_table, write_results  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUBSET = ("tests/test_step_projection.py", "tests/test_vakonomic.py", "tests/rigid/test_mjcf.py")
EMITTERS = "--xla_cpu_use_fusion_emitters=false"
NO_EXPENSIVE = "--xla_llvm_disable_expensive_passes=true"
LEVEL0 = "--xla_backend_optimization_level=0"
SETTINGS = {
    "XLA's defaults": "",
    "LLVM IR emitters, no expensive LLVM passes": f"{EMITTERS} {NO_EXPENSIVE}",
    "and optimisation level 0 (tests/conftest.py)": f"{EMITTERS} {LEVEL0} {NO_EXPENSIVE}",
}


def run(flags: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(
            os.environ,
            XLA_FLAGS=flags,
            CONSTRAX_TEST_FAST_COMPILE="0",
            CONSTRAX_TEST_CACHE=cache,
            JAX_PLATFORMS="cpu",
        )
        cmd = [sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider", *SUBSET]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
    return dict(wall_s=wall, returncode=proc.returncode, summary=summary)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    machine = machine_info()
    rows = []
    for label, flags in SETTINGS.items():
        rows.append(dict(setting=label, xla_flags=flags, **run(flags)))
        print(json.dumps(rows[-1]), flush=True)
    machine["loadavg_at_end"] = loadavg()
    base = rows[0]["wall_s"]
    table = [
        [r["setting"], f"`{r['xla_flags']}`" if r["xla_flags"] else "—", f"{r['wall_s']:.0f}",
         f"{r['wall_s'] / base:.2f}", r["summary"]]
        for r in rows
    ]  # fmt: skip
    report = "\n".join(
        [
            "# The test suite's compile flags (CPU)",
            "",
            f"- date (UTC): {machine['date_utc']}; machine: {machine['cpu_model']}, "
            f"{machine['cpu_cores']} cores; load average at start {machine['loadavg_at_start']}"
            f", at end {machine['loadavg_at_end']}",
            f"- versions: python {machine['python']}, jax {machine['jax']}, "
            f"constrax {machine['constrax']}",
            f"- `pytest -n 2` on {', '.join(f'`{s}`' for s in SUBSET)}; a fresh persistent "
            "compilation cache each run; one run per setting (a shared machine: compare "
            "within this table)",
            "",
            *md_table(["setting", "XLA_FLAGS", "wall [s]", "/ defaults", "pytest"], table),
            "",
        ]
    )
    write_results(args.out, "suite_flags_cpu", dict(machine=machine, rows=rows), report)
    print(report)


if __name__ == "__main__":
    main()
