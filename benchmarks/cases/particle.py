r"""Nonholonomic particle $L = \tfrac12 m|\dot q|^2$, $\dot z = y\dot x$
($\omega = (-y, 0, 1)$), under d'Alembert and vakonomic ($\mu_0 = 0.2$) prescriptions.

The hand-written vakonomic field carries the state $(q, \dot q, \mu)$ and the curl term
$m\ddot q_i = \dot\mu\,\omega_i + \mu(\partial_j\omega_i - \partial_i\omega_j)\dot q^j
= \dot\mu\,\omega_i + \mu(-\dot y, \dot x, 0)_i$ (the vakonomic equations for a linear
constraint; V. V. Kozlov, *Dynamics of systems with nonintegrable constraints*, 1982-83).
"""

import jax.numpy as jnp

import constrax as cx

from .._cases import RolloutCase, constrax_rollout, defaults_rollout, hand_rollout

MU0 = 0.2


def params() -> dict:
    return {"m": jnp.asarray(1.0, dtype=jnp.float64)}


def initial_state():
    return jnp.array([0.0, 0.5, 0.0]), jnp.array([1.0, 0.3, 0.5])  # zdot = y xdot


# ---- constrax -------------------------------------------------------------------------


def system() -> cx.System:
    def lagrangian(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd

    def heisenberg(t, q, p):  # omega . qd = zdot - y xdot
        return jnp.stack([-q[1], jnp.zeros_like(q[1]), jnp.ones_like(q[1])])

    return cx.System(lagrangian, [cx.Pfaffian(heisenberg)])


# ---- hand-written ---------------------------------------------------------------------


def _saddle(p, q, qd, force):
    y, xd, yd = q[1], qd[0], qd[1]
    A = jnp.stack([-y, jnp.zeros_like(y), jnp.ones_like(y)])[None, :]
    W = p["m"] * jnp.eye(3, dtype=q.dtype)
    c_bias = -yd * xd  # (d omega / dt) . qd
    K = jnp.block([[W, A.T], [A, jnp.zeros((1, 1), q.dtype)]])
    return jnp.linalg.solve(K, jnp.concatenate([force, -c_bias[None]]))


def dalembert_hand_vf(t, y, p):
    r"""$m\ddot q = A^\top\lambda$, $A\ddot q = \dot x\dot y$ (KKT solve)."""
    q, qd = y
    return qd, _saddle(p, q, qd, jnp.zeros(3, q.dtype))[:3]


def vakonomic_hand_vf(t, y, p):
    r"""State $(q, \dot q, \mu)$; curl force $\mu(-\dot y, \dot x, 0)$;
    $\dot\mu = \lambda$."""
    q, qd, mu = y
    curl = mu[0] * jnp.stack([-qd[1], qd[0], jnp.zeros_like(qd[0])])
    sol = _saddle(p, q, qd, curl)
    return qd, sol[:3], -sol[3:]


# ---- the cases ------------------------------------------------------------------------

_SYSTEM = system()


def _rollouts(vakonomic: bool):
    def make(**kw):
        sys_ = system()
        if vakonomic:
            return {
                "constrax": lambda q0, qd0, mu0, p: constrax_rollout(
                    sys_, q0, qd0, p, prescription=cx.Vakonomic(), mu0=mu0, **kw
                ),
                "hand": lambda q0, qd0, mu0, p: hand_rollout(
                    vakonomic_hand_vf, (q0, qd0, mu0), p, **kw
                ),
                "defaults": lambda q0, qd0, mu0, p: defaults_rollout(
                    sys_, q0, qd0, p, prescription=cx.Vakonomic(), mu0=mu0, **kw
                ),
            }
        return {
            "constrax": lambda q0, qd0, p: constrax_rollout(sys_, q0, qd0, p, **kw),
            "hand": lambda q0, qd0, p: hand_rollout(dalembert_hand_vf, (q0, qd0), p, **kw),
            "defaults": lambda q0, qd0, p: defaults_rollout(sys_, q0, qd0, p, **kw),
        }

    return make


DALEMBERT = RolloutCase(
    name="particle_dalembert",
    title="particle d'Alembert",
    rollouts=_rollouts(False),
    args=lambda: (*initial_state(), params()),
    accelerations={
        "constrax": lambda t, q, qd, p: (
            cx.accelerations(_SYSTEM, t, q, qd, p, constraint_solver=cx.KKT()).qdd
        ),
        "hand": lambda t, q, qd, p: dalembert_hand_vf(t, (q, qd), p)[1],
    },
    acc_args=lambda: (jnp.asarray(0.3), *initial_state(), params()),
)

VAKONOMIC = RolloutCase(
    name="particle_vakonomic",
    title="particle vakonomic",
    rollouts=_rollouts(True),
    args=lambda: (*initial_state(), jnp.array([MU0]), params()),
    accelerations={
        "constrax": lambda t, q, qd, mu, p: (
            cx.accelerations(
                _SYSTEM, t, q, qd, p, prescription=cx.Vakonomic(), mu=mu, constraint_solver=cx.KKT()
            ).qdd
        ),
        "hand": lambda t, q, qd, mu, p: vakonomic_hand_vf(t, (q, qd, mu), p)[1],
    },
    acc_args=lambda: (jnp.asarray(0.3), *initial_state(), jnp.array([MU0]), params()),
)
