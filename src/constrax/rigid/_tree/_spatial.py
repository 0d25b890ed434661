r"""Spatial-vector algebra of the tree path, batched over leading axes (last axes: 3-vectors,
3x3 matrices, 6-vectors ordered (angular, linear)): rigid transforms, the motion and force
cross products and the spatial inertia (Featherstone, *Rigid Body Dynamics Algorithms*,
2008, ch. 2), and Rodrigues' rotation (docs page "Importing MJCF models").
"""

import jax.numpy as jnp

from .._kinematics._so3 import cross

# The contraction of length 3 unrolled into three products and two sums: XLA:CPU fuses them
# into one loop, where a batched `dot_general` of 3x3 blocks (or a product-and-reduce) is
# several times slower.


def _mm(A, B):
    return (
        A[..., :, 0, None] * B[..., None, 0, :]
        + A[..., :, 1, None] * B[..., None, 1, :]
        + (A[..., :, 2, None] * B[..., None, 2, :])
    )


def _mv(A, x):
    return (
        A[..., :, 0] * x[..., None, 0]
        + A[..., :, 1] * x[..., None, 1]
        + A[..., :, 2] * x[..., None, 2]
    )


def _compose(Ra, ta, Rb, tb):
    r"""The rigid transform $X_a\circ X_b$ for $X = (R, t)$, $x\mapsto Rx + t$."""
    return _mm(Ra, Rb), _mv(Ra, tb) + ta


def _cross_motion(u, m):
    r"""$u\times m = (\omega\times\mu, \omega\times\nu + w\times\mu)$ for $u = (\omega, w)$,
    $m = (\mu, \nu)$ (Featherstone 2008, eq. 2.31)."""
    w, lin = u[..., :3], u[..., 3:]
    a, b = m[..., :3], m[..., 3:]
    return jnp.concatenate([cross(w, a), cross(w, b) + cross(lin, a)], -1)


def _cross_force(u, f):
    r"""$u\times^* f = (\omega\times n + w\times f_l, \omega\times f_l)$ for $u = (\omega, w)$,
    $f = (n, f_l)$ (Featherstone 2008, eq. 2.32)."""
    w, lin = u[..., :3], u[..., 3:]
    n, fl = f[..., :3], f[..., 3:]
    return jnp.concatenate([cross(w, n) + cross(lin, fl), cross(w, fl)], -1)


def _inertia_times(m, h, Ibar, u):
    r"""The spatial inertia $(m, h = mc, \bar I = I_c + m\hat c\hat c^\top)$ about the
    origin applied to $u = (\omega, w)$: $(\bar I\omega + h\times w, mw - h\times\omega)$."""
    w, lin = u[..., :3], u[..., 3:]
    ang = _mv(Ibar, w) + cross(h, lin)
    return jnp.concatenate([ang, m[..., None] * lin - cross(h, w)], -1)


def _rodrigues(axis, angle):
    """Rotations by `angle` about the unit vectors `axis`, batched `(k, 3)`, `(k,)`."""
    x, y, z = axis[:, 0], axis[:, 1], axis[:, 2]
    o = jnp.zeros_like(x)
    K = jnp.stack(
        [jnp.stack([o, -z, y], -1), jnp.stack([z, o, -x], -1), jnp.stack([-y, x, o], -1)], -2
    )
    s, c = jnp.sin(angle)[:, None, None], jnp.cos(angle)[:, None, None]
    return jnp.eye(3, dtype=axis.dtype) + s * K + (1.0 - c) * _mm(K, K)
