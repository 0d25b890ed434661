r"""`System`: a Lagrangian, its constraints and a generalized force, and the terms the
engine derives from them by autodiff (docs/concepts/lagrangians.md).

* mass matrix $W = \partial^2 L / \partial \dot q^2$;
* $f = Q + \partial L/\partial q - (\partial^2 L/\partial\dot q\,\partial q)\,\dot q
  - \partial^2 L/\partial\dot q\,\partial t$ (the bias is one `jax.jvp` of
  $\partial L/\partial\dot q$ along $(1, \dot q)$, never a full mixed Hessian);
* stacked constraint rows $c$, their Jacobian $A = \partial c/\partial\dot q$ and the bias
  $c_\text{bias} = \dot c - A\ddot q$ (one `jax.jvp` of $c$ along $(1, \dot q)$, and $A$
  read off per constraint kind).
"""

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._compilation import compiled
from ._constraints import AbstractConstraint
from ._custom_types import ForceFn, LagrangianFn, Params, Time
from ._kinds import kinds
from ._layout import row_layout


class System(eqx.Module):
    r"""A constrained mechanical system.

    **Arguments:**

    - `lagrangian`: `L(t, q, qd, p) -> scalar`.
    - `constraints`: a sequence of `Holonomic`, `Pfaffian` and `VelocityConstraint`
      (any mix). Their rows are stacked in the order given; `multipliers` follow it.
    - `force`: optional non-conservative generalized force `Q(t, q, qd, p) -> (n,)`
      (friction, dissipation, controls). It is *not* a constraint force: it enters $f$
      and is reported apart from the reactions.

    **Example:**

    ```python
    def L(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd - p["m"] * 9.81 * q[1]
    def rod(t, q, p):
        return q @ q - p["l"] ** 2
    pendulum = cx.System(lagrangian=L, constraints=[cx.Holonomic(rod)])
    ```
    """

    lagrangian: LagrangianFn
    constraints: tuple[AbstractConstraint, ...]
    force: ForceFn | None

    def __init__(
        self,
        lagrangian: LagrangianFn,
        constraints: Sequence[AbstractConstraint] = (),
        force: ForceFn | None = None,
    ):
        if not callable(lagrangian):
            raise TypeError(f"`lagrangian` must be callable L(t, q, qd, p), got {lagrangian!r}")
        if isinstance(constraints, AbstractConstraint):
            constraints = (constraints,)
        constraints = tuple(constraints)
        for i, con in enumerate(constraints):
            if not isinstance(con, AbstractConstraint):
                raise TypeError(
                    f"`constraints[{i}]` must be a {kinds(AbstractConstraint)}, "
                    f"got {type(con).__name__}"
                )
        if force is not None and not callable(force):
            raise TypeError(f"`force` must be callable Q(t, q, qd, p) or None, got {force!r}")
        self.lagrangian = lagrangian
        self.constraints = constraints
        self.force = force


def as_time(t, q: Array) -> Array:
    """`t` as a scalar array of the dtype of `q`."""
    t = jnp.asarray(t)
    if t.ndim != 0:
        raise ValueError(f"`t` must be a scalar time, got shape {t.shape}")
    return t.astype(q.dtype)


# ----------------------------------------------------------------------------------------
# State coercion: every array a user passes as coordinates, velocities or 3-vectors (here,
# in the geometry, `rollout_batch` and `cx.rigid`) is made a float array by `as_float` and,
# if its shape is wrong, refused by `shape_error`, which names the argument.


def as_float(x, dtype=None) -> Array:
    """`x` as a JAX array of an inexact dtype: integer or boolean entries become `dtype`
    (default: JAX's default float); floating and complex arrays keep theirs."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float) if dtype is None else dtype)
    return x


def shape_error(name: str, expected: str, shape: tuple[int, ...]) -> ValueError:
    """The one wording of a wrong shape: ``"`name` must <expected>, got shape <shape>"``."""
    return ValueError(f"`{name}` must {expected}, got shape {tuple(shape)}")


def as_coordinates(q, name: str = "q") -> Array:
    """One configuration `(n,)`, as a float array; `ValueError` naming `name` otherwise."""
    q = jnp.asarray(q)
    if q.ndim != 1:
        raise shape_error(name, "be a 1-D array of generalized coordinates", q.shape)
    return as_float(q)


def as_configurations(qs, name: str = "qs") -> Array:
    """One configuration `(n,)` or a batch `(k, n)` of them, as a float `(k, n)` array."""
    qs = jnp.asarray(qs)
    if qs.ndim == 1:
        qs = qs[None]
    if qs.ndim != 2:
        raise shape_error(name, "be one configuration (n,) or a batch (k, n) of them", qs.shape)
    return as_float(qs)


def check_state(q, qd) -> tuple[Array, Array]:
    """Validate the coordinate/velocity arrays; returns them as inexact arrays (`qd` in the
    dtype of `q`)."""
    q = jnp.asarray(q)
    qd = jnp.asarray(qd)
    q = as_coordinates(q)
    if qd.shape != q.shape:
        raise ValueError(
            f"`q` and `qd` must have the same shape, got q.shape={q.shape} and qd.shape={qd.shape}"
        )
    return q, qd.astype(q.dtype)


def constraint_row_counts(system: System, t, q, qd, p) -> tuple[int, ...]:
    """Rows per constraint, after the checks of `row_layout`."""
    return row_layout(system, t, q, qd, p).counts


def row_names(system: System, t, q, qd, p) -> list[str]:
    """A label `"name[i]"` for every stacked constraint row (`row_layout`)."""
    return list(row_layout(system, t, q, qd, p).names)


# ----------------------------------------------------------------------------------------
# Lagrangian terms.


def _gradients(lagrangian: Callable) -> Callable:
    return jax.grad(lagrangian, argnums=(1, 2))


def euler_lagrange_terms(
    lagrangian: Callable, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], bias: bool = True
) -> tuple[Float[Array, "n n"], Float[Array, " n"] | None]:
    r"""$(W, f_0)$ with $W = \partial^2 L/\partial\dot q^2$ and
    $f_0 = \partial L/\partial q - (\partial^2 L/\partial\dot q\partial q)\dot q
    - \partial^2 L/\partial\dot q\partial t$, for `lagrangian(t, q, qd)`.

    $W$ is the forward Jacobian of $\partial L/\partial\dot q$ in $\dot q$ alone, $f_0$
    `euler_lagrange_rhs`: no tangents that are known to be zero. With `bias=False`, $W$
    and `None` (the caller evaluates $f_0$ elsewhere).
    """
    W = jax.jacfwd(jax.grad(lagrangian, argnums=2), argnums=2)(t, q, qd)
    return W, euler_lagrange_rhs(lagrangian, t, q, qd) if bias else None


def euler_lagrange_rhs(lagrangian: Callable, t, q, qd) -> Float[Array, " n"]:
    r"""$f_0$ alone: one `jax.jvp` of $(\partial L/\partial q, \partial L/\partial\dot q)$
    along $(1, \dot q)$ in $(t, q)$ with $\dot q$ fixed (no mass matrix)."""
    grads = _gradients(lagrangian)
    (Lq, _), (_, Lqd_dot) = jax.jvp(
        lambda t_, q_: grads(t_, q_, qd), (t, q), (jnp.ones_like(t), qd)
    )
    return Lq - Lqd_dot


def generalized_force(system: System, t, q, qd, p) -> Float[Array, " n"]:
    """$Q(t, q, \\dot q, p)$, zeros if the system has no force."""
    if system.force is None:
        return jnp.zeros_like(q)
    return jnp.asarray(system.force(t, q, qd, p), dtype=q.dtype)


@compiled(times=("t",), states=("q", "qd"), params=("p",))
def mass_matrix(system: System, t: Time, q, qd, p: Params) -> Float[Array, "n n"]:
    r"""The mass matrix $W = \partial^2 L / \partial\dot q^2$ (by autodiff).

    **Example:**

    ```python
    cx.mass_matrix(system, 0.0, q, qd, p)      # (n, n)
    ```
    """
    q, qd = check_state(q, qd)
    t = as_time(t, q)
    constraint_row_counts(system, t, q, qd, p)
    return euler_lagrange_terms(lambda t, q, qd: system.lagrangian(t, q, qd, p), t, q, qd)[0]


# ----------------------------------------------------------------------------------------
# Constraint terms.


def stacked_residual(system: System, p: Params) -> Callable:
    """`c(t, q, qd)`: all constraint rows stacked in order."""

    def c(t, q, qd):
        if not system.constraints:
            return jnp.zeros((0,), dtype=q.dtype)
        return jnp.concatenate(
            [con.velocity_residual(t, q, qd, p).astype(q.dtype) for con in system.constraints]
        )

    return c


def constraint_terms(
    system: System, t, q, qd, p, bias: bool = True
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


def constraint_bias(system: System, t, q, qd, p) -> tuple[Float[Array, " m"], Float[Array, " m"]]:
    r"""$(c, c_\text{bias})$ alone: one `jax.jvp` along $(1, \dot q)$ with $\dot q$ fixed."""
    fn = stacked_residual(system, p)
    return jax.jvp(lambda t_, q_: fn(t_, q_, qd), (t, q), (jnp.ones_like(t), qd))


def position_residual(system: System, t, q, p) -> Float[Array, " h"]:
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
