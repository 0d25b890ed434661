r"""Unconstrained forward dynamics of imported MJCF trees: the tree path (composite rigid
body + recursive Newton–Euler, `constrax.rigid._tree._tree_dynamics`) vs the Lagrangian path
(autodiff of the imported Lagrangian, the engine's `euler_lagrange_terms`).

Usage: `python benchmarks/tree_dynamics.py [--quick] [--out benchmarks/results]`. Writes
`tree_dynamics_cpu.json` (every measurement) and `tree_dynamics_cpu.md` into `--out`.

The function timed, for both paths, is `jax.jit(jax.vmap(qdd))` with
`qdd(q, qd, p) = solve_with_norm_rows(W, f0 + Q, q, qd, quaternions)`: the same force
`Q` (the importer's damping and actuators), the same dense solve with the quaternions'
unit-norm rows (none in the chains); only `(W, f0)` differ: `TreeDynamics
.euler_lagrange_terms` or autodiff of `imported.system.lagrangian`. MuJoCo's C engine
(`mj_forward` in a Python loop, contacts and limits disabled) is given for scale.

Every (model, path, batch) is measured in a new Python process (cold caches, persistent
compilation cache off): trace + lower and XLA compile of the jitted function, then the
minimum over repeats of the time per call divided by the batch. A Lagrangian-path process
that has not finished within `--limit` seconds (default 150 s: compile plus timing) is
stopped and reported as such; larger chains are then not tried. MJX is reported when
`mujoco.mjx` imports.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHAINS = (4, 8, 16, 32, 64)
BATCHES = (1, 1024)


def _model(case: str):
    import mujoco

    from benchmarks.mjcf_humanoid import chain_xml

    D = mujoco.mjtDisableBit
    if case == "humanoid":
        import gymnasium

        path = os.path.join(
            os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "humanoid.xml"
        )
        m = mujoco.MjModel.from_xml_path(path)
    else:
        m = mujoco.MjModel.from_xml_string(chain_xml(int(case.removeprefix("chain"))))
    m.opt.disableflags |= int(D.mjDSBL_CONTACT) | int(D.mjDSBL_LIMIT)
    return m


def _states(imported, m, batch: int, seed: int = 0):
    import jax.numpy as jnp
    import numpy as np

    from benchmarks._cases import random_mujoco_states

    qpos, qvel = random_mujoco_states(m, imported, np.random.default_rng(seed), batch)
    q, qd = imported.from_mujoco_state(jnp.asarray(qpos), jnp.asarray(qvel))
    return q, qd, qpos, qvel


def measure_one(case: str, path: str, batch: int, repeats: int) -> dict:
    """One measurement in this process: compile stages and time per state."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    import jax.numpy as jnp
    import numpy as np

    import constrax as cx
    from constrax.rigid._tree._tree_dynamics import TreeDynamics, solve_with_norm_rows

    try:  # the autodiff terms are moving out of _system.py
        from constrax._terms import euler_lagrange_terms
    except ImportError:
        from constrax._system import euler_lagrange_terms

    m = _model(case)
    imported = cx.rigid.from_mjcf(m)
    q, qd, qpos, qvel = _states(imported, m, batch)
    p = imported.params
    starts = [s for s, _ in imported.tree.quaternion_slices()]

    if path == "mujoco":
        import mujoco

        data = mujoco.MjData(m)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for k in range(batch):
                data.qpos[:], data.qvel[:] = qpos[k], qvel[k]
                mujoco.mj_forward(m, data)
            times.append(time.perf_counter() - t0)
        return dict(per_state_s=min(times) / batch)

    if path == "tree":
        dyn = TreeDynamics(imported.tree)
        terms = lambda q, qd, p: dyn.euler_lagrange_terms(0.0, q, qd, p)
    else:
        terms = lambda q, qd, p: euler_lagrange_terms(
            lambda t, q_, qd_: imported.system.lagrangian(t, q_, qd_, p),
            jnp.zeros((), q.dtype),
            q,
            qd,
        )

    def qdd(q, qd, p):
        W, f = terms(q, qd, p)
        return solve_with_norm_rows(W, f + imported.system.force(0.0, q, qd, p), q, qd, starts)

    fn = jax.vmap(qdd, (0, 0, None))
    t0 = time.perf_counter()
    lowered = jax.jit(fn).trace(q, qd, p).lower()
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    out = jax.block_until_ready(compiled(q, qd, p))
    times = []
    for _ in range(repeats):
        s = time.perf_counter()
        jax.block_until_ready(compiled(q, qd, p))
        times.append(time.perf_counter() - s)
    # MuJoCo's qacc at the first state, as a check of what was timed.
    import mujoco

    data = mujoco.MjData(m)
    data.qpos[:], data.qvel[:] = qpos[0], qvel[0]
    mujoco.mj_forward(m, data)
    qacc = np.asarray(imported.mujoco_acceleration(q[0], qd[0], out[0]))
    err = float(np.max(np.abs(qacc - data.qacc)) / np.max(np.abs(data.qacc)))
    return dict(
        trace_lower_s=t1 - t0,
        xla_s=t2 - t1,
        compile_s=t2 - t0,
        per_state_s=min(times) / batch,
        qacc_rel_err_vs_mujoco=err,
    )


def _run_fresh(case, path, batch, repeats, limit):
    cmd = [sys.executable, os.path.abspath(__file__), "--one", case, path, str(batch)]
    cmd += ["--repeats", str(repeats)]
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env)
    except subprocess.TimeoutExpired:
        return dict(stopped_after_s=limit)
    if proc.returncode != 0:
        return dict(error=proc.stderr.strip().splitlines()[-1:])
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["process_wall_s"] = time.perf_counter() - t0
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--limit", type=float, default=150.0)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--one", nargs=3, metavar=("CASE", "PATH", "BATCH"))
    args = ap.parse_args(argv)
    if args.one:
        case, path, batch = args.one
        print(json.dumps(measure_one(case, path, int(batch), args.repeats)))
        return

    import mujoco

    from benchmarks._report import machine_info, write_json

    chains = (4, 8) if args.quick else CHAINS
    cases = [f"chain{n}" for n in chains] + ["humanoid"]
    info = machine_info()
    info["mujoco"] = mujoco.__version__
    try:
        from mujoco import mjx  # noqa: F401

        info["mjx"] = "available but not measured here"
    except ImportError:
        info["mjx"] = "not installed (mujoco.mjx does not import): no MJX rows"
    info["constrax_commit"] = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    results = []
    lagrangian_stopped = set()
    for case in cases:
        for batch in BATCHES:
            for path in ("tree", "lagrangian", "mujoco"):
                if (
                    path == "lagrangian"
                    and case.startswith("chain")
                    and batch in lagrangian_stopped
                ):
                    res = dict(skipped="a smaller chain already exceeded the limit")
                else:
                    res = _run_fresh(case, path, batch, args.repeats, args.limit)
                    stopped = path == "lagrangian" and "stopped_after_s" in res
                    if stopped and case.startswith("chain"):
                        lagrangian_stopped.add(batch)
                row = dict(case=case, path=path, batch=batch, **res)
                print(json.dumps(row), flush=True)
                results.append(row)
    info["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "tree_dynamics_cpu.json"), dict(machine=info, rows=results))
    with open(os.path.join(args.out, "tree_dynamics_cpu.md"), "w") as fh:
        fh.write(_markdown(info, results))


def _fmt(x, scale=1.0, digits=3):
    return "—" if x is None else f"{x * scale:.{digits}g}"


def _markdown(info, rows) -> str:
    from benchmarks._report import md_table

    get = {(r["case"], r["path"], r["batch"]): r for r in rows}
    lines = [
        "# Tree path vs Lagrangian path: unconstrained forward dynamics (CPU)",
        "",
        f"{info['date_utc']}; {info['cpu_model']}, {info['cpu_cores']} CPUs, "
        f"{info['platform']}; python {info['python']}, jax {info['jax']}, jaxlib "
        f"{info['jaxlib']}, mujoco {info['mujoco']}, constrax {info['constrax']} "
        f"(commit {info['constrax_commit']}). MJX: {info['mjx']}.",
        "",
        "One run on a machine shared with other jobs (load average "
        f"{info['loadavg_at_start']} at the start, {info['loadavg_at_end']} at the end): "
        "compare ratios within this run. `benchmarks/tree_dynamics.py` says what is timed: "
        "`jit(vmap(qdd))`, float64, each measurement in a fresh process (cold compile). "
        "Compile = trace + lower, then XLA; run time = min over repeats / batch.",
        "",
    ]
    header = [
        "model",
        "batch",
        "tree [µs/state]",
        "Lagrangian [µs/state]",
        "MuJoCo C loop [µs/state]",
        "Lagrangian / tree",
        "tree compile: trace+lower / XLA [s]",
        "Lagrangian compile: trace+lower / XLA [s]",
    ]
    table = []
    notes = []
    for case in dict.fromkeys(r["case"] for r in rows):
        for batch in BATCHES:
            t, lg, c = (get.get((case, p, batch), {}) for p in ("tree", "lagrangian", "mujoco"))
            if "per_state_s" in lg:
                lag_run = _fmt(lg["per_state_s"], 1e6)
                ratio = _fmt(lg["per_state_s"] / t["per_state_s"])
                lag_c = f"{lg['trace_lower_s']:.2f} / {lg['xla_s']:.1f}"
            else:
                why = (
                    f"stopped after {lg['stopped_after_s']:.0f} s"
                    if "stopped_after_s" in lg
                    else lg.get("skipped", lg.get("error", "—"))
                )
                lag_run, ratio, lag_c = "—", "—", str(why)
            table.append(
                [
                    case,
                    batch,
                    _fmt(t.get("per_state_s"), 1e6),
                    lag_run,
                    _fmt(c.get("per_state_s"), 1e6),
                    ratio,
                    f"{t['trace_lower_s']:.2f} / {t['xla_s']:.2f}" if "xla_s" in t else "—",
                    lag_c,
                ]
            )
            for r in (t, lg):
                if "qacc_rel_err_vs_mujoco" in r:
                    notes.append(r["qacc_rel_err_vs_mujoco"])
    lines += md_table(header, table)
    if notes:
        lines += [
            "",
            f"Every timed function's qacc at the first state agrees with MuJoCo's to "
            f"{max(notes):.1e} (relative to max |qacc|).",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
