r"""Orientation coordinates of a rigid body: which numbers in $q$ describe $R\in SO(3)$.

* `RotationMatrix`: the 9 entries of $R$ (row-major) with the 6 orthonormality rows
  $R^\top R - I = 0$ as holonomic constraints. The kinetic energy is the affine-body form
  $\tfrac12\operatorname{tr}(\dot R J\dot R^\top)$, $J = \tfrac12\operatorname{tr}(I)\mathbb 1 - I$
  (Sławianowski et al. 2013): the rigid body is
  the gyroscopic affine body, with a constant mass matrix. Global, no singularity.
* `Quaternion`: a quaternion $(w, x, y, z)$ with the norm row $|q|^2 - 1 = 0$; $R$ is
  built from $q/|q|$. Global (double cover), 4 numbers, one constraint row.
* `EulerZXZ`: proper Euler angles $(\psi, \theta, \varphi)$, no constraint, but singular
  (gimbal lock) at $\theta\in\{0, \pi\}$, where the mass matrix loses rank.

Angular velocities are derived generically from $R(x)$ by one `jax.jvp`:
$\omega = (\dot R R^\top)^\vee$, $\Omega = (R^\top\dot R)^\vee$ (Briggs 2016, Definition 2.21).
"""

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._tolerances import tolerance
from ._so3 import (
    body_angular_velocity,
    cross,
    euler_zxz_to_rotation,
    orthonormality_residual,
    project_to_so3,
    quaternion_from_rotation,
    quaternion_rotate,
    quaternion_to_rotation,
    safe_reciprocal,
    spatial_angular_velocity,
)

# Python ints, not a NumPy int64 array: the index dtype then follows the x64 setting of the
# trace (an int64 index traced with x64 off breaks JAX's index normalisation).
_IU = tuple(tuple(int(i) for i in a) for a in np.triu_indices(3))


def check_rotation(R, *, project: bool = False, atol: float | None = None) -> Array:
    r"""Validate a rotation matrix (shape and, when concrete, orthonormality to `atol`,
    default $\max(10^{-8}, 1000\epsilon)$ of its dtype)."""
    R = jnp.asarray(R)
    if R.shape != (3, 3):
        raise ValueError(f"a rotation matrix must have shape (3, 3), got {R.shape}")
    if not jnp.issubdtype(R.dtype, jnp.inexact):
        R = R.astype(jnp.result_type(float))
    if project:
        return project_to_so3(R)
    if atol is None:
        atol = tolerance(R.dtype, 1e-8, 1000)
    if not isinstance(R, jax.core.Tracer):
        err = float(orthonormality_residual(R))
        det = float(jnp.linalg.det(R))
        if err > atol or det < 0:
            raise ValueError(
                f"the initial rotation matrix is not orthonormal with det +1 "
                f"(max|R^T R - I| = {err:.3g}, det R = {det:.6g}, tolerance {atol:g}); pass "
                "project=True to use the nearest rotation (cx.rigid.project_to_so3)"
            )
    return R


class AbstractOrientation(eqx.Module):
    """Orientation coordinates $x\\in\\mathbb R^k$ of a rigid body and the map $x\\mapsto R(x)$."""

    size: eqx.AbstractClassVar[int]
    num_constraints: eqx.AbstractClassVar[int]

    @abc.abstractmethod
    def rotation(self, x: Float[Array, " k"]) -> Float[Array, "3 3"]:
        """The rotation matrix $R(x)$."""

    @abc.abstractmethod
    def from_rotation(self, R: Float[Array, "3 3"]) -> Float[Array, " k"]:
        """Coordinates of an (orthonormal) rotation matrix."""

    def rotate(self, x: Float[Array, " k"], X: Float[Array, " 3"]) -> Float[Array, " 3"]:
        """$R(x)X$: a body-frame vector in spatial axes."""
        return self.rotation(x) @ X

    def constraint(self, x: Float[Array, " k"]) -> Float[Array, " c"]:
        """Holonomic rows that keep $x$ on $SO(3)$ (empty by default)."""
        return jnp.zeros((0,), dtype=x.dtype)

    def coordinate_names(self, prefix: str) -> tuple[str, ...]:
        return tuple(f"{prefix}{i}" for i in range(self.size))

    def rotation_and_rate(self, x, xd) -> tuple[Float[Array, "3 3"], Float[Array, "3 3"]]:
        r"""$(R, \dot R)$ by one `jax.jvp`."""
        return jax.jvp(self.rotation, (x,), (xd,))

    def spatial_angular_velocity(self, x, xd) -> Float[Array, " 3"]:
        r"""$\omega = (\dot R R^\top)^\vee$ (Briggs 2016, Definition 2.21 (i))."""
        return spatial_angular_velocity(*self.rotation_and_rate(x, xd))

    def body_angular_velocity(self, x, xd) -> Float[Array, " 3"]:
        r"""$\Omega = (R^\top\dot R)^\vee$ (Briggs 2016, Definition 2.21 (ii))."""
        return body_angular_velocity(*self.rotation_and_rate(x, xd))

    def rotational_kinetic_energy(self, x, xd, inertia: Float[Array, "3 3"]) -> Float[Array, ""]:
        r"""$\tfrac12\Omega^\top I\Omega$ (body frame inertia about the centre of mass)."""
        W = self.body_angular_velocity(x, xd)
        # Elementwise, not `@`: XLA:CPU runs each small `dot` as its own kernel.
        return 0.5 * jnp.sum(inertia * (W[:, None] * W[None, :]))

    def velocity_from_angular_velocity(
        self, x: Float[Array, " k"], omega: Float[Array, " 3"], frame: str = "spatial"
    ) -> Float[Array, " k"]:
        r"""The coordinate rate $\dot x$ with angular velocity `omega` that keeps the
        orientation constraints: the solution of
        $\begin{bmatrix}\partial\omega/\partial\dot x\\ \partial g/\partial x\end{bmatrix}\dot x
        = \begin{bmatrix}\omega\\ 0\end{bmatrix}$ (least squares, exact on $SO(3)$).

        `frame="spatial"` ($\omega$) or `"body"` ($\Omega$).
        """
        if frame not in ("spatial", "body"):
            raise ValueError(f"`frame` must be 'spatial' or 'body', got {frame!r}")
        omega = jnp.asarray(omega, dtype=x.dtype)
        if omega.shape != (3,):
            raise ValueError(f"`omega` must have shape (3,), got {omega.shape}")
        fn = self.spatial_angular_velocity if frame == "spatial" else self.body_angular_velocity
        J = jax.jacfwd(lambda v: fn(x, v))(jnp.zeros_like(x))
        G = jax.jacfwd(self.constraint)(x)
        M = jnp.concatenate([J, G], 0)
        rhs = jnp.concatenate([omega, jnp.zeros(G.shape[0], x.dtype)])
        return jnp.linalg.lstsq(M, rhs)[0]


class RotationMatrix(AbstractOrientation):
    r"""The 9 entries of $R$ (row-major), constrained by the 6 rows of
    $R^\top R - I = 0$ (upper triangle): the gyroscopic affine body of Sławianowski et al. 2013.

    Kinetic energy $\tfrac12\operatorname{tr}(\dot R J\dot R^\top)$ with
    $J = \tfrac12\operatorname{tr}(I)\,\mathbb 1 - I$, the second moment of the mass
    distribution; it equals $\tfrac12\Omega^\top I\Omega$ on $SO(3)$ and gives a constant
    mass matrix. Use `cx.Projection` (or `cx.Baumgarte`) to hold orthonormality over long
    runs.

    **Example:** `RotationMatrix().from_rotation(jnp.eye(3))` is `jnp.eye(3).ravel()`.
    """

    size: ClassVar[int] = 9
    num_constraints: ClassVar[int] = 6

    def rotation(self, x):
        return jnp.reshape(x, (3, 3))

    def from_rotation(self, R):
        return jnp.ravel(R)

    def constraint(self, x):
        R = self.rotation(x)
        E = R.T @ R - jnp.eye(3, dtype=x.dtype)
        return E[_IU]

    def coordinate_names(self, prefix):
        return tuple(f"{prefix}R{i}{j}" for i in range(3) for j in range(3))

    def rotational_kinetic_energy(self, x, xd, inertia):
        Rd = jnp.reshape(xd, (3, 3))
        J = 0.5 * jnp.trace(inertia) * jnp.eye(3, dtype=inertia.dtype) - inertia
        return 0.5 * jnp.sum((Rd @ J) * Rd)


def _quaternion_rate(x, xd, spatial: bool) -> Array:
    r"""$2\operatorname{vec}(\dot q\otimes\bar q)/|q|^2$ (`spatial`) or
    $2\operatorname{vec}(\bar q\otimes\dot q)/|q|^2$ (body), for $q = (w, u)$ and
    $\dot q = (\dot w, \dot u)$: $2(w\dot u - \dot w u \pm u\times\dot u)/|q|^2$.

    The vector part written out: the Hamilton product's scalar part, the conjugate and the
    concatenations are not traced (the angular velocity enters every derived term of a
    quaternion body's dynamics, each differentiated twice)."""
    w, u = jnp.split(x, [1])
    wd, ud = jnp.split(xd, [1])
    rate, turn = w * ud - wd * u, cross(u, ud)
    return (2.0 * safe_reciprocal(x @ x)) * (rate + turn if spatial else rate - turn)


class Quaternion(AbstractOrientation):
    r"""A quaternion $(w, x, y, z)$ (scalar first) with the norm row $|q|^2 - 1 = 0$.

    $R(q) = R(q/|q|)$, so $R$ is orthonormal even off the unit sphere, and accordingly
    $\Omega = 2\operatorname{vec}(\bar q\otimes\dot q)/|q|^2$; the kinetic energy
    $\tfrac12\Omega^\top I\Omega$ does not see the radial direction $\dot q\parallel q$,
    which the norm row removes (the saddle system is regular).

    **Example:** `Quaternion().from_rotation(jnp.eye(3))` is `(1, 0, 0, 0)`.
    """

    size: ClassVar[int] = 4
    num_constraints: ClassVar[int] = 1

    def rotation(self, x):
        return quaternion_to_rotation(x)

    def from_rotation(self, R):
        return quaternion_from_rotation(R)

    def constraint(self, x):
        return jnp.atleast_1d(x @ x - 1.0)

    def rotate(self, x, X):
        r"""$R X = X + \tfrac{2}{|q|^2}\big(w\,u\times X + u\times(u\times X)\big)$ for
        $q = (w, u)$ (closed form, without building $R$)."""
        return quaternion_rotate(x, X)

    def spatial_angular_velocity(self, x, xd):
        r"""$\omega = 2\operatorname{vec}(\dot q\otimes\bar q)/|q|^2$ (closed form; zero at
        $q = 0$, where $R = I$)."""
        return _quaternion_rate(x, xd, spatial=True)

    def body_angular_velocity(self, x, xd):
        r"""$\Omega = 2\operatorname{vec}(\bar q\otimes\dot q)/|q|^2$ (closed form; zero at
        $q = 0$)."""
        return _quaternion_rate(x, xd, spatial=False)

    def coordinate_names(self, prefix):
        return tuple(f"{prefix}q{c}" for c in "wxyz")


class EulerZXZ(AbstractOrientation):
    r"""Proper Euler angles $(\psi, \theta, \varphi)$, $R = R_z(\psi)R_x(\theta)R_z(\varphi)$.

    No constraint rows, but the chart is singular at $\theta\in\{0, \pi\}$ (gimbal lock):
    there $\partial\omega/\partial\dot x$ loses rank and the mass matrix is singular. Use it
    only for motions that stay away from those tilts (a disk that never lies flat).

    **Example:** `EulerZXZ().rotation(jnp.array([0.0, 0.3, 0.0]))` tilts about $e_x$.
    """

    size: ClassVar[int] = 3
    num_constraints: ClassVar[int] = 0

    def rotation(self, x):
        return euler_zxz_to_rotation(x)

    def from_rotation(self, R):
        theta = jnp.arccos(jnp.clip(R[2, 2], -1.0, 1.0))
        psi = jnp.arctan2(R[0, 2], -R[1, 2])
        phi = jnp.arctan2(R[2, 0], R[2, 1])
        return jnp.stack([psi, theta, phi])

    def coordinate_names(self, prefix):
        return (f"{prefix}psi", f"{prefix}theta", f"{prefix}phi")
