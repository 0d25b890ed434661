r"""The snake cart (J. Briggs, *Degeneracy of velocity constraints in rigid body systems*,
2016, §1.2) driven through its singular configurations.

At $\phi = \pm\pi/2$ the two no-side-slip rows (1.2.1) coincide, $A$ drops from rank 2 to
rank 1 and the multipliers of (1.2.3) are no longer unique (1.2.4). The accelerations of
Gauss's principle (Udwadia–Kalaba) stay unique, so the default `AutoSolver` integrates
straight through. Checked along the run: the crossings of $\phi = \pi/2 + k\pi$, the
constraint residual, the rank and smallest singular value of $A$, and the energy balance
$E(t) - E(0) = \int_0^t Q\cdot\dot q\,dt$ (the reactions of d'Alembert's principle do no
work, only the steering torque does).
"""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import cumulative_simpson

from .. import models
from .._diagnostics import constraint_rank
from .._dynamics import accelerations
from .._solve import KKT
from .._stabilisation import Projection
from ._common import (
    enable_x64,
    log_axis_with_zeros,
    outpath,
    pyplot,
    simulate_model,
    stopwatch,
)


@eqx.filter_jit
def _rollout(model, t1, ts, stabilisation):
    traj = simulate_model(model, ts, t1=t1, stabilisation=stabilisation)
    force = model.system.force
    power = jax.vmap(lambda t, q, qd: force(t, q, qd, model.params) @ qd)(ts, traj.q, traj.qd)
    rank = traj.constraint_rank()
    return dict(
        q=traj.q,
        qd=traj.qd,
        steps=traj.stats["num_steps"],
        residual=jnp.max(jnp.abs(traj.constraint_residual().velocity), axis=1),
        energy=traj.energy(),
        power=power,
        rank=rank.rank,
        sigma_min=jnp.min(rank.singular_values, axis=1),
    )


def _crossings(phi):
    c = np.cos(phi)
    return int(np.sum(np.sign(c[1:]) != np.sign(c[:-1])))


def run(outdir, quick: bool = False) -> dict:
    """Drive the snake cart through $\\phi = \\pm\\pi/2$; write `snake_cart.png`.

    **Returns:** a dict with `crossings`, `min_rank`, `min_singular_value`,
    `max_velocity_residual`, `energy_balance_error`, `num_steps`, `kkt_fails_at_singularity`,
    `wall_s`.
    """
    enable_x64()
    model = models.snake_cart()
    T = 3.0 if quick else 8.0
    n = 1201 if quick else 3201
    ts = jnp.linspace(0.0, T, n)
    with stopwatch() as sw:
        out = jax.tree_util.tree_map(np.asarray, _rollout(model, T, ts, Projection(10.0, 10.0)))
    tsn = np.asarray(ts)
    # Energy balance: E(t) - E(0) against Simpson's integral of Q.qd on the save grid.
    work = cumulative_simpson(out["power"], x=tsn, initial=0.0)
    balance = out["energy"] - out["energy"][0] - work
    # At phi = pi/2 exactly the saddle matrix is singular: KKT must refuse it, while the
    # rank-tolerant default solve still returns finite accelerations.
    q_s = jnp.array([0.0, 0.0, 0.3, jnp.pi / 2])
    qd_s = jnp.array([-0.2 * jnp.sin(0.3), 0.2 * jnp.cos(0.3), 0.7, 0.4])  # on ker A there
    try:
        jax.block_until_ready(
            accelerations(model.system, 0.0, q_s, qd_s, model.params, constraint_solver=KKT()).qdd
        )
        kkt_fails = False
    except Exception:  # noqa: BLE001 - eqx.error_if raises an EquinoxRuntimeError/XlaRuntimeError
        kkt_fails = True
    auto = accelerations(model.system, 0.0, q_s, qd_s, model.params)
    rank_s = constraint_rank(model.system, 0.0, q_s, qd_s, model.params)

    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    ax = axes[0, 0]
    ax.plot(tsn, out["q"][:, 3], label=r"$\phi(t)$")
    phi = out["q"][:, 3]
    for k in range(int(np.floor(phi.min() / np.pi - 0.5)), int(np.ceil(phi.max() / np.pi)) + 1):
        ax.axhline(np.pi / 2 + k * np.pi, color="grey", lw=0.5, ls=":")
    ax.set_ylim(phi.min() - 0.2, phi.max() + 0.2)
    ax.set(
        xlabel="t [s]", ylabel=r"$\phi$ [rad]", title=r"steering angle; dotted: $\phi=\pi/2+k\pi$"
    )
    ax = axes[0, 1]
    ax.semilogy(tsn, out["sigma_min"], label=r"$\sigma_\min(A)$")
    ax.set(
        xlabel="t [s]",
        ylabel=r"$\sigma_\min(A)$ (entries of A in 1 and m)",
        title=r"$\sigma_\min(A)$: drops to 0 at the crossings",
    )
    ax = axes[1, 0]
    ax.plot(out["q"][:, 0], out["q"][:, 1])
    ax.set(xlabel="x [m]", ylabel="y [m]", title="centre of mass")
    ax.set_aspect("equal", adjustable="datalim")
    ax = axes[1, 1]
    ax.plot(tsn, np.abs(balance), label=r"energy balance $|E(t)-E(0)-\int Q\cdot\dot q\,dt|$ [J]")
    ax.plot(tsn, out["residual"], label=r"constraint residual $\max|A\dot q|$ [m/s]")
    log_axis_with_zeros(ax, np.abs(balance), out["residual"])
    ax.set(
        xlabel="t [s]",
        ylabel="absolute error [J] or [m/s]",
        title="energy balance, constraint residual (symlog)",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(outpath(outdir, "snake_cart.png"), dpi=100)
    plt.close(fig)

    summary = {
        "horizon_s": float(T),
        "crossings": _crossings(out["q"][:, 3]),
        "min_rank_sampled": int(out["rank"].min()),
        "min_singular_value": float(out["sigma_min"].min()),
        "rank_at_singularity": int(rank_s.rank),
        "auto_accelerations_finite_at_singularity": bool(jnp.all(jnp.isfinite(auto.qdd))),
        "kkt_fails_at_singularity": kkt_fails,
        "max_velocity_residual": float(out["residual"].max()),
        "energy_balance_error": float(np.abs(balance).max()),
        "energy_range": float(out["energy"].max() - out["energy"].min()),
        "num_steps": int(out["steps"]),
        "wall_s": float(sw()),
        "figure": "snake_cart.png",
    }
    with open(outpath(outdir, "snake_cart.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
