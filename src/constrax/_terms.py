r"""The terms of the equations of motion, derived from a `System` by autodiff
(docs/concepts/lagrangians.md).

* mass matrix $W = \partial^2 L / \partial \dot q^2$;
* $f = Q + \partial L/\partial q - (\partial^2 L/\partial\dot q\,\partial q)\,\dot q
  - \partial^2 L/\partial\dot q\,\partial t$ (the bias is one `jax.jvp` of
  $\partial L/\partial\dot q$ along $(1, \dot q)$, never a full mixed Hessian);
* stacked constraint rows $c$, their Jacobian $A = \partial c/\partial\dot q$ and the bias
  $c_\text{bias} = \dot c - A\ddot q$ (one `jax.jvp` of $c$ along $(1, \dot q)$, and $A$
  read off by each constraint kind, `AbstractConstraint.terms`);
* the position level: the stacked holonomic residual $g$.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._compilation import compiled
from ._custom_types import Params, Time
from ._layout import row_layout
from ._state import as_time, check_state
from ._system import System
from ._unconstrained import (
    LagrangianDynamics,
    euler_lagrange_rhs as euler_lagrange_rhs,
    euler_lagrange_terms as euler_lagrange_terms,
)

# ----------------------------------------------------------------------------------------
# Lagrangian terms.


def lagrangian_terms(
    system: "System", t: Time, q, qd, p: Params, bias: bool = True
) -> tuple[Float[Array, "n n"], Float[Array, " n"] | None]:
    """$(W, f_0)$ from `system.dynamics` where the system carries one (`AbstractDynamics`),
    else from autodiff of `system.lagrangian` (`LagrangianDynamics`)."""
    dynamics = system.dynamics
    if dynamics is None:
        dynamics = LagrangianDynamics(system.lagrangian)
    return dynamics.euler_lagrange_terms(t, q, qd, p, bias)


def generalized_force(system: "System", t, q, qd, p) -> Float[Array, " n"]:
    """$Q(t, q, \\dot q, p)$, zeros if the system has no force."""
    if system.force is None:
        return jnp.zeros_like(q)
    return jnp.asarray(system.force(t, q, qd, p), dtype=q.dtype)


@compiled(times=("t",), states=("q", "qd"), params=("p",))
def mass_matrix(system: "System", t: Time, q, qd, p: Params) -> Float[Array, "n n"]:
    r"""The mass matrix $W = \partial^2 L / \partial\dot q^2$ (by autodiff, or from the
    system's `dynamics` where it carries one: e.g. `cx.rigid.from_mjcf`'s tree recursions).

    **Example:**

    ```python
    cx.mass_matrix(system, 0.0, q, qd, p)      # (n, n)
    ```
    """
    q, qd = check_state(q, qd)
    t = as_time(t, q)
    row_layout(system, t, q, qd, p)  # the trace-time shape checks
    return lagrangian_terms(system, t, q, qd, p, bias=False)[0]


# ----------------------------------------------------------------------------------------
# Constraint terms.


def stacked_residual(system: "System", p: Params) -> Callable:
    """`c(t, q, qd)`: all constraint rows stacked in order."""

    def c(t, q, qd):
        if not system.constraints:
            return jnp.zeros((0,), dtype=q.dtype)
        return jnp.concatenate(
            [con.velocity_residual(t, q, qd, p).astype(q.dtype) for con in system.constraints]
        )

    return c


def constraint_terms(
    system: "System", t, q, qd, p, bias: bool = True
) -> tuple[Float[Array, "m n"], Float[Array, " m"], Float[Array, " m"] | None]:
    r"""$(A, c, c_\text{bias})$ of all constraints, rows stacked in order:
    $A = \partial c/\partial\dot q$, $c$ the rows, and
    $c_\text{bias} = \partial c/\partial t + (\partial c/\partial q)\dot q$, so that
    $\dot c = A\ddot q + c_\text{bias}$ (`AbstractConstraint.terms` per constraint); with
    `bias=False`, $c_\text{bias}$ is not computed (`None`)."""
    if not system.constraints:
        n = q.shape[0]
        z = jnp.zeros((0,), q.dtype)
        return jnp.zeros((0, n), q.dtype), z, z if bias else None
    blocks = [con.terms(t, q, qd, p, bias) for con in system.constraints]
    A, c, c_bias = zip(*blocks, strict=True)
    return jnp.concatenate(A), jnp.concatenate(c), jnp.concatenate(c_bias) if bias else None


def constraint_bias(system: "System", t, q, qd, p) -> tuple[Float[Array, " m"], Float[Array, " m"]]:
    r"""$(c, c_\text{bias})$ alone: one `jax.jvp` along $(1, \dot q)$ with $\dot q$ fixed."""
    fn = stacked_residual(system, p)
    return jax.jvp(lambda t_, q_: fn(t_, q_, qd), (t, q), (jnp.ones_like(t), qd))


def position_residual(system: "System", t, q, p) -> Float[Array, " h"]:
    """Stacked $g(t, q)$ of the rows with a position level only (shape `(h,)`, the rows of
    `RowLayout.mask` in order)."""
    parts = [con.position_residual(t, q, p) for con in system.constraints if con.has_position_rows]
    if not parts:
        return jnp.zeros((0,), dtype=q.dtype)
    return jnp.concatenate([jnp.asarray(x, dtype=q.dtype) for x in parts])


def scatter_holonomic(mask: np.ndarray, g: Array) -> Array:
    """Place the holonomic residuals `g` into the stacked rows given by `mask` (zeros elsewhere)."""
    out = jnp.zeros(mask.shape, dtype=g.dtype)
    return out.at[np.flatnonzero(mask)].set(g)
