r"""The surfaces a contact's shape touches: `Plane`, a plane at rest, moving in itself
(`rotating_plane`: a turntable) or carried by a moving body (Loparo & Vakalis 2002,
§7.10)."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._tolerances import rounding_tolerance
from .._kinematics._body import AbstractRigidBody, check_point
from .._kinematics._so3 import cross


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
            if not isinstance(self.body, AbstractRigidBody):
                raise TypeError(
                    "Plane: `body` (the carrier) must be a cx.rigid.RigidBody, PlanarBody or "
                    f"TreeBody (an AbstractRigidBody), got {type(self.body).__name__}"
                )
            if self.velocity is not None:
                raise ValueError(
                    "Plane: give either `velocity` (a plane moving in itself) or `body` (a "
                    "plane carried by a body, moving with it), not both"
                )

    def tangents(self) -> Array:
        r"""A fixed orthonormal basis `(2, 3)` of the plane's tangent space, $(t_1, n\times t_1)$
        ($e_x, e_y$ for the horizontal plane); traceable (a normal computed under `jit`).
        For a carried plane, in the carrier's frame ($t_{B,i}$; `frame` gives them at $q$)."""
        n = self.normal
        a = jnp.eye(3, dtype=n.dtype)[jnp.argmin(jnp.abs(n))]  # e_x for a horizontal plane
        t1 = a - (a @ n) * n
        t1 = t1 / jnp.sqrt(t1 @ t1)
        return jnp.stack([t1, cross(n, t1)])

    def frame(self, q) -> Float[Array, "3 3"]:
        r"""The rows $(n, t_1, t_2)$ of the plane's spatial frame at the configuration `q`:
        `normal` and `tangents()` for a plane not carried by a body, $(Rn_B, Rt_{B,1},
        Rt_{B,2})$ for one carried by `body` (rotation $R$ at `q`)."""
        q = jnp.asarray(q)
        local = jnp.concatenate([self.normal[None], self.tangents()]).astype(q.dtype)
        if self.body is None:
            return local
        return local @ self.body.rotation(q).T

    def material_velocity(self, q, qd, x) -> Float[Array, " 3"]:
        r"""$v_B(x) = \dot r + \omega\times(x - r)$: the velocity of the carrier's material
        point at the spatial point `x` (a carried plane only; linear in `qd`)."""
        body = self.body
        return body.offset_velocity(q, qd, x - body.position(q))


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
