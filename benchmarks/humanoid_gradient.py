"""The first gradient through a 100-step rollout of the gymnasium humanoid imported from MJCF.

    python -m benchmarks.humanoid_gradient [--out benchmarks/results]

`cx.rigid.from_mjcf` of gymnasium's `humanoid.xml` (a free joint and 17 hinges: nq = 24,
nv = 23; contacts and joint limits disabled, as in `benchmarks/tree_dynamics.py`), the
default path (`System.dynamics`: the composite-rigid-body and recursive Newton–Euler terms of
the tree) and `cx.simulate`'s defaults (`AutoSolver()`, `StepProjection()`), 100 fixed Tsit5
steps of the model's own time step, from MuJoCo's initial state with a small velocity; then
100 `diffrax.Euler` steps (the batch user's integrator), with the defaults and like for
like (`KKT()`, `stabilisation=None`), XLA's defaults only. The
loss is the squared distance of the final coordinates from the initial ones; its gradient is
taken with respect to the actuator gears (`actuator_gear`, 21 x 6) and the initial velocity.

Each measurement runs in a new process (cold caches), once with XLA's defaults and once
with its LLVM IR emitters (`XLA_FLAGS=--xla_cpu_use_fusion_emitters=false`): trace + lower
and XLA compile of `jax.jit(jax.grad(loss))`, its jaxpr size, the run time of a compiled
gradient, and — as a check that the compiled gradient is the gradient — one directional
derivative (along the gears) against a central difference of the loss.
"""

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script

STEPS = 100


CASES = {  # label: (solver, like for like)
    "Tsit5, defaults": ("Tsit5", False),
    "Euler, defaults": ("Euler", False),
    "Euler, like for like": ("Euler", True),
}


def measure(solver_name: str = "Tsit5", like: bool = False) -> dict:
    import diffrax
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    import constrax as cx
    from benchmarks.stabilisation import _eqns
    from benchmarks.tree_dynamics import _model

    m = _model("humanoid")
    imported = cx.rigid.from_mjcf(m)
    q0, qd0 = imported.initial_state()
    qd0 = qd0 + 0.1 * jnp.asarray(np.random.default_rng(0).normal(size=qd0.shape))
    q0, qd0 = cx.consistent_initial_state(imported.system, 0.0, q0, qd0, imported.params)
    dt = float(m.opt.timestep)
    ctrl = jnp.asarray(0.2 * np.random.default_rng(1).normal(size=m.nu))
    solver = getattr(diffrax, solver_name)()
    options = dict(constraint_solver=cx.KKT(), stabilisation=None) if like else {}

    def loss(theta):
        gear, v0 = theta
        p = dict(imported.params, actuator_gear=gear, ctrl=ctrl)
        tr = cx.simulate(
            imported.system, q0, v0, p, t1=STEPS * dt, dt0=dt, solver=solver,
            stepsize_controller=diffrax.ConstantStepSize(), max_steps=STEPS + 1, **options,
        )  # fmt: skip
        return jnp.sum((tr.q[-1] - q0) ** 2)

    theta = (imported.params["actuator_gear"], qd0)
    grad = jax.grad(loss)
    t = time.perf_counter()
    lowered = jax.jit(grad).lower(theta)
    trace_lower = time.perf_counter() - t
    t = time.perf_counter()
    compiled = lowered.compile()
    xla = time.perf_counter() - t
    g = jax.block_until_ready(compiled(theta))
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(compiled(theta))
        runs.append(time.perf_counter() - t)
    # One directional derivative against a central difference of the loss, along the gears
    # (a shift of the initial velocity would leave the quaternion's velocity row).
    rng = np.random.default_rng(2)
    direction = (jnp.asarray(rng.normal(size=theta[0].shape)), jnp.zeros_like(theta[1]))
    pairs = zip(jax.tree.leaves(g), jax.tree.leaves(direction), strict=True)
    ad = sum(jnp.vdot(a, d) for a, d in pairs)
    f = jax.jit(loss)
    h = 1e-6
    shift = lambda s: jax.tree.map(lambda x, d: x + s * d, theta, direction)  # noqa: E731
    fd = (f(shift(h)) - f(shift(-h))) / (2 * h)
    return dict(
        trace_lower_s=trace_lower,
        xla_s=xla,
        jaxpr_eqns=_eqns(grad, theta),
        run_s=min(runs),
        directional_derivative_ad=float(ad),
        directional_derivative_fd=float(fd),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for humanoid_gradient_cpu.{json,md}")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--case", choices=list(CASES), default="Tsit5, defaults", help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(*CASES[args.case])))
        return
    from benchmarks._report import (
        XLA_SETTINGS,
        loadavg,
        machine_info,
        machine_line,
        run_fresh,
        write_results,
    )

    machine = machine_info()
    rows = {}
    runs = [("Tsit5, defaults", s) for s in XLA_SETTINGS] + [
        (case, "default (fusion emitters)") for case in list(CASES)[1:]
    ]
    for case, setting in runs:
        key = f"{case}; {setting}"
        rows[key] = run_fresh(
            "benchmarks.humanoid_gradient", XLA_SETTINGS[setting], ("--case", case)
        )
        rows[key].update(case=case, xla_setting=setting)
        print(key, rows[key], flush=True)
    machine["loadavg_at_end"] = loadavg()
    lines = [
        f"# First gradient through a {STEPS}-step rollout of the imported humanoid (CPU)",
        "",
        machine_line(machine),
        "- gymnasium humanoid, `cx.rigid.from_mjcf` (tree path), `cx.simulate`, "
        f"{STEPS} fixed steps; `jax.jit(jax.grad(loss))` with respect to the actuator gears "
        "and the initial velocity; each row in a new process; defaults = no option, like for "
        "like = `KKT()`, `stabilisation=None`",
        "",
        "| solver, options | XLA setting | trace + lower [s] | XLA compile [s] | total [s] "
        "| jaxpr equations | gradient run [ms] | directional derivative: AD / central "
        "difference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        lines.append(
            f"| {r['case']} | {r['xla_setting']} | {r['trace_lower_s']:.1f} | {r['xla_s']:.1f} "
            f"| {r['trace_lower_s'] + r['xla_s']:.1f} | {r['jaxpr_eqns']} | "
            f"{r['run_s'] * 1e3:.1f} | {r['directional_derivative_ad']:.8g} / "
            f"{r['directional_derivative_fd']:.8g} |"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    result = dict(machine=machine, steps=STEPS, rows=rows)
    write_results(args.out, "humanoid_gradient_cpu", result, report)


if __name__ == "__main__":
    main()
