r"""Where the Lagrange–d'Alembert and vakonomic prescriptions differ.

Two systems, each run from the same initial state under both prescriptions with
`compare_prescriptions`:

* the nonholonomic (Heisenberg) particle $L = \tfrac12(\dot x^2 + \dot y^2)$,
  $\dot z = \tfrac12(x\dot y - y\dot x)$: d'Alembert moves on straight lines, the vakonomic
  motion projects to circles of radius $|v_0|/|\mu_0|$ (closed forms in
  `tests/test_vakonomic.py`);
* the vertical rolling disk $q = (x, y, \theta, \varphi)$, $\dot x = R\cos\theta\,\dot\varphi$,
  $\dot y = R\sin\theta\,\dot\varphi$: d'Alembert keeps $\dot\theta$, $\dot\varphi$ constant
  (a circle); the vakonomic reaction carries the curl term
  $\mu^a(\partial_j\omega_{ai} - \partial_i\omega_{aj})\dot q^j$ and bends the path.

For the particle and $\mu_0 = 0$ the motions coincide (the d'Alembert multiplier is zero,
so $\mu$ stays zero); the rolling disk needs a lateral reaction to turn, so even with
$\mu_0 = 0$ the vakonomic $\mu$ grows and the paths separate. Both prescriptions conserve
the energy here (linear, scleronomic constraints) and their reactions do no work on the
motion, yet the motions differ. (On the vakonomic prescription, $\Lambda = L - \mu\,c$:
Arnold, Kozlov & Neishtadt, *Mathematical Aspects of Classical and Celestial Mechanics*,
1988; Bloch, *Nonholonomic Mechanics and Control*, 2003.) SI units throughout (unit masses
in kg, lengths in m, angles in rad, time in s). Run
`python experiments/dalembert_vs_vakonomic.py`; it writes
`experiments/figures/dalembert_vs_vakonomic.png` and prints the measured numbers.
"""

import os
import sys
import time

import matplotlib

matplotlib.use("Agg")

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
from constrax._compare import compare_prescriptions  # noqa: E402
from constrax._showcase._common import log_axis_with_zeros, zero_note  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def heisenberg_particle():
    """Planar kinetic energy with the Heisenberg constraint; returns `(system, q0, qd0)`."""

    def L(t, q, qd, p):
        return 0.5 * (qd[0] ** 2 + qd[1] ** 2)

    def heisenberg(t, q, p):
        return jnp.array([q[1] / 2, -q[0] / 2, 1.0])

    q0 = jnp.array([0.0, 0.0, 0.0])
    qd0 = jnp.array([1.0, 0.0, 0.0])
    return cx.System(L, [cx.Pfaffian(heisenberg)]), q0, qd0


def rolling_disk():
    """Vertical rolling disk; returns `(system, q0, qd0, p)`."""

    def L(t, q, qd, p):
        return (
            0.5 * p["m"] * (qd[0] ** 2 + qd[1] ** 2)
            + 0.5 * p["I"] * qd[2] ** 2
            + 0.5 * p["J"] * qd[3] ** 2
        )

    def rolling(t, q, p):
        c, s = jnp.cos(q[2]), jnp.sin(q[2])
        return jnp.array([[1.0, 0.0, 0.0, -p["R"] * c], [0.0, 1.0, 0.0, -p["R"] * s]])

    p = {
        "m": jnp.asarray(1.0),
        "I": jnp.asarray(0.25),
        "J": jnp.asarray(0.5),
        "R": jnp.asarray(0.5),
    }
    th_d, ph_d = 0.4, 2.0
    qd0 = jnp.array([p["R"] * ph_d, 0.0, th_d, ph_d])
    return cx.System(L, [cx.Pfaffian(rolling)]), jnp.zeros(4), qd0, p


def run(outdir: str | None = None, quick: bool = False) -> dict:
    """Make the figure; return the measured numbers (divergences, invariants, timings)."""
    outdir = os.path.join(HERE, "figures") if outdir is None else outdir
    os.makedirs(outdir, exist_ok=True)
    t1 = 6.0 if quick else 12.0
    ts = jnp.linspace(0.0, t1, 121 if quick else 241)
    kw = dict(
        t1=t1,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )
    mu0s = [0.0, 1.0, 2.0] if quick else [0.0, 0.5, 1.0, 2.0]
    start = time.perf_counter()
    results: dict = {"t1": t1, "mu0": mu0s}

    @eqx.filter_jit
    def compare(system, q0, qd0, p, mu0):
        c = compare_prescriptions(system, q0, qd0, p, mu0=mu0, **kw)
        vak = c.vakonomic
        energy = vak.energy()
        return dict(
            dq=c.dalembert.q,
            vq=vak.q,
            divergence=c.divergence,
            residual=jnp.max(jnp.abs(vak.constraint_residual().velocity)),
            energy_drift=jnp.max(jnp.abs(energy - energy[0])) / jnp.abs(energy[0]),
            power=jnp.max(jnp.abs(vak.reaction_power())),
            dalembert_power=jnp.max(jnp.abs(c.dalembert.reaction_power())),
        )

    part, pq0, pqd0 = heisenberg_particle()
    disk, dq0, dqd0, dp = rolling_disk()
    parts = [compare(part, pq0, pqd0, None, jnp.array([m])) for m in mu0s]
    disks = [compare(disk, dq0, dqd0, dp, jnp.array([m, -0.5 * m])) for m in mu0s]

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    ax = axes[0]
    ax.plot(
        parts[0]["dq"][:, 0], parts[0]["dq"][:, 1], "k-", lw=2.5, label="d'Alembert (all $\\mu_0$)"
    )
    for m, c in zip(mu0s, parts, strict=True):
        ax.plot(c["vq"][:, 0], c["vq"][:, 1], "--", label=f"vakonomic $\\mu_0$={m:g}")
    ax.set_title("Heisenberg particle: line vs circles $r = |v_0|/|\\mu_0|$")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_aspect("equal", "datalim")
    ax.legend(fontsize=8)

    ax = axes[1]
    ax.plot(disks[0]["dq"][:, 0], disks[0]["dq"][:, 1], "k-", lw=2.5, label="d'Alembert")
    for m, c in zip(mu0s, disks, strict=True):
        ax.plot(
            c["vq"][:, 0], c["vq"][:, 1], "--", label=f"vakonomic $\\mu_0$=({m:g}, {-0.5 * m:g})"
        )
    ax.set_title("Vertical rolling disk: contact-point path")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_aspect("equal", "datalim")
    ax.legend(fontsize=8)

    ax = axes[2]
    divs = []
    for m, c in zip(mu0s, parts, strict=True):
        div = np.asarray(c["divergence"])
        divs.append(div)
        ax.plot(np.asarray(ts), div, label=zero_note(f"particle $\\mu_0$={m:g}", div))
    for m, c in zip(mu0s, disks, strict=True):
        div = np.asarray(c["divergence"])
        divs.append(div)
        ax.plot(np.asarray(ts), div, ":", lw=2, label=zero_note(f"disk $\\mu_0$={m:g}", div))
    log_axis_with_zeros(ax, *divs)
    ax.set_title("divergence of the two motions (symlog: 0 is exact)")
    ax.set_ylabel("$|q_{dA}(t) - q_{vak}(t)|$ (norm over q: m, rad)")
    ax.set_xlabel("t [s]")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(outdir, "dalembert_vs_vakonomic.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)

    for name, cmps in (("particle", parts), ("disk", disks)):
        results[f"{name}_max_divergence"] = [float(jnp.max(c["divergence"])) for c in cmps]
        results[f"{name}_vakonomic_max_velocity_residual"] = max(float(c["residual"]) for c in cmps)
        results[f"{name}_vakonomic_energy_rel_drift"] = max(float(c["energy_drift"]) for c in cmps)
        results[f"{name}_vakonomic_reaction_power_max"] = max(float(c["power"]) for c in cmps)
        results[f"{name}_dalembert_reaction_power_max"] = float(cmps[0]["dalembert_power"])
    results["figure"] = path
    results["wall_s"] = time.perf_counter() - start
    return results


if __name__ == "__main__":
    out = run(quick="--quick" in sys.argv)
    for k, v in out.items():
        print(f"{k}: {v}")
