r"""Snake cart (J. Briggs, *Degeneracy of velocity constraints in rigid body systems*,
Queen's University report, 2016, §1.2; also `cx.models.snake_cart`), $q = (x, y, \theta, \phi)$,

$T = \tfrac12(m_b+2m_w)(\dot x^2+\dot y^2) + \tfrac12(J_b+2J_w+\tfrac12\ell^2m_w)\dot\theta^2
+ J_w\dot\phi^2$, two Pfaffian wheel rows, steering torque $\tau\sin t$ on $\phi$.
"""

import jax.numpy as jnp
import numpy as np

import constrax as cx

from .._cases import RolloutCase, constrax_rollout, defaults_rollout, hand_rollout

PARAMS = {"m_b": 1.0, "m_w": 0.2, "J_b": 0.3, "J_w": 0.25, "l": 1.0, "tau": 0.3}


def params() -> dict:
    return {k: jnp.asarray(v, dtype=jnp.float64) for k, v in PARAMS.items()}


def initial_state(phi0: float = 0.2, xdot0: float = 1.0):
    r"""A consistent state: $\theta = 0$, $\dot y = 0$,
    $\dot\theta = 2\tan\phi\,\dot x/\ell$; $\dot\phi_0 = -\tau/2J_w$ keeps
    $\phi(t) = \phi_0 - (\tau/2J_w)\sin t$ away from the singular $\pm\pi/2$."""
    q0, qd0 = batch(1, phi0, xdot0)
    return q0[0], qd0[0]


def batch(n: int, phi0: float = 0.2, xdot0: float = 1.0):
    r"""`n` consistent initial states, $\phi_0\in[-0.3, 0.3]$, $\dot x_0\in[0.5, 1.5]$
    (`n = 1`: the single-rollout state)."""
    phi = np.linspace(-0.3, 0.3, n) if n > 1 else np.array([phi0])
    xd = np.linspace(0.5, 1.5, n) if n > 1 else np.array([xdot0])
    q0, qd0 = np.zeros((n, 4)), np.zeros((n, 4))
    q0[:, 3] = phi
    qd0[:, 0] = xd
    qd0[:, 2] = 2.0 * np.tan(phi) * xd / PARAMS["l"]
    qd0[:, 3] = -PARAMS["tau"] / (2 * PARAMS["J_w"])
    return jnp.asarray(q0), jnp.asarray(qd0)


# ---- constrax -------------------------------------------------------------------------


def system() -> cx.System:
    def lagrangian(t, q, qd, p):
        M = p["m_b"] + 2 * p["m_w"]
        J = p["J_b"] + 2 * p["J_w"] + 0.5 * p["l"] ** 2 * p["m_w"]
        return 0.5 * M * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * J * qd[2] ** 2 + p["J_w"] * qd[3] ** 2

    def wheels(t, q, p):
        _, _, th, ph = q
        h = 0.5 * p["l"] * jnp.cos(ph)
        zero = jnp.zeros_like(h)
        return jnp.stack(
            [
                jnp.stack([-jnp.sin(th + ph), jnp.cos(th + ph), h, zero]),
                jnp.stack([jnp.sin(th - ph), -jnp.cos(th - ph), h, zero]),
            ]
        )

    def steering(t, q, qd, p):
        return jnp.zeros_like(q).at[3].set(p["tau"] * jnp.sin(t))

    return cx.System(lagrangian, [cx.Pfaffian(wheels)], force=steering)


# ---- hand-written ---------------------------------------------------------------------


def hand_vf(t, y, p):
    r"""Explicit diagonal $W$, $A(q)$ and $\dot A\dot q$, `jnp.linalg.solve` of the
    $6\times6$ saddle matrix."""
    q, qd = y
    _, _, th, ph = q
    xd, yd, thd, phd = qd
    M = p["m_b"] + 2 * p["m_w"]
    J = p["J_b"] + 2 * p["J_w"] + 0.5 * p["l"] ** 2 * p["m_w"]
    W = jnp.diag(jnp.stack([M, M, J, 2 * p["J_w"]]))
    sp, cp = jnp.sin(th + ph), jnp.cos(th + ph)
    sm, cm = jnp.sin(th - ph), jnp.cos(th - ph)
    h = 0.5 * p["l"] * jnp.cos(ph)
    zero = jnp.zeros_like(h)
    A = jnp.stack([jnp.stack([-sp, cp, h, zero]), jnp.stack([sm, -cm, h, zero])])
    hd = -0.5 * p["l"] * jnp.sin(ph) * phd
    Adot_qd = jnp.stack(
        [
            -cp * (thd + phd) * xd - sp * (thd + phd) * yd + hd * thd,
            cm * (thd - phd) * xd + sm * (thd - phd) * yd + hd * thd,
        ]
    )
    f = jnp.stack([zero, zero, zero, p["tau"] * jnp.sin(t)])
    K = jnp.block([[W, A.T], [A, jnp.zeros((2, 2), W.dtype)]])
    sol = jnp.linalg.solve(K, jnp.concatenate([f, -Adot_qd]))
    return qd, sol[:4]


# ---- the case -------------------------------------------------------------------------


def rollouts(**kw):
    sys_ = system()
    return {
        "constrax": lambda q0, qd0, p: constrax_rollout(sys_, q0, qd0, p, **kw),
        "hand": lambda q0, qd0, p: hand_rollout(hand_vf, (q0, qd0), p, **kw),
        "defaults": lambda q0, qd0, p: defaults_rollout(sys_, q0, qd0, p, **kw),
    }


_SYSTEM = system()

CASE = RolloutCase(
    name="snake",
    title="snake cart",
    rollouts=rollouts,
    args=lambda: (*initial_state(), params()),
    accelerations={
        "constrax": lambda t, q, qd, p: (
            cx.accelerations(_SYSTEM, t, q, qd, p, constraint_solver=cx.KKT()).qdd
        ),
        "hand": lambda t, q, qd, p: hand_vf(t, (q, qd), p)[1],
    },
    acc_args=lambda: (jnp.asarray(0.3), *initial_state(), params()),
    gradient_target=1.5,
)
