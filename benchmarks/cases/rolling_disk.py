r"""Tilted rolling disk (`cx.models.tilted_rolling_disk()`: tilt 1.2, precession 2 rad/s,
no friction) in $q = (r, Q)$ with the norm row, against its equations written out by
hand (quaternion algebra only, no autodiff; see `_quaternion.py`).

Symmetry axis $e = Re_3$, $c = e_z$, $\sin\theta = \sqrt{1 - c^2}$, lowest rim point
$\Delta = -a(e_z - ce)/\sin\theta$. Rows: norm; contact height $r_z - a\sin\theta = 0$;
no slip $\dot r + \omega\times\Delta = 0$ (horizontal). Gravity and the viscous
rolling/spin friction torques as generalized forces.
"""

import jax.numpy as jnp

import constrax as cx

from .._cases import model_case
from ._quaternion import hat, norm_row, rigid_terms, saddle_solve


def hand_vf(t, y, p):
    r"""Height row: $\partial c/\partial Q = \tfrac2s((w, -x, -y, z) - cQ)$, bias
    $a[(c/\sin\theta)\dot Q^\top\nabla^2c\,\dot Q + \dot c^2/\sin^3\theta]$; no-slip rows
    $T(\dot r - \Delta\times\omega)$ with bias $-T((\dot\Delta - \tfrac{\dot s}{s}\Delta)
    \times\omega)$, $\dot e = \omega\times e$; friction torque $\tau$ as $\tfrac2sE^\top\tau$.
    """
    q, qd = y
    m, a = p["mass"], p["radius"]
    inertia = jnp.stack([p["I1"], p["I1"], p["I3"]])
    W, h, s, sd, omega, E = rigid_terms(q, qd, m, inertia)
    Q, Qd = q[3:], qd[3:]
    w, x, yq, z = Q
    wd, xd, yd, zd = Qd
    zero = jnp.zeros_like(w)
    ez = jnp.array([0.0, 0.0, 1.0], q.dtype)
    e = jnp.stack([2 * (w * yq + x * z), 2 * (yq * z - w * x), w * w - x * x - yq * yq + z * z]) / s
    c = e[2]
    st = jnp.sqrt(1.0 - c * c)
    A0, b0 = norm_row(q, qd)
    # height row
    dc = (2.0 / s) * (jnp.stack([w, -x, -yq, z]) - c * Q)
    cd = dc @ Qd
    Nddot = 2.0 * (wd * wd - xd * xd - yd * yd + zd * zd)
    cdd0 = (Nddot - c * 2.0 * (Qd @ Qd) - 2.0 * cd * sd) / s  # Qd^T Hess(c) Qd
    A1 = jnp.concatenate([jnp.stack([zero, zero, 1.0 + zero]), (a * c / st) * dc])
    b1 = a * ((c / st) * cdd0 + cd * cd / st**3)
    # no-slip rows
    delta = -a * (ez - c * e) / st
    ed = jnp.cross(omega, e)
    delta_d = a * (cd * e + c * ed) / st - a * (ez - c * e) * c * cd / st**3
    A_slip = jnp.concatenate(
        [jnp.eye(3, dtype=q.dtype)[:2], -(2.0 / s) * (hat(delta) @ E)[:2]], axis=1
    )
    b_slip = -jnp.cross(delta_d - (sd / s) * delta, omega)[:2]
    A = jnp.concatenate([A0[None], A1[None], A_slip])
    bias = jnp.concatenate([b0[None], b1[None], b_slip])
    # forces: gravity, viscous rolling and spin friction torque
    tau = -p["c_roll"] * (omega - omega[2] * ez) - p["c_spin"] * omega[2] * ez
    f = h + jnp.concatenate([jnp.stack([zero, zero, -m * p["g"]]), (2.0 / s) * (E.T @ tau)])
    return qd, saddle_solve(W, f, A, bias)


CASE = model_case("rolling_disk", "tilted rolling disk", cx.models.tilted_rolling_disk, hand_vf)
