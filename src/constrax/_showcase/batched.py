r"""Batched Monte-Carlo rollouts: many snake carts with random steering
(the snake cart of J. Briggs, *Degeneracy of velocity constraints in rigid body systems*,
2016, §1.2).

Each cart starts at the origin heading along $x$ with a random speed $v_0$, steering angle
$\phi_0$ and steering rate, on the admissible velocities
$\dot\theta_0 = 2v_0\tan\phi_0/\ell$; its steering torque $\tau(t) = \tau_\text{amp}
\sin(\omega_\tau t)$ has a random amplitude and frequency (controls are parameters, batched
with `p_axes`). All carts are integrated at once with `rollout_batch` (`vmap`, sharded over
every visible device) with a fixed-step Tsit5 of step `dt` — one env step is one such step
of one cart, as in a simulator for reinforcement learning — and the `KKT` solve (the
steering stays away from the singular $\phi = \pm\pi/2$, which is checked). The
throughput is reported in env-steps per second, and the fixed-step accuracy against an
adaptive solve at `rtol = 1e-10` for a few carts.
"""

import json
import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from .. import models
from .._batch import rollout_batch
from .._diagnostics import constraint_residual
from .._sharding import batch_mesh
from .._simulate import simulate
from .._solve import KKT
from ._common import block, enable_x64, outpath, progress, pyplot, stopwatch

_RANDOM = ("tau_amp", "tau_freq")


def sample_batch(key, batch: int, model):
    """Random initial states `(B, 4)` and steering parameters for `batch` snake carts."""
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    v0 = jax.random.uniform(k1, (batch,), minval=0.2, maxval=1.0)
    phi0 = jax.random.uniform(k2, (batch,), minval=-0.4, maxval=0.4)
    phid0 = jax.random.uniform(k3, (batch,), minval=-0.05, maxval=0.05)
    zeros = jnp.zeros(batch)
    q0s = jnp.stack([zeros, zeros, zeros, phi0], axis=1)
    thd0 = 2 * v0 * jnp.tan(phi0) / model.params["l"]
    qd0s = jnp.stack([v0, zeros, thd0, phid0], axis=1)
    ps = dict(model.params)
    ps["tau_amp"] = jax.random.uniform(k4, (batch,), minval=-0.02, maxval=0.02)
    ps["tau_freq"] = jax.random.uniform(k5, (batch,), minval=1.0, maxval=3.0)
    p_axes = {k: (0 if k in _RANDOM else None) for k in ps}
    return q0s, qd0s, ps, p_axes


def run(outdir, quick: bool = False, *, batch: int | None = None, progress_bar: bool = True):
    """Roll out a batch of snake carts; write `batched_rollouts.png` and return the figures.

    **Arguments:** `outdir` for the figure; `quick` for a small batch (256 carts, 2 s)
    instead of 10⁴ carts over 5 s; `batch` to override the batch size.

    **Returns:** a dict with `batch`, `horizon_s`, `dt_env`, `env_steps`, `devices`,
    `compile_and_first_chunk_s`, `wall_s`, `env_steps_per_s`, `solver_steps_per_s`,
    `mean_solver_steps`, `success_fraction`, `max_constraint_residual`,
    `final_spread_m`.
    """
    enable_x64()
    model = models.snake_cart()
    B = batch if batch is not None else (256 if quick else 10_000)
    T = 2.0 if quick else 5.0
    dt = 0.05
    n_env = int(round(T / dt))
    ts = jnp.linspace(0.0, T, n_env + 1)
    chunk = min(B, 128 if quick else 2_500)
    n_chunks = math.ceil(B / chunk)
    q0s, qd0s, ps, p_axes = sample_batch(jax.random.PRNGKey(0), n_chunks * chunk, model)
    kwargs = dict(
        p_axes=p_axes,
        shard=True,
        constraint_solver=KKT(),
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=dt,
        max_steps=n_env + 1,
        throw=False,
    )

    def chunk_args(i):
        sl = slice(i * chunk, (i + 1) * chunk)
        pc = {k: (v[sl] if k in _RANDOM else v) for k, v in ps.items()}
        return q0s[sl], qd0s[sl], pc

    outs = []
    with stopwatch() as first:
        outs.append(block(rollout_batch(model.system, *chunk_args(0), ts=ts, **kwargs)))
    with stopwatch() as rest:
        for i in progress(range(1, n_chunks), "batched rollouts", enabled=progress_bar):
            outs.append(block(rollout_batch(model.system, *chunk_args(i), ts=ts, **kwargs)))
    q = jnp.concatenate([o.q for o in outs])[:B]
    qd = jnp.concatenate([o.qd for o in outs])[:B]
    steps = jnp.concatenate([o.num_steps for o in outs])[:B]
    ok = jnp.concatenate([o.success for o in outs])[:B]
    if n_chunks > 1:
        # Throughput from the chunks after the first (compiled) one.
        timed_carts, wall = (n_chunks - 1) * chunk, rest()
        timed_steps = jnp.concatenate([o.num_steps for o in outs[1:]])
    else:
        timed_carts, wall = chunk, first()
        timed_steps = outs[0].num_steps
    p_shared = {k: v for k, v in ps.items() if k not in _RANDOM}

    def residual(qT, qdT, amp, freq):
        p = {**p_shared, "tau_amp": amp, "tau_freq": freq}
        return jnp.max(jnp.abs(constraint_residual(model.system, ts[-1], qT, qdT, p).velocity))

    res = jax.jit(jax.vmap(residual))(q[:, -1], qd[:, -1], ps["tau_amp"][:B], ps["tau_freq"][:B])
    # Accuracy of the fixed-step rollouts: a few carts again, adaptively at rtol=1e-10.
    n_ref = 4
    ref_err = 0.0
    for i in range(n_ref):
        p_i = {**p_shared, "tau_amp": ps["tau_amp"][i], "tau_freq": ps["tau_freq"][i]}
        ref = simulate(
            model.system,
            q0s[i],
            qd0s[i],
            p_i,
            t1=T,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
            constraint_solver=KKT(),
        )
        ref_err = max(ref_err, float(jnp.max(jnp.abs(ref.q - q[i]))))
    good = np.asarray(ok)
    final_xy = np.asarray(q[:, -1, :2])[good]

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    for i in range(min(B, 60)):
        ax1.plot(np.asarray(q[i, :, 0]), np.asarray(q[i, :, 1]), lw=0.7)
    ax1.set(
        xlabel="x [m]", ylabel="y [m]", title=f"snake carts, random steering ({min(B, 60)} shown)"
    )
    ax1.set_aspect("equal", adjustable="datalim")
    *_, image = ax2.hist2d(final_xy[:, 0], final_xy[:, 1], bins=40, cmap="viridis")
    fig.colorbar(image, ax=ax2, label="carts per bin")
    ax2.set(
        xlabel="x(T) [m]",
        ylabel="y(T) [m]",
        title=f"final positions of {good.sum()} carts at T = {T:g} s (40 × 40 bins)",
    )
    fig.tight_layout()
    fig.savefig(outpath(outdir, "batched_rollouts.png"), dpi=110)
    plt.close(fig)

    summary = {
        "batch": int(B),
        "horizon_s": float(T),
        "dt_env": float(dt),
        "env_steps": int(B * n_env),
        "devices": int(batch_mesh().devices.size),
        "platform": jax.devices()[0].platform,
        "compile_and_first_chunk_s": float(first()),
        "timed_carts": int(timed_carts),
        "wall_s": float(wall),
        "env_steps_per_s": float(timed_carts * n_env / wall),
        "solver_steps_per_s": float(jnp.sum(timed_steps) / wall),
        "mean_solver_steps": float(jnp.mean(steps)),
        "success_fraction": float(np.mean(good)),
        "max_constraint_residual": float(jnp.max(jnp.where(ok, res, 0.0))),
        "max_error_vs_adaptive": ref_err,
        "min_abs_cos_phi": float(jnp.min(jnp.abs(jnp.cos(q[:, :, 3])))),
        "final_spread_m": float(np.std(final_xy, axis=0).mean()) if len(final_xy) else 0.0,
        "figure": "batched_rollouts.png",
    }
    with open(outpath(outdir, "batched_rollouts.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
