r"""Quaternion algebra shared by the hand-written rigid-body fields (no autodiff).

$q = (r, Q)$, $Q = (w, x, y, z)$, $s = |Q|^2$ (not assumed 1: the hand-written fields are
the same ODE as constrax's off the constraint manifold too). With
$G(Q)P = \operatorname{vec}(\bar Q\otimes P)$ and $E(Q)P = \operatorname{vec}(P\otimes\bar Q)$:
body $\Omega = \tfrac2sG\dot Q$, spatial $\omega = \tfrac2sE\dot Q$,
$T_\text{rot} = \tfrac12\Omega^\top I\Omega$, so $M_Q = \tfrac4{s^2}G^\top IG$ and
$M_Q\ddot Q = \tfrac{4\dot s}{s^2}G^\top I\Omega - \tfrac4sG(\dot Q)^\top I\Omega
- \tfrac2s(\Omega^\top I\Omega)Q + \dots$, $\dot s = 2Q\cdot\dot Q$
(using $G(\dot Q)\dot Q = 0$ and $G(\delta)\dot Q = -G(\dot Q)\delta$).
"""

import jax.numpy as jnp


def quat_G(Q):
    """`G(Q) P = vec(conj(Q) (x) P)` (3x4)."""
    w, x, y, z = Q
    return jnp.stack(
        [jnp.stack([-x, w, z, -y]), jnp.stack([-y, -z, w, x]), jnp.stack([-z, y, -x, w])]
    )


def quat_E(Q):
    """`E(Q) P = vec(P (x) conj(Q))` (3x4)."""
    w, x, y, z = Q
    return jnp.stack(
        [jnp.stack([-x, w, -z, y]), jnp.stack([-y, z, w, -x]), jnp.stack([-z, -y, x, w])]
    )


def hat(v):
    zero = jnp.zeros_like(v[0])
    return jnp.stack(
        [
            jnp.stack([zero, -v[2], v[1]]),
            jnp.stack([v[2], zero, -v[0]]),
            jnp.stack([-v[1], v[0], zero]),
        ]
    )


def rigid_terms(q, qd, mass, inertia):
    """Mass matrix `W` (7x7) and velocity force `h` (7,) of
    `T = 1/2 m |rd|^2 + 1/2 Omega^T diag(inertia) Omega`, plus `(s, sd, omega, E)`."""
    Q, Qd = q[3:], qd[3:]
    s = Q @ Q
    sd = 2.0 * Q @ Qd
    G = quat_G(Q)
    Om = (2.0 / s) * (G @ Qd)
    IOm = inertia * Om
    WQ = (4.0 / s**2) * (G.T * inertia) @ G
    hQ = (4.0 * sd / s**2) * (G.T @ IOm) - (4.0 / s) * (quat_G(Qd).T @ IOm)
    hQ = hQ - (2.0 / s) * (Om @ IOm) * Q
    W = jnp.zeros((7, 7), q.dtype).at[:3, :3].set(mass * jnp.eye(3, dtype=q.dtype))
    W = W.at[3:, 3:].set(WQ)
    h = jnp.concatenate([jnp.zeros(3, q.dtype), hQ])
    E = quat_E(Q)
    omega = (2.0 / s) * (E @ Qd)
    return W, h, s, sd, omega, E


def saddle_solve(W, f, A, bias):
    """`qdd` of `[[W, A^T], [A, 0]] (qdd, -lam) = (f, -bias)` by `jnp.linalg.solve`."""
    m = A.shape[0]
    K = jnp.block([[W, A.T], [A, jnp.zeros((m, m), W.dtype)]])
    return jnp.linalg.solve(K, jnp.concatenate([f, -bias]))[: W.shape[0]]


def norm_row(q, qd):
    """Holonomic `|Q|^2 - 1 = 0`: row `(0, 2Q)`, bias `2|Qd|^2`."""
    Q, Qd = q[3:], qd[3:]
    return jnp.concatenate([jnp.zeros(3, q.dtype), 2.0 * Q]), 2.0 * Qd @ Qd
