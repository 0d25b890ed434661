r"""d'Alembert vs vakonomic on the Heisenberg (nonholonomic) particle.

$L = \tfrac12(\dot x^2 + \dot y^2)$ with $\dot z = \tfrac k2(x\dot y - y\dot x)$
(`models.nonholonomic_particle("heisenberg")`; Bloch, *Nonholonomic Mechanics and Control*,
2003, §1.8).

* Lagrange–d'Alembert (reactions $A^\top\lambda$): the $z$ row forces $\lambda = 0$; the
  $(x, y)$ projection moves on straight lines, $z$ grows linearly.
* Vakonomic ($\Lambda = L - \mu\,c$; Arnold, Kozlov & Neishtadt, *Mathematical Aspects of
  Classical and Celestial Mechanics*, 1988): $\mu$ is constant and
  $\ddot x = \mu k\dot y$, $\ddot y = -\mu k\dot x$ — circles of radius $|v|/(\mu k)$
  (the sub-Riemannian geodesics), traversed at the rate $\mu k$.

Both conserve $E = \tfrac12(\dot x^2 + \dot y^2)$ here, but the vakonomic reaction is not
of the form $A^\top\lambda$: it does virtual work $R\cdot\delta q \neq 0$ on admissible
displacements $\delta q\in\ker A$, which d'Alembert's principle forbids.
"""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import models
from .._diagnostics import constraint_jacobian
from .._prescriptions import DAlembert, Vakonomic
from ._common import (
    enable_x64,
    log_axis_with_zeros,
    outpath,
    pyplot,
    simulate_model,
    stopwatch,
    zero_note,
)


@eqx.filter_jit
def _rollout(model, ts, prescription, mu0):
    traj = simulate_model(model, ts, prescription=prescription, mu0=mu0)
    acc = traj.accelerations()
    A = jax.vmap(lambda t, q, qd: constraint_jacobian(model.system, t, q, qd, model.params))(
        traj.ts, traj.q, traj.qd
    )
    vw = jax.vmap(lambda r, a: jnp.linalg.norm((jnp.eye(3) - jnp.linalg.pinv(a) @ a) @ r))(
        acc.reactions, A
    )
    return dict(
        q=traj.q,
        energy=traj.energy(),
        power=acc.reaction_power,
        virtual_work=vw,
        residual=jnp.max(jnp.abs(traj.constraint_residual().velocity)),
        mu=traj.mu if traj.mu is not None else jnp.zeros((ts.shape[0], 1)),
    )


def closed_forms(q0, qd0, k, mu, t):
    """The two motions in closed form: `(q_dalembert, q_vakonomic)` at times `t`."""
    x0, y0, z0 = q0
    u, v = qd0[0], qd0[1]
    dal = np.stack([x0 + u * t, y0 + v * t, z0 + 0.5 * k * (x0 * v - y0 * u) * t], 1)
    w = mu * k
    x = x0 + (u * np.sin(w * t) + v * (1 - np.cos(w * t))) / w
    y = y0 + (-u * (1 - np.cos(w * t)) + v * np.sin(w * t)) / w
    xd = u * np.cos(w * t) + v * np.sin(w * t)
    yd = -u * np.sin(w * t) + v * np.cos(w * t)
    # z from the constraint zd = k/2 (x yd - y xd), integrated on the grid (Simpson).
    from scipy.integrate import cumulative_simpson

    z = z0 + cumulative_simpson(0.5 * k * (x * yd - y * xd), x=t, initial=0.0)
    return dal, np.stack([x, y, z], 1)


def run(outdir, quick: bool = False) -> dict:
    """Both prescriptions from the same initial state; write `dalembert_vs_vakonomic.png`.

    **Returns:** a dict with the final separation of the two motions, each one's error
    against its closed form, energy drift, reaction power and virtual work of the
    reactions on $\\ker A$.
    """
    enable_x64()
    model = models.nonholonomic_particle("heisenberg")
    T = 4.0 if quick else 8.0
    ts = jnp.linspace(0.0, T, 401)
    mu0 = 1.5
    with stopwatch() as sw:
        d = jax.tree_util.tree_map(np.asarray, _rollout(model, ts, DAlembert(), None))
        v = jax.tree_util.tree_map(np.asarray, _rollout(model, ts, Vakonomic(), jnp.array([mu0])))
    k = float(model.params["k"])
    ref_d, ref_v = closed_forms(np.asarray(model.q0), np.asarray(model.qd0), k, mu0, np.asarray(ts))

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    ax1.plot(d["q"][:, 0], d["q"][:, 1], label="d'Alembert")
    ax1.plot(v["q"][:, 0], v["q"][:, 1], label=rf"vakonomic, $\mu_0$={mu0:g}")
    ax1.plot(ref_v[:, 0], ref_v[:, 1], "k:", lw=1, label="closed forms")
    ax1.plot(ref_d[:, 0], ref_d[:, 1], "k:", lw=1)
    ax1.set(
        xlabel="x [m]", ylabel="y [m]", title="Heisenberg particle: same start, two prescriptions"
    )
    ax1.set_aspect("equal", adjustable="datalim")
    ax1.legend(fontsize=8)
    ax2.plot(np.asarray(ts), d["virtual_work"], label=zero_note("d'Alembert", d["virtual_work"]))
    ax2.plot(np.asarray(ts), v["virtual_work"], label="vakonomic")
    log_axis_with_zeros(ax2, d["virtual_work"], v["virtual_work"])
    ax2.set(
        xlabel="t [s]",
        ylabel=r"$|P_{\ker A}R|$ [N]",
        title="reaction along admissible directions",
    )
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(outpath(outdir, "dalembert_vs_vakonomic.png"), dpi=110)
    plt.close(fig)

    summary = {
        "model": "nonholonomic_particle('heisenberg')",
        "mu0": mu0,
        "horizon": float(T),
        "final_separation": float(np.linalg.norm(d["q"][-1] - v["q"][-1])),
        "dalembert_error_vs_closed_form": float(np.abs(d["q"] - ref_d).max()),
        "vakonomic_error_vs_closed_form": float(np.abs(v["q"] - ref_v).max()),
        "dalembert_energy_drift": float(np.ptp(d["energy"])),
        "vakonomic_energy_drift": float(np.ptp(v["energy"])),
        "vakonomic_mu_drift": float(np.ptp(v["mu"])),
        "dalembert_max_reaction_power": float(np.abs(d["power"]).max()),
        "vakonomic_max_reaction_power": float(np.abs(v["power"]).max()),
        "dalembert_max_virtual_work": float(d["virtual_work"].max()),
        "vakonomic_max_virtual_work": float(v["virtual_work"].max()),
        "max_velocity_residual": float(max(d["residual"], v["residual"])),
        "wall_s": float(sw()),
        "figure": "dalembert_vs_vakonomic.png",
    }
    with open(outpath(outdir, "dalembert_vs_vakonomic.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
