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
    qd = np.asarray(traj.qd)
    t = np.asarray(ts)
    u = np.asarray(jax.vmap(res.params["u"])(ts))
    v = np.cos(q[:, 2]) * qd[:, 0] + np.sin(q[:, 2]) * qd[:, 1]  # speed along the blade
    fig, axes = plt.subplots(2, 3, figsize=(13.5, 7.4))
    ax1 = axes[0, 0]
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
    ax1.plot([0.0], [0.0], "ks", mfc="none", ms=9, label="start (rest)")
    ax1.plot([float(goal[0])], [float(goal[1])], "ko", mfc="none", ms=11, label="goal (rest)")
    ax1.set_aspect("equal")
    ax1.set_xlabel("x [m]")
    ax1.set_ylabel("y [m]")
    ax1.set_title("knife edge moved sideways")
    ax1.margins(x=0.6)
    ax1.legend(fontsize=8, loc="lower right")
    ax = axes[0, 1]
    ax.plot(t, q[:, 0], label="x")
    ax.plot(t, q[:, 1], label="y")
    ax.plot([T, T], [float(goal[0]), float(goal[1])], "ko", mfc="none", ms=8, label="goal")
    ax.set(xlabel="t [s]", ylabel="position [m]", title="position of the contact point")
    ax.legend(fontsize=8)
    ax = axes[0, 2]
    ax.plot(t, np.degrees(q[:, 2]), color="C1")
    ax.plot([T], [np.degrees(float(goal[2]))], "ko", mfc="none", ms=8, label="goal")
    ax.set(xlabel="t [s]", ylabel=r"heading $\theta$ [deg]", title=r"heading $\theta(t)$")
    ax.legend(fontsize=8)
    ax = axes[1, 0]
    ax.plot(t, v, label=r"speed along the blade $v$ [m/s]")
    ax.plot(t, qd[:, 2], label=r"turning rate $\dot\theta$ [rad/s]")
    ax.axhline(0.0, color="k", lw=0.6)
    ax.set(
        xlabel="t [s]",
        ylabel="v [m/s], $\\dot\\theta$ [rad/s]",
        title="velocities (rest at both ends)",
    )
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    ax.plot(t, u[:, 0], label="push $u_1$ [N]")
    ax.plot(t, u[:, 1], label="torque $u_2$ [N m]")
    ax.plot(res.params["u"].times, np.asarray(res.params["u"].knots), "k.", ms=4)
    ax.set(
        xlabel="t [s]",
        ylabel="$u_1$ [N], $u_2$ [N m]",
        title=f"controls ({N} knots, piecewise linear)",
    )
    ax.legend(fontsize=8)
    ax = axes[1, 2]
    ax.axis("off")
    ax.text(
        0.0,
        0.95,
        "\n".join(
            [
                "what the optimiser found",
                "",
                f"terminal error max |q(T) - q*|, |qd(T)|: {np.max(np.abs(err)):.1e}",
                f"largest |constraint residual|: {residual:.1e} m/s",
                f"effort integral of |u|^2 dt: {effort:.3g}",
                f"Levenberg-Marquardt steps: {res.num_steps}, loss {float(res.loss):.3g}",
                f"speed along the blade: {v.min():+.2f} to {v.max():+.2f} m/s",
                "  (negative: moving backwards)",
                f"heading: {np.degrees(q[:, 2]).min():.0f} to {np.degrees(q[:, 2]).max():.0f} deg",
                "",
                "The blade cannot slip sideways, so it reaches",
                "the goal 1 m to its side along an S, turning",
                "away and back while it rolls along its blade.",
            ]
        ),
        va="top",
        family="monospace",
        fontsize=8.5,
        transform=ax.transAxes,
    )
    fig.tight_layout()
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "trajectory_optimisation.png")
    fig.savefig(path, dpi=100)
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
