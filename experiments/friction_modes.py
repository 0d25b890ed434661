"""A ball that skids, rolls, then slides, as Coulomb friction decides (`cx.rigid.FrictionalContact`,
`cx.rigid.simulate_contacts`).

A homogeneous ball (mass 2, radius 0.1) is launched at 1 m/s without spin on a horizontal
plane (mu_s = 0.4, mu_k = 0.2) and pushed at its centre by a growing force F = k t
(k = 20 N/s). It skids until its slip v - a omega vanishes (the smaller root of
v0 + k t^2 / (2m) - 7 mu_k g t / 2 = 0), rolls while the friction it needs, 2F/7, stays
below mu_s m g, and slides from t = 7 mu_s m g / (2k) on. The figure shows the slip speed,
the centre speed and the rolling speed a omega, and the energy friction has dissipated,
W_push - (E - E0): it grows while the ball slides and stays flat while it rolls (the
rolling constraint does no work). Dashed lines: the closed-form switching times.

Run: `python experiments/friction_modes.py` -> `experiments/figures/friction_modes.png`
and `friction_modes.json`.
"""

import argparse
import json
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import cumulative_simpson  # noqa: E402

import constrax as cx  # noqa: E402

G = 9.81
M, A, MU_S, MU_K, K, V0, T1 = 2.0, 0.1, 0.4, 0.2, 20.0, 1.0, 2.0


def run(outdir: str) -> dict:
    start = time.perf_counter()
    ball = cx.rigid.RigidBody(M, 0.4 * M * A**2 * jnp.ones(3), name="ball")

    def L(t, q, qd, p):
        return ball.kinetic_energy(q, qd) - M * G * q[2]

    def push(t, q, qd, p):
        return cx.rigid.body_force(ball, q, force=jnp.stack([p["k"] * t, 0.0 * t, 0.0 * t]))

    system = cx.System(L, [ball.orientation_constraint()], force=push)
    contact = cx.rigid.FrictionalContact(
        ball, cx.rigid.Sphere(A), static_friction=MU_S, kinetic_friction=MU_K
    )
    q0, qd0 = ball.state(jnp.array([0, 0, A]), jnp.eye(3), jnp.array([V0, 0, 0]), jnp.zeros(3))
    ts = jnp.linspace(0.0, T1, 801)
    out = cx.rigid.simulate_contacts(
        system,
        [contact],
        q0,
        qd0,
        {"k": jnp.asarray(K)},
        modes=["sliding"],
        t1=T1,
        ts=ts,
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10, dtmax=0.1),
        max_switches=4,
    )
    ts = np.asarray(out.ts)
    v = np.asarray(out.qd[:, 0])
    omega = np.asarray(jax.vmap(ball.angular_velocity)(out.q, out.qd))[:, 1]
    slip = np.asarray(out.slip_speed()[:, 0])
    E = np.asarray(out.energy())
    power = K * ts * v
    work = cumulative_simpson(power, x=ts, initial=0.0)  # the push's work
    dissipated = work - (E - E[0])
    modes = np.asarray(out.modes[:, 0])

    b, c = 3.5 * MU_K * G, K / (2 * M)
    t_roll = (b - np.sqrt(b * b - 4 * c * V0)) / (2 * c)
    t_slide = 7 * MU_S * M * G / (2 * K)
    switches = np.asarray(out.switch_times[: int(out.num_switches)])
    numbers = {
        "switch_times": switches.tolist(),
        "closed_form_switch_times": [t_roll, t_slide],
        "switch_time_errors": (switches - np.array([t_roll, t_slide])).tolist(),
        "dissipated_while_rolling": float(
            np.ptp(dissipated[(ts > t_roll + 1e-3) & (ts < t_slide - 1e-3)])
        ),
        "seconds": time.perf_counter() - start,
    }

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(7, 7.5), sharex=True)
    colours = {0: "#d9f0d3", 1: "#fde0c5"}
    for ax in axes:
        edges = np.flatnonzero(np.diff(modes)) + 1
        for lo, hi in zip(np.r_[0, edges], np.r_[edges, len(ts) - 1], strict=True):
            ax.axvspan(ts[lo], ts[hi], color=colours[int(modes[lo])], lw=0)
        for t in (t_roll, t_slide):
            ax.axvline(t, color="k", ls="--", lw=0.8)
    axes[0].plot(ts, slip, "C3")
    axes[0].set_ylabel("slip speed |s| [m/s]")
    axes[0].set_title("a pushed ball skids, rolls, then slides (orange: sliding, green: rolling)")
    axes[1].plot(ts, v, "C0", label=r"centre speed $v$")
    axes[1].plot(ts, A * omega, "C2--", label=r"rolling speed $a\omega$")
    axes[1].set_ylabel("speed [m/s]")
    axes[1].legend(loc="upper left")
    axes[2].plot(ts, dissipated, "C1")
    axes[2].set_ylabel("dissipated by friction [J]")
    axes[2].set_xlabel("t [s]")
    fig.tight_layout()
    os.makedirs(outdir, exist_ok=True)
    fig.savefig(os.path.join(outdir, "friction_modes.png"), dpi=120)
    with open(os.path.join(outdir, "friction_modes.json"), "w") as f:
        json.dump(numbers, f, indent=2)
    return numbers


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "figures"))
    print(json.dumps(run(parser.parse_args().out), indent=2))
