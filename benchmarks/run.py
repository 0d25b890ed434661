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
    traj = cx.simulate(system, q0, qd0, p, constraint_solver=cx.KKT(), **_solve_kwargs(t1, dt0), **kwargs)
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
    """`batch` consistent initial states with phi0 in [-0.3, 0.3], xdot0 in [0.5, 1.5]."""
    phi0 = np.linspace(-0.3, 0.3, batch) if batch > 1 else np.array([0.2])
    xd0 = np.linspace(0.5, 1.5, batch) if batch > 1 else np.array([1.0])
    qs, qds = zip(*(snake_initial_state(a, b) for a, b in zip(phi0, xd0)))
    return jnp.stack(qs), jnp.stack(qds)


def snake_batch_fast(batch: int):
    """Vectorised `snake_batch` (same formula), for large batches."""
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


def _stats(samples: list[float]) -> dict:
    return {
        "min_s": min(samples),
        "median_s": statistics.median(samples),
        "repeats": len(samples),
        "samples_s": samples,
    }


def compile_times(factories: dict[str, Callable[[], Callable]], args, repeats: int) -> dict:
    """Trace+lower and XLA compile times, interleaved, with caches cleared before each."""
    lower = {k: [] for k in factories}
    comp = {k: [] for k in factories}
    for _ in range(repeats):
        for name, factory in factories.items():
            jax.clear_caches()
            fn = jax.jit(factory())
            t0 = time.perf_counter()
            lowered = fn.lower(*args)
            t1 = time.perf_counter()
            lowered.compile()
            t2 = time.perf_counter()
            lower[name].append(t1 - t0)
            comp[name].append(t2 - t1)
    return {
        name: {
            "trace_lower": _stats(lower[name]),
            "xla_compile": _stats(comp[name]),
            "total_min_s": min(a + b for a, b in zip(lower[name], comp[name])),
        }
        for name in factories
    }


def run_times(fns: dict[str, Callable], args, repeats: int, inner: int = 1) -> dict:
    """Steady-state wall time per call (after warm-up), contenders interleaved."""
    compiled = {name: jax.jit(fn).lower(*args).compile() for name, fn in fns.items()}
    for f in compiled.values():  # warm-up
        _block(f(*args))
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for name, f in compiled.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                out = f(*args)
            _block(out)
            samples[name].append((time.perf_counter() - t0) / inner)
    return {name: _stats(s) for name, s in samples.items()}


def _ratio(res: dict, key: str = "min_s") -> float:
    return res["constrax"][key] / res["hand"][key]


def _max_abs_diff(a, b) -> float:
    return max(
        float(jnp.max(jnp.abs(x - y)))
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    )


# ----------------------------------------------------------------------------------------
# Benchmarks.


def bench_snake(cfg: dict) -> dict:
    args = (*snake_initial_state(), snake_params())
    rolls = make_snake_rollouts()
    grads = make_snake_grads()
    out = {"t1": T1, "dt0": DT0, "n_steps": round(T1 / DT0)}
    a = jax.jit(rolls["constrax"])(*args)
    b = jax.jit(rolls["hand"])(*args)
    out["final_state_max_abs_diff"] = _max_abs_diff(a, b)
    ga = jax.jit(grads["constrax"])(*args)
    gb = jax.jit(grads["hand"])(*args)
    out["grad_max_abs_diff"] = _max_abs_diff(ga, gb)
    out["rollout"] = run_times(rolls, args, cfg["repeats"])
    out["rollout"]["ratio_min"] = _ratio(out["rollout"])
    out["rollout"]["ratio_median"] = _ratio(out["rollout"], "median_s")
    out["gradient"] = run_times(grads, args, cfg["grad_repeats"])
    out["gradient"]["ratio_min"] = _ratio(out["gradient"])
    out["gradient"]["ratio_median"] = _ratio(out["gradient"], "median_s")
    out["compile_rollout"] = compile_times(
        {k: (lambda k=k: make_snake_rollouts()[k]) for k in rolls}, args, cfg["compile_repeats"]
    )
    out["compile_gradient"] = compile_times(
        {k: (lambda k=k: make_snake_grads()[k]) for k in grads}, args, cfg["compile_repeats"]
    )
    for key in ("compile_rollout", "compile_gradient"):
        r = out[key]
        r["ratio_total_min"] = r["constrax"]["total_min_s"] / r["hand"]["total_min_s"]
    out["targets"] = {
        "rollout_ratio_max": 1.2,
        "gradient_ratio_max": 1.5,
        "rollout_met": out["rollout"]["ratio_min"] <= 1.2,
        "gradient_met": out["gradient"]["ratio_min"] <= 1.5,
    }
    return out


def bench_particle(cfg: dict) -> dict:
    args = (*particle_initial_state(), jnp.array([PARTICLE_MU0]), particle_params())
    out = {"t1": T1, "dt0": DT0, "n_steps": round(T1 / DT0), "mu0": PARTICLE_MU0}
    for label, vak in (("dalembert", False), ("vakonomic", True)):
        fns = make_particle_rollouts(vak)
        a = jax.jit(fns["constrax"])(*args)
        b = jax.jit(fns["hand"])(*args)
        res = {"final_state_max_abs_diff": _max_abs_diff(a, b)}
        res["rollout"] = run_times(fns, args, cfg["repeats"])
        res["rollout"]["ratio_min"] = _ratio(res["rollout"])
        res["rollout"]["ratio_median"] = _ratio(res["rollout"], "median_s")
        res["compile_rollout"] = compile_times(
            {k: (lambda k=k, vak=vak: make_particle_rollouts(vak)[k]) for k in fns},
            args,
            cfg["compile_repeats"],
        )
        r = res["compile_rollout"]
        r["ratio_total_min"] = r["constrax"]["total_min_s"] / r["hand"]["total_min_s"]
        res["target"] = {"rollout_ratio_max": 1.2, "met": res["rollout"]["ratio_min"] <= 1.2}
        out[label] = res
    return out


def bench_batched(cfg: dict) -> dict:
    t1 = cfg["batch_t1"]
    n_steps = round(t1 / DT0)
    p = snake_params()
    out = {"t1": t1, "dt0": DT0, "n_steps": n_steps, "batches": {}}
    for batch in cfg["batches"]:
        rolls = make_snake_rollouts(t1=t1)
        fns = {
            name: jax.vmap(lambda q0, qd0, p, fn=fn: fn(q0, qd0, p), in_axes=(0, 0, None))
            for name, fn in rolls.items()
        }
        q0, qd0 = snake_batch_fast(batch)
        args = (q0, qd0, p)
        reps = cfg["batch_repeats"] if batch < 4096 else max(2, cfg["batch_repeats"] // 2)
        res = run_times(fns, args, reps)
        for name in fns:
            res[name]["env_steps_per_s"] = batch * n_steps / res[name]["min_s"]
        res["ratio_min"] = _ratio(res)
        out["batches"][str(batch)] = res
        print(
            f"  batch {batch:6d}: constrax {res['constrax']['env_steps_per_s']:.3e} steps/s, "
            f"hand {res['hand']['env_steps_per_s']:.3e} steps/s, ratio {res['ratio_min']:.3f}",
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
    try:
        load = os.getloadavg()
    except OSError:  # pragma: no cover
        load = None
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
        "loadavg_at_start": load,
    }


def _ms(x: float) -> str:
    return f"{1e3 * x:.2f}"


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [
        "# constrax CPU benchmarks",
        "",
        f"- date (UTC): {m['date_utc']}; mode: {res['mode']}; wall time {res['wall_s']:.0f} s",
        f"- machine: {m['cpu_model']}, {m['cpu_cores']} cores ({m['platform']}); "
        f"load average at start {m['loadavg_at_start']}, at end {m.get('loadavg_at_end')}",
        f"- versions: python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, "
        f"diffrax {m['diffrax']}, equinox {m['equinox']}, constrax {m['constrax']}",
        f"- note: {res['note']}",
        "- times are per call, minimum (median) over interleaved repeats; ratio = constrax / hand "
        "from the same run (of the minima).",
        "",
        "| case | measure | constrax ms | hand-written ms | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]

    def row(case, measure, r, target=None, met=None, key="min_s"):
        a, b = r["constrax"], r["hand"]
        ratio = a[key] / b[key]
        lines.append(
            f"| {case} | {measure} | {_ms(a[key])} ({_ms(a['median_s'])}) | "
            f"{_ms(b[key])} ({_ms(b['median_s'])}) | {ratio:.2f} | "
            f"{'' if target is None else f'≤ {target}'} | {'' if met is None else ('yes' if met else 'no')} |"
        )

    def crow(case, measure, r):
        a, b = r["constrax"], r["hand"]
        lines.append(
            f"| {case} | {measure} | {_ms(a['total_min_s'])} "
            f"(lower {_ms(a['trace_lower']['min_s'])} + XLA {_ms(a['xla_compile']['min_s'])}) | "
            f"{_ms(b['total_min_s'])} (lower {_ms(b['trace_lower']['min_s'])} + XLA "
            f"{_ms(b['xla_compile']['min_s'])}) | {r['ratio_total_min']:.2f} | | |"
        )

    s = res.get("snake")
    if s:
        n = s["n_steps"]
        row(f"snake cart ({n} Tsit5 steps)", "rollout", s["rollout"], 1.2, s["targets"]["rollout_met"])
        row(f"snake cart ({n} Tsit5 steps)", "gradient", s["gradient"], 1.5, s["targets"]["gradient_met"])
        crow("snake cart", "compile rollout", s["compile_rollout"])
        crow("snake cart", "compile gradient", s["compile_gradient"])
    pa = res.get("particle")
    if pa:
        for label in ("dalembert", "vakonomic"):
            r = pa[label]
            row(f"particle {label} ({pa['n_steps']} steps)", "rollout", r["rollout"], 1.2, r["target"]["met"])
            crow(f"particle {label}", "compile rollout", r["compile_rollout"])
    b = res.get("batched")
    if b:
        lines += [
            "",
            f"Batched snake cart (`vmap` over initial states, {b['n_steps']} steps of dt={b['dt0']}); "
            "env-steps/s = batch × steps / wall time (min over repeats):",
            "",
            "| batch | constrax steps/s | hand-written steps/s | time ratio |",
            "|---|---|---|---|",
        ]
        for batch, r in b["batches"].items():
            lines.append(
                f"| {batch} | {r['constrax']['env_steps_per_s']:.3e} | "
                f"{r['hand']['env_steps_per_s']:.3e} | {r['ratio_min']:.2f} |"
            )
    agree = []
    if s:
        agree.append(f"snake final state {s['final_state_max_abs_diff']:.1e}, gradient {s['grad_max_abs_diff']:.1e}")
    if pa:
        agree += [f"particle {k} {pa[k]['final_state_max_abs_diff']:.1e}" for k in ("dalembert", "vakonomic")]
    if agree:
        lines += ["", "Max |constrax − hand-written| at t1: " + "; ".join(agree) + "."]
    return "\n".join(lines) + "\n"


CONFIGS = {
    "full": dict(
        repeats=15,
        grad_repeats=7,
        compile_repeats=3,
        batches=[1, 16, 256, 4096, 16384],
        batch_t1=1.0,
        batch_repeats=5,
    ),
    "quick": dict(
        repeats=5,
        grad_repeats=3,
        compile_repeats=1,
        batches=[1, 16, 256],
        batch_t1=1.0,
        batch_repeats=3,
    ),
}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and batch sizes (≤ 2 min)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    parser.add_argument(
        "--only", nargs="*", choices=["snake", "particle", "batched"], default=None,
        help="run a subset of the cases",
    )
    parser.add_argument("--note", default="machine shared with other jobs (2 cores); timings are noisy")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    cfg = CONFIGS[mode]
    cases = args.only or ["snake", "particle", "batched"]
    start = time.perf_counter()
    res = {"mode": mode, "config": cfg, "note": args.note, "machine": machine_info()}
    if "snake" in cases:
        print("snake cart ...", flush=True)
        res["snake"] = bench_snake(cfg)
    if "particle" in cases:
        print("nonholonomic particle ...", flush=True)
        res["particle"] = bench_particle(cfg)
    if "batched" in cases:
        print("batched snake cart ...", flush=True)
        res["batched"] = bench_batched(cfg)
    res["wall_s"] = time.perf_counter() - start
    try:
        res["machine"]["loadavg_at_end"] = os.getloadavg()
    except OSError:  # pragma: no cover
        pass
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
