r"""Planar 5-link pendulum chain (`cx.models.pendulum_chain(5, ...)`, unit masses and
lengths), in maximal coordinates (Cartesian bobs, $n$ rod rows) and in minimal ones (joint
angles, unconstrained), each against its equations of motion written out by hand.

- maximal: $q = (x_1, y_1, \dots)$, $W = \operatorname{diag}(m_i, m_i)$, rows
  $g_i = |d_i|^2 - l_i^2$, $d_i = r_i - r_{i-1}$, $r_0 = 0$; $A_i = 2d_i^\top$ on $r_i$ and
  $-2d_i^\top$ on $r_{i-1}$, bias $2|\dot d_i|^2$; KKT solve.
- minimal: with $\mu_{jk} = \sum_{i\ge\max(j,k)} m_i$, Lagrange's equations
  $\sum_k \mu_{jk}l_jl_k[\cos(\vartheta_j-\vartheta_k)\ddot\vartheta_k
  + \sin(\vartheta_j-\vartheta_k)\dot\vartheta_k^2] + g\,l_j\sin\vartheta_j\sum_{i\ge j}m_i = 0$
  (e.g. Goldstein, *Classical Mechanics*, §1.6 for $n = 2$), `jnp.linalg.solve`.
"""

import functools

import jax.numpy as jnp
import numpy as np

import constrax as cx

from .._cases import model_case

N_LINKS = 5


def maximal_hand_vf(t, y, p):
    q, qd = y
    n = q.shape[0] // 2
    r, v = q.reshape(n, 2), qd.reshape(n, 2)
    d = r - jnp.concatenate([jnp.zeros_like(r[:1]), r[:-1]])
    dd = v - jnp.concatenate([jnp.zeros_like(v[:1]), v[:-1]])
    blocks = jnp.eye(n, dtype=q.dtype) - jnp.eye(n, k=-1, dtype=q.dtype)  # d_i = r_i - r_{i-1}
    A = (2.0 * blocks[:, :, None] * d[:, None, :]).reshape(n, 2 * n)
    bias = 2.0 * jnp.sum(dd**2, axis=-1)
    W = jnp.diag(jnp.repeat(p["masses"], 2))
    f = jnp.stack([jnp.zeros_like(p["masses"]), -p["g"] * p["masses"]], axis=-1).reshape(-1)
    K = jnp.block([[W, A.T], [A, jnp.zeros((n, n), q.dtype)]])
    return qd, jnp.linalg.solve(K, jnp.concatenate([f, -bias]))[: 2 * n]


def minimal_hand_vf(t, y, p):
    th, thd = y
    m, l = p["masses"], p["lengths"]
    n = th.shape[0]
    tail = jnp.cumsum(m[::-1])[::-1]  # sum_{i >= j} m_i
    i = np.arange(n)
    ll = tail[np.maximum.outer(i, i)] * l[:, None] * l[None, :]
    dth = th[:, None] - th[None, :]
    M = ll * jnp.cos(dth)
    rhs = -(ll * jnp.sin(dth)) @ thd**2 - p["g"] * l * tail * jnp.sin(th)
    return thd, jnp.linalg.solve(M, rhs)


MAXIMAL = model_case(
    "chain_maximal",
    f"{N_LINKS}-link chain, maximal",
    functools.partial(cx.models.pendulum_chain, N_LINKS, "maximal"),
    maximal_hand_vf,
)
MINIMAL = model_case(
    "chain_minimal",
    f"{N_LINKS}-link chain, minimal",
    functools.partial(cx.models.pendulum_chain, N_LINKS, "minimal"),
    minimal_hand_vf,
)
