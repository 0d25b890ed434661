r"""A ball that skids, rolls, then slides, as Coulomb friction decides
(`cx.rigid.FrictionalContact`, `cx.rigid.simulate_contacts`; docs page "Rolling or sliding").

A homogeneous ball (mass 2, radius 0.1) is launched at 1 m/s without spin on a horizontal
plane ($\mu_s = 0.4$, $\mu_k = 0.2$) and pushed at its centre by a growing force $F = k t$
($k = 20$ N/s). It skids until its slip $v - a\omega$ vanishes (the smaller root of
$v_0 + k t^2/(2m) - \tfrac72\mu_k g t = 0$), rolls while the friction it needs, $2F/7$,
stays below $\mu_s m g$, and slides from $t = 7\mu_s m g/(2k)$ on (Coriolis 1835; Routh
1905). The figure shows the slip speed, the centre speed beside the rolling speed
$a\omega$, and the energy friction has dissipated, $W_\text{push} - (E - E_0)$: it grows
while the ball slides and stays flat while it rolls (the rolling constraint does no work).
Dashed lines: the closed-form switching times.
"""

import json

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import cumulative_simpson  # scipy comes with jax

from ._common import enable_x64, outpath, pyplot, stopwatch

G = 9.81
M, A, MU_S, MU_K, K, V0, T1 = 2.0, 0.1, 0.4, 0.2, 20.0, 1.0, 2.0


def closed_form_switch_times() -> tuple[float, float]:
    """$(t_\text{roll}, t_\text{slide})$ of the pushed ball, from Newton–Euler."""
    b, c = 3.5 * MU_K * G, K / (2 * M)
    return (b - np.sqrt(b * b - 4 * c * V0)) / (2 * c), 7 * MU_S * M * G / (2 * K)


def run(outdir, quick: bool = False, figure: str = "friction_modes.png") -> dict:
    """Simulate the pushed ball over 2 s (401 saved times, 801 in full mode); write
    `figure` and `friction_modes.json`. The quick mode integrates without stabilisation
    (`stabilisation=None`, a third less to trace and compile than with the default
    velocity projection): at the tolerance 1e-10 the quaternion's norm then drifts by
    2.4e-9 over the 2 s (8e-10 with the projection), the switching times as close to their
    closed forms (measured 2026-11-28).

    **Returns:** a dict with `switch_times`, `closed_form_switch_times`,
    `switch_time_errors`, `switch_modes`, `dissipated_while_rolling` (J, should be ~0),
    `max_orientation_residual`, `wall_s`, `figure`.
    """
    enable_x64()
    import constrax as cx

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
    ts = jnp.linspace(0.0, T1, 401 if quick else 801)
    with stopwatch() as sw:
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
            **({"stabilisation": None} if quick else {}),
        )
        out = jax.block_until_ready(out)
    ts = np.asarray(out.ts)
    v = np.asarray(out.qd[:, 0])
    omega = np.asarray(jax.vmap(ball.angular_velocity)(out.q, out.qd))[:, 1]
    slip = np.asarray(out.slip_speed()[:, 0])
    E = np.asarray(out.energy())
    power = K * ts * v
    work = cumulative_simpson(power, x=ts, initial=0.0)  # the push's work
    dissipated = work - (E - E[0])
    modes = np.asarray(out.modes[:, 0])
    orientation = np.abs(np.sum(np.asarray(out.q[:, 3:7]) ** 2, axis=1) - 1.0)

    t_roll, t_slide = closed_form_switch_times()
    num = int(out.num_switches)
    switches = np.asarray(out.switch_times[:num])
    rolling = (ts > t_roll + 1e-3) & (ts < t_slide - 1e-3)

    plt = pyplot()
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
    fig.savefig(outpath(outdir, figure), dpi=120)
    plt.close(fig)

    summary = {
        "switch_times": switches.tolist(),
        "closed_form_switch_times": [t_roll, t_slide],
        "switch_time_errors": (switches - np.array([t_roll, t_slide])[:num]).tolist(),
        "switch_modes": np.asarray(out.switch_modes[:num, 0]).tolist(),
        "dissipated_while_rolling": float(np.ptp(dissipated[rolling])),
        "max_orientation_residual": float(orientation.max()),
        "wall_s": float(sw()),
        "figure": figure,
    }
    with open(outpath(outdir, "friction_modes.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
