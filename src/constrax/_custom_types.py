"""Type aliases shared by the public signatures.

Each alias is a `TypeAliasType`, so that signatures — in `help()`, `inspect.signature` and
the API docs alike — show its short name (`g: HolonomicFn`) instead of the expanded
jaxtyping types. Annotations only: nothing checks them at run time.
"""

from collections.abc import Callable
from typing import Any

from jaxtyping import Array, ArrayLike, Float, PyTree
from typing_extensions import TypeAliasType

Params = TypeAliasType("Params", PyTree[Any])
"""Any pytree of (differentiable) physical parameters, passed as `p` to user functions."""

Time = TypeAliasType("Time", Float[ArrayLike, ""])
"""A scalar time."""

Coordinates = TypeAliasType("Coordinates", Float[Array, " n"])
"""Generalized coordinates `q`, shape `(n,)`."""

Velocities = TypeAliasType("Velocities", Float[Array, " n"])
"""Generalized velocities `qd`, shape `(n,)`."""

LagrangianFn = TypeAliasType(
    "LagrangianFn", Callable[[Time, Coordinates, Velocities, Params], Float[Array, ""]]
)
"""`L(t, q, qd, p) -> scalar`."""

ForceFn = TypeAliasType(
    "ForceFn", Callable[[Time, Coordinates, Velocities, Params], Float[Array, " n"]]
)
"""`Q(t, q, qd, p) -> (n,)`: non-conservative generalized force (friction, controls)."""

HolonomicFn = TypeAliasType(
    "HolonomicFn", Callable[[Time, Coordinates, Params], Float[Array, " k"]]
)
"""`g(t, q, p) -> (k,)`."""

OneFormFn = TypeAliasType("OneFormFn", Callable[[Time, Coordinates, Params], Float[Array, "k n"]])
"""`omega(t, q, p) -> (k, n)`."""

AffineTermFn = TypeAliasType(
    "AffineTermFn", Callable[[Time, Coordinates, Params], Float[Array, " k"]]
)
"""`b(t, q, p) -> (k,)`."""

VelocityConstraintFn = TypeAliasType(
    "VelocityConstraintFn",
    Callable[[Time, Coordinates, Velocities, Params], Float[Array, " k"]],
)
"""`F(t, q, qd, p) -> (k,)`."""
