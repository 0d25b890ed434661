"""The stacked constraint rows of a system, from trace-time shape checks.

Every user function (the Lagrangian, the force, the functions of each constraint) is traced
abstractly (`jax.eval_shape`) once, before anything runs: a wrong shape or a failure inside
the function raises at trace time, naming the function, the constraint and the shapes at
fault. What the checks find is the `RowLayout` of the system: how many rows each constraint
has, which of them have a position level, and their names.
"""

from typing import NamedTuple

import jax
import numpy as np

_TRACE_ERRORS = (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError)


def _describe(x) -> str:
    if x is None:
        return "None"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(map(str, x))}"
    shape = getattr(x, "shape", None)
    return f"shape {tuple(shape)}" if shape is not None else type(x).__name__


def _leaf_summary(out) -> str:
    if isinstance(out, (list, tuple)):
        return f" of {len(out)} entries"
    return ""


def traced_shape(label: str, fn, *args) -> tuple[int, ...]:
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


def row_count(label: str, what: str, shape: tuple[int, ...]) -> int:
    """The number of rows of a function returning `shape`: a scalar is one row."""
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


def row_layout(system, t, q, qd, p) -> RowLayout:
    """Check every user function's output shape at trace time (`jax.eval_shape`, once
    each) of `system` (a `System`; not imported here, since `_system` imports the
    constraint kinds that import this module); return the row counts, the position-level
    mask and the row names.

    Raises `ValueError` naming the function, the constraint and the shapes at fault.
    """
    n = q.shape[0]
    shape = traced_shape("the Lagrangian L(t, q, qd, p)", system.lagrangian, t, q, qd, p)
    if shape != ():
        raise ValueError(f"the Lagrangian L(t, q, qd, p) must return a scalar, got shape {shape}")
    if system.force is not None:
        shape = traced_shape("the force Q(t, q, qd, p)", system.force, t, q, qd, p)
        if shape != (n,):
            raise ValueError(
                f"the force Q(t, q, qd, p) must return shape (n,) = ({n},) like `q`, got {shape}"
            )
    rows = [con.count_rows(t, q, qd, p) for con in system.constraints]
    counts = tuple(k for k, _ in rows)
    mask = np.concatenate([np.arange(k) < h for k, h in rows] or [np.zeros(0, bool)])
    pairs = zip(system.constraints, counts, strict=True)
    names = tuple(f"{con.name}[{i}]" for con, k in pairs for i in range(k))
    return RowLayout(counts, mask, names)
