r"""`AbstractRigidBody`, what the constraint builders read of a body (its pose and
velocities at the state), and `RigidBody`: mass, inertia and where its coordinates sit in
$q$; kinetic energy and rigid-motion kinematics (Briggs 2016, §2.3).

A body's coordinates are the block `q[offset : offset + 3 + k]`: the position $r$ of the
centre of mass, then $k$ orientation coordinates (`RotationMatrix`, `Quaternion` or
`EulerZXZ`). A material point with body-frame position $X$ (relative to the centre of
mass) is at $x = r + R X$ (Briggs 2016, eq. 2.3.2), moving at $\dot r + \omega\times R X$.
Every method takes the *whole* system state `(q, qd)`, so several bodies compose into one
Lagrangian in a few lines:

```python
ball = cx.rigid.RigidBody(1.0, 0.4 * jnp.eye(3), offset=0)
arm = cx.rigid.RigidBody(2.0, jnp.array([0.1, 0.2, 0.2]), offset=ball.size)
def L(t, q, qd, p):
    return ball.kinetic_energy(q, qd) + arm.kinetic_energy(q, qd) - 9.81 * (
        ball.mass * ball.position(q)[2] + arm.mass * arm.position(q)[2])
```
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._constraints import Holonomic, UnitQuaternion
from ..._state import as_float, shape_error
from ..._tolerances import rounding_tolerance
from ._orientation import AbstractOrientation, Quaternion, check_rotation
from ._so3 import cross

_QUATERNION = Quaternion()


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_mass(mass, who: str = "RigidBody", *, traced: bool = True) -> Array:
    """A scalar positive mass (ValueError when concrete, `eqx.error_if` under jit unless
    `traced=False`, which only converts a traced value)."""
    mass = jnp.asarray(mass)
    if not jnp.issubdtype(mass.dtype, jnp.inexact):
        mass = mass.astype(jnp.result_type(float))
    if mass.shape != ():
        raise ValueError(f"{who}: `mass` must be a scalar, got shape {mass.shape}")
    msg = f"{who}: `mass` must be positive"
    if _is_concrete(mass):
        if not float(mass) > 0:
            raise ValueError(f"{msg}, got {float(mass)}")
        return mass
    return eqx.error_if(mass, ~(mass > 0), msg) if traced else mass


def check_inertia(inertia, who: str = "RigidBody", *, traced: bool = True) -> Array:
    """A symmetric positive definite 3x3 inertia (a `(3,)` array is the diagonal); under
    jit an `eqx.error_if` (and a Cholesky) unless `traced=False`."""
    inertia = jnp.asarray(inertia)
    if not jnp.issubdtype(inertia.dtype, jnp.inexact):
        inertia = inertia.astype(jnp.result_type(float))
    if inertia.shape == (3,):
        inertia = jnp.diag(inertia)
    if inertia.shape != (3, 3):
        raise ValueError(
            f"{who}: `inertia` must have shape (3, 3) or (3,) (the body-frame inertia tensor "
            f"about the centre of mass, or its principal moments), got {inertia.shape}"
        )
    msg = f"{who}: `inertia` must be symmetric positive definite"
    if _is_concrete(inertia):
        I = np.asarray(inertia)
        scale = max(float(np.max(np.abs(I))), np.finfo(float).tiny)
        rel = rounding_tolerance(I.dtype)
        if not np.allclose(I, I.T, atol=rel * scale):
            raise ValueError(f"{msg}; it is not symmetric: {I.tolist()}")
        ev = np.linalg.eigvalsh(0.5 * (I + I.T))
        if not ev[0] > 0:
            raise ValueError(f"{msg}; its eigenvalues are {ev.tolist()}")
        tol = rel * ev[-1]
        if ev[2] > ev[0] + ev[1] + tol:
            raise ValueError(
                f"{who}: `inertia` violates the triangle inequality I_max <= I_1 + I_2 of a "
                f"physical body (principal moments {ev.tolist()})"
            )
        return inertia
    if not traced:
        return inertia
    scale = jnp.maximum(jnp.max(jnp.abs(inertia)), jnp.finfo(inertia.dtype).tiny)
    bad = jnp.max(jnp.abs(inertia - inertia.T)) > rounding_tolerance(inertia.dtype) * scale
    bad = bad | ~jnp.all(jnp.isfinite(jnp.linalg.cholesky(0.5 * (inertia + inertia.T))))
    return eqx.error_if(inertia, bad, msg)


class AbstractRigidBody(eqx.Module):
    r"""A rigid body as the `cx.rigid` constraint builders and friction forces see it: its
    pose and velocities at the system's state `(q, qd)`, and a name for the rows.

    Concrete bodies: `RigidBody` (its own block of coordinates in $q$) and `TreeBody` (a
    frame of a kinematic tree imported by `from_mjcf`, placed by forward kinematics). Every
    builder (`rolling_contact`, `plane_contact`, `no_slip`, `knife_edge`,
    `interconnection`, the primary velocity constraints, the friction forces,
    `FrictionalContact`) accepts either; `twist_rows`, which maps twists into the body's own
    block of $q$, needs a `RigidBody`.

    A material point with body-frame position $X$ is at $x = r + RX$ and moves at
    $\dot r + \omega\times RX$ (Briggs 2016, eq. 2.3.2), with $r$ the body's reference
    point (`position`), $R$ its rotation and $\omega$ its spatial angular velocity. A
    subclass implements the abstract methods below (and the field `name`); the velocities
    of points and the body's translational velocities follow from them.

    **Example:** `cx.rigid.rolling_contact(body, cx.rigid.Sphere(0.1))` for `body` a
    `RigidBody` or an `imported.wheel("tyre")[0]`.
    """

    name: eqx.AbstractVar[str]

    # -- what a body implements -----------------------------------------------------------

    @abc.abstractmethod
    def position(self, q) -> Float[Array, " 3"]:
        """The reference point $r$ (a `RigidBody`'s centre of mass)."""

    @abc.abstractmethod
    def rotation(self, q) -> Float[Array, "3 3"]:
        """Rotation $R$ (body frame to spatial frame)."""

    @abc.abstractmethod
    def rotate(self, q, X: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
        """$RX$: the body-frame vector `X` in spatial axes."""

    @abc.abstractmethod
    def point(self, q, X: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
        r"""Spatial position $x = r + RX$ of the material point `X` (body frame, relative to
        the reference point)."""

    @abc.abstractmethod
    def velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""Velocity $\dot r$ of the reference point."""

    @abc.abstractmethod
    def angular_velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""Spatial angular velocity $\omega = (\dot RR^\top)^\vee$."""

    @abc.abstractmethod
    def body_angular_velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""Body angular velocity $\Omega = (R^\top\dot R)^\vee$."""

    @abc.abstractmethod
    def orientation_constraint(self) -> Holonomic | None:
        """The rows that keep the body's own orientation coordinates on $SO(3)$, or `None`
        where it has none to keep."""

    # -- what follows from them -----------------------------------------------------------

    def spatial_translational_velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""$v = \dot r + r\times\omega$ (Briggs 2016, Def. 2.21 (iii))."""
        return self.velocity(q, qd) + cross(self.position(q), self.angular_velocity(q, qd))

    def body_translational_velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""$V = R^\top\dot r$ (Briggs 2016, Def. 2.21 (iv))."""
        return self.rotation(q).T @ self.velocity(q, qd)

    def point_velocity(self, q, qd, X: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
        r"""Velocity $\dot r + \dot R X$ of the material point `X` (body frame); equals
        $\dot r + \omega\times RX$ on $SO(3)$."""
        X = check_point(X, "X", jnp.asarray(q).dtype)
        return jax.jvp(lambda q_: self.point(q_, X), (jnp.asarray(q),), (jnp.asarray(qd),))[1]

    def offset_velocity(self, q, qd, delta: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
        r"""Velocity $\dot r + \omega\times\Delta$ of the material point currently at
        $r + \Delta$ (`delta` in the spatial frame)."""
        delta = check_point(delta, "delta", jnp.asarray(q).dtype)
        return self.velocity(q, qd) + cross(self.angular_velocity(q, qd), delta)

    def placement(self, q) -> tuple[Float[Array, " 3"], Callable[[Array], Array]]:
        r"""$(r, X\mapsto RX)$: the reference point and the rotation as a map, for a builder
        that reads both (the height of a contact point). A body whose pose is one
        computation (a `TreeBody`'s forward kinematics) does it once for both."""
        return self.position(q), lambda X: self.rotate(q, X)

    def offset_and_velocity(
        self, q, qd, offset: Callable[[Callable[[Array], Array]], Array]
    ) -> tuple[Float[Array, " 3"], Float[Array, " 3"]]:
        r"""$(\Delta, \dot r + \omega\times\Delta)$ for the spatial offset
        $\Delta$ = `offset(rotate)` that the body's rotation ($X\mapsto RX$) places, e.g.
        the lowest point of a shape: the offset and the velocity of the material point
        there (`offset_velocity`), from one pass of the body's kinematics where the body
        allows (a `TreeBody`)."""
        delta = check_point(offset(lambda X: self.rotate(q, X)), "delta", jnp.asarray(q).dtype)
        return delta, self.offset_velocity(q, qd, delta)


class RigidBody(AbstractRigidBody):
    r"""A rigid body: mass $m$, body-frame inertia $I$ about the centre of mass, and the
    layout of its coordinates in $q$.

    Kinetic energy (Briggs 2016, §2.3, Definition 2.21):
    $T = \tfrac12 m|\dot r|^2 + \tfrac12\Omega^\top I\Omega$, $\Omega = (R^\top\dot R)^\vee$
    (for `RotationMatrix` the equal affine form $\tfrac12\operatorname{tr}(\dot RJ\dot R^\top)$).

    **Arguments:**

    - `mass`: positive scalar (array or tracer; differentiable).
    - `inertia`: `(3, 3)` symmetric positive definite, or `(3,)` principal moments.
    - `orientation`: `Quaternion()` (default), `RotationMatrix()` or `EulerZXZ()`.
    - `offset`: index of the body's first coordinate in `q` (static).
    - `name`: label for constraint names (static).

    Bad values raise `ValueError` (or an `eqx.error_if` runtime error under `jit`). The
    velocities of material points (`point_velocity`, `offset_velocity`) and the
    translational velocities are `AbstractRigidBody`'s.

    **Example:**

    ```python
    body = cx.rigid.RigidBody(2.0, jnp.array([1.0, 2.0, 2.5]))
    q0, qd0 = body.state(jnp.zeros(3), jnp.eye(3), jnp.zeros(3), jnp.array([0.0, 0.0, 1.0]))
    system = cx.System(lambda t, q, qd, p: body.kinetic_energy(q, qd),
                       constraints=[body.orientation_constraint()])
    ```
    """

    mass: Float[Array, ""]
    inertia: Float[Array, "3 3"]
    orientation: AbstractOrientation
    offset: int = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mass: Float[ArrayLike, ""],
        inertia: Float[ArrayLike, "3 3"] | Float[ArrayLike, " 3"],
        orientation: AbstractOrientation = _QUATERNION,
        offset: int = 0,
        name: str = "body",
    ):
        if not isinstance(orientation, AbstractOrientation):
            raise TypeError(
                "RigidBody: `orientation` must be cx.rigid.Quaternion(), RotationMatrix() or "
                f"EulerZXZ(), got {orientation!r}"
            )
        if not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"RigidBody: `offset` must be a non-negative int, got {offset!r}")
        self.mass = check_mass(mass)
        self.inertia = check_inertia(inertia)
        self.orientation = orientation
        self.offset = int(offset)
        self.name = name

    def with_parameters(self, mass=None, inertia=None) -> "RigidBody":
        r"""A copy with another `mass` and/or `inertia` (e.g. read from the parameters `p`
        inside a Lagrangian, so that they can be identified or differentiated).

        Concrete values are checked like the constructor's. Traced values are only converted:
        the constructor's run-time checks (an `equinox.error_if` and a Cholesky) would
        otherwise run at every evaluation of the vector field. Validate parameters once,
        outside the integration (`cx.rigid.check_mass`, `cx.rigid.check_inertia`).

        **Example:** `body.with_parameters(p["mass"], jnp.stack([p["I1"], p["I1"], p["I3"]]))`.
        """
        who = "RigidBody.with_parameters"
        if mass is not None:
            mass = check_mass(mass, who, traced=False)
        if inertia is not None:
            inertia = check_inertia(inertia, who, traced=False)
        return eqx.tree_at(
            lambda b: (b.mass, b.inertia),
            self,
            (self.mass if mass is None else mass, self.inertia if inertia is None else inertia),
        )

    # -- layout ---------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of coordinates of the body, `3 + orientation.size`."""
        return 3 + self.orientation.size

    @property
    def stop(self) -> int:
        """One past the body's last coordinate in `q`."""
        return self.offset + self.size

    def coordinate_names(self) -> tuple[str, ...]:
        p = f"{self.name}."
        return (p + "x", p + "y", p + "z") + self.orientation.coordinate_names(p)

    def split(self, q: Float[Array, " n"]) -> tuple[Float[Array, " 3"], Float[Array, " k"]]:
        """`(r, x)`: the centre-of-mass position and orientation coordinates in `q`."""
        q = jnp.asarray(q)
        if q.ndim != 1 or q.shape[0] < self.stop:
            raise ValueError(
                f"RigidBody {self.name!r}: `q` must be a 1-D state holding the body's "
                f"coordinates at [{self.offset}:{self.stop}], got shape {q.shape}"
            )
        return q[self.offset : self.offset + 3], q[self.offset + 3 : self.stop]

    # -- kinematics -----------------------------------------------------------------------

    def position(self, q) -> Float[Array, " 3"]:
        """Centre of mass $r$."""
        return self.split(q)[0]

    def rotation(self, q) -> Float[Array, "3 3"]:
        """Rotation $R$ (body frame to spatial frame)."""
        return self.orientation.rotation(self.split(q)[1])

    def rotate(self, q, X: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
        """$RX$: the body-frame vector `X` in spatial axes (closed form for quaternions)."""
        return self.orientation.rotate(self.split(q)[1], jnp.asarray(X))

    def velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""Centre-of-mass velocity $\dot r$."""
        return self.split(qd)[0]

    def angular_velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""Spatial angular velocity $\omega = (\dot RR^\top)^\vee$ (Briggs 2016, Def. 2.21 (i))."""
        return self.orientation.spatial_angular_velocity(self.split(q)[1], self.split(qd)[1])

    def body_angular_velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""Body angular velocity $\Omega = (R^\top\dot R)^\vee$ (Briggs 2016, Def. 2.21 (ii))."""
        return self.orientation.body_angular_velocity(self.split(q)[1], self.split(qd)[1])

    def point(self, q, X: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
        r"""Spatial position $x = r + RX$ of the material point `X` (body frame, relative to
        the centre of mass)."""
        r, x = self.split(q)
        return r + self.orientation.rotate(x, check_point(X, "X", r.dtype))

    # -- dynamics -------------------------------------------------------------------------

    def kinetic_energy(self, q, qd) -> Float[Array, ""]:
        r"""$T = \tfrac12 m|\dot r|^2 + \tfrac12\Omega^\top I\Omega$."""
        r, x = self.split(q)
        rd, xd = self.split(qd)
        return 0.5 * self.mass * rd @ rd + self.orientation.rotational_kinetic_energy(
            x, xd, self.inertia
        )

    def potential_energy(self, q, gravity: Float[ArrayLike, " 3"] = (0.0, 0.0, -9.81)):
        r"""Gravitational potential $V = -m\,g\cdot r$ for a uniform field `gravity`."""
        g = jnp.asarray(gravity, dtype=jnp.asarray(q).dtype)
        return -self.mass * g @ self.position(q)

    def linear_momentum(self, q, qd) -> Float[Array, " 3"]:
        r"""$m\dot r$."""
        return self.mass * self.velocity(q, qd)

    def angular_momentum(self, q, qd) -> Float[Array, " 3"]:
        r"""Spatial angular momentum about the centre of mass, $\pi = R I\Omega$."""
        return self.rotation(q) @ (self.inertia @ self.body_angular_velocity(q, qd))

    # -- constraints and states -----------------------------------------------------------

    def orientation_constraint(self) -> Holonomic | UnitQuaternion | None:
        """The rows keeping the orientation coordinates on $SO(3)$, named
        `"<name>.orientation"`: a `cx.UnitQuaternion` for a quaternion (its norm row in
        closed form; rows of distinct quaternions never lose rank, which the solvers use),
        a `cx.Holonomic` for a rotation matrix, `None` for Euler angles."""
        if self.orientation.num_constraints == 0:
            return None
        if isinstance(self.orientation, Quaternion):
            return UnitQuaternion(self.offset + 3, name=f"{self.name}.orientation")
        orientation = self.orientation

        def g(t, q, p):
            return orientation.constraint(self.split(q)[1])

        return Holonomic(g, name=f"{self.name}.orientation")

    def state(
        self,
        position: Float[ArrayLike, " 3"],
        rotation: Float[ArrayLike, "3 3"],
        velocity: Float[ArrayLike, " 3"],
        angular_velocity: Float[ArrayLike, " 3"],
        *,
        frame: str = "spatial",
        project: bool = False,
    ) -> tuple[Float[Array, " k"], Float[Array, " k"]]:
        r"""The body's coordinate block and its rate from $(r, R, \dot r, \omega)$.

        `angular_velocity` is spatial ($\omega$, default) or body ($\Omega$, `frame="body"`).
        A non-orthonormal `rotation` raises `ValueError` unless `project=True`, which uses
        the nearest rotation (`project_to_so3`). Returns `(q_body, qd_body)` of length
        `size`; concatenate blocks of several bodies in offset order.
        """
        if frame not in ("spatial", "body"):
            raise ValueError(f"`frame` must be 'spatial' or 'body', got {frame!r}")
        dtype = jnp.result_type(float)
        R = check_rotation(rotation, project=project)
        r = check_point(position, "position", dtype)
        v = check_point(velocity, "velocity", dtype)
        w = check_point(angular_velocity, "angular_velocity", dtype)
        return _block_state(self.orientation, R, r, v, w, frame)


@eqx.filter_jit
def _block_state(orientation, R, r, v, w, frame):
    x = orientation.from_rotation(R)
    xd = orientation.velocity_from_angular_velocity(x, w, frame)
    return jnp.concatenate([r, x]), jnp.concatenate([v, xd])


def check_point(X, name: str, dtype=None) -> Array:
    """A 3-vector (body-frame point, spatial offset or direction); ValueError otherwise."""
    X = jnp.asarray(X)
    if X.shape != (3,):
        raise shape_error(name, "be a 3-vector of shape (3,) (a single point/direction)", X.shape)
    return as_float(X, dtype)
