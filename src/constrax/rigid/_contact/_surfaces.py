r"""The surfaces a contact's shape touches: `Plane`, a plane at rest, moving in itself
(`rotating_plane`: a turntable) or carried by a moving body (Loparo & Vakalis 2002,
§7.10); and `SphericalSurface`, the outside of a sphere at rest or carried by a body,
which a `Sphere` touches on its tangent plane (`_TangentPlane`).

A surface gives the contact code `frame(q)` (the rows $(n, t_1, t_2)$ of the contact
frame at `q`), `level(q, p)` (the height $h$ of the plane $n\cdot x = h$, measured from
the carrier's reference point where it has one), `body` (the carrier, or `None`),
`velocity` (the in-plane velocity field of a plane at rest, or `None`) and
`material_velocity` (the carrier's velocity at a point).
"""

from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._tolerances import rounding_tolerance
from .._kinematics._body import AbstractRigidBody, check_point
from .._kinematics._so3 import cross, safe_rsqrt
from ._shapes import Sphere, _param, _positive, check_radius


class Plane(eqx.Module):
    r"""The plane $\{x : n\cdot x = h\}$ with unit normal `normal` (pointing to the side of the
    bodies), height `height`, and either an optional in-plane velocity field
    `velocity(t, x, p) -> (3,)` of its material points (a turntable, a conveyor belt) or a
    carrier `body` whose face it is.

    **Carried by a body.** With `body` (an `AbstractRigidBody`, e.g. a `cx.rigid.PlanarBody`
    link), `normal` $n_B$ and `height` $h$ are in the carrier's frame: the plane is
    $\{x : n_B\cdot R^\top(x - r) = h\}$, $r$ and $R$ the carrier's reference point and
    rotation. Its spatial frame depends on the configuration, $n(q) = Rn_B$,
    $t_i(q) = Rt_{B,i}$ (`frame`), and its material point at $x$ moves at
    $v_B(x) = \dot r + \omega\times(x - r)$, linear in $\dot q$. A shape touching it
    has the gap $g = n(q)\cdot(x_c - r) - h$, $x_c$ the shape's lowest point in the
    direction $-n(q)$; the normal row of a contact, $n\cdot(v_A(x_c) - v_B(x_c))$, is
    $\dot g$ — with $\dot n = \omega\times n$, $\dot n\cdot(x_c - r) =
    -n\cdot(\omega\times(x_c - r))$, and at the lowest point $n\cdot\dot x_c =
    n\cdot v_A(x_c)$ (the contact point slides along the shape's surface, tangentially).
    The reaction of every row acts on both bodies, equal and opposite at $x_c$: a row is
    $u\cdot(v_A - v_B)$, so its force enters as $A^\top\lambda$ on each body's
    coordinates with opposite signs (Loparo & Vakalis 2002, §7.10, the disk on a moving
    link: `cx.models.disk_on_link`).

    **Example:** a turntable spinning at `p["Omega"]`:
    `Plane(velocity=lambda t, x, p: p["Omega"] * jnp.cross(jnp.array([0, 0, 1.0]), x))`;
    the upper face of a link, `Plane(jnp.array([0.0, 1.0, 0.0]), body=link)`.
    """

    normal: Array = eqx.field(converter=lambda a: _unit_normal(a), default=(0.0, 0.0, 1.0))
    height: float | Callable = 0.0
    velocity: Callable | None = None
    body: AbstractRigidBody | None = None

    def __check_init__(self):
        if self.body is not None:
            _check_carrier(self.body, "Plane")
            if self.velocity is not None:
                raise ValueError(
                    "Plane: give either `velocity` (a plane moving in itself) or `body` (a "
                    "plane carried by a body, moving with it), not both"
                )

    def sizes_valid(self, p, dtype) -> Array:
        """`True`: a plane has no size (the interface of `SphericalSurface.sizes_valid`)."""
        return jnp.asarray(True)

    def tangents(self) -> Array:
        r"""A fixed orthonormal basis `(2, 3)` of the plane's tangent space, $(t_1, n\times t_1)$
        ($e_x, e_y$ for the horizontal plane); traceable (a normal computed under `jit`).
        For a carried plane, in the carrier's frame ($t_{B,i}$; `frame` gives them at $q$)."""
        return _tangents(self.normal)

    def frame(self, q) -> Float[Array, "3 3"]:
        r"""The rows $(n, t_1, t_2)$ of the plane's spatial frame at the configuration `q`:
        `normal` and `tangents()` for a plane not carried by a body, $(Rn_B, Rt_{B,1},
        Rt_{B,2})$ for one carried by `body` (rotation $R$ at `q`)."""
        q = jnp.asarray(q)
        local = jnp.concatenate([self.normal[None], self.tangents()]).astype(q.dtype)
        if self.body is None:
            return local
        return local @ self.body.rotation(q).T

    def level(self, q, p) -> Float[Array, ""]:
        """The height $h$ (`height`, read from `p` where it is a callable)."""
        del q
        return _param(self.height, p)

    def material_velocity(self, q, qd, x) -> Float[Array, " 3"]:
        r"""$v_B(x) = \dot r + \omega\times(x - r)$: the velocity of the carrier's material
        point at the spatial point `x` (a carried plane only; linear in `qd`)."""
        return _material_velocity(self.body, q, qd, x)


class SphericalSurface(eqx.Module):
    r"""The outside of a sphere of radius `radius` (a number or a callable `p -> radius`)
    centred at `centre`: a point fixed in space, or with `body` a body-frame point of a
    carrier, the sphere moving with it (a ball on a ball).

    A `cx.rigid.Sphere` of radius $a$ centred at $x$ touches it on the line of the two
    centres: the contact normal is $n = (x - c)/|x - c|$ from the surface's centre $c$, the
    gap $g = |x - c| - a - R$, and the contact point $x - an = c + Rn$ where the gap is
    zero. The contact is that of the tangent plane there: the plane with normal $n(q)$
    at height $n\cdot c + R$, whose frame turns with $q$ (`frame`); on a carried sphere
    its material points move with the carrier, $v_B(x) = \dot r_B + \omega_B\times
    (x - r_B)$, and the reaction acts on both bodies, equal and opposite, as for a carried
    `Plane`. Only a `Sphere` touches a sphere (`TypeError` for another shape: the closest
    points of a disk or an ellipsoid to a sphere are not along the line of centres).

    **Example:** a ball of radius 0.1 on a fixed sphere of radius 1 at the origin,
    `FrictionalContact(ball, Sphere(0.1), SphericalSurface(1.0), static_friction=0.5,
    kinetic_friction=0.4)`.
    """

    radius: float | Callable
    centre: Array = eqx.field(converter=lambda c: check_point(c, "centre"), default=(0.0, 0.0, 0.0))
    body: AbstractRigidBody | None = None

    def __check_init__(self):
        check_radius(self.radius, "SphericalSurface")
        if self.body is not None:
            _check_carrier(self.body, "SphericalSurface")

    def sizes_valid(self, p, dtype) -> Array:
        """`True` where the radius (read from `p` where it is a callable) is finite and
        $> 0$ (as `Sphere.sizes_valid`): checked at $t_0$ by `simulate_contacts`."""
        return _positive(_param(self.radius, p), dtype, (), "SphericalSurface", "radius")

    def centre_at(self, q) -> Float[Array, " 3"]:
        """The spatial position of the centre at `q`."""
        q = jnp.asarray(q)
        c = self.centre.astype(q.dtype)
        if self.body is None:
            return c
        return self.body.position(q) + self.body.rotate(q, c)

    def touched_by(self, body: AbstractRigidBody, shape) -> "_TangentPlane":
        """The tangent plane where `shape` (a `Sphere`) on `body` touches the sphere."""
        if not isinstance(shape, Sphere):
            raise TypeError(
                "SphericalSurface: only a cx.rigid.Sphere touches a sphere (on the line of "
                f"the centres), got {type(shape).__name__}"
            )
        return _TangentPlane(self, body, shape)


class _TangentPlane(eqx.Module):
    """The tangent plane of `surface` where `shape` on `toucher` touches it, with the
    interface of `Plane` (module docstring), its frame and height depending on `q`."""

    surface: SphericalSurface
    toucher: AbstractRigidBody
    shape: Sphere
    velocity: ClassVar[None] = None

    @property
    def body(self) -> AbstractRigidBody | None:
        return self.surface.body

    def sizes_valid(self, p, dtype) -> Array:
        """The surface's radius is finite and $> 0$ (`SphericalSurface.sizes_valid`)."""
        return self.surface.sizes_valid(p, dtype)

    def frame(self, q) -> Float[Array, "3 3"]:
        r"""The rows $(n, t_1, t_2)$ at `q`: $n = (x - c)/|x - c|$ from the surface's centre
        to the touching sphere's, and two tangents built from it as `Plane.tangents`."""
        q = jnp.asarray(q)
        x = self.toucher.position(q)
        if self.shape.centre is not None:
            x = x + self.toucher.rotate(q, self.shape.centre.astype(q.dtype))
        d = x - self.surface.centre_at(q)
        n = d * safe_rsqrt(d @ d)
        return jnp.concatenate([n[None], _tangents(n)])

    def level(self, q, p) -> Float[Array, ""]:
        r"""$h = n\cdot(c - r_B) + R$ ($r_B$ the carrier's reference point, none at rest)."""
        c = self.surface.centre_at(q)
        if self.body is not None:
            c = c - self.body.position(q)
        return self.frame(q)[0] @ c + _param(self.surface.radius, p)

    def material_velocity(self, q, qd, x) -> Float[Array, " 3"]:
        """As `Plane.material_velocity`: the carrier's material velocity at `x`."""
        return _material_velocity(self.body, q, qd, x)


#: What a contact's `plane` may be.
SURFACES = (Plane, SphericalSurface, _TangentPlane)


def contact_surface(body: AbstractRigidBody, shape, plane):
    """The surface a contact builder's rows read: the horizontal plane through the origin
    for `None`, a `SphericalSurface`'s tangent plane where `shape` on `body` touches it,
    `plane` itself otherwise."""
    if plane is None:
        return Plane()
    if isinstance(plane, SphericalSurface):
        return plane.touched_by(body, shape)
    if not isinstance(plane, SURFACES):
        raise TypeError(
            "`plane` must be a cx.rigid.Plane or a cx.rigid.SphericalSurface, got "
            f"{type(plane).__name__}"
        )
    return plane


def _tangents(n) -> Array:
    r"""An orthonormal pair `(2, 3)` normal to the unit vector `n`, $(t_1, n\times t_1)$,
    $t_1$ the projection of the axis least aligned with `n` ($e_x$ for $n = e_z$)."""
    a = jnp.eye(3, dtype=n.dtype)[jnp.argmin(jnp.abs(n))]
    t1 = a - (a @ n) * n
    t1 = t1 / jnp.sqrt(t1 @ t1)
    return jnp.stack([t1, cross(n, t1)])


def _material_velocity(body, q, qd, x) -> Array:
    return body.offset_velocity(q, qd, x - body.position(q))


def _check_carrier(body, who: str) -> None:
    if not isinstance(body, AbstractRigidBody):
        raise TypeError(
            f"{who}: `body` (the carrier) must be a cx.rigid.RigidBody, PlanarBody or "
            f"TreeBody (an AbstractRigidBody), got {type(body).__name__}"
        )


def _unit_normal(value) -> Array:
    """A plane's normal: a 3-vector of unit length, checked now where concrete and by an
    `equinox.error_if` where traced (a plane built under `jit`)."""
    n = check_point(value, "normal")
    tol = rounding_tolerance(n.dtype)
    if isinstance(n, jax.core.Tracer):
        norm = jnp.sqrt(n @ n)
        return eqx.error_if(
            n, ~(jnp.abs(norm - 1.0) <= tol), "Plane: `normal` must be a unit vector"
        )
    if not np.isclose(np.linalg.norm(np.asarray(n)), 1.0, atol=tol):
        raise ValueError(f"Plane: `normal` must be a unit vector, got {np.asarray(n).tolist()}")
    return n


def rotating_plane(
    rate: float | Callable, centre: Float[ArrayLike, " 3"] = (0.0, 0.0, 0.0), **plane_kwargs
) -> Plane:
    r"""A plane spinning in itself about the axis through `centre` along its normal at angular
    rate `rate` (number or `(t, p) -> rate`): $v_s(t, x) = \Omega(t)\,n\times(x - c)$.

    **Example:** `rotating_plane(lambda t, p: p["Omega"])`.
    """
    c = check_point(centre, "centre")
    n = check_point(plane_kwargs.get("normal", (0.0, 0.0, 1.0)), "normal")

    def velocity(t, x, p):
        w = rate(t, p) if callable(rate) else rate
        return w * cross(n.astype(x.dtype), x - c.astype(x.dtype))

    return Plane(velocity=velocity, **plane_kwargs)
