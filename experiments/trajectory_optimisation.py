"""Trajectory optimisation: steer the knife edge sideways (constrax.fit).

The knife edge (`cx.models.knife_edge`) cannot slip sideways. It is pushed along its
heading ($u_1$) and turned ($u_2$), $Q = (u_1\\cos\\theta, u_1\\sin\\theta, u_2)$, with
piecewise-linear controls. Goal: from rest at the origin to rest at $(0, 1, 0)$, a pure
sideways displacement it cannot make by moving straight. Objective
$\\tfrac{w_u}{2}\\int|u|^2dt + \\tfrac{w_T}{2}|x(T) - x^\\star|^2$, minimised by
Levenberg–Marquardt on the knots with forward-mode Jacobians through diffrax. The
no-slip constraint is part of the dynamics, so it holds along every iterate.

Run: `python experiments/trajectory_optimisation.py [--quick]` → `experiments/figures/`.
"""

import argparse
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optimistix as optx  # noqa: E402

import constrax as cx  # noqa: E402
import constrax.fit as fit  # noqa: E402
from constrax import models  # noqa: E402


def _force(t, q, qd, p):
    u = p["u"](t)
    th = q[2]
    return jnp.stack([u[0] * jnp.cos(th), u[0] * jnp.sin(th), u[1]])


def run(outdir: str, quick: bool = False) -> dict:
    """Optimise the manoeuvre, save `trajectory_optimisation.png` in `outdir`, and return
    the measured numbers."""
    start = time.perf_counter()
    T, N = 4.0, 12 if quick else 16
    model = models.knife_edge()
    system = cx.System(model.system.lagrangian, model.system.constraints, force=_force)
    knots0 = 0.5 * jax.random.normal(jax.random.PRNGKey(0), (N, 2))
    params = {**model.params, "u": fit.PiecewiseLinear(knots0, 0.0, T)}
    goal = jnp.array([0.0, 1.0, 0.0])
    problem = fit.TrajectoryProblem(
        system,
        jnp.zeros(3),
        jnp.zeros(3),
        params,
        controls=lambda p: p["u"],
        t1=T,
        goal_q=goal,
        goal_qd=jnp.zeros(3),
        effort_weight=1e-3,
        terminal_weight=1e3,
        adjoint=diffrax.ForwardMode(),
        constraint_solver=cx.KKT(),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )
    res = fit.solve(
        problem, params, optx.LevenbergMarquardt(rtol=1e-9, atol=1e-9), steps=40, throw=False
    )
    ts = jnp.linspace(0.0, T, 401)
    traj = problem.simulate(res.params, ts)
    err = np.concatenate([traj.q[-1] - goal, traj.qd[-1]])
    residual = float(jnp.max(jnp.abs(traj.constraint_residual().velocity)))
    effort = float(jnp.sum(res.params["u"].effort_residuals() ** 2))
    wall = time.perf_counter() - start

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    q = np.asarray(traj.q)
    u = np.asarray(jax.vmap(res.params["u"])(ts))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(q[:, 0], q[:, 1], "-", color="C0", label="contact point")
    idx = np.linspace(0, len(q) - 1, 25).astype(int)
    ax1.quiver(
        q[idx, 0],
        q[idx, 1],
        0.08 * np.cos(q[idx, 2]),
        0.08 * np.sin(q[idx, 2]),
        angles="xy",
        scale_units="xy",
        scale=1.0,
        width=0.006,
        color="C1",
        label="heading",
    )
    ax1.plot([0, float(goal[0])], [0, float(goal[1])], "k*", ms=10, label="start / goal")
    ax1.set_aspect("equal")
    ax1.set_xlabel("x [m]")
    ax1.set_ylabel("y [m]")
    ax1.set_title("knife edge moved sideways")
    ax1.margins(x=0.6)
    ax1.legend(fontsize=8, loc="lower right")
    ax2.plot(ts, u[:, 0], label="push $u_1$ [N]")
    ax2.plot(ts, u[:, 1], label="torque $u_2$ [N m]")
    ax2.plot(res.params["u"].times, np.asarray(res.params["u"].knots), "k.", ms=4)
    ax2.set_xlabel("t [s]")
    ax2.set_title(f"controls ({N} knots, piecewise linear)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "trajectory_optimisation.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return {
        "terminal_error_max": float(np.max(np.abs(err))),
        "constraint_residual_max": residual,
        "effort_integral": effort,
        "loss": float(res.loss),
        "lm_steps": res.num_steps,
        "num_knots": N,
        "wall_time_s": wall,
        "figure": path,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--outdir", default=os.path.join(os.path.dirname(__file__), "figures"))
    args = parser.parse_args()
    for k, v in run(args.outdir, quick=args.quick).items():
        print(f"{k}: {v}")
