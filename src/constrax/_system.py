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
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._compilation import compiled
from ._constraints import (
    AbstractConstraint,
    Holonomic,
    Pfaffian,
    VelocityConstraint,
    row_jacobian,
)
from ._custom_types import ForceFn, LagrangianFn, Params, Time


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
                    f"`constraints[{i}]` must be a cx.Holonomic, cx.Pfaffian or "
                    f"cx.VelocityConstraint, got {type(con).__name__}"
                )
        if force is not None and not callable(force):
            raise TypeError(f"`force` must be callable Q(t, q, qd, p) or None, got {force!r}")
        self.lagrangian = lagrangian
        self.constraints = constraints
        self.force = force


# ----------------------------------------------------------------------------------------
# Trace-time validation: shapes are checked with `jax.eval_shape` before anything runs.


_TRACE_ERRORS = (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError)


def _describe(x) -> str:
    if x is None:
        return "None"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(map(str, x))}"
    shape = getattr(x, "shape", None)
    return f"shape {tuple(shape)}" if shape is not None else type(x).__name__


def _shape(label: str, fn, *args) -> tuple[int, ...]:
    """Output shape of a user function `fn(*args)` traced abstractly.

    A failure inside `fn` (a tuple unpacking of the wrong length, a `dot_general` of
    mismatched shapes, indexing `p=None`) is re-raised naming `label`, the shapes it was
    called with, and what to check; a result that is not one array is refused.
    """
    try:
        out = jax.eval_shape(fn, *args)
    except _TRACE_ERRORS as e:
        q = args[1]
        p = args[-1]
        hint = f"Check that `q` and `qd` have the system's number of coordinates (got {q.shape[0]})"
        if p is None:
            hint += " and pass the parameters `p` if the system's functions read them (p=None)"
        else:
            hint += f" and that `p` ({_describe(p)}) has what the functions read"
        kind = TypeError if isinstance(e, TypeError) else ValueError
        raise kind(
            f"{label} failed when traced with q of shape {tuple(q.shape)}: "
            f"{type(e).__name__}: {e}. {hint}."
        ) from e
    if not isinstance(out, jax.ShapeDtypeStruct):
        raise TypeError(
            f"{label} must return one JAX array, got {type(out).__name__}"
            f"{_leaf_summary(out)}: stack the entries with jnp.stack([...]) or jnp.array([...])"
        )
    return tuple(out.shape)


def _leaf_summary(out) -> str:
    if isinstance(out, (list, tuple)):
        return f" of {len(out)} entries"
    return ""


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


def _row_count(label: str, what: str, shape: tuple[int, ...]) -> int:
    if len(shape) > 1:
        raise ValueError(f"{label}: {what} must return a scalar or shape (k,), got {shape}")
    return shape[0] if shape else 1


class RowLayout(NamedTuple):
    """The stacked constraint rows of a system, from one pass of the trace-time checks."""

    counts: tuple[int, ...]
    """Rows per constraint, in order."""
    mask: np.ndarray
    """Static boolean mask of the stacked rows that have a position level: every row of a
    holonomic constraint, the integrable leading rows of a `Pfaffian` with `position=`."""
    names: tuple[str, ...]
    """A label `"name[i]"` for every stacked row."""


def row_layout(system: System, t, q, qd, p) -> RowLayout:
    """Check every user function's output shape at trace time (`jax.eval_shape`, once
    each); return the row counts, the position-level mask and the row names.

    Raises `ValueError` naming the function, the constraint and the shapes at fault.
    """
    layout = _row_layout(system, t, q, qd, p)
    counts = tuple(k for k, _ in layout)
    mask = np.concatenate([np.arange(k) < h for k, h in layout] or [np.zeros(0, bool)])
    pairs = zip(system.constraints, counts, strict=True)
    names = tuple(f"{con.name}[{i}]" for con, k in pairs for i in range(k))
    return RowLayout(counts, mask, names)


def constraint_row_counts(system: System, t, q, qd, p) -> tuple[int, ...]:
    """Rows per constraint, after the checks of `row_layout`."""
    return row_layout(system, t, q, qd, p).counts


def _row_layout(system: System, t, q, qd, p) -> tuple[tuple[int, int], ...]:
    """`(k, h)` per constraint — its `k` rows, of which the first `h` have a position level
    (all of a holonomic constraint's) — from the trace-time shape checks of every user
    function (`jax.eval_shape`); `row_layout` is its public form."""
    n = q.shape[0]
    shape = _shape("the Lagrangian L(t, q, qd, p)", system.lagrangian, t, q, qd, p)
    if shape != ():
        raise ValueError(f"the Lagrangian L(t, q, qd, p) must return a scalar, got shape {shape}")
    if system.force is not None:
        shape = _shape("the force Q(t, q, qd, p)", system.force, t, q, qd, p)
        if shape != (n,):
            raise ValueError(
                f"the force Q(t, q, qd, p) must return shape (n,) = ({n},) like `q`, got {shape}"
            )
    rows = []
    for con in system.constraints:
        label = f"constraint {con.name!r} ({type(con).__name__})"
        if isinstance(con, Holonomic):
            k = _row_count(label, "g(t, q, p)", _shape(f"{label}: g(t, q, p)", con.g, t, q, p))
            if con.velocity is not None:
                vlabel = f"{label}: velocity(t, q, qd, p)"
                kv = _row_count(
                    label, "velocity(t, q, qd, p)", _shape(vlabel, con.velocity, t, q, qd, p)
                )
                if kv != k:
                    raise ValueError(
                        f"{label}: velocity(t, q, qd, p) must return one row per row of "
                        f"g(t, q, p): expected ({k},), got ({kv},)"
                    )
        elif isinstance(con, Pfaffian) and con.omega is not None:
            shape = _shape(f"{label}: omega(t, q, p)", con.omega, t, q, p)
            if not (shape == (n,) or (len(shape) == 2 and shape[1] == n)):
                raise ValueError(
                    f"{label}: omega(t, q, p) must return shape (k, n) = (k, {n}) or ({n},), "
                    f"got {shape}"
                )
            k = 1 if len(shape) == 1 else shape[0]
            if con.b is not None:
                bshape = _shape(f"{label}: b(t, q, p)", con.b, t, q, p)
                if bshape not in ((k,), ()) or (bshape == () and k != 1):
                    raise ValueError(
                        f"{label}: b(t, q, p) must return shape (k,) = ({k},) to match omega's "
                        f"{k} rows, got {bshape}"
                    )
        elif isinstance(con, VelocityConstraint):
            shape = _shape(f"{label}: F(t, q, qd, p)", con.F, t, q, qd, p)
            k = _row_count(label, "F(t, q, qd, p)", shape)
        elif isinstance(con, Pfaffian):
            shape = _shape(f"{label}: velocity(t, q, qd, p)", con.velocity, t, q, qd, p)
            k = _row_count(label, "velocity(t, q, qd, p)", shape)
        else:
            k = _shape(f"{label}: c(t, q, qd, p)", con.velocity_residual, t, q, qd, p)[0]
        h = k if con.holonomic else 0
        if isinstance(con, Pfaffian) and con.position is not None:
            shape = _shape(f"{label}: position(t, q, p)", con.position, t, q, p)
            h = _row_count(label, "position(t, q, p)", shape)
            if h > k:
                raise ValueError(
                    f"{label}: position(t, q, p) gives the first rows' holonomic form, so it "
                    f"must return at most the constraint's {k} rows, got ({h},)"
                )
        rows.append((k, h))
    return tuple(rows)


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


def constraint_rows(
    con: AbstractConstraint, t, q, qd, p, bias: bool = True
) -> tuple[Float[Array, "k n"], Float[Array, " k"], Float[Array, " k"] | None]:
    r"""$(A, c, c_\text{bias})$ of one constraint.

    $c_\text{bias}$ is the tangent of $(t, q)\mapsto c(t, q, \dot q)$ along $(1, \dot q)$
    with $\dot q$ held fixed (one `jax.jvp`). $A$ is read off directly where it can be:
    $\omega$ for a `Pfaffian` given by its one-form (one `jax.jvp` of $(\omega, b)$ gives all
    three, $c_\text{bias} = \dot\omega\dot q + \dot b$), $\partial g/\partial q$ for a
    `Holonomic` given by $g$ alone. Rows given at velocity level (a velocity form, a
    `VelocityConstraint`) are traced once for $c$ and $A = \partial c/\partial\dot q$
    together (`jax.vjp` in $\dot q$, one pullback per row, or forward mode when there are
    at least as many rows as coordinates), and the `jax.jvp` in $(t, q)$ is taken of that
    pair. With `bias=False`, $(A, c, \text{None})$ without the jvp.
    """
    if isinstance(con, Pfaffian) and con.omega is not None:
        # One jvp of (omega, b) gives A = omega, c = omega qd + b and
        # c_bias = omega_dot qd + b_dot; omega is traced once.
        def one_form_and_term(t_, q_):
            w = con.one_form(t_, q_, p).astype(q.dtype)
            b = jnp.zeros(w.shape[0], q.dtype) if con.b is None else con.affine_term(t_, q_, p)
            return w, jnp.asarray(b, q.dtype)

        if not bias:
            A, b = one_form_and_term(t, q)
            return A, A @ qd + b, None
        (A, b), (A_dot, b_dot) = jax.jvp(one_form_and_term, (t, q), (jnp.ones_like(t), qd))
        return A, A @ qd + b, A_dot @ qd + b_dot
    if isinstance(con, Holonomic) and con.velocity is None:
        fn = lambda t_, q_: jnp.atleast_1d(con.velocity_residual(t_, q_, qd, p)).astype(q.dtype)
        if bias:
            c, c_bias = jax.jvp(fn, (t, q), (jnp.ones_like(t), qd))
        else:
            c, c_bias = fn(t, q), None
        g = lambda q_: jnp.atleast_1d(con.g(t, q_, p)).astype(q.dtype)
        return row_jacobian(g, q, c.shape[0]), c, c_bias

    # Rows given at velocity level: c and A = dc/dqd from one trace of the rows (their
    # q-dependent part, e.g. a contact geometry, is traced once for both); c_bias is the
    # tangent of c along (1, qd).
    def rows_and_jacobian(t_, q_):
        rows = lambda v: jnp.atleast_1d(con.velocity_residual(t_, q_, v, p)).astype(q.dtype)
        c, pullback = jax.vjp(rows, qd)
        k, n = c.shape[0], qd.shape[0]
        if k < n:  # reverse mode: k pullbacks of the one trace
            return c, jax.vmap(lambda ct: pullback(ct)[0])(jnp.eye(k, dtype=q.dtype))
        basis = jnp.eye(n, dtype=q.dtype)
        return c, jax.vmap(lambda e: jax.jvp(rows, (qd,), (e,))[1], out_axes=1)(basis)

    if not bias:
        c, A = rows_and_jacobian(t, q)
        return A, c, None
    (c, A), (c_bias, _) = jax.jvp(rows_and_jacobian, (t, q), (jnp.ones_like(t), qd))
    return A, c, c_bias


def constraint_terms(
    system: System, t, q, qd, p, bias: bool = True
) -> tuple[Float[Array, "m n"], Float[Array, " m"], Float[Array, " m"] | None]:
    r"""$(A, c, c_\text{bias})$ of all constraints, rows stacked in order:
    $A = \partial c/\partial\dot q$, $c$ the rows, and
    $c_\text{bias} = \partial c/\partial t + (\partial c/\partial q)\dot q$, so that
    $\dot c = A\ddot q + c_\text{bias}$ (`constraint_rows` per constraint); with
    `bias=False`, $c_\text{bias}$ is not computed (`None`)."""
    if not system.constraints:
        n = q.shape[0]
        z = jnp.zeros((0,), q.dtype)
        return jnp.zeros((0, n), q.dtype), z, z if bias else None
    blocks = [constraint_rows(con, t, q, qd, p, bias) for con in system.constraints]
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
