r"""float32 accelerations of imported robots against MuJoCo's float64 ones: constrax and MJX,
at the robots' own positions and carried far from the world origin.

    python -m benchmarks.float32_accuracy [--quick] [--out benchmarks/results]

Writes `float32_accuracy_cpu.{json,md}`. For each model (gymnasium's humanoid and ant: a free
root and hinges; contacts and joint limits disabled, as in `benchmarks/mjcf_humanoid.py`) and
each offset $d$ of the root along the world's $x$ axis (0, 10 and 100 m): `B` random states
(`qpos0` plus noise, unit quaternions drawn uniformly, `qvel` standard normal, `ctrl` uniform
in [-1, 1]), the root moved by $d$; the reference is MuJoCo's `qacc` from `mj_forward` in
float64 (without contacts, the motion does not depend on where the robot is). The error of
a state is $\max_i|\ddot q_i - \ddot q^\text{ref}_i| / \max_i|\ddot q^\text{ref}_i|$ in
MuJoCo's velocity coordinates; the table gives its median and worst over the states.

- constrax: `cx.accelerations(imported.system, ...)` with the default solver, the state and
  the parameters in float32 (x64 off), `jax.vmap` over the states; its accelerations are
  mapped to `qacc` in float64 (`imported.mujoco_acceleration`). Also in float64, as a check.
- MJX (when importable: `pip install -e ".[bench]"`): `jax.vmap(mjx.forward)` of a float32
  `mjx.put_model` (x64 off), `qacc`.

And for every model of `cx.models`: float32 `cx.accelerations` (the model built and run
with x64 off) against float64 ones, at 16 states of its float64 trajectory over
$t\in[0, 1]$ (`cx.simulate`'s defaults), relative to the largest $|\ddot q|$ of each
state, beside the median condition number of the saddle matrix $[W, A^\top; A, 0]$ there
(the error a float32 solve can have is about $\epsilon$ times it,
$\epsilon = 1.2\times10^{-7}$).

No timing: accuracy only. float32 states hold a position of 100 m to $8\times10^{-6}$ m, for
both contenders alike.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script

import diffrax  # noqa: E402
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import constrax as cx  # noqa: E402
from benchmarks._cases import random_mujoco_states  # noqa: E402
from benchmarks._report import machine_info, md_table, write_results  # noqa: E402

MODELS = ("humanoid", "ant")
OFFSETS = (0.0, 10.0, 100.0)
# The models of `cx.models` (those `tests/test_float32.py` runs).
ZOO = (
    "snake_cart", "vertical_rolling_disk", "tilted_rolling_disk", "chaplygin_sleigh",
    "knife_edge", "kinematic_car", "ball_on_turntable", "disk_and_link", "pendulum_chain",
    "free_rigid_body", "bead_on_rotating_hoop", "nonholonomic_particle",
)  # fmt: skip


def _model(mujoco, name: str):
    """gymnasium's `<name>.xml` as `benchmarks/mjcf_humanoid.py` loads it."""
    import gymnasium

    from benchmarks.mjcf_humanoid import _model as load

    assets = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
    return load(mujoco, os.path.join(assets, f"{name}.xml"), True)


def _floats(tree, dtype):
    floating = lambda v: np.issubdtype(np.asarray(v).dtype, np.floating)  # noqa: E731
    return jax.tree.map(lambda v: jnp.asarray(v, dtype) if floating(v) else v, tree)


def _errors(qacc, ref) -> dict:
    err = np.max(np.abs(np.asarray(qacc, np.float64) - ref), 1) / np.max(np.abs(ref), 1)
    return dict(median=float(np.median(err)), worst=float(np.max(err)))


def _constrax_qacc(m, q, qd, ctrl, dtype):
    """`qacc` from constrax's accelerations in `dtype`: the model imported, and its
    accelerations computed, with x64 off for float32 (as a float32 user runs it)."""
    with jax.enable_x64(dtype == jnp.float64):
        imported = cx.rigid.from_mjcf(m)
        params = _floats(imported.params, dtype)

        def acc(q, qd, u):
            return cx.accelerations(imported.system, 0.0, q, qd, dict(params, ctrl=u)).qdd

        qdd = jax.jit(jax.vmap(acc))(*(jnp.asarray(x, dtype) for x in (q, qd, ctrl)))
        qdd = np.asarray(qdd, np.float64)
    imported = cx.rigid.from_mjcf(m)
    to_qacc = jax.jit(jax.vmap(imported.mujoco_acceleration))
    return np.asarray(to_qacc(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)))


def _mjx_qacc(mjx, m, qpos, qvel, ctrl):
    with jax.enable_x64(False):
        mx = mjx.put_model(m)
        d0 = mjx.make_data(mx)

        def forward(qpos, qvel, ctrl):
            return mjx.forward(mx, d0.replace(qpos=qpos, qvel=qvel, ctrl=ctrl)).qacc

        f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
        return np.asarray(jax.jit(jax.vmap(forward))(f32(qpos), f32(qvel), f32(ctrl)))


def measure(mujoco, mjx, name: str, batch: int, offsets) -> list[dict]:
    m = _model(mujoco, name)
    imported = cx.rigid.from_mjcf(m)
    free = [j for j in range(m.njnt) if m.jnt_type[j] == int(mujoco.mjtJoint.mjJNT_FREE)]
    x_adr = int(m.jnt_qposadr[free[0]])  # the root's x coordinate
    rows = []
    for d in offsets:
        rng = np.random.default_rng(0)
        qpos, qvel = random_mujoco_states(m, imported, rng, batch)
        ctrl = rng.uniform(-1, 1, size=(batch, m.nu))
        qpos[:, x_adr] += d
        data, ref = mujoco.MjData(m), []
        for k in range(batch):
            data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[k], qvel[k], ctrl[k]
            mujoco.mj_forward(m, data)
            ref.append(data.qacc.copy())
        ref = np.array(ref)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        row = dict(model=name, offset_m=d, batch=batch)
        row["constrax_float32"] = _errors(_constrax_qacc(m, q, qd, ctrl, jnp.float32), ref)
        row["constrax_float64"] = _errors(_constrax_qacc(m, q, qd, ctrl, jnp.float64), ref)
        if mjx is not None:
            row["mjx_float32"] = _errors(_mjx_qacc(mjx, m, qpos, qvel, ctrl), ref)
            row["ratio_median"] = row["constrax_float32"]["median"] / row["mjx_float32"]["median"]
            row["ratio_worst"] = row["constrax_float32"]["worst"] / row["mjx_float32"]["worst"]
        print(row, flush=True)
        rows.append(row)
    return rows


def _accelerations(system, p, qs, qds, dtype) -> np.ndarray:
    def one(q, qd):
        return cx.accelerations(system, 0.0, q, qd, p).qdd

    out = jax.jit(jax.vmap(one))(jnp.asarray(qs, dtype), jnp.asarray(qds, dtype))
    return np.asarray(out, np.float64)


def _saddle_condition(model, qs, qds) -> np.ndarray:
    from constrax._terms import constraint_terms, lagrangian_terms

    def one(q, qd):
        W, _ = lagrangian_terms(model.system, 0.0, q, qd, model.params)
        A = constraint_terms(model.system, 0.0, q, qd, model.params)[0]
        Z = jnp.zeros((A.shape[0], A.shape[0]), W.dtype)
        return jnp.linalg.cond(jnp.block([[W, A.T], [A, Z]]))

    return np.asarray(jax.vmap(one)(jnp.asarray(qs), jnp.asarray(qds)))


def measure_model(name: str, samples: int) -> dict:
    """float32 against float64 `cx.accelerations` of the model `cx.models.<name>`."""
    model = getattr(cx.models, name)()
    saveat = diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, samples))
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=1.0, saveat=saveat)
    qs, qds = np.asarray(traj.q), np.asarray(traj.qd)
    ref = _accelerations(model.system, model.params, qs, qds, jnp.float64)
    cond = _saddle_condition(model, qs, qds)
    with jax.enable_x64(False):
        model32 = getattr(cx.models, name)()
        out = _accelerations(model32.system, model32.params, qs, qds, jnp.float32)
    err = np.max(np.abs(out - ref), 1) / np.maximum(np.max(np.abs(ref), 1), 1e-300)
    row = dict(
        model=name, n=int(qs.shape[1]), states=samples,
        median=float(np.median(err)), worst=float(np.max(err)),
        saddle_condition_median=float(np.median(cond)),
    )  # fmt: skip
    print(row, flush=True)
    return row


def report(result: dict) -> str:
    mach = result["machine"]
    fmt = lambda x: "–" if x is None else f"{x:.2g}"  # noqa: E731
    lines = [
        "# float32 accelerations of imported robots against MuJoCo's float64 `qacc` (CPU)",
        "",
        f"- date (UTC): {mach['date_utc']}; {mach['cpu_model']}, {mach['cpu_cores']} cores; "
        f"jax {mach['jax']}, constrax {mach['constrax']}, mujoco {result['mujoco']}, "
        f"MJX {result['mujoco_mjx'] or 'not installed'}",
        f"- {result['batch']} random states per row; error of a state: "
        "max |q̈ − q̈_ref| / max |q̈_ref| in MuJoCo's velocity coordinates; the root moved "
        "along x by the offset; `benchmarks/float32_accuracy.py` says what each contender "
        "runs.",
        "",
    ]
    header = [
        "model", "offset [m]", "constrax f32 median", "constrax f32 worst",
        "MJX f32 median", "MJX f32 worst", "constrax / MJX median", "constrax / MJX worst",
        "constrax f64 worst",
    ]  # fmt: skip
    rows = []
    for r in result["rows"]:
        mjx = r.get("mjx_float32", {})
        rows.append(
            [r["model"], f"{r['offset_m']:g}", fmt(r["constrax_float32"]["median"]),
             fmt(r["constrax_float32"]["worst"]), fmt(mjx.get("median")), fmt(mjx.get("worst")),
             fmt(r.get("ratio_median")), fmt(r.get("ratio_worst")),
             fmt(r["constrax_float64"]["worst"])]
        )  # fmt: skip
    lines += md_table(header, rows)
    lines += [
        "",
        "## `cx.models`: float32 against float64 constrax",
        "",
        f"- {result['samples']} states of each model's float64 trajectory over [0, 1]; error: "
        "max |q̈₃₂ − q̈₆₄| / max |q̈₆₄|; κ: the saddle matrix's median condition number "
        "(a float32 solve errs by about 1.2e-7 κ)",
        "",
    ]
    header = ["model", "n", "median", "worst", "κ median", "worst / (ε κ median)"]
    rows = [
        [r["model"], r["n"], fmt(r["median"]), fmt(r["worst"]),
         fmt(r["saddle_condition_median"]),
         fmt(r["worst"] / (np.finfo(np.float32).eps * r["saddle_condition_median"]))]
        for r in result["models"]
    ]  # fmt: skip
    return "\n".join(lines + md_table(header, rows)) + "\n"


def main(out: str | None, quick: bool) -> dict:
    import mujoco

    try:
        from importlib.metadata import version

        from mujoco import mjx

        mjx_version = version("mujoco-mjx")
    except Exception:  # noqa: BLE001
        mjx, mjx_version = None, None
    batch = 8 if quick else 64
    result = dict(
        machine=machine_info(), mujoco=mujoco.__version__, mujoco_mjx=mjx_version, batch=batch
    )
    result["rows"] = []
    for name in MODELS[:1] if quick else MODELS:
        result["rows"] += measure(mujoco, mjx, name, batch, OFFSETS[::2] if quick else OFFSETS)
    result["samples"] = 4 if quick else 16
    result["models"] = [measure_model(name, result["samples"]) for name in ZOO]
    write_results(out, "float32_accuracy_cpu", result, report(result))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    main(args.out, args.quick)
