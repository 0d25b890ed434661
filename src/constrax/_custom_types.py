"""Type aliases shared by the public signatures."""

from collections.abc import Callable
from typing import Any

from jaxtyping import Array, ArrayLike, Float, PyTree

Params = PyTree[Any]
"""Any pytree of (differentiable) physical parameters, passed as `p` to user functions."""

Time = Float[ArrayLike, ""]
Coordinates = Float[Array, " n"]
Velocities = Float[Array, " n"]

LagrangianFn = Callable[[Time, Coordinates, Velocities, Params], Float[Array, ""]]
"""`L(t, q, qd, p) -> scalar`."""

ForceFn = Callable[[Time, Coordinates, Velocities, Params], Float[Array, " n"]]
"""`Q(t, q, qd, p) -> (n,)`: non-conservative generalized force (friction, controls)."""

HolonomicFn = Callable[[Time, Coordinates, Params], Float[Array, " k"]]
"""`g(t, q, p) -> (k,)`."""

OneFormFn = Callable[[Time, Coordinates, Params], Float[Array, "k n"]]
"""`omega(t, q, p) -> (k, n)`."""

AffineTermFn = Callable[[Time, Coordinates, Params], Float[Array, " k"]]
"""`b(t, q, p) -> (k,)`."""

VelocityConstraintFn = Callable[[Time, Coordinates, Velocities, Params], Float[Array, " k"]]
"""`F(t, q, qd, p) -> (k,)`."""
