r"""First calls on an imported wheeled robot: what a new user waits for.

The differential-drive robot of `experiments/mjcf_wheeled_robot.py` (a chassis on a free
joint, two hinged wheels, a caster ball: 4 bodies), imported with `cx.rigid.from_mjcf`, with
exact rolling of both wheels (`cx.rigid.rolling_contact`) and the caster on the floor
(`cx.rigid.plane_contact`). Timed, each in a new Python process (cold: no compiled program,
persistent compilation cache off), the wall time of one call as a user makes it, eagerly:

- `consistent_initial_state`: `cx.consistent_initial_state` from a perturbed velocity;
- `accelerations`: `cx.accelerations` (`UdwadiaKalaba`: the lateral no-slip rows of the two
  wheels are redundant);
- `jacfwd`: `jax.jacfwd` of the accelerations with respect to the velocity.

Two paths: the engine's (`from_mjcf` systems carry the composite-rigid-body / recursive
Newton–Euler terms of their tree, `System.dynamics`) and the Lagrangian path (the same
system with `dynamics=None`: autodiff of the imported Lagrangian); and the engine's path
again with `XLA_FLAGS=--xla_cpu_use_fusion_emitters=false` (XLA's CPU compiler on its LLVM
IR emitters, which compile long chains of small operations faster than its default fusion
emitters). The issue's target: each first call ≤ 5 s on an idle 2-core machine.

Usage: `python benchmarks/first_calls.py [--repeats 3] [--out benchmarks/results]`; writes
`first_calls_cpu.{json,md}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CALLS = ("consistent_initial_state", "accelerations", "jacfwd")
# (label, path, LLVM IR emitters for every program): the engine's path, the Lagrangian path,
# and the engine's path with XLA's CPU compiler on its LLVM IR emitters instead of its
# default fusion emitters for every program of the process (`benchmarks._report.
# LLVM_IR_EMITTERS` in `XLA_FLAGS`; constrax's own eager calls compile that way already).
CONFIGS = (
    ("tree (default)", "tree", False),
    ("Lagrangian", "Lagrangian", False),
    ("tree, XLA_FLAGS=--xla_cpu_use_fusion_emitters=false", "tree", True),
)
PATHS = tuple(label for label, _, _ in CONFIGS)
EXPERIMENTS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "experiments"
)


def _calls(path: str):
    """The robot's three first calls on `path` (`"tree"` or `"Lagrangian"`), as functions of
    no argument, and the seconds spent importing and building the robot."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import constrax as cx

    sys.path.insert(0, EXPERIMENTS)
    from mjcf_wheeled_robot import TORQUES, constrax_robot

    t = time.perf_counter()
    robot = constrax_robot()
    system = robot.system
    if path == "Lagrangian":
        system = eqx.tree_at(lambda s: s.dynamics, system, None, is_leaf=lambda x: x is None)
    q0, qd0 = robot.initial_state()
    p = dict(robot.params, ctrl=jnp.asarray(TORQUES))
    build = time.perf_counter() - t
    solver = cx.UdwadiaKalaba()
    qd = qd0.at[0].add(0.1)

    def acc(v):
        return cx.accelerations(system, 0.0, q0, v, p, constraint_solver=solver).qdd

    calls = {
        "consistent_initial_state": lambda: cx.consistent_initial_state(system, 0.0, q0, qd, p),
        "accelerations": lambda: acc(qd),
        "jacfwd": lambda: jax.jacfwd(acc)(qd),
    }
    return calls, build


def measure_one(call: str, path: str) -> dict:
    """One first call in this (fresh) process."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from benchmarks._timing import cold_compile_settings

    cold_compile_settings()
    calls, build = _calls(path)
    t = time.perf_counter()
    jax.block_until_ready(calls[call]())
    first = time.perf_counter() - t
    return dict(call=call, path=path, first_call_s=first, import_and_build_s=build)


def equation_counts() -> dict:
    """`{path: {call: equations}}`: the jaxpr equations each call traces
    (`_jaxpr.count_equations`; deterministic, unlike the times)."""
    import jax

    from benchmarks._jaxpr import count_equations

    out = {}
    for path in ("tree", "Lagrangian"):
        calls, _ = _calls(path)
        out[path] = {c: count_equations(jax.make_jaxpr(calls[c])()) for c in CALLS}
    return out


def _run_fresh(call: str, label: str, limit: float) -> dict:
    _, path, llvm_ir = next(c for c in CONFIGS if c[0] == label)
    cmd = [sys.executable, os.path.abspath(__file__), "--one", call, path]
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    if llvm_ir:
        from benchmarks._report import LLVM_IR_EMITTERS

        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {LLVM_IR_EMITTERS}".strip()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env)
    except subprocess.TimeoutExpired:
        return dict(call=call, path=label, stopped_after_s=limit)
    if proc.returncode != 0:
        return dict(call=call, path=label, error=proc.stderr.strip().splitlines()[-1:])
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), path=label)


def _markdown(info: dict, rows: list[dict]) -> str:
    from benchmarks._report import md_table

    lines = [
        "# First calls on an imported wheeled robot (CPU)",
        "",
        f"- date (UTC): {info['date_utc']}; machine: {info['cpu_model']}, {info['cpu_cores']} "
        f"cores ({info['platform']}); load average (1, 5, 15 min) at start "
        f"{info['loadavg_at_start']}, at end {info['loadavg_at_end']}",
        f"- versions: python {info['python']}, jax {info['jax']}, diffrax {info['diffrax']}, "
        f"equinox {info['equinox']}, constrax {info['constrax']}",
        "- each call in a new process (cold; persistent compilation cache off); wall time of "
        f"the first call, minimum (median) over {info['repeats']} processes; the equations of "
        "the jaxpr each call traces (`_jaxpr.count_equations`, deterministic)",
        "",
    ]
    table = []
    counts = info.get("jaxpr_equations", {})
    for call in CALLS:
        cells = [f"`{call}`"]
        for path in PATHS:
            r = next(r for r in rows if r["call"] == call and r["path"] == path)
            if "samples_s" in r:
                cells.append(f"{min(r['samples_s']):.1f} ({statistics.median(r['samples_s']):.1f})")
            else:
                cells.append(r.get("note", "—"))
        cells.append(
            " / ".join(str(counts.get(p, {}).get(call, "—")) for p in ("tree", "Lagrangian"))
        )
        table.append(cells)
    header = ["first call", *(f"{p} [s]" for p in PATHS), "jaxpr equations, tree / Lagrangian"]
    lines += md_table(header, table)
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=float, default=300.0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--one", nargs=2, metavar=("CALL", "PATH"))
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(*args.one)))
        return
    import jax

    jax.config.update("jax_enable_x64", True)
    from benchmarks._report import loadavg, machine_info, write_json

    info = machine_info()
    info["repeats"] = args.repeats
    info["jaxpr_equations"] = equation_counts()
    rows = []
    for call in CALLS:
        for path in PATHS:
            runs = [_run_fresh(call, path, args.limit) for _ in range(args.repeats)]
            ok = [r for r in runs if "first_call_s" in r]
            row = dict(call=call, path=path, runs=runs)
            if ok:
                row["samples_s"] = [r["first_call_s"] for r in ok]
            else:
                row["note"] = "; ".join(
                    f"stopped after {r['stopped_after_s']:.0f} s"
                    if "stopped_after_s" in r
                    else f"error: {r.get('error')}"
                    for r in runs[:1]
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
    info["loadavg_at_end"] = loadavg()
    write_json(os.path.join(args.out, "first_calls_cpu.json"), dict(info=info, rows=rows))
    with open(os.path.join(args.out, "first_calls_cpu.md"), "w") as fh:
        fh.write(_markdown(info, rows))


if __name__ == "__main__":
    main()
