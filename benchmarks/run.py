r"""constrax performance benchmarks: constrax vs the same physics hand-written in JAX.

Usage: `python benchmarks/run.py [--quick] [--out benchmarks/results]`. Writes
`cpu.json` (every measurement) and `cpu.md` (a short table) into `--out`.

Cases (see `benchmarks/README.md`):

1. Snake cart (seed 003 §1.2): $T = \tfrac12(m_b+2m_w)(\dot x^2+\dot y^2)
   + \tfrac12(J_b+2J_w+\tfrac12\ell^2m_w)\dot\theta^2 + J_w\dot\phi^2$, the two Pfaffian
   rows of eq. (1.2.1), steering torque $\tau\sin t$ on $\phi$. Rollout, gradient of a
   final-state loss with respect to the parameter dict, compile time.
2. Nonholonomic particle $L = \tfrac12 m|\dot q|^2$, $\dot z = y\dot x$, under
   d'Alembert and vakonomic (seed 002 "Linear vakonomic constraints": the explicit
   curl formula in the hand-written vector field). Rollout and compile time.
3. Batched throughput of the snake cart (`vmap` of the rollout over initial states).

Every contender uses the same `diffrax.diffeqsolve` configuration: `Tsit5`,
`ConstantStepSize`, `SaveAt(t1=True)`, `RecursiveCheckpointAdjoint`, `max_steps=16384`.
Contenders are timed interleaved in one process; the minimum and median over repeats
are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import constrax as cx  # noqa: E402

# ----------------------------------------------------------------------------------------
# Common integration settings (identical for every contender).

T1 = 10.0
DT0 = 0.01
MAX_STEPS = 16384


def _solve_kwargs(t1: float, dt0: float) -> dict:
    return dict(
        t0=0.0,
        t1=t1,
        dt0=dt0,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True),
        adjoint=diffrax.RecursiveCheckpointAdjoint(),
        max_steps=MAX_STEPS,
    )


def hand_rollout(vf: Callable, y0, p, t1: float = T1, dt0: float = DT0):
    """Final state of `diffeqsolve(ODETerm(vf), ...)` with the shared settings."""
    kw = _solve_kwargs(t1, dt0)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vf),
        kw["solver"],
        kw["t0"],
        kw["t1"],
        kw["dt0"],
        y0,
        args=p,
        saveat=kw["saveat"],
        stepsize_controller=kw["stepsize_controller"],
        adjoint=kw["adjoint"],
        max_steps=kw["max_steps"],
    )
    return jax.tree_util.tree_map(lambda y: y[-1], sol.ys)


def constrax_rollout(system: cx.System, q0, qd0, p, t1: float = T1, dt0: float = DT0, **kwargs):
    """Final state `(q, qd[, mu])` of `cx.simulate` with the shared settings."""
    traj = cx.simulate(
        system, q0, qd0, p, constraint_solver=cx.KKT(), **_solve_kwargs(t1, dt0), **kwargs
    )
    if traj.mu is None:
        return traj.q[-1], traj.qd[-1]
    return traj.q[-1], traj.qd[-1], traj.mu[-1]


# ----------------------------------------------------------------------------------------
# Case 1: snake cart (seed 003 §1.2).

SNAKE_PARAMS = {"m_b": 1.0, "m_w": 0.2, "J_b": 0.3, "J_w": 0.25, "l": 1.0, "tau": 0.3}


def snake_params() -> dict:
    return {k: jnp.asarray(v, dtype=jnp.float64) for k, v in SNAKE_PARAMS.items()}


def snake_initial_state(phi0: float = 0.2, xdot0: float = 1.0):
    """A consistent state: theta = 0, ydot = 0, thetadot = 2 tan(phi) xdot / l (from eq. 1.2.1).

    `phidot0 = -tau / (2 J_w)` makes `phi(t) = phi0 - (tau / 2 J_w) sin t` stay in
    `[phi0 - 0.6, phi0 + 0.6]`, away from the singular `phi = ±pi/2`.
    """
    P = SNAKE_PARAMS
    q0 = np.array([0.0, 0.0, 0.0, phi0])
    qd0 = np.array([xdot0, 0.0, 2.0 * np.tan(phi0) * xdot0 / P["l"], -P["tau"] / (2 * P["J_w"])])
    return jnp.asarray(q0), jnp.asarray(qd0)


def snake_system() -> cx.System:
    def lagrangian(t, q, qd, p):
        M = p["m_b"] + 2 * p["m_w"]
        J = p["J_b"] + 2 * p["J_w"] + 0.5 * p["l"] ** 2 * p["m_w"]
        return 0.5 * M * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * J * qd[2] ** 2 + p["J_w"] * qd[3] ** 2

    def wheels(t, q, p):  # eq. (1.2.1)
        _, _, th, ph = q
        h = 0.5 * p["l"] * jnp.cos(ph)
        return jnp.stack(
            [
                jnp.stack([-jnp.sin(th + ph), jnp.cos(th + ph), h, jnp.zeros_like(h)]),
                jnp.stack([jnp.sin(th - ph), -jnp.cos(th - ph), h, jnp.zeros_like(h)]),
            ]
        )

    def steering(t, q, qd, p):
        return jnp.zeros_like(q).at[3].set(p["tau"] * jnp.sin(t))

    return cx.System(lagrangian, [cx.Pfaffian(wheels)], force=steering)


def snake_hand_vf(t, y, p):
    """Snake cart vector field written out by hand: explicit W, A(q), Adot qd, KKT solve."""
    q, qd = y
    _, _, th, ph = q
    xd, yd, thd, phd = qd
    M = p["m_b"] + 2 * p["m_w"]
    J = p["J_b"] + 2 * p["J_w"] + 0.5 * p["l"] ** 2 * p["m_w"]
    W = jnp.diag(jnp.stack([M, M, J, 2 * p["J_w"]]))
    sp, cp = jnp.sin(th + ph), jnp.cos(th + ph)
    sm, cm = jnp.sin(th - ph), jnp.cos(th - ph)
    h = 0.5 * p["l"] * jnp.cos(ph)
    zero = jnp.zeros_like(h)
    A = jnp.stack([jnp.stack([-sp, cp, h, zero]), jnp.stack([sm, -cm, h, zero])])
    hd = -0.5 * p["l"] * jnp.sin(ph) * phd
    Adot_qd = jnp.stack(
        [
            -cp * (thd + phd) * xd - sp * (thd + phd) * yd + hd * thd,
            cm * (thd - phd) * xd + sm * (thd - phd) * yd + hd * thd,
        ]
    )
    f = jnp.stack([zero, zero, zero, p["tau"] * jnp.sin(t)])
    K = jnp.block([[W, A.T], [A, jnp.zeros((2, 2), W.dtype)]])
    sol = jnp.linalg.solve(K, jnp.concatenate([f, -Adot_qd]))
    return qd, sol[:4]


def snake_loss(q, qd):
    return jnp.sum(q**2) + jnp.sum(qd**2)


# ----------------------------------------------------------------------------------------
# Case 2: nonholonomic particle, zdot = y xdot (seed 002).

PARTICLE_PARAMS = {"m": 1.0}
PARTICLE_MU0 = 0.2


def particle_params() -> dict:
    return {k: jnp.asarray(v, dtype=jnp.float64) for k, v in PARTICLE_PARAMS.items()}


def particle_initial_state():
    q0 = jnp.array([0.0, 0.5, 0.0])
    qd0 = jnp.array([1.0, 0.3, 0.5])  # zdot = y xdot
    return q0, qd0


def particle_system() -> cx.System:
    def lagrangian(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd

    def heisenberg(t, q, p):  # omega . qd = zdot - y xdot
        return jnp.stack([-q[1], jnp.zeros_like(q[1]), jnp.ones_like(q[1])])

    return cx.System(lagrangian, [cx.Pfaffian(heisenberg)])


def _particle_saddle(p, q, qd, rhs_force):
    y = q[1]
    xd, yd = qd[0], qd[1]
    A = jnp.stack([-y, jnp.zeros_like(y), jnp.ones_like(y)])[None, :]
    W = p["m"] * jnp.eye(3, dtype=q.dtype)
    c_bias = -yd * xd  # (d omega / dt) . qd
    K = jnp.block([[W, A.T], [A, jnp.zeros((1, 1), q.dtype)]])
    return jnp.linalg.solve(K, jnp.concatenate([rhs_force, -c_bias[None]]))


def particle_dalembert_hand_vf(t, y, p):
    """d'Alembert: m qdd = A^T lam, A qdd = x' y' (KKT solve)."""
    q, qd = y
    sol = _particle_saddle(p, q, qd, jnp.zeros(3, q.dtype))
    return qd, sol[:3]


def particle_vakonomic_hand_vf(t, y, p):
    r"""Vakonomic, seed 002: $m\ddot q_i = \dot\mu\,\omega_i
    + \mu(\partial_j\omega_i - \partial_i\omega_j)\dot q^j$, $\omega = (-y, 0, 1)$; the only
    non-zero derivative is $\partial_y\omega_x = -1$, so the curl term is
    $\mu(-\dot y, \dot x, 0)$."""
    q, qd, mu = y
    curl = mu[0] * jnp.stack([-qd[1], qd[0], jnp.zeros_like(qd[0])])
    sol = _particle_saddle(p, q, qd, curl)
    return qd, sol[:3], -sol[3:]


# ----------------------------------------------------------------------------------------
# Contenders as pure functions of arrays (jit-able), built fresh on each call.


def make_snake_rollouts(t1: float = T1, dt0: float = DT0) -> dict[str, Callable]:
    system = snake_system()

    def constrax_fn(q0, qd0, p):
        return constrax_rollout(system, q0, qd0, p, t1=t1, dt0=dt0)

    def hand_fn(q0, qd0, p):
        return hand_rollout(snake_hand_vf, (q0, qd0), p, t1=t1, dt0=dt0)

    return {"constrax": constrax_fn, "hand": hand_fn}


def make_snake_grads(t1: float = T1, dt0: float = DT0) -> dict[str, Callable]:
    out = {}
    for name, fn in make_snake_rollouts(t1, dt0).items():

        def loss(p, q0, qd0, fn=fn):
            q, qd = fn(q0, qd0, p)
            return snake_loss(q, qd)

        out[name] = lambda q0, qd0, p, loss=loss: jax.grad(loss)(p, q0, qd0)
    return out


def make_particle_rollouts(vakonomic: bool, t1: float = T1, dt0: float = DT0):
    system = particle_system()
    if vakonomic:

        def constrax_fn(q0, qd0, mu0, p):
            return constrax_rollout(
                system, q0, qd0, p, t1=t1, dt0=dt0, prescription=cx.Vakonomic(), mu0=mu0
            )

        def hand_fn(q0, qd0, mu0, p):
            return hand_rollout(particle_vakonomic_hand_vf, (q0, qd0, mu0), p, t1=t1, dt0=dt0)

    else:

        def constrax_fn(q0, qd0, mu0, p):
            return constrax_rollout(system, q0, qd0, p, t1=t1, dt0=dt0)

        def hand_fn(q0, qd0, mu0, p):
            return hand_rollout(particle_dalembert_hand_vf, (q0, qd0), p, t1=t1, dt0=dt0)

    return {"constrax": constrax_fn, "hand": hand_fn}


def snake_batch(batch: int):
    """`batch` consistent initial states (`snake_initial_state` formula), phi0 in
    [-0.3, 0.3] and xdot0 in [0.5, 1.5]; `batch = 1` gives the single-rollout state."""
    P = SNAKE_PARAMS
    phi0 = np.linspace(-0.3, 0.3, batch) if batch > 1 else np.array([0.2])
    xd0 = np.linspace(0.5, 1.5, batch) if batch > 1 else np.array([1.0])
    q0 = np.zeros((batch, 4))
    q0[:, 3] = phi0
    qd0 = np.zeros((batch, 4))
    qd0[:, 0] = xd0
    qd0[:, 2] = 2.0 * np.tan(phi0) * xd0 / P["l"]
    qd0[:, 3] = -P["tau"] / (2 * P["J_w"])
    return jnp.asarray(q0), jnp.asarray(qd0)


# ----------------------------------------------------------------------------------------
# Smoke check used by tests/test_benchmark_smoke.py.


def smoke(case: str = "snake", t1: float = 0.05):
    """Final states of constrax and the hand-written reference after a few steps.

    `case` is `"snake"`, `"particle_dalembert"` or `"particle_vakonomic"`.
    Returns `(constrax_final, hand_final)` as tuples of arrays.
    """
    if case == "snake":
        fns = make_snake_rollouts(t1=t1)
        args = (*snake_initial_state(), snake_params())
    elif case in ("particle_dalembert", "particle_vakonomic"):
        fns = make_particle_rollouts(case == "particle_vakonomic", t1=t1)
        args = (*particle_initial_state(), jnp.array([PARTICLE_MU0]), particle_params())
    else:
        raise ValueError(f"unknown smoke case {case!r}")
    return jax.jit(fns["constrax"])(*args), jax.jit(fns["hand"])(*args)


# ----------------------------------------------------------------------------------------
# Timing harness.


def _block(x):
    return jax.block_until_ready(x)


def _stats(samples: list[float], cpu: list[float] | None = None) -> dict:
    out = {
        "min_s": min(samples),
        "median_s": statistics.median(samples),
        "repeats": len(samples),
        "samples_s": samples,
    }
    if cpu is not None:
        out["cpu_min_s"] = min(cpu)
        out["cpu_median_s"] = statistics.median(cpu)
        out["cpu_samples_s"] = cpu
    return out


def _lower_compile(fn: Callable, args):
    """Trace+lower, then XLA-compile `jax.jit(fn)` from cold caches.

    Returns `(compiled, (t_lower, t_xla), (cpu_lower, cpu_xla))`: wall and process CPU
    seconds of each stage.
    """
    jax.clear_caches()
    c0, t0 = time.process_time(), time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    c1, t1 = time.process_time(), time.perf_counter()
    compiled = lowered.compile()
    c2, t2 = time.process_time(), time.perf_counter()
    return compiled, (t1 - t0, t2 - t1), (c1 - c0, c2 - c1)


def _compile_summary(wall: list[tuple], cpu: list[tuple]) -> dict:
    return {
        "trace_lower": _stats([w[0] for w in wall], [c[0] for c in cpu]),
        "xla_compile": _stats([w[1] for w in wall], [c[1] for c in cpu]),
        "total_min_s": min(sum(w) for w in wall),
        "total_median_s": statistics.median([sum(w) for w in wall]),
        "total_cpu_min_s": min(sum(c) for c in cpu),
        "total_cpu_median_s": statistics.median([sum(c) for c in cpu]),
    }


def run_times(
    factories: dict[str, Callable[[], Callable]], args, repeats: int, compile_repeats: int = 1
):
    """Compile, then time steady-state calls (after warm-up), contenders interleaved.

    `factories` build a fresh function per contender, so every compile starts from cold
    caches (`jax.clear_caches()`; equinox's `filter_jit` inside diffrax would otherwise
    reuse a trace). Compile time is trace+lower plus XLA compile, repeated
    `compile_repeats` times (interleaved). Run time records wall time
    (`time.perf_counter`) and process CPU time (`time.process_time`, all threads): on a
    shared, oversubscribed machine the wall time includes time spent waiting for a core,
    the CPU time does not.

    Returns `(timings, compile_times, outputs)`.
    """
    names = list(factories)
    cwall = {k: [] for k in names}
    ccpu = {k: [] for k in names}
    compiled = {}
    for _ in range(compile_repeats):
        for name in names:
            compiled[name], tw, tc = _lower_compile(factories[name](), args)
            cwall[name].append(tw)
            ccpu[name].append(tc)
    outputs = {name: _block(f(*args)) for name, f in compiled.items()}  # warm-up
    wall = {k: [] for k in names}
    cpu = {k: [] for k in names}
    for _ in range(repeats):
        for name, f in compiled.items():
            c0 = time.process_time()
            t0 = time.perf_counter()
            _block(f(*args))
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    timings = _add_ratios({name: _stats(wall[name], cpu[name]) for name in names})
    compiles = {name: _compile_summary(cwall[name], ccpu[name]) for name in names}
    for key in ("total_min_s", "total_cpu_min_s"):
        compiles[f"ratio_{key[:-2]}"] = compiles["constrax"][key] / compiles["hand"][key]
    return timings, compiles, outputs


def _ratio(res: dict, key: str = "min_s") -> float:
    return res["constrax"][key] / res["hand"][key]


def _add_ratios(res: dict) -> dict:
    for key in ("min_s", "median_s", "cpu_min_s", "cpu_median_s"):
        res[f"ratio_{key[:-2]}"] = _ratio(res, key)
    return res


def _max_abs_diff(a, b) -> float:
    return max(
        float(jnp.max(jnp.abs(x - y)))
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    )


# ----------------------------------------------------------------------------------------
# Benchmarks.


def _verdict(timings: dict, target: float) -> dict:
    return {
        "ratio_max": target,
        "met_cpu_time": timings["ratio_cpu_min"] <= target,
        "met_wall_time": timings["ratio_min"] <= target,
    }


def bench_snake(cfg: dict) -> dict:
    args = (*snake_initial_state(), snake_params())
    out = {"t1": T1, "dt0": DT0, "n_steps": round(T1 / DT0)}
    print("  rollout", flush=True)
    names = ("constrax", "hand")
    out["rollout"], out["compile_rollout"], finals = run_times(
        {k: (lambda k=k: make_snake_rollouts()[k]) for k in names},
        args,
        cfg["repeats"],
        cfg["compile_repeats"],
    )
    out["final_state_max_abs_diff"] = _max_abs_diff(finals["constrax"], finals["hand"])
    print("  gradient", flush=True)
    out["gradient"], out["compile_gradient"], grads = run_times(
        {k: (lambda k=k: make_snake_grads()[k]) for k in names},
        args,
        cfg["grad_repeats"],
        cfg["grad_compile_repeats"],
    )
    out["grad_max_abs_diff"] = _max_abs_diff(grads["constrax"], grads["hand"])
    out["targets"] = {
        "rollout": _verdict(out["rollout"], 1.2),
        "gradient": _verdict(out["gradient"], 1.5),
    }
    return out


def bench_particle(cfg: dict) -> dict:
    args = (*particle_initial_state(), jnp.array([PARTICLE_MU0]), particle_params())
    out = {"t1": T1, "dt0": DT0, "n_steps": round(T1 / DT0), "mu0": PARTICLE_MU0}
    for label, vak in (("dalembert", False), ("vakonomic", True)):
        print(f"  {label}", flush=True)
        res = {}
        res["rollout"], res["compile_rollout"], finals = run_times(
            {
                k: (lambda k=k, vak=vak: make_particle_rollouts(vak)[k])
                for k in ("constrax", "hand")
            },
            args,
            cfg["repeats"],
            cfg["compile_repeats"],
        )
        res["final_state_max_abs_diff"] = _max_abs_diff(finals["constrax"], finals["hand"])
        res["target"] = _verdict(res["rollout"], 1.2)
        out[label] = res
    return out


def bench_batched(cfg: dict) -> dict:
    p = snake_params()
    out = {"dt0": DT0, "batches": {}}

    def factory(name, t1):
        fn = make_snake_rollouts(t1=t1)[name]
        return jax.vmap(fn, in_axes=(0, 0, None))

    for batch, n_steps in cfg["batches"].items():
        t1 = n_steps * DT0
        q0, qd0 = snake_batch(batch)
        reps = cfg["batch_repeats"] if batch < 4096 else 2
        res, _, _ = run_times(
            {k: (lambda k=k, t1=t1: factory(k, t1)) for k in ("constrax", "hand")},
            (q0, qd0, p),
            reps,
        )
        res["n_steps"] = n_steps
        for name in ("constrax", "hand"):
            res[name]["env_steps_per_s"] = batch * n_steps / res[name]["min_s"]
            res[name]["env_steps_per_cpu_s"] = batch * n_steps / res[name]["cpu_min_s"]
        out["batches"][str(batch)] = res
        print(
            f"  batch {batch:6d}: constrax {res['constrax']['env_steps_per_s']:.3e} steps/s, "
            f"hand {res['hand']['env_steps_per_s']:.3e} steps/s, time ratio {res['ratio_min']:.3f} "
            f"(cpu {res['ratio_cpu_min']:.3f})",
            flush=True,
        )
    return out


# ----------------------------------------------------------------------------------------
# Report.


def _cmd(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=10).stdout
    except Exception:  # pragma: no cover - informational only
        return ""


def machine_info() -> dict:
    import equinox
    import jaxlib

    lscpu = _cmd(["lscpu"])
    model = next(
        (ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")),
        platform.processor(),
    )
    return {
        "cpu_model": model,
        "cpu_cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "diffrax": diffrax.__version__,
        "equinox": equinox.__version__,
        "constrax": cx.__version__,
        "jax_backend": jax.default_backend(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_at_start": _loadavg(),
    }


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return None


def _ms(x: float) -> str:
    return f"{1e3 * x:.2f}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [
        "# constrax CPU benchmarks",
        "",
        f"- date (UTC): {m['date_utc']}; mode: `{res['mode']}`; wall time of the run "
        f"{res['wall_s']:.0f} s",
        f"- machine: {m['cpu_model']}, {m['cpu_cores']} cores ({m['platform']}); load average "
        f"(1, 5, 15 min) at start {m['loadavg_at_start']}, at end {m.get('loadavg_at_end')}",
        f"- versions: python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, "
        f"diffrax {m['diffrax']}, equinox {m['equinox']}, constrax {m['constrax']}",
        f"- note: {res['note']}",
        "- per call: minimum (median) over interleaved repeats, in ms; *CPU* = process CPU "
        "time, *wall* = elapsed time; ratio = constrax / hand-written, of the minima, "
        "same run. Targets are judged on both; CPU time is the one to trust on a busy "
        "machine.",
        "",
        "| case | measure | constrax CPU | hand CPU | ratio CPU | constrax wall | hand wall "
        "| ratio wall | target | met (CPU / wall) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def row(case, measure, r, verdict):
        a, b = r["constrax"], r["hand"]
        lines.append(
            f"| {case} | {measure} | {_ms(a['cpu_min_s'])} ({_ms(a['cpu_median_s'])}) | "
            f"{_ms(b['cpu_min_s'])} ({_ms(b['cpu_median_s'])}) | {r['ratio_cpu_min']:.2f} | "
            f"{_ms(a['min_s'])} ({_ms(a['median_s'])}) | {_ms(b['min_s'])} ({_ms(b['median_s'])}) "
            f"| {r['ratio_min']:.2f} | ≤ {verdict['ratio_max']} | "
            f"{_yes(verdict['met_cpu_time'])} / {_yes(verdict['met_wall_time'])} |"
        )

    compile_lines = [
        "",
        "Compile time (trace + lower, then XLA compile; cold caches; min over "
        f"{res['config']['compile_repeats']} interleaved repeats, gradient "
        f"{res['config']['grad_compile_repeats']}), in s, CPU time (wall time):",
        "",
        "| case | constrax total CPU (wall) | constrax lower + XLA, CPU | hand total CPU (wall) "
        "| hand lower + XLA, CPU | ratio CPU (wall) |",
        "|---|---|---|---|---|---|",
    ]

    def crow(case, r):
        a, b = r["constrax"], r["hand"]
        compile_lines.append(
            f"| {case} | {a['total_cpu_min_s']:.2f} ({a['total_min_s']:.2f}) | "
            f"{a['trace_lower']['cpu_min_s']:.2f} + {a['xla_compile']['cpu_min_s']:.2f} | "
            f"{b['total_cpu_min_s']:.2f} ({b['total_min_s']:.2f}) | "
            f"{b['trace_lower']['cpu_min_s']:.2f} + {b['xla_compile']['cpu_min_s']:.2f} | "
            f"{r['ratio_total_cpu_min']:.2f} ({r['ratio_total_min']:.2f}) |"
        )

    s = res.get("snake")
    if s:
        case = f"snake cart, {s['n_steps']} Tsit5 steps"
        row(case, "rollout", s["rollout"], s["targets"]["rollout"])
        row(case, "gradient", s["gradient"], s["targets"]["gradient"])
        crow("snake cart rollout", s["compile_rollout"])
        crow("snake cart gradient", s["compile_gradient"])
    pa = res.get("particle")
    if pa:
        for label in ("dalembert", "vakonomic"):
            r = pa[label]
            row(f"particle {label}, {pa['n_steps']} steps", "rollout", r["rollout"], r["target"])
            crow(f"particle {label} rollout", r["compile_rollout"])
    lines += compile_lines
    b = res.get("batched")
    if b:
        lines += [
            "",
            "Batched snake cart (`vmap` of the rollout over initial states, Tsit5 steps of "
            f"dt = {b['dt0']}; fewer steps for the largest batches to bound the run time); "
            "env-steps/s = batch × steps / time (minimum over repeats), per wall second and "
            "per CPU second:",
            "",
            "| batch | steps | constrax steps/s (wall) | hand steps/s (wall) | constrax "
            "steps/CPU-s | hand steps/CPU-s | time ratio CPU | time ratio wall |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for batch, r in b["batches"].items():
            a, h = r["constrax"], r["hand"]
            lines.append(
                f"| {batch} | {r['n_steps']} | {a['env_steps_per_s']:.3e} | "
                f"{h['env_steps_per_s']:.3e} | "
                f"{a['env_steps_per_cpu_s']:.3e} | {h['env_steps_per_cpu_s']:.3e} | "
                f"{r['ratio_cpu_min']:.2f} | {r['ratio_min']:.2f} |"
            )
    agree = []
    if s:
        agree.append(
            f"snake final state {s['final_state_max_abs_diff']:.1e}, gradient "
            f"{s['grad_max_abs_diff']:.1e}"
        )
    if pa:
        agree += [
            f"particle {k} {pa[k]['final_state_max_abs_diff']:.1e}"
            for k in ("dalembert", "vakonomic")
        ]
    if agree:
        lines += ["", "Max |constrax − hand-written| at t1: " + "; ".join(agree) + "."]
    return "\n".join(lines) + "\n"


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


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer repeats and batch sizes (≤ 2 min)"
    )
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    parser.add_argument(
        "--only",
        nargs="*",
        choices=["snake", "particle", "batched"],
        default=None,
        help="run a subset of the cases",
    )
    parser.add_argument(
        "--note",
        default="machine shared with other jobs compiling JAX code; wall times are noisy",
        help="free-text note stored with the results",
    )
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    cfg = CONFIGS[mode]
    cases = args.only or ["snake", "particle", "batched"]
    start = time.perf_counter()
    res = {"mode": mode, "config": cfg, "note": args.note, "machine": machine_info()}
    res["section_wall_s"] = {}
    for case, label, bench in (
        ("snake", "snake cart", bench_snake),
        ("particle", "nonholonomic particle", bench_particle),
        ("batched", "batched snake cart", bench_batched),
    ):
        if case in cases:
            print(f"{label} ...", flush=True)
            t0 = time.perf_counter()
            res[case] = bench(cfg)
            res["section_wall_s"][case] = time.perf_counter() - t0
    res["wall_s"] = time.perf_counter() - start
    res["machine"]["loadavg_at_end"] = _loadavg()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cpu.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    md = markdown(res)
    with open(os.path.join(args.out, "cpu.md"), "w") as fh:
        fh.write(md)
    print(md)
    return res


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
