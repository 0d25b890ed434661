"""The trace-time check of one user function: its output shape, from `jax.eval_shape`.

A user function (a Lagrangian, a force, a function of a constraint) is traced abstractly
once, before anything runs: a failure inside it or a result that is not one array raises
at trace time, naming the function and the shapes it was called with. The constraint
kinds (`_constraints.py`) count their rows with it, and `_layout.py` checks the
Lagrangian and the force with it.
"""

import jax

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
