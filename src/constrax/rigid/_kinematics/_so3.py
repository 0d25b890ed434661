r"""SO(3)/SE(3) kinematics: hat/vee, unit quaternions, Euler angles, rigid-body velocities.

Briggs 2016, §2.3 (rigid transformations $\Phi(X) = x_0 + r + R(X - X_0)$, Definition 2.9 the
hat map, Definition 2.21 rigid body velocities). Everything is a pure function of arrays;
the singular points (zero rotation angle, gimbal lock of Euler angles, a vanishing
quaternion) are handled with safe primitives so that gradients stay finite there.
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ..._state import as_float, shape_error


def _as3(x, name: str) -> Array:
    x = jnp.asarray(x)
    if x.shape[-1:] != (3,):
        raise shape_error(name, "be a 3-vector (shape (..., 3))", x.shape)
    return as_float(x)


def _as33(x, name: str) -> Array:
    x = jnp.asarray(x)
    if x.shape[-2:] != (3, 3):
        raise shape_error(name, "be a 3x3 matrix (shape (..., 3, 3))", x.shape)
    return as_float(x)


def cross(
    a: Float[ArrayLike, "*batch 3"], b: Float[ArrayLike, "*batch 3"]
) -> Float[Array, "*batch 3"]:
    r"""$a\times b$ over the last axis, $(a_1b_2 - a_2b_1, a_2b_0 - a_0b_2, a_0b_1 - a_1b_0)$.

    The same numbers as `jnp.cross`, written with one `split` per operand so that it
    traces to fewer than half of `jnp.cross`'s equations, and its derivatives to fewer
    too: the rigid-body kinematics call it in every derived term.

    **Example:** `cross(jnp.array([1.0, 0, 0]), jnp.array([0.0, 1, 0]))` is $e_z$.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    a0, a1, a2 = jnp.split(a, 3, axis=-1)
    b0, b1, b2 = jnp.split(b, 3, axis=-1)
    return jnp.concatenate([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)


def hat(w: Float[ArrayLike, "*batch 3"]) -> Float[Array, "*batch 3 3"]:
    r"""The hat map $\hat w v = w\times v$ (Briggs 2016, Definition 2.9).

    **Arguments:** `w`: a 3-vector (batched over leading axes).

    **Returns:** the skew-symmetric matrix $\hat w$.

    **Example:** `hat(jnp.array([0.0, 0.0, 1.0])) @ jnp.array([1.0, 0.0, 0.0])` is $e_y$.
    """
    w = _as3(w, "w")
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    o = jnp.zeros_like(x)
    return jnp.stack(
        [jnp.stack([o, -z, y], -1), jnp.stack([z, o, -x], -1), jnp.stack([-y, x, o], -1)], -2
    )


def vee(M: Float[ArrayLike, "*batch 3 3"]) -> Float[Array, "*batch 3"]:
    r"""The inverse of `hat` applied to the skew part of `M`: $(\tfrac12(M - M^\top))^\vee$.

    Briggs 2016, Definition 2.9 ($\check{\cdot}$). Taking the skew part first makes
    $\operatorname{vee}(\dot R R^\top)$ the angular velocity even when $R$ has drifted off
    $SO(3)$ by a little.

    **Example:** `vee(hat(w))` equals `w`.
    """
    M = _as33(M, "M")
    return 0.5 * jnp.stack(
        [M[..., 2, 1] - M[..., 1, 2], M[..., 0, 2] - M[..., 2, 0], M[..., 1, 0] - M[..., 0, 1]],
        -1,
    )


@jax.custom_jvp
def safe_reciprocal(x: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""$1/x$ for $x > 0$, and $0$ (with zero derivatives) for $x \le 0$.

    The derivative rule $d(1/x) = -(1/x)^2\,dx$ is written with the value itself, so
    derivatives of every order are products of $1/x$ and tangents: the graph divides once.
    (A plain `1 / x` divides again at every order of differentiation; XLA:CPU does not
    duplicate divisions into their users, so each distinct one becomes a kernel of its
    own, which is what the quaternion angular velocities in the rigid-contact benchmarks
    paid for.)

    **Example:** `safe_reciprocal(jnp.array([4.0, 0.0]))` is `[0.25, 0.0]`.
    """
    x = jnp.asarray(x)
    ok = x > 0
    return jnp.where(ok, 1.0 / jnp.where(ok, x, 1.0), 0.0)


@safe_reciprocal.defjvp
def _safe_reciprocal_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    r = safe_reciprocal(x)
    return r, -(r * r) * dx


@jax.custom_jvp
def safe_rsqrt(x: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""$x^{-1/2}$ for $x > 0$, and $0$ (with zero derivatives) for $x \le 0$; the derivative
    rule $-\tfrac12 x^{-3/2}dx$ is written with the value (products only, as
    `safe_reciprocal`).

    **Example:** `safe_rsqrt(jnp.array([4.0, 0.0]))` is `[0.5, 0.0]`.
    """
    x = jnp.asarray(x)
    ok = x > 0
    return jnp.where(ok, jax.lax.rsqrt(jnp.where(ok, x, 1.0)), 0.0)


@safe_rsqrt.defjvp
def _safe_rsqrt_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    r = safe_rsqrt(x)
    return r, (-0.5 * r * r * r) * dx


def safe_sqrt(x: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""$\sqrt{x} = x\cdot x^{-1/2}$ for $x > 0$, and $0$ for $x \le 0$, with derivatives of
    every order finite there (zero) and free of divisions (`safe_rsqrt`).

    **Example:** `jax.grad(safe_sqrt)(0.0)` is `0.0` (`jnp.sqrt` gives `inf`).
    """
    x = jnp.asarray(x)
    return x * safe_rsqrt(x)


def _safe_norm(x: Array) -> tuple[Array, Array]:
    """`(|x|, |x|^2)` with a finite gradient at `x = 0`."""
    sq = jnp.sum(x * x, axis=-1)
    nz = sq > 0
    return jnp.where(nz, jnp.sqrt(jnp.where(nz, sq, 1.0)), 0.0), sq


def rotation_from_axis_angle(rotvec: Float[ArrayLike, "*batch 3"]) -> Float[Array, "*batch 3 3"]:
    r"""Rodrigues' formula $R = \exp(\hat\theta) = I + \frac{\sin\vartheta}{\vartheta}\hat\theta
    + \frac{1 - \cos\vartheta}{\vartheta^2}\hat\theta^2$, $\vartheta = |\theta|$.

    Finite with finite gradients at $\theta = 0$ (Taylor branches).

    **Example:** `rotation_from_axis_angle(jnp.array([0.0, 0.0, jnp.pi / 2]))` maps $e_x$ to $e_y$.
    """
    rotvec = _as3(rotvec, "rotvec")
    th, th2 = _safe_norm(rotvec)
    small = th2 < 1e-8
    th2s = jnp.where(small, 1.0, th2)
    ths = jnp.where(small, 1.0, th)
    a = jnp.where(small, 1.0 - th2 / 6.0, jnp.sin(ths) / ths)
    b = jnp.where(small, 0.5 - th2 / 24.0, (1.0 - jnp.cos(ths)) / th2s)
    K = hat(rotvec)
    eye = jnp.eye(3, dtype=rotvec.dtype)
    return eye + a[..., None, None] * K + b[..., None, None] * (K @ K)


def quaternion_multiply(a: Float[ArrayLike, "*batch 4"], b: Float[ArrayLike, "*batch 4"]):
    r"""Hamilton product $a\otimes b$ of quaternions stored scalar first, $(w, x, y, z)$.

    **Example:** `quaternion_multiply(q, jnp.array([1.0, 0, 0, 0]))` is `q`.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - jnp.sum(av * bv, -1, keepdims=True)
    v = aw * bv + bw * av + cross(av, bv)
    return jnp.concatenate([w, v], -1)


def quaternion_conjugate(q: Float[ArrayLike, "*batch 4"]) -> Float[Array, "*batch 4"]:
    """$\\bar q = (w, -x, -y, -z)$."""
    q = jnp.asarray(q)
    return q * jnp.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quaternion_to_rotation(q: Float[ArrayLike, "*batch 4"]) -> Float[Array, "*batch 3 3"]:
    r"""Rotation matrix of the quaternion $q/|q|$ (scalar first):
    $R = I + \frac{2}{|q|^2}(w\hat v + \hat v^2)$ for $q = (w, v)$.

    Normalising inside makes $R$ exactly orthonormal even when $q$ has drifted off the unit
    sphere (no square root is taken); $q = 0$ gives the identity.

    **Example:** `quaternion_to_rotation(jnp.array([1.0, 0.0, 0.0, 0.0]))` is the identity.
    """
    q = jnp.asarray(q)
    if q.shape[-1:] != (4,):
        raise ValueError(f"`q` must be a quaternion (shape (..., 4)), got shape {q.shape}")
    sq = jnp.sum(q * q, -1)
    ok = sq > 0
    scale = jnp.where(ok, 2.0 / jnp.where(ok, sq, 1.0), 0.0)
    w, v = q[..., 0], q[..., 1:]
    V = hat(v)
    eye = jnp.eye(3, dtype=q.dtype)
    return eye + scale[..., None, None] * (w[..., None, None] * V + V @ V)


def quaternion_rotate(q: Float[ArrayLike, " 4"], X: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
    r"""$R(q)X$ without building $R$:
    $X + \frac{2}{|q|^2}\big(w\,u\times X + u\times(u\times X)\big)$ for $q = (w, u)$,
    the rotation of `quaternion_to_rotation` ($q = 0$ gives $X$).

    **Example:** `quaternion_rotate(jnp.array([1.0, 0, 0, 0]), X)` is `X`.
    """
    q, X = jnp.asarray(q), jnp.asarray(X)
    if q.shape != (4,) or X.shape != (3,):
        raise ValueError(f"`q` must have shape (4,) and `X` (3,), got {q.shape} and {X.shape}")
    sq = q @ q
    ok = sq > 0
    # A plain (guarded) division, not `safe_reciprocal`: in the rolling-disk benchmark XLA
    # fused this one better.
    scale = jnp.where(ok, 2.0 / jnp.where(ok, sq, 1.0), 0.0)
    u = q[1:]
    uX = cross(u, X)
    return X + scale * (q[0] * uX + cross(u, uX))


def quaternion_from_axis_angle(rotvec: Float[ArrayLike, "*batch 3"]) -> Float[Array, "*batch 4"]:
    r"""$q = (\cos\frac\vartheta2, \sin\frac\vartheta2\,\theta/\vartheta)$, finite at $\theta = 0$.

    **Example:** `quaternion_from_axis_angle(jnp.zeros(3))` is `(1, 0, 0, 0)`.
    """
    rotvec = _as3(rotvec, "rotvec")
    th, th2 = _safe_norm(rotvec)
    small = th2 < 1e-8
    ths = jnp.where(small, 1.0, th)
    s = jnp.where(small, 0.5 - th2 / 48.0, jnp.sin(0.5 * ths) / ths)
    return jnp.concatenate([jnp.cos(0.5 * th)[..., None], s[..., None] * rotvec], -1)


def quaternion_from_rotation(R: Float[ArrayLike, "3 3"]) -> Float[Array, " 4"]:
    r"""A unit quaternion (scalar first, $w \ge 0$) of a rotation matrix (Shepperd's method:
    the branch with the largest of $1 + \operatorname{tr}R$, $1 + 2R_{ii} - \operatorname{tr}R$).

    **Example:** `quaternion_to_rotation(quaternion_from_rotation(R))` equals `R`.
    """
    R = _as33(R, "R")
    if R.ndim != 2:
        raise ValueError(f"`R` must have shape (3, 3), got {R.shape}")
    tr = jnp.trace(R)
    cands = jnp.stack(
        [1.0 + tr, 1.0 + 2 * R[0, 0] - tr, 1.0 + 2 * R[1, 1] - tr, 1.0 + 2 * R[2, 2] - tr]
    )
    i = jnp.argmax(cands)
    s = 2.0 * jnp.sqrt(jnp.maximum(cands[i], 1e-300))
    qs = jnp.stack(
        [
            jnp.stack(
                [
                    0.25 * s,
                    (R[2, 1] - R[1, 2]) / s,
                    (R[0, 2] - R[2, 0]) / s,
                    (R[1, 0] - R[0, 1]) / s,
                ]
            ),
            jnp.stack(
                [
                    (R[2, 1] - R[1, 2]) / s,
                    0.25 * s,
                    (R[0, 1] + R[1, 0]) / s,
                    (R[0, 2] + R[2, 0]) / s,
                ]
            ),
            jnp.stack(
                [
                    (R[0, 2] - R[2, 0]) / s,
                    (R[0, 1] + R[1, 0]) / s,
                    0.25 * s,
                    (R[1, 2] + R[2, 1]) / s,
                ]
            ),
            jnp.stack(
                [
                    (R[1, 0] - R[0, 1]) / s,
                    (R[0, 2] + R[2, 0]) / s,
                    (R[1, 2] + R[2, 1]) / s,
                    0.25 * s,
                ]
            ),
        ]
    )
    q = qs[i]
    return jnp.where(q[0] < 0, -q, q)


def _rz(a):
    c, s = jnp.cos(a), jnp.sin(a)
    o, z = jnp.ones_like(a), jnp.zeros_like(a)
    return jnp.stack([jnp.stack([c, -s, z]), jnp.stack([s, c, z]), jnp.stack([z, z, o])])


def _rx(a):
    c, s = jnp.cos(a), jnp.sin(a)
    o, z = jnp.ones_like(a), jnp.zeros_like(a)
    return jnp.stack([jnp.stack([o, z, z]), jnp.stack([z, c, -s]), jnp.stack([z, s, c])])


def euler_zxz_to_rotation(angles: Float[ArrayLike, " 3"]) -> Float[Array, "3 3"]:
    r"""Proper Euler angles $(\psi, \theta, \varphi)$, $R = R_z(\psi)R_x(\theta)R_z(\varphi)$.

    $\psi$ precession (heading of the line of nodes), $\theta$ nutation (angle between the
    body and spatial $z$ axes), $\varphi$ spin. The chart is singular at
    $\theta \in \{0, \pi\}$ (gimbal lock: $\psi$ and $\varphi$ rotate about the same axis).

    **Example:** `euler_zxz_to_rotation(jnp.zeros(3))` is the identity.
    """
    angles = _as3(angles, "angles")
    if angles.ndim != 1:
        raise ValueError(f"`angles` must have shape (3,), got {angles.shape}")
    return _rz(angles[0]) @ _rx(angles[1]) @ _rz(angles[2])


def project_to_so3(M: Float[ArrayLike, "3 3"]) -> Float[Array, "3 3"]:
    r"""The rotation closest to `M` in the Frobenius norm (polar factor via an SVD,
    $R = U\operatorname{diag}(1, 1, \det UV^\top)V^\top$).

    **Example:** `project_to_so3(R + 1e-3)` is orthonormal.
    """
    M = _as33(M, "M")
    U, _, Vt = jnp.linalg.svd(M)
    d = jnp.sign(jnp.linalg.det(U @ Vt))
    D = jnp.diag(jnp.stack([jnp.ones_like(d), jnp.ones_like(d), d]))
    return U @ D @ Vt


def orthonormality_residual(R: Float[ArrayLike, "*batch 3 3"]) -> Float[Array, "*batch"]:
    r"""$\lVert R^\top R - I\rVert_{\max}$, the largest absolute entry of $R^\top R - I$ (zero
    exactly on $O(3)$)."""
    R = _as33(R, "R")
    E = jnp.swapaxes(R, -1, -2) @ R - jnp.eye(3, dtype=R.dtype)
    return jnp.max(jnp.abs(E), axis=(-2, -1))


def spatial_angular_velocity(R: Float[ArrayLike, "3 3"], Rdot: Float[ArrayLike, "3 3"]):
    r"""Spatial angular velocity $\omega = (\dot R R^\top)^\vee$ (Briggs 2016, Definition 2.21 (i)).

    **Example:** with `Rdot = hat(w) @ R`, `spatial_angular_velocity(R, Rdot)` is `w`.
    """
    R, Rdot = _as33(R, "R"), _as33(Rdot, "Rdot")
    return vee(Rdot @ jnp.swapaxes(R, -1, -2))


def body_angular_velocity(R: Float[ArrayLike, "3 3"], Rdot: Float[ArrayLike, "3 3"]):
    r"""Body angular velocity $\Omega = (R^\top\dot R)^\vee = R^\top\omega$ (Briggs 2016,
    Definition 2.21 (ii)).

    **Example:** with `Rdot = R @ hat(W)`, `body_angular_velocity(R, Rdot)` is `W`.
    """
    R, Rdot = _as33(R, "R"), _as33(Rdot, "Rdot")
    return vee(jnp.swapaxes(R, -1, -2) @ Rdot)


def spatial_translational_velocity(r, rdot, omega) -> Float[Array, " 3"]:
    r"""Spatial translational velocity $v = \dot r + r\times\omega$ (Briggs 2016, Definition
    2.21 (iii)): the velocity of the body point passing through the spatial origin.

    **Example:** a body spinning about the origin (`rdot = omega x r`) has `v = 0`.
    """
    r, rdot, omega = _as3(r, "r"), _as3(rdot, "rdot"), _as3(omega, "omega")
    return rdot + cross(r, omega)


def body_translational_velocity(R, rdot) -> Float[Array, " 3"]:
    r"""Body translational velocity $V = R^\top\dot r$ (Briggs 2016, Definition 2.21 (iv)).

    **Example:** `body_translational_velocity(jnp.eye(3), v)` is `v`.
    """
    R, rdot = _as33(R, "R"), _as3(rdot, "rdot")
    return jnp.swapaxes(R, -1, -2) @ rdot


def rotation_derivative(fn, x, xd):
    """$(R, \\dot R)$ for `R = fn(x)` along `xd` (one `jax.jvp`)."""
    return jax.jvp(fn, (x,), (xd,))
