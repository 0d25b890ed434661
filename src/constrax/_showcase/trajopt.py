r"""Trajectory optimisation of a nonholonomic vehicle by gradient through `cx.simulate`.

The dynamic car (`models.kinematic_car`): rear axle and steered front wheel that cannot
slip sideways (two Pfaffian rows), driven by a force $F(t)$ along the heading and a
steering torque $\tau(t)$, both piecewise linear in time (their knot values are the
decision variables, read from the parameters). Task: from the model's initial state
(moving forward at 1 m/s), reach a lane-change target pose $(x, y, \theta)$ of the rear
axle at time $T$.

Two objectives, both solved as nonlinear least squares with Levenberg–Marquardt
(`optimistix`) from the same initial controls, the sensitivities by forward mode through
the whole constrained rollout:

* **terminal pose + effort**:
  $\tfrac12\big|(q(T) - q^\ast)_{x,y,\theta}/\epsilon\big|^2 + \tfrac12 w\sum_k |u_k|^2$.
  The optimiser meets the pose, but the motion it finds is not a lane change: the car
  overshoots the target, stops, and reverses into it with the front wheel turned far
  past 90°. Nothing in this objective forbids that.
* **+ steering rate and forward speed**: adds $\tfrac12 w_r\int_0^T\dot\psi^2\,dt$ (a
  steering-rate penalty) and a soft floor on the forward speed $v = \dot x\cos\theta +
  \dot y\sin\theta$, $\tfrac12 w_v\int_0^T \min(v - v_\min, 0)^2\,dt$ (both integrals
  by the rectangle rule on a grid of the horizon).

The figure shows both motions: the path, and position, heading, steering angle, forward
speed and controls over time. The constraints hold along every candidate motion by
construction (they are part of the dynamics, not penalties).
"""

import json

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from .. import models
from ._common import enable_x64, outpath, pyplot, simulate_model, stopwatch

TARGET = (1.5, 0.6, 0.0)  # x [m], y [m], theta [rad]
TOL = 1e-3  # pose tolerance scaling the terminal residual
EFFORT = 1e-3  # effort weight w
RATE = 0.1  # steering-rate weight w_r
FLOOR = 100.0  # weight w_v of the soft forward-speed floor
V_MIN = 0.1  # the floor v_min [m/s]
N_GRID = 31  # grid of the running penalties
VARIANTS = (("plain", "terminal pose + effort"), ("smooth", "+ steering rate, speed floor"))


def _controls(t, q, qd, p):
    knots = p["knots"]  # (K, 2): drive force, steering torque
    tk = jnp.linspace(0.0, p["T"], knots.shape[0])
    F = jnp.interp(t, tk, knots[:, 0])
    tau = jnp.interp(t, tk, knots[:, 1])
    th = q[2]
    return jnp.stack([F * jnp.cos(th), F * jnp.sin(th), jnp.zeros_like(th), tau])


def _model():
    return models.kinematic_car(force=_controls)


def _rollout(model, knots, T, ts):
    p = {**model.params, "knots": knots, "T": T}
    return simulate_model(model, ts, p, t1=T, tol=1e-8, adjoint=diffrax.ForwardMode())


def _speed(q, qd):
    """Forward speed of the rear axle along the heading [m/s]."""
    return jnp.cos(q[..., 2]) * qd[..., 0] + jnp.sin(q[..., 2]) * qd[..., 1]


@eqx.filter_jit
def _trajectory(model, knots, T, ts):
    traj = _rollout(model, knots, T, ts)
    return traj.q, traj.qd, jnp.max(jnp.abs(traj.constraint_residual().velocity))


@eqx.filter_jit
def _optimise(model, knots0, T, max_steps, rate, floor):
    # `rate` and `floor` are arrays, so both variants share one compiled solve.
    ts = jnp.linspace(0.0, T, N_GRID)
    dt = T / (N_GRID - 1)
    target = jnp.array(TARGET)

    def residuals(flat, _):
        knots = flat.reshape(knots0.shape)
        traj = _rollout(model, knots, T, ts)
        qT = traj.q[-1]
        v = _speed(traj.q, traj.qd)
        return jnp.concatenate(
            [
                (qT[:3] - target) / TOL,
                jnp.sqrt(EFFORT) * flat,
                jnp.sqrt(rate * dt) * traj.qd[:, 3],
                jnp.sqrt(floor * dt) * jnp.minimum(v - V_MIN, 0.0),
            ]
        )

    sol = optx.least_squares(
        residuals,
        optx.LevenbergMarquardt(rtol=1e-6, atol=1e-6),
        knots0.ravel(),
        max_steps=max_steps,
        throw=False,
    )
    r0 = residuals(knots0.ravel(), None)
    r = residuals(sol.value, None)
    return (
        sol.value.reshape(knots0.shape),
        r0[:3] * TOL,
        r[:3] * TOL,
        sol.stats["num_steps"],
        (sol.result == optx.RESULTS.successful),
    )


def _describe(name, out):
    """One honest line on what the optimiser found."""
    s = out
    txt = (
        f"{name}: |pose error| {s['terminal_error']:.1e}, x max {s['max_x']:.3f} m, "
        f"v min {s['min_forward_speed']:+.2f} m/s, |ψ| max {s['max_abs_steering_deg']:.0f}°, "
        f"ψ(T) {s['final_steering_deg']:.0f}°"
    )
    if s["min_forward_speed"] < 0:
        txt += f" — reverses for {s['reversing_s']:.2f} s"
    return txt


def _figure(path, T, ts, q_init, runs, K):
    plt = pyplot()
    tsn = np.asarray(ts)
    fig = plt.figure(figsize=(16, 8))
    grid = fig.add_gridspec(2, 4)
    colors = {"plain": "C3", "smooth": "C0"}

    def path_panel(ax, zoomed):
        if not zoomed:
            ax.plot(q_init[:, 0], q_init[:, 1], ":", color="0.5", label="initial controls")
        for key, label in VARIANTS:
            q, v = runs[key]["q"], runs[key]["v"]
            ax.plot(q[:, 0], q[:, 1], color=colors[key], lw=1.6, label=label)
            rev = np.where(v < 0, q[:, 1], np.nan)  # the reversing stretch, drawn on top
            if np.isfinite(rev).any():
                ax.plot(q[:, 0], rev, color="k", lw=4, alpha=0.3, label=f"{label}: reversing")
            idx = np.arange(len(q) - 1, 0, -(len(q) // (20 if zoomed else 8)))
            ax.quiver(
                q[idx, 0], q[idx, 1], np.cos(q[idx, 2]), np.sin(q[idx, 2]), color=colors[key],
                angles="xy", scale_units="xy", scale=30 if zoomed else 8, width=0.006,
            )  # fmt: skip
            ax.plot(q[-1, 0], q[-1, 1], "x", color=colors[key], ms=8, mew=2)
        ax.plot(TARGET[0], TARGET[1], "o", mfc="none", mec="k", ms=12, mew=1.2, label="target")
        ax.set_aspect("equal")
        ax.set(xlabel="x [m]", ylabel="y [m]")

    ax = fig.add_subplot(grid[0, :2])
    path_panel(ax, zoomed=False)
    ax.set_xlim(-0.05, 2.2)
    ax.set_ylim(-0.1, 0.85)
    ax.set_title("rear-axle path (arrows: heading; x: position at T)")
    ax.legend(fontsize=7, loc="upper left")
    zoom = fig.add_subplot(grid[0, 2])
    path_panel(zoom, zoomed=True)
    far = max(float(r["q"][:, 0].max()) for r in runs.values())
    zoom.set_xlim(1.33, max(1.6, far + 0.03))
    zoom.set_ylim(0.47, 0.66)
    zoom.set_title("zoom at the target")
    ax.indicate_inset_zoom(zoom, edgecolor="0.4")

    def series(ax, f, ylabel, title, target=None):
        for key, label in VARIANTS:
            ax.plot(tsn, f(runs[key]), color=colors[key], label=label)
        if target is not None:
            ax.axhline(target, color="k", lw=0.8, ls="--", label="target")
        ax.set(xlabel="t [s]", ylabel=ylabel, title=title)

    ax = fig.add_subplot(grid[0, 3])
    for key, label in VARIANTS:
        q = runs[key]["q"]
        ax.plot(tsn, q[:, 0], color=colors[key], label=f"x, {label}")
        ax.plot(tsn, q[:, 1], "--", color=colors[key], label=f"y, {label}")
    ax.plot([float(T)] * 2, TARGET[:2], "ko", mfc="none", ms=8, label="target x, y")
    ax.set(xlabel="t [s]", ylabel="position [m]", title="position of the rear axle")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(grid[1, 0])
    series(
        ax, lambda r: np.degrees(r["q"][:, 2]), r"heading $\theta$ [deg]",
        r"heading $\theta(t)$", target=np.degrees(TARGET[2]),
    )  # fmt: skip
    ax.legend(fontsize=7)
    ax = fig.add_subplot(grid[1, 1])
    series(
        ax, lambda r: np.degrees(r["q"][:, 3]), r"steering angle $\psi$ [deg]",
        r"steering angle $\psi(t)$ (dotted: $\pm 90°$)",
    )  # fmt: skip
    for y in (-90, 90):
        ax.axhline(y, color="0.6", lw=0.6, ls=":")
    ax = fig.add_subplot(grid[1, 2])
    series(
        ax, lambda r: r["v"], "forward speed v [m/s]",
        r"forward speed $v = \dot x\cos\theta + \dot y\sin\theta$",
    )  # fmt: skip
    ax.axhline(0.0, color="k", lw=0.8)
    ax.axhline(V_MIN, color="0.5", lw=0.8, ls=":", label=rf"floor $v_\min$ = {V_MIN} m/s")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(grid[1, 3])
    tk = np.linspace(0.0, float(T), K)
    for key, label in VARIANTS:
        kn = runs[key]["knots"]
        ax.plot(tk, kn[:, 0], "o-", color=colors[key], ms=4, label=f"F [N], {label}")
        ax.plot(tk, kn[:, 1], "s--", color=colors[key], ms=4, label=rf"$\tau$ [N m], {label}")
    ax.set(xlabel="t [s]", ylabel="F [N], τ [N m]", title=f"controls ({K} knots, piecewise linear)")
    ax.legend(fontsize=7)
    fig.suptitle(
        "\n".join(_describe(label, runs[key]) for key, label in VARIANTS), fontsize=10, y=0.995
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(outdir, quick: bool = False) -> dict:
    """Optimise the car's drive and steering controls under both objectives; write
    `trajectory_optimisation.png`.

    **Returns:** a dict with the target and, for the plain objective (top level, as
    before) and the penalised one (`smooth`), the reached pose, the terminal error, the
    largest $x$, the smallest forward speed, the time spent reversing, the largest
    steering angle and rate, the effort, the optimiser steps and the largest constraint
    residual; the initial terminal error and the time.
    """
    enable_x64()
    model = _model()
    K = 5 if quick else 8
    T = jnp.asarray(3.0)
    knots0 = jnp.zeros((K, 2)).at[:, 0].set(0.2)
    ts = jnp.linspace(0.0, T, 301)
    dt = float(ts[1] - ts[0])
    weights = {"plain": (0.0, 0.0), "smooth": (RATE, FLOOR)}
    runs = {}
    with stopwatch() as sw:
        for key, (rate, floor) in weights.items():
            knots, err0, err, steps, ok = jax.block_until_ready(
                _optimise(model, knots0, T, 300, jnp.asarray(rate), jnp.asarray(floor))
            )
            q, qd, res = (np.asarray(a) for a in _trajectory(model, knots, T, ts))
            v = np.asarray(_speed(q, qd))
            runs[key] = {
                "q": q,
                "v": v,
                "knots": np.asarray(knots),
                "reached_pose": [float(x) for x in q[-1, :3]],
                "terminal_error_initial": float(np.linalg.norm(np.asarray(err0))),
                "terminal_error": float(np.linalg.norm(np.asarray(err))),
                "max_x": float(q[:, 0].max()),
                "min_forward_speed": float(v.min()),
                "reversing_s": float(np.sum(v < 0) * dt),
                "max_abs_steering_deg": float(np.degrees(np.abs(q[:, 3]).max())),
                "max_abs_steering_rate": float(np.abs(qd[:, 3]).max()),
                "final_steering_deg": float(np.degrees(q[-1, 3])),
                "effort": float(np.sum(np.asarray(knots) ** 2)),
                "optimiser_steps": int(steps),
                "converged": bool(ok),
                "max_velocity_residual": float(res),
            }
    q_init = np.asarray(_trajectory(model, knots0, T, ts)[0])
    _figure(outpath(outdir, "trajectory_optimisation.png"), T, ts, q_init, runs, K)

    public = {
        k: {n: v for n, v in r.items() if n not in ("q", "v", "knots")} for k, r in runs.items()
    }
    summary = {
        "model": "kinematic_car",
        "target_pose": list(TARGET),
        "control_knots": K,
        "objective": dict(VARIANTS)["plain"],
        **public["plain"],
        "smooth_weights": {"steering_rate": RATE, "speed_floor": FLOOR, "v_min": V_MIN},
        "smooth": {"objective": dict(VARIANTS)["smooth"], **public["smooth"]},
        "wall_s": float(sw()),
        "figure": "trajectory_optimisation.png",
    }
    with open(outpath(outdir, "trajectory_optimisation.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
