r"""Forward dynamics of an imported MJCF model: constrax vs MuJoCo's C engine vs MJX.

Usage: `python benchmarks/mjcf_humanoid.py [--quick] [--out benchmarks/results]`. Writes
`mjcf_cpu.json` (every measurement) and `mjcf_cpu.md` (tables) into `--out`.

One evaluation of the forward dynamics at a state: MuJoCo's `qacc` from
`(qpos, qvel, ctrl)`, contacts and limits disabled (`mjDSBL_CONTACT | mjDSBL_LIMIT`), in
float64.

- constrax: `cx.accelerations(imported.system, ...)` of `cx.rigid.from_mjcf(model)` with
  `cx.KKT()` (the only constraint rows are the free joint's quaternion norm), jitted; the
  state is constrax's `(q, qd)`, so the state map is not timed.
- MuJoCo C: `mujoco.mj_forward` (the whole smooth pipeline: kinematics, CRB mass matrix,
  its factorisation, bias forces, passive and actuator forces, `qacc`); batches are a
  Python loop over `mj_forward` (the C engine has no batched forward call), whose per-call
  Python overhead is part of the measurement.
- MJX (`mujoco.mjx`, when importable: `pip install -e ".[bench]"`): `jax.jit(mjx.forward)`,
  batches by `jax.vmap`.

Cases: the gymnasium humanoid (free joint + 17 hinges, nq = 24, nv = 23) single and
batched (`vmap` over B states for constrax and MJX, a loop for C), and hinge chains of
2 to 64 links generated as MJCF strings, one state at a time (cost against the number of
bodies). Compile times
of the jitted functions are reported separately. All contenders are timed in one process,
interleaved per case; minimum and median over repeats. The machine may be shared: compare
ratios from one run, not absolute times across runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import constrax as cx  # noqa: E402
from benchmarks._cases import random_mujoco_states  # noqa: E402
from benchmarks._report import md_table  # noqa: E402


def _timeit(fn, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return dict(min_s=min(times), median_s=statistics.median(times), repeats=repeats)


def _block(x):
    return jax.tree.map(lambda a: a.block_until_ready(), x)


def chain_xml(n: int) -> str:
    """A chain of `n` capsule links on hinges with alternating axes, hanging from the world."""
    body = ""
    for i in reversed(range(n)):
        axis = "0 1 0" if i % 2 == 0 else "1 0 0"
        pos = "0 0 0" if i == 0 else "0 0 -0.2"
        body = (
            f'<body name="l{i}" pos="{pos}"><joint name="j{i}" type="hinge" axis="{axis}" '
            f'damping="0.1"/><geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02"/>'
            f"{body}</body>"
        )
    return f"<mujoco><worldbody>{body}</worldbody></mujoco>"


def _model(mujoco, source: str, is_path: bool):
    m = mujoco.MjModel.from_xml_path(source) if is_path else mujoco.MjModel.from_xml_string(source)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(
        mujoco.mjtDisableBit.mjDSBL_LIMIT
    )
    m.opt.solver = int(mujoco.mjtSolver.mjSOL_NEWTON)  # MJX has no PGS; no constraints anyway
    return m


def _states(m, imported, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    qpos, qvel = random_mujoco_states(m, imported, rng, batch)
    ctrl = rng.uniform(-1, 1, size=(batch, m.nu))
    return qpos, qvel, ctrl


def bench_model(mujoco, mjx, m, batches, repeats: int) -> dict:
    imported = cx.rigid.from_mjcf(m)
    solver = cx.KKT()

    def acc(q, qd, ctrl):
        p = dict(imported.params, ctrl=ctrl)
        return cx.accelerations(imported.system, 0.0, q, qd, p, constraint_solver=solver).qdd

    out = dict(nq=int(m.nq), nv=int(m.nv), nbody=int(m.nbody), cases=[])
    single = jax.jit(acc)
    batched = jax.jit(jax.vmap(acc))
    data = mujoco.MjData(m)
    if mjx is not None:
        mx = mjx.put_model(m)
        dx0 = mjx.make_data(mx)

        def mjx_forward(qpos, qvel, ctrl):
            return mjx.forward(mx, dx0.replace(qpos=qpos, qvel=qvel, ctrl=ctrl)).qacc

        mjx_single = jax.jit(mjx_forward)
        mjx_batched = jax.jit(jax.vmap(mjx_forward))

    def run_case(B):
        qpos, qvel, ctrl = _states(m, imported, B)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        q, qd, u = jnp.asarray(q), jnp.asarray(qd), jnp.asarray(ctrl)
        row = dict(batch=B)
        if B == 1:
            f = lambda: _block(single(q[0], qd[0], u[0]))
        else:
            f = lambda: _block(batched(q, qd, u))
        start = time.perf_counter()
        f()
        row["constrax_compile_s"] = time.perf_counter() - start
        if mjx is not None:
            jq, jv = jnp.asarray(qpos), jnp.asarray(qvel)
            if B == 1:
                g = lambda: _block(mjx_single(jq[0], jv[0], u[0]))
            else:
                g = lambda: _block(mjx_batched(jq, jv, u))
            start = time.perf_counter()
            g()
            row["mjx_compile_s"] = time.perf_counter() - start

        def c_loop():
            for k in range(B):
                data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[k], qvel[k], ctrl[k]
                mujoco.mj_forward(m, data)

        reps = repeats if B <= 1024 else max(3, repeats // 3)
        # Interleave the contenders: one repeat of each in turn.
        timings = {"constrax": [], "mujoco_c": [], "mjx": []}
        for _ in range(reps):
            timings["constrax"].append(_timeit(f, 1)["min_s"])
            timings["mujoco_c"].append(_timeit(c_loop, 1)["min_s"])
            if mjx is not None:
                timings["mjx"].append(_timeit(g, 1)["min_s"])
        for name, ts in timings.items():
            if ts:
                row[f"{name}_min_s"] = min(ts)
                row[f"{name}_median_s"] = statistics.median(ts)
                row[f"{name}_per_state_us"] = 1e6 * min(ts) / B
        row["constrax_over_c"] = row["constrax_min_s"] / row["mujoco_c_min_s"]
        if mjx is not None:
            row["constrax_over_mjx"] = row["constrax_min_s"] / row["mjx_min_s"]
        # Same numbers? (sanity: first state of the batch)
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[0], qvel[0], ctrl[0]
        mujoco.mj_forward(m, data)
        qacc = imported.mujoco_acceleration(q[0], qd[0], single(q[0], qd[0], u[0]))
        row["max_rel_err_qacc_vs_c"] = float(
            np.max(np.abs(np.asarray(qacc) - data.qacc)) / np.max(np.abs(data.qacc))
        )
        print(json.dumps(row), flush=True)
        return row

    out["cases"] = [run_case(B) for B in batches]
    return out


def _versions(mjx) -> dict:
    import mujoco

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except Exception:  # noqa: BLE001
        commit = "unknown"
    v = dict(
        constrax=cx.__version__,
        constrax_commit=commit,
        jax=jax.__version__,
        mujoco=mujoco.__version__,
        python=platform.python_version(),
    )
    if mjx is not None:
        from importlib.metadata import version

        v["mujoco_mjx"] = version("mujoco-mjx")
    return v


# MJX's first call on a 32-link hinge chain had not returned after 11 minutes (the run of
# 2026-11-25, stopped), so MJX is timed on chains up to this many links.
MJX_MAX_LINKS = 16


def main(out_dir: str, quick: bool) -> dict:
    import gymnasium
    import mujoco

    try:
        from mujoco import mjx
    except Exception:  # noqa: BLE001
        mjx = None
    repeats = 5 if quick else 15
    batches = (1, 64, 1024) if quick else (1, 64, 1024, 8192)
    chains = (2, 4, 8) if quick else (2, 4, 8, 16, 32, 64)
    path = os.path.join(
        os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "humanoid.xml"
    )
    result = dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        machine=dict(
            platform=platform.platform(),
            processor=platform.processor() or platform.machine(),
            cpu_count=os.cpu_count(),
            jax_devices=[str(d) for d in jax.devices()],
        ),
        versions=_versions(mjx),
        quick=quick,
        note="one run on a machine shared with other jobs: compare ratios within this run",
    )
    os.makedirs(out_dir, exist_ok=True)

    def write():  # after every case, so that an interrupted run keeps what it measured
        with open(os.path.join(out_dir, "mjcf_cpu.json"), "w") as f:
            json.dump(result, f, indent=2)
        with open(os.path.join(out_dir, "mjcf_cpu.md"), "w") as f:
            f.write(_markdown(result))

    print("humanoid", flush=True)
    result["humanoid"] = bench_model(mujoco, mjx, _model(mujoco, path, True), batches, repeats)
    result["chains"] = []
    write()
    for n in chains:
        print(f"chain {n}", flush=True)
        peer = mjx if n <= MJX_MAX_LINKS else None
        r = bench_model(mujoco, peer, _model(mujoco, chain_xml(n), False), (1,), repeats)
        r["links"] = n
        result["chains"].append(r)
        write()
    return result


def _markdown(r: dict) -> str:
    has_mjx = "mujoco_mjx" in r["versions"]
    lines = [
        "# Forward dynamics of an imported MJCF model (CPU)",
        "",
        f"{r['date']}; {r['machine']['platform']}, {r['machine']['cpu_count']} CPUs; "
        + ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        + ("" if has_mjx else "; MJX not installed")
        + ".",
        "",
        f"{r['note']}. Times are the minimum over repeats, float64, contacts and limits "
        "disabled; `benchmarks/mjcf_humanoid.py` describes what each contender runs.",
        "",
        f"## gymnasium humanoid (nq = {r['humanoid']['nq']}, nv = {r['humanoid']['nv']})",
        "",
    ]
    fmt = lambda x: "–" if x is None else (f"{x:.3g}")
    header = (
        "batch | constrax [µs/state] | MuJoCo C loop [µs/state] | MJX [µs/state] | "
        "constrax / C | constrax / MJX | compile constrax [s] | compile MJX [s]"
    ).split(" | ")
    rows = [
        [c["batch"], fmt(c["constrax_per_state_us"]), fmt(c["mujoco_c_per_state_us"]),
         fmt(c.get("mjx_per_state_us")), fmt(c["constrax_over_c"]),
         fmt(c.get("constrax_over_mjx")), fmt(c["constrax_compile_s"]),
         fmt(c.get("mjx_compile_s"))]
        for c in r["humanoid"]["cases"]
    ]  # fmt: skip
    lines += md_table(header, rows)
    lines += [
        "",
        "## Hinge chains (cost against the number of bodies)",
        "",
        f"MJX on chains of at most {MJX_MAX_LINKS} links: its first call on a 32-link chain had "
        "not returned after 11 minutes (2026-11-25, stopped).",
        "",
    ]
    header = (
        "links | batch | constrax [µs/state] | MuJoCo C [µs/state] | MJX [µs/state] | "
        "constrax / C | constrax / MJX | compile constrax [s] | compile MJX [s]"
    ).split(" | ")
    rows = [
        [ch["links"], c["batch"], fmt(c["constrax_per_state_us"]),
         fmt(c["mujoco_c_per_state_us"]), fmt(c.get("mjx_per_state_us")),
         fmt(c["constrax_over_c"]), fmt(c.get("constrax_over_mjx")),
         fmt(c["constrax_compile_s"]), fmt(c.get("mjx_compile_s"))]
        for ch in r["chains"]
        for c in ch["cases"]
    ]  # fmt: skip
    lines += md_table(header, rows)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--markdown-only", action="store_true", help="rewrite mjcf_cpu.md from mjcf_cpu.json"
    )
    args = parser.parse_args()
    if args.markdown_only:
        with open(os.path.join(args.out, "mjcf_cpu.json")) as f:
            result = json.load(f)
        with open(os.path.join(args.out, "mjcf_cpu.md"), "w") as f:
            f.write(_markdown(result))
    else:
        main(args.out, args.quick)
