r"""Trajectory optimisation of a nonholonomic vehicle by direct collocation.

The dynamic car (`models.kinematic_car`): rear axle and steered front wheel that cannot
slip sideways (two Pfaffian rows), driven by a force $F$ along the heading and a
steering torque $\tau$, the control $u = (F, \tau)$ read from the parameters
(`p["u"]`). Task: from the model's initial state (moving forward at 1 m/s, front wheel
turned by 0.2 rad), reach the lane-change target pose $(x, y, \theta)$ of the rear axle
at $T = 3$ s (the steering angle and the velocities left free), with least effort
$\int_0^T |u|^2\,dt$.

Solved with `cx.fit.solve_optimal_control` (`cx.fit.OptimalControlProblem`,
Hermite–Simpson collocation on the constraint manifold, IPOPT), run to convergence; the
target pose is a terminal equality constraint, not a penalty. Two variants from the same
default guess:

* **plain**: effort only. The optimum meets the pose, but it is not a lane change: the
  car overshoots the target, stops, and reverses into it, spinning its front wheel far
  past 90°. Nothing in this problem forbids that.
* **constrained**: the same effort, subject to a forward-speed floor
  $v = \dot x\cos\theta + \dot y\sin\theta \ge v_\min$ (a path constraint, imposed at
  the nodes and midpoints) and a steering-angle bound $|\psi| \le 60°$ (a bound on $q$).
  At its optimum the steering bound is active (the wheel ends on it) and the speed floor
  is not (the car stays near 0.4 m/s or faster): bounding the steering alone already
  keeps it from reversing here, and the floor makes that a requirement (at the nodes and
  midpoints) rather than an outcome.

Each solution's status, iterations, objective, constraint violation and terminal error
are the solver's and its independent check's; every other reported quantity (the pose
reached, the largest $x$, the smallest forward speed, the time spent reversing, the
largest steering angle, the no-slip residual) is measured on the **replay**: the
solution's controls applied to `cx.simulate` of the exact constrained dynamics
(`sol.replay`), independently of the nonlinear program. The replay error is the largest
difference between the replay and the collocated states at the nodes (larger for the
plain optimum, whose fast-spinning front wheel needs a finer grid). The figure shows
both replayed motions: the path, position, heading, steering angle, forward speed and the
controls (node values and the piecewise-quadratic control between them).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np

from .. import fit, models
from ._common import enable_x64, outpath, pyplot, stopwatch

TARGET = (1.5, 0.6, 0.0)  # x [m], y [m], theta [rad] of the rear axle at T
T = 3.0  # horizon [s]
V_MIN = 0.1  # forward-speed floor of the constrained variant [m/s]
PSI_MAX_DEG = 60.0  # steering-angle bound of the constrained variant [deg]
VARIANTS = (
    ("plain", "effort only"),
    ("constrained", f"+ v ≥ {V_MIN} m/s, ψ within ±{PSI_MAX_DEG:.0f}°"),
)


def _controls(t, q, qd, p):
    """Generalised force of the control `p["u"] = (F, tau)`: drive force along the
    heading, steering torque."""
    F, tau = p["u"][0], p["u"][1]
    th = q[2]
    return jnp.stack([F * jnp.cos(th), F * jnp.sin(th), jnp.zeros_like(th), tau])


def _model():
    return models.kinematic_car(force=_controls)


def _speed(q, qd):
    """Forward speed of the rear axle along the heading [m/s]."""
    return jnp.cos(q[..., 2]) * qd[..., 0] + jnp.sin(q[..., 2]) * qd[..., 1]


def _control(p):
    return p["u"]


def _effort(t, q, qd, u, p):
    return u @ u


def _pose_error(t, q, qd, p):
    return q[:3] - jnp.asarray(TARGET, q.dtype)


def _speed_floor(t, q, qd, u, p):
    return jnp.atleast_1d(V_MIN - _speed(q, qd))  # <= 0


def _problem(model, key: str) -> fit.OptimalControlProblem:
    options = dict(
        control=_control,
        t1=T,
        q0=model.q0,
        qd0=model.qd0,
        running_cost=_effort,
        terminal_constraint=_pose_error,
    )
    if key == "constrained":
        psi = np.radians(PSI_MAX_DEG)
        options.update(
            path_constraint=_speed_floor,
            q_bounds=([-np.inf, -np.inf, -np.inf, -psi], [np.inf, np.inf, np.inf, psi]),
        )
    return fit.OptimalControlProblem(model.system, {**model.params, "u": jnp.zeros(2)}, **options)


def _describe(name, out):
    """One honest line on what the solver reached."""
    s = out
    txt = (
        f"{name}: {s['status']} in {s['iterations']} iterations, ∫|u|² {s['objective']:.4g}, "
        f"violation {s['constraint_violation']:.0e}, replay error {s['replay_error']:.0e}; "
        f"x max {s['max_x']:.3f} m, v min {s['min_forward_speed']:+.2f} m/s, "
        f"|ψ| max {s['max_abs_steering_deg']:.0f}°"
    )
    if s["reversing_s"] > 0:
        txt += f" — reverses for {s['reversing_s']:.2f} s"
    if not s["success"]:
        txt += " — NOT a solution"
    return txt


def _figure(path, ts, runs, N):
    plt = pyplot()
    tsn = np.asarray(ts)
    fig = plt.figure(figsize=(16, 8))
    grid = fig.add_gridspec(2, 4)
    colors = {"plain": "C3", "constrained": "C0"}

    def path_panel(ax, zoomed):
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
    ax.set_title("rear-axle path, replayed (arrows: heading; x: position at T)")
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
    ax.plot([T] * 2, TARGET[:2], "ko", mfc="none", ms=8, label="target x, y")
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
        rf"steering angle $\psi(t)$ (dotted: bound $\pm{PSI_MAX_DEG:.0f}°$)",
    )  # fmt: skip
    for y in (-PSI_MAX_DEG, PSI_MAX_DEG):
        ax.axhline(y, color="0.4", lw=0.8, ls=":")
    ax = fig.add_subplot(grid[1, 2])
    series(
        ax, lambda r: r["v"], "forward speed v [m/s]",
        r"forward speed $v = \dot x\cos\theta + \dot y\sin\theta$",
    )  # fmt: skip
    ax.axhline(0.0, color="k", lw=0.8)
    ax.axhline(V_MIN, color="0.4", lw=0.8, ls=":", label=rf"floor $v_\min$ = {V_MIN} m/s")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(grid[1, 3])
    for key, label in VARIANTS:
        r = runs[key]
        ax.plot(tsn, r["u_fine"][:, 0], "-", color=colors[key], lw=1.2, label=f"F [N], {label}")
        ax.plot(tsn, r["u_fine"][:, 1], "--", color=colors[key], lw=1.2,
                label=rf"$\tau$ [N m], {label}")  # fmt: skip
        ax.plot(r["t_nodes"], r["u_nodes"][:, 0], "o", color=colors[key], ms=2.5)
        ax.plot(r["t_nodes"], r["u_nodes"][:, 1], "s", color=colors[key], ms=2.5)
    ax.axhline(0.0, color="k", lw=0.6)
    ax.set(
        xlabel="t [s]",
        ylabel="F [N], τ [N m]",
        title=f"controls (markers: the {N + 1} nodes)",
    )
    ax.legend(fontsize=7)
    fig.suptitle(
        "\n".join(_describe(f"{key} ({label})", runs[key]) for key, label in VARIANTS),
        fontsize=10,
        y=0.995,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _measure(sol, ts, every: int) -> dict:
    """The solver's verdict, and the motion measured on the replay of its controls."""
    traj = sol.replay(ts=ts)
    q, qd = np.asarray(traj.q), np.asarray(traj.qd)
    # `ts` holds the nodes (every `every`-th entry): the replay error as
    # `sol.replay_error()` measures it, from the same replay.
    replay_error = max(
        float(np.abs(q[::every] - np.asarray(sol.q)).max()),
        float(np.abs(qd[::every] - np.asarray(sol.qd)).max()),
    )
    v = np.asarray(_speed(q, qd))
    dt = float(ts[1] - ts[0])
    residual = float(jnp.max(jnp.abs(traj.constraint_residual().velocity)))
    return {
        "q": q,
        "v": v,
        "u_fine": np.asarray(jax.vmap(sol.control)(ts)),
        "t_nodes": np.asarray(sol.ts),
        "u_nodes": np.asarray(sol.u),
        "success": bool(sol.success),
        "status": sol.status,
        "iterations": int(sol.iterations),
        "objective": float(sol.objective),
        "constraint_violation": float(sol.constraint_violation),
        "manifold_violation": float(sol.manifold_violation),
        "terminal_error": float(sol.terminal_error),
        "replay_error": replay_error,
        "reached_pose": [float(x) for x in q[-1, :3]],
        "replay_pose_error": float(np.abs(q[-1, :3] - np.asarray(TARGET)).max()),
        "max_x": float(q[:, 0].max()),
        "min_forward_speed": float(v.min()),
        "reversing_s": float(np.sum(v < 0) * dt),
        "max_abs_steering_deg": float(np.degrees(np.abs(q[:, 3]).max())),
        "max_abs_steering_rate": float(np.abs(qd[:, 3]).max()),
        "final_steering_deg": float(np.degrees(q[-1, 3])),
        "max_velocity_residual": residual,
    }


def run(outdir, quick: bool = False) -> dict:
    """Solve the car's lane change in both variants by direct collocation; write
    `trajectory_optimisation.png`.

    **Returns:** a dict with the target, the transcription and, per variant (`plain`,
    `constrained`), the solver's status, success, iterations, objective, constraint
    violation and terminal error, the replay error, and the motion measured on the
    replay: the reached pose, the largest $x$, the smallest forward speed, the time spent
    reversing, the largest steering angle and rate, the largest no-slip residual.
    """
    enable_x64()
    model = _model()
    N = 40 if quick else 80
    every = 8 if quick else 4
    ts = jnp.linspace(0.0, T, N * every + 1)  # the nodes are every `every`-th time
    runs, sols = {}, {}
    with stopwatch() as sw:
        for key, _ in VARIANTS:
            problem = _problem(model, key)
            sols[key] = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(N))
            runs[key] = _measure(sols[key], ts, every)
    _figure(outpath(outdir, "trajectory_optimisation.png"), ts, runs, N)

    hidden = ("q", "v", "u_fine", "t_nodes", "u_nodes")
    public = {k: {n: v for n, v in r.items() if n not in hidden} for k, r in runs.items()}
    for key, sol in sols.items():
        if not sol.success:  # the worst rows or bounds, by name
            public[key]["violated"] = list(sol.violated)
    summary = {
        "model": "kinematic_car",
        "method": f"direct collocation (Hermite–Simpson, {N} intervals) + IPOPT",
        "target_pose": list(TARGET),
        "horizon_s": T,
        "v_min": V_MIN,
        "max_steering_deg": PSI_MAX_DEG,
        **{key: {"problem": label, **public[key]} for key, label in VARIANTS},
        "wall_s": float(sw()),
        "figure": "trajectory_optimisation.png",
    }
    with open(outpath(outdir, "trajectory_optimisation.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
