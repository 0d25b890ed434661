r"""The surfaces a contact's shape touches: `Plane`, a plane at rest or moving in itself
(`rotating_plane`: a turntable)."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._tolerances import rounding_tolerance
from .._kinematics._body import check_point
from .._kinematics._so3 import cross


class Plane(eqx.Module):
    r"""The plane $\{x : n\cdot x = h\}$ with unit normal `normal` (pointing to the side of the
    bodies), height `height`, and an optional in-plane velocity field
    `velocity(t, x, p) -> (3,)` of its material points (a turntable, a conveyor belt).

    **Example:** a turntable spinning at `p["Omega"]`:
    `Plane(velocity=lambda t, x, p: p["Omega"] * jnp.cross(jnp.array([0, 0, 1.0]), x))`.
    """

    normal: Array = eqx.field(converter=lambda a: _unit_normal(a), default=(0.0, 0.0, 1.0))
    height: float | Callable = 0.0
    velocity: Callable | None = None

    def tangents(self) -> Array:
        r"""A fixed orthonormal basis `(2, 3)` of the plane's tangent space, $(t_1, n\times t_1)$
        ($e_x, e_y$ for the horizontal plane); traceable (a normal computed under `jit`)."""
        n = self.normal
        a = jnp.eye(3, dtype=n.dtype)[jnp.argmin(jnp.abs(n))]  # e_x for a horizontal plane
        t1 = a - (a @ n) * n
        t1 = t1 / jnp.sqrt(t1 @ t1)
        return jnp.stack([t1, cross(n, t1)])


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
