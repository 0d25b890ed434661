r"""`PlanarBody`: a rigid body moving in the $(x, y)$ plane and turning about $e_z$, with
three coordinates $(x, y, \theta)$ of its own in $q$ — the planar bodies of Loparo &
Vakalis 2002, §7.10 (a disk on a moving link), as the `cx.rigid` builders see a body."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._body import AbstractRigidBody, check_mass, check_point


def _check_moment(inertia, who: str, *, traced: bool = True) -> Array:
    """A positive scalar moment of inertia about $e_z$ (ValueError when concrete, an
    `eqx.error_if` under jit unless `traced=False`), as `check_mass` checks a mass."""
    J = jnp.asarray(inertia)
    if not jnp.issubdtype(J.dtype, jnp.inexact):
        J = J.astype(jnp.result_type(float))
    if J.shape != ():
        raise ValueError(f"{who}: `inertia` (the moment about e_z) must be a scalar, got {J.shape}")
    msg = f"{who}: `inertia` must be positive"
    if not isinstance(J, jax.core.Tracer):
        if not float(J) > 0:
            raise ValueError(f"{msg}, got {float(J)}")
        return J
    return eqx.error_if(J, ~(J > 0), msg) if traced else J


class PlanarBody(AbstractRigidBody):
    r"""A rigid body in planar motion: its reference point (the centre of mass) moves in the
    $(x, y)$ plane and it turns about $e_z$; coordinates $(x, y, \theta)$ at
    `q[offset : offset + 3]`.

    $r = (x, y, 0)$, $R = R_z(\theta)$, $\omega = \dot\theta e_z$; a material point $X$
    (body frame) is at $r + RX$ and moves at $\dot r + \omega\times RX$. Kinetic energy
    $T = \tfrac12 m(\dot x^2 + \dot y^2) + \tfrac12 J\dot\theta^2$, $J$ the moment of
    inertia about the axis through the centre of mass along $e_z$. No orientation rows.

    The `cx.rigid` contact builders and `FrictionalContact` take it like any
    `AbstractRigidBody`: a `Disk(a, axis=e_z)` on a `PlanarBody` is a disk rolling in the
    plane, and `Plane(normal, body=link)` the face of a planar link (Loparo & Vakalis 2002,
    §7.10; `cx.models.disk_on_link`). The out-of-plane no-slip row of such a contact
    ($t_2 = \pm e_z$) vanishes identically: the default `cx.AutoSolver` then takes its
    rank-robust path (the row's multiplier is zero).

    **Arguments:** `mass` $m > 0$, `inertia` $J > 0$ (scalars, arrays or tracers;
    differentiable), `offset` (index of $x$ in `q`, static), `name` (static).

    **Example:**

    ```python
    disk = cx.rigid.PlanarBody(1.0, 0.02, offset=3, name="disk")
    L = lambda t, q, qd, p: disk.kinetic_energy(q, qd) - 9.81 * disk.mass * q[4]
    ```
    """

    mass: Float[Array, ""]
    inertia: Float[Array, ""]
    offset: int = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mass: Float[ArrayLike, ""],
        inertia: Float[ArrayLike, ""],
        offset: int = 0,
        name: str = "body",
    ):
        if not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"PlanarBody: `offset` must be a non-negative int, got {offset!r}")
        self.mass = check_mass(mass, "PlanarBody")
        self.inertia = _check_moment(inertia, "PlanarBody")
        self.offset = int(offset)
        self.name = name

    def with_parameters(self, mass=None, inertia=None) -> "PlanarBody":
        """A copy with another `mass` and/or `inertia` (e.g. read from the parameters inside
        a Lagrangian); traced values are only converted (as `RigidBody.with_parameters`)."""
        who = "PlanarBody.with_parameters"
        mass = self.mass if mass is None else check_mass(mass, who, traced=False)
        inertia = self.inertia if inertia is None else _check_moment(inertia, who, traced=False)
        return eqx.tree_at(lambda b: (b.mass, b.inertia), self, (mass, inertia))

    # -- layout ---------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of coordinates of the body, 3."""
        return 3

    @property
    def stop(self) -> int:
        """One past the body's last coordinate in `q`."""
        return self.offset + 3

    def coordinate_names(self) -> tuple[str, ...]:
        p = f"{self.name}."
        return (p + "x", p + "y", p + "theta")

    def split(self, q) -> Float[Array, " 3"]:
        r"""$(x, y, \theta)$ of the body in `q`."""
        q = jnp.asarray(q)
        if q.ndim != 1 or q.shape[0] < self.stop:
            raise ValueError(
                f"PlanarBody {self.name!r}: `q` must be a 1-D state holding the body's "
                f"coordinates at [{self.offset}:{self.stop}], got shape {q.shape}"
            )
        return q[self.offset : self.stop]

    # -- kinematics -----------------------------------------------------------------------

    def position(self, q) -> Float[Array, " 3"]:
        """$r = (x, y, 0)$."""
        x = self.split(q)
        return jnp.stack([x[0], x[1], jnp.zeros((), x.dtype)])

    def rotation(self, q) -> Float[Array, "3 3"]:
        r"""$R_z(\theta)$."""
        th = self.split(q)[2]
        c, s = jnp.cos(th), jnp.sin(th)
        z, o = jnp.zeros_like(th), jnp.ones_like(th)
        return jnp.stack([jnp.stack([c, -s, z]), jnp.stack([s, c, z]), jnp.stack([z, z, o])])

    def rotate(self, q, X: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
        """$RX$."""
        th = self.split(q)[2]
        X = jnp.asarray(X, th.dtype)
        c, s = jnp.cos(th), jnp.sin(th)
        return jnp.stack([c * X[0] - s * X[1], s * X[0] + c * X[1], X[2]])

    def point(self, q, X: Float[ArrayLike, " 3"]) -> Float[Array, " 3"]:
        """$r + RX$."""
        r = self.position(q)
        return r + self.rotate(q, check_point(X, "X", r.dtype))

    def velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""$\dot r = (\dot x, \dot y, 0)$."""
        v = self.split(qd)
        return jnp.stack([v[0], v[1], jnp.zeros((), v.dtype)])

    def angular_velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""$\omega = \dot\theta e_z$."""
        w = self.split(qd)[2]
        z = jnp.zeros((), w.dtype)
        return jnp.stack([z, z, w])

    def body_angular_velocity(self, q, qd) -> Float[Array, " 3"]:
        r"""$\Omega = \dot\theta e_z$ (rotations about $e_z$ leave $e_z$ fixed)."""
        return self.angular_velocity(q, qd)

    def orientation_constraint(self) -> None:
        """`None`: the angle needs no rows."""
        return None

    # -- dynamics -------------------------------------------------------------------------

    def kinetic_energy(self, q, qd) -> Float[Array, ""]:
        r"""$T = \tfrac12 m(\dot x^2 + \dot y^2) + \tfrac12 J\dot\theta^2$."""
        v = self.split(qd)
        return 0.5 * self.mass * (v[0] ** 2 + v[1] ** 2) + 0.5 * self.inertia * v[2] ** 2

    def potential_energy(self, q, gravity: Float[ArrayLike, " 3"] = (0.0, -9.81, 0.0)):
        r"""Gravitational potential $V = -m\,g\cdot r$ for a uniform field `gravity`
        (default $-9.81e_y$: the plane of motion is vertical)."""
        g = jnp.asarray(gravity, dtype=jnp.asarray(q).dtype)
        return -self.mass * g @ self.position(q)
