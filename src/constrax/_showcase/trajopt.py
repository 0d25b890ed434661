r"""Trajectory optimisation of a nonholonomic vehicle by gradient through `cx.simulate`.

The dynamic car (`models.kinematic_car`): rear axle and steered front wheel that cannot
slip sideways (two Pfaffian rows), driven by a force $F(t)$ along the heading and a
steering torque $\tau(t)$, both piecewise linear in time (their knot values are
the decision variables, read from the parameters). Task: from the model's initial
state (moving at 1 m/s), reach a lane-change target pose $(x, y, \theta)$ at time
$T$ with small effort:

$\min_u\ \tfrac12\big|(q(T) - q^\ast)_{x,y,\theta}/\epsilon\big|^2
+ \tfrac12 w\,\textstyle\sum_k |u_k|^2$,

solved as nonlinear least squares with Levenberg–Marquardt (`optimistix`), the
sensitivities $\partial q(T)/\partial u$ by forward mode through the whole constrained
rollout. The constraints hold along the optimised motion by construction (they are part
of the dynamics, not penalties).
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


@eqx.filter_jit
def _trajectory(model, knots, T, ts):
    traj = _rollout(model, knots, T, ts)
    return traj.q, jnp.max(jnp.abs(traj.constraint_residual().velocity))


@eqx.filter_jit
def _optimise(model, knots0, T, max_steps):
    ts = jnp.stack([jnp.zeros_like(T), T])
    target = jnp.array(TARGET)

    def residuals(flat, _):
        knots = flat.reshape(knots0.shape)
        qT = _rollout(model, knots, T, ts).q[-1]
        return jnp.concatenate([(qT[:3] - target) / TOL, jnp.sqrt(EFFORT) * flat])

    sol = optx.least_squares(
        residuals,
        optx.LevenbergMarquardt(rtol=1e-6, atol=1e-6),
        knots0.ravel(),
        max_steps=max_steps,
        throw=False,
    )
    r0 = residuals(knots0.ravel(), None)
    r = residuals(sol.value, None)
    return sol.value.reshape(knots0.shape), r0, r, sol.stats["num_steps"], sol.result


def run(outdir, quick: bool = False) -> dict:
    """Optimise the car's drive and steering controls; write `trajectory_optimisation.png`.

    **Returns:** a dict with the target, the reached pose, the terminal error before and
    after, the control effort, the optimiser steps, the largest constraint residual along
    the optimised motion and the time.
    """
    enable_x64()
    model = _model()
    K = 5 if quick else 8
    T = jnp.asarray(3.0)
    knots0 = jnp.zeros((K, 2)).at[:, 0].set(0.2)
    with stopwatch() as sw:
        knots, r0, r, steps, result = jax.block_until_ready(_optimise(model, knots0, T, 100))
    ts = jnp.linspace(0.0, T, 301)
    q_before, _ = _trajectory(model, knots0, T, ts)
    q_after, res = _trajectory(model, knots, T, ts)
    qT = np.asarray(q_after[-1])
    err0 = float(np.linalg.norm(np.asarray(r0[:3]) * TOL))
    err = float(np.linalg.norm(np.asarray(r[:3]) * TOL))

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    ax1.plot(np.asarray(q_before[:, 0]), np.asarray(q_before[:, 1]), "--", label="initial controls")
    ax1.plot(np.asarray(q_after[:, 0]), np.asarray(q_after[:, 1]), label="optimised")
    ax1.plot([TARGET[0]], [TARGET[1]], "k*", ms=12, label="target")
    ax1.set(xlabel="x [m]", ylabel="y [m]", title="car-like robot: reach a target pose")
    ax1.set_aspect("equal", adjustable="datalim")
    ax1.legend(fontsize=8)
    tk = np.linspace(0.0, float(T), K)
    ax2.plot(tk, np.asarray(knots[:, 0]), "o-", label="drive force F [N]")
    ax2.plot(tk, np.asarray(knots[:, 1]), "s-", label=r"steering torque $\tau$ [N m]")
    ax2.set(xlabel="t [s]", title="optimised controls (piecewise linear)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(outpath(outdir, "trajectory_optimisation.png"), dpi=110)
    plt.close(fig)

    summary = {
        "model": "kinematic_car",
        "target_pose": list(TARGET),
        "reached_pose": [float(v) for v in qT[:3]],
        "terminal_error_initial": err0,
        "terminal_error": err,
        "control_knots": K,
        "effort": float(np.sum(np.asarray(knots) ** 2)),
        "optimiser_steps": int(steps),
        "converged": bool(result == optx.RESULTS.successful),
        "max_velocity_residual": float(res),
        "wall_s": float(sw()),
        "figure": "trajectory_optimisation.png",
    }
    with open(outpath(outdir, "trajectory_optimisation.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
