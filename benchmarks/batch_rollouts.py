"""Batch rollouts as batch users run them: fixed steps, the defaults against like for like,
float64 and float32, on whatever device JAX finds (CPU or one GPU).

    python benchmarks/batch_rollouts.py [--quick] [--float32] [--out benchmarks/results]

Writes `batch_rollouts_<platform>.json` and `.md` (`cpu` or `gpu`) into `--out`.

For each model (the gymnasium humanoid imported from MJCF, contacts and limits off, when
MuJoCo and gymnasium are installed; the 5-link chain in maximal coordinates; the snake
cart), each fixed-step solver (`diffrax.Euler`, `Heun`, `Midpoint`, `Ralston`, the
classical RK4, `Tsit5`, `cx.SemiImplicitEuler`) and each batch size, two calls of
`cx.simulate` under `jax.vmap`, compiled ahead and timed in turn, round after round, each
keeping its fastest round:

- *like for like*: `constraint_solver=cx.KKT()`, `stabilisation=None` (the equations a
  hand-written field solves);
- *defaults*: no option (`cx.AutoSolver()` and the velocity projection
  `cx.StepProjection()`).

The ratio defaults / like for like is the cost of the defaults. Beside it: env-steps per
second of the defaults, compile time (trace + lower, XLA), and, for the snake cart, the
gradient of a batched rollout's summed final state over its forward pass (the reverse
pass through diffrax's `RecursiveCheckpointAdjoint`). Compare ratios within one run: the
machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

if __name__ == "__main__":  # float64 unless --float32, before constrax makes an array
    jax.config.update("jax_enable_x64", "--float32" not in sys.argv)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import constrax as cx  # noqa: E402
from benchmarks._cases import RK4, random_mujoco_states  # noqa: E402
from benchmarks._report import loadavg, machine_info, md_table, write_json  # noqa: E402

SOLVERS = {
    "Euler": diffrax.Euler(),
    "Heun": diffrax.Heun(),
    "Midpoint": diffrax.Midpoint(),
    "Ralston": diffrax.Ralston(),
    "RK4": RK4(),
    "Tsit5": diffrax.Tsit5(),
    "SemiImplicitEuler": cx.SemiImplicitEuler(),
}
QUICK_SOLVERS = ("Euler", "Heun", "SemiImplicitEuler")
VARIANTS = {
    "like for like": dict(constraint_solver=cx.KKT(), stabilisation=None),
    "defaults": {},
}
DT = 1e-3


def _humanoid(batch: int):
    import gymnasium
    import mujoco

    path = os.path.join(
        os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "humanoid.xml"
    )
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(
        mujoco.mjtDisableBit.mjDSBL_LIMIT
    )
    imported = cx.rigid.from_mjcf(m)
    qpos, qvel = random_mujoco_states(m, imported, np.random.default_rng(0), batch)
    q, qd = imported.from_mujoco_state(qpos, qvel)
    p = dict(imported.params, ctrl=np.zeros(m.nu))
    return imported.system, q, qd, p


def _model(name: str, *args):
    def build(batch: int):
        model = getattr(cx.models, name)(*args)
        scale = np.linspace(0.5, 1.5, batch)[:, None]
        q = np.broadcast_to(np.asarray(model.q0), (batch, model.q0.size))
        return model.system, q, np.asarray(model.qd0) * scale, model.params

    return build


MODELS = {
    "humanoid": _humanoid,
    "5-link chain, maximal": _model("pendulum_chain", 5, "maximal"),
    "snake cart": _model("snake_cart"),
}


def _cast(tree, dtype):
    def leaf(v):
        a = np.asarray(v)
        return jnp.asarray(a, dtype) if np.issubdtype(a.dtype, np.floating) else v

    return jax.tree.map(leaf, tree)


def _rollout(system, p, solver, steps, options):
    def one(q0, qd0):
        traj = cx.simulate(
            system, q0, qd0, p, t1=steps * DT, dt0=DT, solver=solver, max_steps=steps + 1,
            stepsize_controller=diffrax.ConstantStepSize(), **options,
        )  # fmt: skip
        return traj.q[-1], traj.qd[-1]

    return one


def _compile(fn, args):
    start = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    traced = time.perf_counter()
    compiled = lowered.compile()
    done = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    return compiled, traced - start, done - traced


def _time(calls: dict, rounds: int) -> dict:
    best = {k: float("inf") for k in calls}
    for _ in range(rounds):
        for k, (fn, args) in calls.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def bench(model: str, batch: int, solvers, steps: int, rounds: int, dtype) -> list[dict]:
    system, q, qd, p = MODELS[model](batch)
    q, qd, p = _cast(q, dtype), _cast(qd, dtype), _cast(p, dtype)
    rows = []
    for solver in solvers:
        calls, row = {}, dict(model=model, batch=batch, solver=solver, steps=steps)
        for variant, options in VARIANTS.items():
            fn = jax.vmap(_rollout(system, p, SOLVERS[solver], steps, options))
            compiled, trace, xla = _compile(fn, (q, qd))
            calls[variant] = (compiled, (q, qd))
            row[f"{variant} compile_s"] = [round(trace, 3), round(xla, 3)]
        best = _time(calls, rounds)
        for variant in VARIANTS:
            row[f"{variant} us_per_state_step"] = 1e6 * best[variant] / (batch * steps)
        row["defaults / like for like"] = best["defaults"] / best["like for like"]
        row["defaults env-steps/s"] = batch * steps / best["defaults"]
        print(row, flush=True)
        rows.append(row)
    return rows


def float_params(p: dict) -> dict:
    """The floating-point parameters of `p` (what a gradient is taken with respect to)."""
    return {k: v for k, v in p.items() if jnp.issubdtype(jnp.asarray(v).dtype, jnp.floating)}


def summed_final_state(system, p, solver, steps: int, options: dict):
    """`loss(f, q, qd)`: the sum of squares of the final states of a batch of rollouts from
    `(q, qd)`, with the floating-point parameters `f` in `p`: what the gradients of a
    batched rollout differentiate."""

    def loss(f, q, qd):
        out = jax.vmap(_rollout(system, {**p, **f}, solver, steps, options))(q, qd)
        return jnp.sum(out[0] ** 2) + jnp.sum(out[1] ** 2)

    return loss


def gradient_over_forward(batch: int, steps: int, rounds: int, dtype) -> dict:
    system, q, qd, p = MODELS["snake cart"](batch)
    q, qd, p = _cast(q, dtype), _cast(qd, dtype), _cast(p, dtype)
    floats = float_params(p)
    forward = summed_final_state(system, p, diffrax.Tsit5(), steps, {})

    calls, row = {}, dict(model="snake cart", batch=batch, steps=steps, solver="Tsit5")
    for name, fn in (("forward", forward), ("gradient", jax.grad(forward))):
        compiled, trace, xla = _compile(fn, (floats, q, qd))
        calls[name] = (compiled, (floats, q, qd))
        row[f"{name} compile_s"] = [round(trace, 3), round(xla, 3)]
    best = _time(calls, rounds)
    row.update({f"{k} s": v for k, v in best.items()})
    row["gradient / forward"] = best["gradient"] / best["forward"]
    print(row, flush=True)
    return row


def _markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        f"# Batch rollouts: the defaults against like for like ({result['device']})",
        "",
        f"- date (UTC): {m['date_utc']}; machine: {m['cpu_model']}, {m['cpu_cores']} cores; "
        f"device: {result['device']}; dtype: {result['dtype']}; load average at start "
        f"{m['loadavg_at_start']}, at end {result['loadavg_at_end']}",
        f"- versions: python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, diffrax "
        f"{m['diffrax']}, equinox {m['equinox']}",
        "- fixed steps of 1e-3; like for like = `KKT()`, `stabilisation=None`; defaults = "
        "no option (`AutoSolver()`, `StepProjection()`); compiled ahead, timed in turn, "
        "fastest round each; compile = (trace + lower, XLA) of the defaults",
        "",
    ]
    header = ["model", "batch", "solver", "like [µs/state/step]", "defaults [µs/state/step]",
              "defaults / like", "defaults env-steps/s", "compile, defaults [s]"]  # fmt: skip
    body = [
        [
            r["model"],
            r["batch"],
            r["solver"],
            f"{r['like for like us_per_state_step']:.2f}",
            f"{r['defaults us_per_state_step']:.2f}",
            f"{r['defaults / like for like']:.2f}",
            f"{r['defaults env-steps/s']:.3g}",
            " / ".join(map(str, r["defaults compile_s"])),
        ]  # fmt: skip
        for r in result["rollouts"]
    ]
    lines += md_table(header, body)
    g = result.get("gradient")
    if g:
        lines += [
            "",
            f"Gradient of a batched rollout (snake cart, B = {g['batch']}, {g['steps']} Tsit5 "
            f"steps, defaults): forward {1e3 * g['forward s']:.1f} ms, gradient "
            f"{1e3 * g['gradient s']:.1f} ms, **{g['gradient / forward']:.2f}x** "
            f"(compile {g['gradient compile_s']} s).",
        ]
    return "\n".join(lines) + "\n"


def main(out: str, quick: bool, float32: bool) -> dict:
    dtype = jnp.float32 if float32 else jnp.float64
    device = jax.devices()[0]
    result = dict(
        machine=machine_info(),
        device=f"{device.platform}: {getattr(device, 'device_kind', device.platform)}",
        dtype=np.dtype(dtype).name,
        rollouts=[],
    )
    gpu = device.platform == "gpu"
    batches = (256,) if quick else ((1, 256, 4096) if gpu else (1, 256))
    steps, rounds = (50, 3) if quick else (200, 5)
    solvers = QUICK_SOLVERS if quick else tuple(SOLVERS)
    models = list(MODELS)
    try:
        import gymnasium  # noqa: F401
        import mujoco  # noqa: F401
    except ImportError:
        models.remove("humanoid")
    for model in models:
        for batch in batches:
            result["rollouts"] += bench(model, batch, solvers, steps, rounds, dtype)
    result["gradient"] = gradient_over_forward(
        256 if quick else (65536 if gpu else 4096), 50 if quick else 200, rounds, dtype
    )
    result["loadavg_at_end"] = loadavg()
    name = f"batch_rollouts_{device.platform}{'_float32' if float32 else ''}"
    write_json(os.path.join(out, name + ".json"), result)
    with open(os.path.join(out, name + ".md"), "w") as fh:
        fh.write(_markdown(result))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 solvers, B = 256, 50 steps")
    parser.add_argument("--float32", action="store_true", help="float32 (x64 off)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args()
    main(args.out, args.quick, args.float32)
