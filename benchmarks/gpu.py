r"""Batch rollouts on an accelerator: constrax against hand-written JAX and MJX, float32 and
float64, the defaults and like for like, env-steps per second and gradient over forward.

    python benchmarks/gpu.py [--quick] [--budget SECONDS] [--only WORD ...] [--out DIR]

Runs unchanged on one NVIDIA GPU (jax's CUDA wheels; MuJoCo and MJX from wheels:
`pip install -e ".[mjcf,bench]"`) and on a CPU (`--quick`: small batches and few steps,
a few minutes on 2 cores). Writes `device_rollouts_<platform>.{json,md}` (`gpu`, `cpu`)
into `--out`, with the device's name.

Each precision runs in a process of its own, as batch users run it: float32 with
`jax_enable_x64` off, float64 with it on. In each, for each row, the contenders are
compiled ahead (trace + lower and XLA compile reported), then timed in turn, round after
round, each keeping its fastest round:

- **snake cart**, fixed `diffrax.Tsit5` steps of 1 ms: the hand-written field
  (`benchmarks/cases/snake.py`: explicit $W$, $A$, $\dot A\dot q$, `jnp.linalg.solve` of
  the saddle matrix), constrax like for like (`cx.KKT()`, `stabilisation=None`) and
  constrax with the defaults (no option);
- **humanoid** (gymnasium's, imported with `cx.rigid.from_mjcf`, contacts and joint limits
  off in both engines), 1 ms steps: `mjx.step` (MuJoCo's semi-implicit Euler integrator)
  in a `lax.fori_loop`, constrax like for like with `diffrax.Euler`, and constrax with the
  defaults with `diffrax.Euler` and with `cx.SemiImplicitEuler()` (MuJoCo's step);
- **gradient over forward**: `jax.grad` of the summed squared final state of a batched
  rollout against the rollout itself, for the hand-written snake cart and for constrax's
  defaults (the snake cart, and the humanoid with `diffrax.Euler`, its gradient's compile
  time beside).

Each row also records how far the contenders' final states are apart (the hand-written
field and constrax like for like integrate the same equations with the same steps; MJX's
step and constrax's are different integrators of the same model, so they differ by the
step's error).

`--budget` (seconds, default 330) bounds the run: the rows run in order of importance
and, once the budget is spent, the rest are recorded as skipped. Each finished row is
written at once, so a process stopped from outside keeps what it measured. Compare ratios
within one run: the machine may be shared.
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

DT = 1e-3
DTYPES = ("float32", "float64")  # float32 first: the batch user's precision


def _sizes(gpu: bool, quick: bool) -> dict:
    """Batch sizes and step counts of the rows."""
    if quick:
        return dict(snake=(64, 256), humanoid=(8, 32), snake_steps=50, humanoid_steps=20,
                    snake_grad=64, humanoid_grad=8, rounds=3)  # fmt: skip
    if gpu:
        return dict(snake=(65_536, 4_096, 1_048_576), humanoid=(4_096, 65_536),
                    snake_steps=200, humanoid_steps=100, snake_grad=65_536,
                    humanoid_grad=4_096, rounds=5)  # fmt: skip
    return dict(snake=(256, 4_096), humanoid=(256,), snake_steps=200, humanoid_steps=100,
                snake_grad=4_096, humanoid_grad=256, rounds=5)  # fmt: skip


# --------------------------------------------------------------------------------------
# The worker: one precision, one process.


def _worker(dtype_name: str, quick: bool, deadline: float, rows_path: str, only) -> None:
    import jax

    jax.config.update("jax_enable_x64", dtype_name == "float64")
    import diffrax
    import jax.numpy as jnp
    import numpy as np

    import constrax as cx
    from benchmarks import batch_rollouts as br
    from benchmarks._cases import random_mujoco_states
    from benchmarks._report import machine_info
    from benchmarks.cases import snake

    dtype = jnp.dtype(dtype_name)
    device = jax.devices()[0]
    sizes = _sizes(device.platform == "gpu", quick)
    rounds = sizes["rounds"]

    def emit(row: dict) -> None:
        print(json.dumps(row), flush=True)
        with open(rows_path, "a") as fh:
            fh.write(json.dumps(row) + "\n")

    if dtype_name == DTYPES[0]:
        emit(dict(
            machine=machine_info(), platform=device.platform, versions=_versions(),
            device=f"{device.platform}: {getattr(device, 'device_kind', device.platform)}",
            sizes=sizes,
        ))  # fmt: skip

    def race(contenders: dict, args: tuple) -> tuple[dict, dict, dict]:
        """Compile each contender ahead (`batch_rollouts._compile`), time them in turn:
        (best seconds, compile times, outputs)."""
        calls, compile_s, outs = {}, {}, {}
        for name, fn in contenders.items():
            calls[name], trace, xla = br._compile(fn, args)
            compile_s[name] = [round(trace, 3), round(xla, 3)]
            outs[name] = calls[name](*args)
        best = br._time({k: (f, args) for k, f in calls.items()}, rounds)
        return best, compile_s, outs

    def gap(a, b) -> float:
        """max |a - b| over the leaves, relative to max |b|."""
        pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
        num = max(float(jnp.max(jnp.abs(x.astype(jnp.float64) - y))) for x, y in pairs)
        den = max(float(jnp.max(jnp.abs(y))) for y in jax.tree.leaves(b))
        return num / den

    def finite(tree) -> bool:
        return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(tree))

    # ---- the snake cart --------------------------------------------------------------

    snake_system = snake.system()
    snake_p = br._cast(snake.params(), dtype)

    def snake_rollout(options, steps):
        def one(q0, qd0):
            if options is None:  # the hand-written field
                sol = diffrax.diffeqsolve(
                    diffrax.ODETerm(snake.hand_vf), diffrax.Tsit5(), 0.0, steps * DT, DT,
                    (q0, qd0), args=snake_p, stepsize_controller=diffrax.ConstantStepSize(),
                    max_steps=steps + 1, saveat=diffrax.SaveAt(t1=True),
                )  # fmt: skip
                return sol.ys[0][-1], sol.ys[1][-1]
            traj = cx.simulate(
                snake_system, q0, qd0, snake_p, t1=steps * DT, dt0=DT, solver=diffrax.Tsit5(),
                stepsize_controller=diffrax.ConstantStepSize(), max_steps=steps + 1, **options,
            )  # fmt: skip
            return traj.q[-1], traj.qd[-1]

        return jax.vmap(one)

    snake_contenders = {
        "hand-written JAX": None,
        "constrax like for like": dict(constraint_solver=cx.KKT(), stabilisation=None),
        "constrax defaults": {},
    }

    def snake_row(batch: int) -> dict:
        q, qd = (br._cast(x, dtype) for x in snake.batch(batch))
        steps = sizes["snake_steps"]
        fns = {k: snake_rollout(o, steps) for k, o in snake_contenders.items()}
        best, compile_s, outs = race(fns, (q, qd))
        peer = "hand-written JAX"
        return dict(
            row="snake cart", batch=batch, steps=steps, solver="Tsit5", peer=peer,
            seconds=best, compile_s=compile_s,
            env_steps_per_s={k: batch * steps / v for k, v in best.items()},
            over_peer={k: v / best[peer] for k, v in best.items()},
            gap_to_peer={k: gap(outs[k], outs[peer]) for k in outs},
            finite={k: finite(v) for k, v in outs.items()},
        )  # fmt: skip

    def loss_of(rollout):
        def loss(q, qd):
            qT, qdT = rollout(q, qd)
            return jnp.sum(qT**2) + jnp.sum(qdT**2)

        return loss

    def gradient_row(name, rollouts: dict, args, batch, steps, solver) -> dict:
        out = dict(row=f"{name}: gradient / forward", batch=batch, steps=steps, solver=solver)
        for who, rollout in rollouts.items():
            loss = loss_of(rollout)
            best, compile_s, outs = race(
                {"forward": loss, "gradient": jax.grad(loss, argnums=(0, 1))}, args
            )
            out[who] = dict(
                seconds=best, compile_s=compile_s,
                gradient_over_forward=best["gradient"] / best["forward"],
                finite=finite(outs["gradient"]),
            )  # fmt: skip
        return out

    def snake_gradient_row() -> dict:
        batch, steps = sizes["snake_grad"], sizes["snake_steps"]
        args = tuple(br._cast(x, dtype) for x in snake.batch(batch))
        rollouts = {
            "hand-written JAX": snake_rollout(None, steps),
            "constrax defaults": snake_rollout({}, steps),
        }
        return gradient_row("snake cart", rollouts, args, batch, steps, "Tsit5")

    # ---- the humanoid ----------------------------------------------------------------

    try:
        import gymnasium
        import mujoco
    except ImportError as e:
        humanoid_missing = f"MuJoCo or gymnasium not importable ({e})"
    else:
        humanoid_missing = None
    try:
        from mujoco import mjx
    except ImportError as e:
        mjx, mjx_missing = None, f"MJX not importable ({e}): pip install -e '.[bench]'"
    else:
        mjx_missing = None

    def humanoid_model():
        path = os.path.join(
            os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "humanoid.xml"
        )
        m = mujoco.MjModel.from_xml_path(path)
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(
            mujoco.mjtDisableBit.mjDSBL_LIMIT
        )
        m.opt.timestep = DT
        # No constraint rows are left for a solver; MJX implements only CG and Newton
        # (gymnasium's file asks for PGS).
        m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
        imported = cx.rigid.from_mjcf(m)
        p = br._cast(dict(imported.params, ctrl=np.zeros(m.nu)), dtype)
        return m, imported, p

    def humanoid_states(m, imported, batch):
        qpos, qvel = random_mujoco_states(m, imported, np.random.default_rng(0), batch)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        return (br._cast(x, dtype) for x in (q, qd, qpos, qvel))

    def humanoid_rollout(imported, p, solver, options, steps):
        def one(q0, qd0):
            traj = cx.simulate(
                imported.system, q0, qd0, p, t1=steps * DT, dt0=DT, solver=solver,
                stepsize_controller=diffrax.ConstantStepSize(), max_steps=steps + 1, **options,
            )  # fmt: skip
            return traj.q[-1], traj.qd[-1]

        return jax.vmap(one)

    def mjx_rollout(m, steps):
        mx = mjx.put_model(m)
        d0 = mjx.make_data(mx)

        def one(qpos, qvel):
            d = d0.replace(qpos=qpos, qvel=qvel, ctrl=jnp.zeros_like(d0.ctrl))
            # With x64 on, `mjx.step` returns some integer fields of its data as int64
            # that came in as int32: keep the loop carry's types.
            keep = lambda new, old: new.astype(old.dtype) if hasattr(old, "dtype") else new  # noqa: E731
            step = lambda i, d: jax.tree.map(keep, mjx.step(mx, d), d)  # noqa: E731
            d = jax.lax.fori_loop(0, steps, step, d)
            return d.qpos, d.qvel

        return jax.vmap(one)

    def humanoid_row(batch: int) -> dict:
        m, imported, p = humanoid_model()
        q, qd, qpos, qvel = humanoid_states(m, imported, batch)
        steps = sizes["humanoid_steps"]
        like = dict(constraint_solver=cx.KKT(), stabilisation=None)
        fns = {
            "constrax like for like (Euler)": humanoid_rollout(
                imported, p, diffrax.Euler(), like, steps
            ),
            "constrax defaults (Euler)": humanoid_rollout(imported, p, diffrax.Euler(), {}, steps),
            "constrax defaults (SemiImplicitEuler)": humanoid_rollout(
                imported, p, cx.SemiImplicitEuler(), {}, steps
            ),
        }  # fmt: skip
        best, compile_s, outs = race(fns, (q, qd))
        row = dict(row="humanoid", batch=batch, steps=steps, solver="see contenders",
                   seconds=best, compile_s=compile_s,
                   finite={k: finite(v) for k, v in outs.items()})  # fmt: skip
        if mjx is None:
            row["peer"] = None
            row["peer_missing"] = mjx_missing
        else:
            peer = "mjx.step"
            rollout = mjx_rollout(m, steps)
            pbest, pcompile, pout = race({peer: rollout}, (qpos, qvel))
            best = dict(best, **pbest)
            row.update(peer=peer, seconds=best, compile_s=dict(compile_s, **pcompile))
            row["finite"][peer] = finite(pout[peer])
            qpos_T, qvel_T = imported.from_mujoco_state(*pout[peer])
            ref = (qpos_T.astype(dtype), qvel_T.astype(dtype))
            row["gap_to_peer"] = {k: gap(v, ref) for k, v in outs.items()}
            row["over_peer"] = {k: v / best[peer] for k, v in best.items()}
        row["env_steps_per_s"] = {k: batch * steps / v for k, v in best.items()}
        return row

    def humanoid_gradient_row() -> dict:
        m, imported, p = humanoid_model()
        batch, steps = sizes["humanoid_grad"], sizes["humanoid_steps"]
        q, qd, _, _ = humanoid_states(m, imported, batch)
        rollouts = {"constrax defaults": humanoid_rollout(imported, p, diffrax.Euler(), {}, steps)}
        return gradient_row("humanoid", rollouts, (q, qd), batch, steps, "Euler")

    # ---- the rows, in order of importance ---------------------------------------------

    snake_b, humanoid_b = sizes["snake"], sizes["humanoid"]
    plan = [(f"snake cart, B = {snake_b[0]}", lambda: snake_row(snake_b[0]), None)]
    plan.append(
        (f"humanoid, B = {humanoid_b[0]}", lambda: humanoid_row(humanoid_b[0]), humanoid_missing)
    )
    plan.append(("snake cart: gradient / forward", snake_gradient_row, None))
    plan.append(("humanoid: gradient / forward", humanoid_gradient_row, humanoid_missing))
    plan += [(f"snake cart, B = {b}", lambda b=b: snake_row(b), None) for b in snake_b[1:]]
    plan += [
        (f"humanoid, B = {b}", lambda b=b: humanoid_row(b), humanoid_missing)
        for b in humanoid_b[1:]
    ]
    for name, run, missing in plan:
        if only and not any(word in name for word in only):
            continue
        if missing:
            row = dict(row=name, skipped=missing)
        elif time.time() > deadline:
            row = dict(row=name, skipped="the time budget was spent")
        else:
            start = time.perf_counter()
            try:
                row = run()
            except Exception as e:  # a failure is a result: record it, go on
                row = dict(row=name, failed=f"{type(e).__name__}: {str(e)[:2000]}")
            row = dict(row, wall_s=round(time.perf_counter() - start, 1))
        emit(dict(row, dtype=dtype_name))


# --------------------------------------------------------------------------------------
# The report.


def _markdown(result: dict) -> str:
    from benchmarks._report import machine_line, md_table

    m = result["machine"]
    lines = [
        f"# Batch rollouts on {result['device']}: constrax against hand-written JAX and MJX",
        "",
        machine_line(m),
        f"- device: {result['device']}; python {m['python']}, jaxlib {m['jaxlib']}, diffrax "
        f"{m['diffrax']}, equinox {m['equinox']}, mujoco {result['versions'].get('mujoco')}, "
        f"mujoco-mjx {result['versions'].get('mujoco-mjx')}",
        f"- command: `{result['command']}`; wall time {result['wall_s']:.0f} s",
        "- 1 ms fixed steps; like for like = `cx.KKT()`, `stabilisation=None`; defaults = no "
        "option; compiled ahead, timed in turn, fastest of the rounds; compile = trace + lower "
        "/ XLA [s]; gap = max |final state − the peer's| / max |the peer's|",
        "",
    ]
    header = ["dtype", "row", "B", "steps", "contender", "env-steps/s", "/ peer",
              "gap to peer", "compile [s]"]  # fmt: skip
    body, notes = [], []
    for r in result["rows"]:
        if "skipped" in r or "failed" in r:
            notes.append(f"- {r['dtype']}, {r['row']}: " + (r.get("skipped") or r["failed"]))
            continue
        if "gradient" in r["row"]:
            continue
        for k in r["seconds"]:
            body.append([
                r["dtype"], r["row"], r["batch"], r["steps"], k,
                f"{r['env_steps_per_s'][k]:.3g}",
                f"{r['over_peer'][k]:.2f}" if r.get("over_peer") else "–",
                f"{r['gap_to_peer'][k]:.1e}" if k in r.get("gap_to_peer", {}) else "–",
                " / ".join(map(str, r["compile_s"][k])),
            ])  # fmt: skip
        if r.get("peer_missing"):
            notes.append(f"- {r['dtype']}, {r['row']}, B = {r['batch']}: {r['peer_missing']}")
    lines += md_table(header, body)
    grads = [r for r in result["rows"] if "gradient" in r["row"] and "seconds" not in r]
    grads = [r for r in grads if "skipped" not in r and "failed" not in r]
    if grads:
        lines += ["", "Gradient over forward (`jax.grad` of the summed squared final state):", ""]
        header = ["dtype", "row", "B", "steps", "contender", "forward [ms]", "gradient [ms]",
                  "gradient / forward", "compile of the gradient [s]"]  # fmt: skip
        body = [
            [r["dtype"], r["row"], r["batch"], r["steps"], who,
             f"{1e3 * v['seconds']['forward']:.1f}", f"{1e3 * v['seconds']['gradient']:.1f}",
             f"{v['gradient_over_forward']:.2f}", " / ".join(map(str, v["compile_s"]["gradient"]))]
            for r in grads for who, v in r.items() if isinstance(v, dict) and "seconds" in v
        ]  # fmt: skip
        lines += md_table(header, body)
    if notes:
        lines += ["", "Not measured:", "", *notes]
    return "\n".join(lines) + "\n"


def _versions() -> dict:
    from importlib import metadata

    out = {}
    for name in ("mujoco", "mujoco-mjx", "jax-cuda12-plugin", "jax-cuda13-plugin"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def main(out: str, quick: bool, budget: float, only=None) -> dict:
    """Run the float32 and the float64 worker (the parent process never starts a JAX
    backend: on a GPU it would hold the workers' memory) and write the report."""
    start = time.time()
    os.makedirs(out, exist_ok=True)
    rows_path = os.path.join(out, ".device_rollouts.rows.jsonl")
    if os.path.exists(rows_path):
        os.remove(rows_path)
    for i, dtype in enumerate(DTYPES):
        # float32 may use the first 55 % of the budget; float64 what is left.
        deadline = start + budget * (0.55 if i == 0 else 1.0)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", dtype,
               "--deadline", str(deadline), "--rows", rows_path]  # fmt: skip
        cmd += (["--quick"] if quick else []) + (["--only", *only] if only else [])
        # A row started before the deadline may run past it: a hard stop a little later.
        timeout = max(deadline - time.time(), 0) + 120
        try:
            subprocess.run(cmd, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            print(f"the {dtype} process was stopped after {timeout:.0f} s", flush=True)
    records = []
    if os.path.exists(rows_path):
        with open(rows_path) as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        os.remove(rows_path)
    heads = [r for r in records if "machine" in r]
    if not heads:
        raise RuntimeError("benchmarks/gpu.py: no worker started (see its output above)")
    result = dict(
        heads[0],
        command=" ".join(["python benchmarks/gpu.py", *sys.argv[1:]]),
        rows=[r for r in records if "machine" not in r],
        wall_s=time.time() - start,
    )
    result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    name = f"device_rollouts_{result['platform']}"
    with open(os.path.join(out, name + ".json"), "w") as fh:
        json.dump(result, fh, indent=1)
        fh.write("\n")
    with open(os.path.join(out, name + ".md"), "w") as fh:
        fh.write(_markdown(result))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small batches, few steps (CPU)")
    parser.add_argument("--budget", type=float, default=330.0, help="seconds for the whole run")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    parser.add_argument("--only", nargs="+", help="only the rows whose name has one of these words")
    parser.add_argument("--worker", choices=DTYPES, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.quick, args.deadline, args.rows, args.only)
    else:
        main(args.out, args.quick, args.budget, args.only)
