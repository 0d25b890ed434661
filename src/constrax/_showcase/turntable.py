r"""A ball rolling without slipping on a spinning turntable: the closed orbit.

The rolling contact with the moving table is an affine (rheonomic) Pfaffian constraint,
$\dot r + \omega\times(-a e_z) = \Omega e_z\times(r - a e_z)$ (an affine one-form,
$A(q)\dot q + b(t, q) = 0$ with $b \neq 0$). Its classical closed form: the centre obeys
$\dot v = \nu\, e_z\times v$ with $\nu = \frac{k}{1+k}\Omega$ ($\tfrac27\Omega$ for a
homogeneous ball), i.e. it runs on a circle of centre $c = r_0 + e_z\times v_0/\nu$ and
radius $|v_0|/\nu$ at angular rate $\nu$ — whatever the table's spin, the ball never flies
off. The simulation is compared with $r(t) = c + R(\nu t)(r_0 - c)$ over several orbits.
"""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import models
from ._common import enable_x64, log_axis_with_zeros, outpath, pyplot, simulate_model, stopwatch


def _model_fns():
    ball = getattr(models, "ball_on_turntable", None)
    orbit = getattr(models, "turntable_orbit", None)
    if ball is None or orbit is None:
        from ..models import _rigid_models

        ball, orbit = _rigid_models.ball_on_turntable, _rigid_models.turntable_orbit
    return ball, orbit


@eqx.filter_jit
def _rollout(model, ts):
    traj = simulate_model(model, ts)
    res = traj.constraint_residual()
    return (
        traj.q,
        traj.stats["num_steps"],
        jnp.max(jnp.abs(res.velocity)),
        jnp.max(jnp.abs(res.position)),
    )


def run(outdir, quick: bool = False) -> dict:
    """Simulate the ball on the turntable for 1 (quick) or 3 orbits; write `turntable.png`.

    **Returns:** a dict with `orbit_rate_nu`, `orbit_radius`, `orbits`,
    `max_position_error` (simulated vs closed-form centre), `max_radius_error`,
    `max_velocity_residual`, `num_steps`, `wall_s`.
    """
    enable_x64()
    ball_on_turntable, turntable_orbit = _model_fns()
    model = ball_on_turntable()
    centre, radius, nu = (np.asarray(x) for x in turntable_orbit(model.params))
    orbits = 1 if quick else 3
    T = orbits * 2 * np.pi / float(nu)
    ts = jnp.linspace(0.0, T, 100 * orbits + 1)
    with stopwatch() as sw:
        q, steps, vres, pres = jax.block_until_ready(_rollout(model, ts))
    xy = np.asarray(q[:, :2])
    r0 = np.asarray(model.params["r0"])
    ang = float(nu) * np.asarray(ts)
    rot = np.stack([np.cos(ang), -np.sin(ang), np.sin(ang), np.cos(ang)], 1).reshape(-1, 2, 2)
    closed = centre + rot @ (r0 - centre)
    pos_err = np.linalg.norm(xy - closed, axis=1)
    rad_err = np.abs(np.linalg.norm(xy - centre, axis=1) - radius)

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    th = np.linspace(0, 2 * np.pi, 200)
    ax1.plot(xy[:, 0], xy[:, 1], lw=4, alpha=0.45, label="constrax")
    ax1.plot(
        centre[0] + radius * np.cos(th),
        centre[1] + radius * np.sin(th),
        "k--",
        lw=1,
        label="closed form (on top)",
    )
    ax1.plot([0], [0], "r+", ms=12, label="table axis")
    ax1.set(
        xlabel="x [m]",
        ylabel="y [m]",
        title=rf"ball on a turntable, $\Omega$={float(model.params['Omega']):g} rad/s",
    )
    ax1.set_aspect("equal", adjustable="datalim")
    ax1.legend(fontsize=8)
    ax2.plot(np.asarray(ts), pos_err)
    log_axis_with_zeros(ax2, pos_err)
    ax2.set(
        xlabel="t [s]",
        ylabel=r"$|r(t) - r_\mathrm{closed}(t)|$ [m]",
        title="error vs closed form (symlog: 0 at t = 0 is exact)",
    )
    fig.tight_layout()
    fig.savefig(outpath(outdir, "turntable.png"), dpi=110)
    plt.close(fig)

    summary = {
        "Omega": float(model.params["Omega"]),
        "orbit_rate_nu": float(nu),
        "orbit_radius": float(radius),
        "orbits": orbits,
        "max_position_error": float(pos_err.max()),
        "max_radius_error": float(rad_err.max()),
        "max_velocity_residual": float(vres),
        "max_position_residual": float(pres),
        "num_steps": int(steps),
        "wall_s": float(sw()),
        "figure": "turntable.png",
    }
    with open(outpath(outdir, "turntable.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
