r"""Reverse-mode Jacobians through adaptive steps against forward mode, under three XLA settings.

    python -m benchmarks.adaptive_reverse_gradients [--out benchmarks/results]   (~4 min)

`diffrax.RecursiveCheckpointAdjoint` keeps a few checkpoints of the forward solve and, in
the backward pass, recomputes the steps between them, the step-size controller's accept /
reject decisions included. The gradient is right only if the recomputation repeats those
decisions. At tight tolerances an error estimate is close to round-off, and if the
compiler computes the recomputed step differently, a decision can flip.

The case is the knife edge steered by a piecewise-linear control, the example of
`cx.fit.TrajectoryProblem` (`effort_weight=1e-3`, goal `(0, 1, 0)` at rest, `t1 = 4`,
PID tolerances $10^{-10}$, the tolerance `cx.fit` integrates with). At four random control
tables (`0.3 * normal`, keys 1..4), `max |jacrev(residuals) - jacfwd(residuals)|`: reverse
mode with each adjoint of `ADJOINTS`, forward mode (`diffrax.ForwardMode()`) as the
reference. The forward-mode program makes its own step decisions, so entries of order the
tolerance are expected; entries of order one are wrong. `hand` is the same motion written
as a plain diffrax ODE (no constrax; reduced coordinates $x, y, \theta, v, \omega$), with the
default adjoint.

Each XLA setting (`SETTINGS`) runs in a fresh process. Writes
`adaptive_reverse_gradients_cpu.{json,md}`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)

from benchmarks._report import machine_info, md_table, run_fresh, write_results  # noqa: E402
from benchmarks.suite_flags import SETTINGS  # noqa: E402

ADJOINTS = (
    "RecursiveCheckpointAdjoint() (adaptive, the default)",
    "RecursiveCheckpointAdjoint(checkpoints=16384) (adaptive)",
    "fixed steps dt0 = 0.05 (cx.fit.default_adjoint: one checkpoint per step)",
    "hand-written diffrax ODE, RecursiveCheckpointAdjoint() (adaptive)",
)
KEYS = (1, 2, 3, 4)


def one() -> dict:
    """The four rows of `ADJOINTS` in this process's XLA setting."""
    import diffrax
    import equinox as eqx
    import jax.flatten_util
    import jax.numpy as jnp

    import constrax as cx

    def knife(t, q, p):
        return jnp.array([-jnp.sin(q[2]), jnp.cos(q[2]), 0.0])

    def steered(t, q, qd, p):
        u = p["u"](t)
        return jnp.stack([u[0] * jnp.cos(q[2]), u[0] * jnp.sin(q[2]), u[1]])

    def lagrangian(t, q, qd, p):
        return 0.5 * p["m"] * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * p["I"] * qd[2] ** 2

    system = cx.System(lagrangian, [cx.Pfaffian(knife)], force=steered)
    q0, qd0 = jnp.zeros(3), jnp.array([1.0, 0.0, 2.0])
    params = {"m": 1.0, "I": 0.1, "u": cx.fit.PiecewiseLinear(jnp.zeros((9, 2)), 0.0, 4.0)}
    goal = dict(goal_q=jnp.array([0.0, 1.0, 0.0]), goal_qd=jnp.zeros(3), effort_weight=1e-3)
    pid = diffrax.PIDController(rtol=1e-10, atol=1e-10)

    def problem(**kw):
        return cx.fit.TrajectoryProblem(
            system, q0, qd0, params, controls=lambda p: p["u"], t1=4.0, **goal, **kw
        )

    def hand(adjoint):
        def field(t, y, knots):
            u = cx.fit.PiecewiseLinear(knots, 0.0, 4.0)(t)
            x, y_, th, v, w = y
            return jnp.stack([v * jnp.cos(th), v * jnp.sin(th), w, u[0], u[1] / 0.1])

        def final(knots):
            y0 = jnp.array([0.0, 0.0, 0.0, 1.0, 2.0])
            sol = diffrax.diffeqsolve(
                diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, 4.0, None, y0, knots,
                stepsize_controller=pid, adjoint=adjoint, max_steps=16384,
            )  # fmt: skip
            return sol.ys[-1]

        return final

    def residuals(**kw):  # the problem's residuals as a function of the knots
        pr = problem(**kw)
        return lambda knots: pr.residuals(cx.fit.PiecewiseLinear(knots, 0.0, 4.0))

    fixed = dict(dt0=0.05, stepsize_controller=diffrax.ConstantStepSize())
    forward, every_step = (
        diffrax.ForwardMode(),
        diffrax.RecursiveCheckpointAdjoint(checkpoints=16384),
    )
    pairs = {  # label -> (reverse-mode function of the knots, forward-mode one)
        ADJOINTS[0]: (
            residuals(stepsize_controller=pid),
            residuals(stepsize_controller=pid, adjoint=forward),
        ),
        ADJOINTS[1]: (
            residuals(stepsize_controller=pid, adjoint=every_step),
            residuals(stepsize_controller=pid, adjoint=forward),
        ),
        ADJOINTS[2]: (residuals(**fixed), residuals(**fixed, adjoint=forward)),
        ADJOINTS[3]: (hand(diffrax.RecursiveCheckpointAdjoint()), hand(forward)),
    }
    rows = []
    for label, (rev, fwd) in pairs.items():
        jr, jf = eqx.filter_jit(jax.jacrev(rev)), eqx.filter_jit(jax.jacfwd(fwd))
        errors = []
        for key in KEYS:
            knots = 0.3 * jax.random.normal(jax.random.PRNGKey(key), (9, 2))
            errors.append(float(jnp.max(jnp.abs(jr(knots) - jf(knots)))))
        rows.append(dict(adjoint=label, max_abs_difference=errors))
    return dict(rows=rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--one", action="store_true", help="one setting, in this process")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one()))
        return
    machine = machine_info()
    settings = []
    for label, flags in SETTINGS.items():
        rows = run_fresh("benchmarks.adaptive_reverse_gradients", flags)["rows"]
        settings.append(dict(setting=label, xla_flags=flags, rows=rows))
        print(label, json.dumps(settings[-1]["rows"]), flush=True)
    result = dict(machine=machine, keys=list(KEYS), settings=settings)
    lines = [
        "# Reverse-mode Jacobians through adaptive steps vs forward mode",
        "",
        f"- date (UTC): {machine['date_utc']}; {machine['cpu_model']}, {machine['cpu_cores']} "
        f"cores; jax {machine['jax']}, diffrax {machine['diffrax']}, equinox "
        f"{machine['equinox']}",
        "- `python -m benchmarks.adaptive_reverse_gradients` (what it measures: its docstring)",
        "- max |jacrev − jacfwd| of the knife edge's `TrajectoryProblem` residuals, at the "
        f"random control tables of keys {list(KEYS)}",
        "",
    ]
    for s in settings:
        flags = f"`{s['xla_flags']}`" if s["xla_flags"] else "none"
        lines += [f"## {s['setting']} (XLA_FLAGS: {flags})", ""]
        lines += md_table(
            ["reverse mode", *(f"key {k}" for k in KEYS)],
            [[r["adjoint"], *(f"{e:.1e}" for e in r["max_abs_difference"])] for r in s["rows"]],
        )
        lines.append("")
    write_results(args.out, "adaptive_reverse_gradients_cpu", result, "\n".join(lines))


if __name__ == "__main__":
    main()
