"""The tippe top inverting while it slides, and a disk on a moving link that slides then
rolls (`cx.rigid.simulate_contacts`): the figures of the docs page "Rolling or sliding"
(sections "Shapes: the classical tops" and "Contact between two moving bodies").

The tippe top is the one of `tests/rigid/test_tops.py`: a sphere of radius R = 2 cm whose
centre of mass lies alpha R (alpha = 0.3) below its centre on the symmetry axis, m = 1 kg,
I_3 = (2/5) m R^2, I_1 = I_2 = gamma I_3, Coulomb friction mu_s = mu_k = 0.6, spun at
150 rad/s about the vertical with its axis tilted 0.3 rad, in the sliding mode. With
gamma = 1 (inside the inversion range 1 - alpha < gamma < 1 + alpha) it turns over within
0.4 s; with gamma = 0.6 (below it) it rights itself, shown over its first 0.025 s
(afterwards its slip vanishes and it rolls, then alternates between rolling and sliding
until a marginal stick-slip makes the run stiff: docs page "Rolling or sliding"). The figure
shows cos(theta) of the symmetry axis with the vertical, the height of the centre of mass
above the sphere's centre and the energy (it never increases); thin grey lines: the
segment boundaries (the slip direction re-anchored, no mode change).

The disk on the link is `cx.models.disk_on_link()` (Loparo & Vakalis 2002, section 7.10),
started with a backspin: it slides until its slip vanishes, then rolls. The figure shows
the slip speed and the energy (falling while it slides, constant while it rolls), the
switching time dashed.

Run: `python experiments/tops_and_link.py` -> `experiments/figures/tippe_top.png`,
`experiments/figures/disk_on_link.png` and `tops_and_link.json`.
"""

import argparse
import json
import os
import time

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
import constrax.rigid as rg  # noqa: E402

G = 9.81
EZ = jnp.array([0.0, 0.0, 1.0])
COLOURS = {0: "#d9f0d3", 1: "#fde0c5"}  # rolling green, sliding orange

# The tippe top of tests/rigid/test_tops.py.
TOP_R, TOP_ALPHA, TOP_M = 0.02, 0.3, 1.0
TOP_I3 = 0.4 * TOP_M * TOP_R**2
TOP = rg.RigidBody(TOP_M, jnp.full(3, TOP_I3), name="top")


def _top_body(p):
    return TOP.with_parameters(TOP_M, jnp.stack([p["gamma"] * TOP_I3, p["gamma"] * TOP_I3, TOP_I3]))


def _top_lagrangian(t, q, qd, p):
    return _top_body(p).kinetic_energy(q, qd) - TOP_M * G * TOP.position(q)[2]


TOP_SYSTEM = cx.System(_top_lagrangian, [TOP.orientation_constraint()])
TOP_SHAPE = rg.Sphere(TOP_R, centre=(0.0, 0.0, TOP_ALPHA * TOP_R))
TOP_CONTACT = rg.FrictionalContact(TOP, TOP_SHAPE, static_friction=0.6, kinetic_friction=0.6)
TOP_SPIN, TOP_TILT = 150.0, 0.3


def _top_state():
    c, s = np.cos(TOP_TILT), np.sin(TOP_TILT)
    R = jnp.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    q, _ = TOP.state(jnp.zeros(3), R, jnp.zeros(3), jnp.zeros(3))
    delta = TOP_SHAPE.contact_offset(TOP, q, EZ, None)
    return TOP.state(-delta, R, jnp.zeros(3), TOP_SPIN * EZ)


def run_top(gamma: float, t1: float, n: int):
    q0, qd0 = _top_state()
    out = rg.simulate_contacts(
        TOP_SYSTEM,
        [TOP_CONTACT],
        q0,
        qd0,
        {"gamma": jnp.asarray(gamma)},
        modes=["sliding"],
        t1=t1,
        ts=jnp.linspace(0.0, t1, n),
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
        max_switches=64,
        max_steps=20_000,
    )
    out = jax.block_until_ready(out)
    centre = jnp.array([0.0, 0.0, TOP_ALPHA * TOP_R])
    num = int(out.num_switches)
    return {
        "out": out,
        "ts": np.asarray(out.ts),
        "cos": np.asarray(jax.vmap(lambda q: TOP.rotate(q, EZ)[2])(out.q)),
        # centre of mass minus the sphere's centre, vertical: -(R X_c)_z
        "com_height": -np.asarray(jax.vmap(lambda q: TOP.rotate(q, centre)[2])(out.q)),
        "E": np.asarray(out.energy()),
        "modes": np.asarray(out.modes[:, 0]),
        "switches": np.asarray(out.switch_times[:num]),
        "switch_modes": np.asarray(out.switch_modes[:num, 0]),
        "status": int(out.status),
    }


def _shade(ax, ts, modes):
    edges = np.flatnonzero(np.diff(modes)) + 1
    for lo, hi in zip(np.r_[0, edges], np.r_[edges, len(ts) - 1], strict=True):
        ax.axvspan(ts[lo], ts[hi], color=COLOURS[int(modes[lo])], lw=0)


def tippe_top(outdir, plt, n: int) -> dict:
    t0 = time.perf_counter()
    inv = run_top(1.0, 0.4, n)
    t_inv = time.perf_counter() - t0
    t0 = time.perf_counter()
    up = run_top(0.6, 0.025, n)
    t_up = time.perf_counter() - t0

    fig = plt.figure(figsize=(10, 7.5))
    gs = fig.add_gridspec(3, 2, width_ratios=(2.2, 1))
    axes = [fig.add_subplot(gs[0, 0])]
    axes += [fig.add_subplot(gs[i, 0], sharex=axes[0]) for i in (1, 2)]
    ts = inv["ts"]
    for ax in axes:
        _shade(ax, ts, inv["modes"])
        for t in inv["switches"]:
            ax.axvline(t, color="0.6", lw=0.5)
    axes[0].plot(ts, inv["cos"], "C0")
    axes[0].axhline(0.0, color="k", lw=0.6)
    axes[0].set_ylabel(r"$\cos\theta$ of the axis")
    axes[0].set_title(r"tippe top, $I_1/I_3 = 1$: it turns over while sliding")
    axes[1].plot(ts, 1e3 * inv["com_height"], "C2")
    axes[1].axhline(0.0, color="k", lw=0.6)
    axes[1].set_ylabel("centre of mass above\nsphere's centre [mm]")
    axes[2].plot(ts, 1e3 * (inv["E"] - inv["E"][0]), "C1")
    axes[2].set_ylabel(r"$E - E_0$ [mJ]")
    axes[2].set_xlabel("t [s]")
    for ax in axes[:2]:
        plt.setp(ax.get_xticklabels(), visible=False)

    ax = fig.add_subplot(gs[:, 1])
    k = inv["ts"] <= 0.025 + 1e-12
    ax.plot(inv["ts"][k], inv["cos"][k], "C0", label=r"$I_1/I_3 = 1$ (inverts)")
    ax.plot(up["ts"], up["cos"], "C3", label=r"$I_1/I_3 = 0.6$ (rights itself)")
    ax.set_xlim(0.0, 0.025)
    ax.set_title("the first 0.025 s")
    ax.set_xlabel("t [s]")
    ax.set_ylabel(r"$\cos\theta$ of the axis")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "tippe_top.png"), dpi=120)
    plt.close(fig)

    E = inv["E"]
    return {
        "inverting": {
            "gamma": 1.0,
            "t1": 0.4,
            "status": inv["status"],
            "cos_theta_start": float(inv["cos"][0]),
            "cos_theta_end": float(inv["cos"][-1]),
            "cos_theta_min": float(inv["cos"].min()),
            "t_axis_horizontal": float(np.interp(0.0, -inv["cos"], ts)),
            "com_height_start_mm": float(1e3 * inv["com_height"][0]),
            "com_height_end_mm": float(1e3 * inv["com_height"][-1]),
            "energy_start_J": float(E[0]),
            "energy_end_J": float(E[-1]),
            "energy_largest_rise_J": float(np.max(np.diff(E))),
            "num_switches": len(inv["switches"]),
            "switch_times": inv["switches"].tolist(),
            "switch_modes": inv["switch_modes"].tolist(),
            "wall_s": t_inv,
        },
        "righting": {
            "gamma": 0.6,
            "t1": 0.025,
            "status": up["status"],
            "tilt_start_rad": float(np.arccos(up["cos"][0])),
            "tilt_end_rad": float(np.arccos(up["cos"][-1])),
            "energy_largest_rise_J": float(np.max(np.diff(up["E"]))),
            "num_switches": len(up["switches"]),
            "wall_s": t_up,
        },
        "figure": "tippe_top.png",
    }


def disk_on_link(outdir, plt, n: int) -> dict:
    model = cx.models.disk_on_link()
    contact = cx.models.disk_on_link_contact()
    t0 = time.perf_counter()
    out = cx.rigid.simulate_contacts(
        model.system,
        [contact],
        model.q0,
        model.qd0,
        model.params,
        modes=["sliding"],
        t1=0.3,
        ts=jnp.linspace(0.0, 0.3, n),
        max_switches=2,
    )
    out = jax.block_until_ready(out)
    wall = time.perf_counter() - t0
    ts = np.asarray(out.ts)
    slip = np.asarray(out.slip_speed()[:, 0])
    E = np.asarray(out.energy())
    modes = np.asarray(out.modes[:, 0])
    num = int(out.num_switches)
    switches = np.asarray(out.switch_times[:num])
    t_star = float(switches[0])
    rolling = ts > t_star

    fig, axes = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    for ax in axes:
        _shade(ax, ts, modes)
        for t in switches:
            ax.axvline(t, color="k", ls="--", lw=0.8)
    axes[0].plot(ts, slip, "C3")
    axes[0].set_ylabel("slip speed |s| [m/s]")
    axes[0].set_title("disk on a moving link: slides, then rolls (orange: sliding, green: rolling)")
    axes[1].plot(ts, E, "C1")
    axes[1].set_ylabel("energy E [J]")
    axes[1].set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "disk_on_link.png"), dpi=120)
    plt.close(fig)
    return {
        "status": int(out.status),
        "switch_times": switches.tolist(),
        "switch_modes": np.asarray(out.switch_modes[:num, 0]).tolist(),
        "slip_start": float(slip[0]),
        "energy_start_J": float(E[0]),
        "energy_at_switch_J": float(E[rolling][0]),
        "energy_lost_fraction": float((E[0] - E[rolling][0]) / E[0]),
        "energy_spread_while_rolling_J": float(np.ptp(E[rolling])),
        "energy_largest_rise_J": float(np.max(np.diff(E))),
        "wall_s": wall,
        "figure": "disk_on_link.png",
    }


def run(outdir, n: int = 201) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(outdir, exist_ok=True)
    t0 = time.perf_counter()
    summary = {
        "tippe_top": tippe_top(outdir, plt, n),
        "disk_on_link": disk_on_link(outdir, plt, n),
    }
    summary["wall_s"] = time.perf_counter() - t0
    with open(os.path.join(outdir, "tops_and_link.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "figures"))
    print(json.dumps(run(parser.parse_args().out), indent=2))
