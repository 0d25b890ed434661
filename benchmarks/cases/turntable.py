r"""Ball on a turntable (`cx.models.ball_on_turntable()`, $\Omega = 7$ rad/s) in
$q = (r, Q)$ with the norm row, against its equations written out by hand (quaternion
algebra only, no autodiff; see `_quaternion.py`).

$\Delta = -ae_z$; rows: norm; height $r_z - a = 0$; affine rheonomic no slip
$\dot r + \omega\times\Delta = \Omega e_z\times(r + \Delta)$ (horizontal).
"""

import jax.numpy as jnp

import constrax as cx

from .._cases import model_case
from ._quaternion import hat, norm_row, rigid_terms, saddle_solve


def hand_vf(t, y, p):
    r"""No-slip acceleration bias $T(\tfrac{\dot s}{s}\Delta\times\omega
    - \Omega e_z\times\dot r - \dot\Omega e_z\times(r + \Delta))$, $\dot\Omega = 0$."""
    q, qd = y
    m, a, Om_t = p["mass"], p["radius"], p["Omega"]
    Ib = p["k"] * m * a**2
    W, h, s, sd, omega, E = rigid_terms(q, qd, m, Ib * jnp.ones(3, q.dtype))
    zero = jnp.zeros_like(a)
    A0, b0 = norm_row(q, qd)
    A1 = jnp.zeros(7, q.dtype).at[2].set(1.0)
    delta = jnp.stack([zero, zero, -a])
    A_slip = jnp.concatenate(
        [jnp.eye(3, dtype=q.dtype)[:2], -(2.0 / s) * (hat(delta) @ E)[:2]], axis=1
    )
    rd = qd[:3]
    Omega_dot = 0.0  # constant table rate: the d/dt of the rheonomic term vanishes
    xc = q[:3] + delta
    b_slip = (sd / s) * jnp.cross(delta, omega)[:2] - Om_t * jnp.stack([-rd[1], rd[0]])
    b_slip = b_slip - Omega_dot * jnp.stack([-xc[1], xc[0]])
    A = jnp.concatenate([A0[None], A1[None], A_slip])
    bias = jnp.concatenate([b0[None], jnp.zeros(1, q.dtype), b_slip])
    f = h + jnp.concatenate([jnp.stack([zero, zero, -m * p["g"]]), jnp.zeros(4, q.dtype)])
    return qd, saddle_solve(W, f, A, bias)


CASE = model_case("turntable", "ball on turntable", cx.models.ball_on_turntable, hand_vf)
