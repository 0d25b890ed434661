"""The stacked constraint rows of a system, from trace-time shape checks.

Every user function (the Lagrangian, the force, the functions of each constraint) is traced
abstractly (`jax.eval_shape`) once, before anything runs: a wrong shape or a failure inside
the function raises at trace time, naming the function, the constraint and the shapes at
fault. What the checks find is the `RowLayout` of the system: how many rows each constraint
has, which of them have a position level, and their names.
"""

from typing import NamedTuple

import numpy as np

from ._traced import traced_shape


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
