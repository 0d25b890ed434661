r"""Bounds of an `OptimalControlProblem`'s variables: constant, or functions of time
(docs page "Trajectory optimisation", section "Bounds that vary along the horizon").

A bound is `(lower, upper)`, each a scalar, an array of the variable's shape or `None`
(unbounded); for the controls, the coordinates and the velocities it may also be a
function `t -> (lower, upper)` of the time, evaluated (by `jax.vmap`) at every node and
midpoint of the transcription's grid, so that one problem holds on every grid (a coarse
stage of mesh refinement included).
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

_INF = np.inf


def constant_bounds(name: str, value, shape: tuple, dtype) -> tuple[np.ndarray, np.ndarray]:
    """`(lo, hi)` broadcast to `shape` (`None` entries: unbounded); `ValueError` naming
    `name` for a wrong shape, NaN or lo > hi."""
    if value is None:
        return np.full(shape, -_INF), np.full(shape, _INF)
    if not (isinstance(value, tuple | list) and len(value) == 2):
        raise ValueError(f"`{name}` must be a pair (lower, upper), got {value!r}")
    out = []
    for side, v, default in (("lower", value[0], -_INF), ("upper", value[1], _INF)):
        v = np.full(shape, default) if v is None else np.asarray(v, dtype=np.float64)
        try:
            v = np.broadcast_to(v, shape).astype(np.float64)
        except ValueError:
            hint = (
                "; for bounds that vary along the horizon pass a function t -> (lower, upper)"
                if np.ndim(v) > len(shape)
                else ""
            )
            raise ValueError(
                f"`{name}`: the {side} bound must be a scalar or have shape {shape}, "
                f"got {np.shape(v)}{hint}"
            ) from None
        if np.isnan(v).any():
            raise ValueError(f"`{name}`: the {side} bound holds NaN at {np.argwhere(np.isnan(v))}")
        out.append(v)
    lo, hi = out
    if (lo > hi).any():
        i = np.argwhere(lo > hi)[0]
        raise ValueError(
            f"`{name}`: lower bound > upper bound at index {tuple(int(j) for j in i)} "
            f"({lo[tuple(i)]} > {hi[tuple(i)]})"
        )
    return lo, hi


def bounds_along(name: str, fn: Callable, ts, shape: tuple, dtype) -> tuple[np.ndarray, ...]:
    """`(lo, hi)`, each `(K,) + shape`: the bound function `fn(t) -> (lower, upper)` at the
    times `ts` `(K,)`; `ValueError` naming `name` and the time for a failing function, a
    result that is not a pair of the variable's shape, NaN, or lo > hi."""
    ts = np.asarray(ts, np.float64)
    try:
        out = jax.vmap(fn)(jnp.asarray(ts, dtype))
    except Exception as e:  # noqa: BLE001 - re-raised with the argument named
        raise type(e)(f"`{name}(t)` failed: {e}") from e
    if not (isinstance(out, tuple | list) and len(out) == 2):
        raise ValueError(f"`{name}(t)` must return a pair (lower, upper), got {out!r}")
    sides = []
    K = ts.shape[0]
    for side, v, default in (("lower", out[0], -_INF), ("upper", out[1], _INF)):
        if v is None:
            sides.append(np.full((K, *shape), default))
            continue
        v = np.asarray(v, np.float64)
        v = v.reshape(K, *([1] * len(shape))) if v.shape == (K,) and shape else v
        try:
            v = np.broadcast_to(v, (K, *shape)).astype(np.float64)
        except ValueError:
            raise ValueError(
                f"`{name}(t)`: the {side} bound must be a scalar or have shape {shape}, got "
                f"{v.shape[1:]}"
            ) from None
        if np.isnan(v).any():
            k, *i = np.argwhere(np.isnan(v))[0]
            raise ValueError(f"`{name}(t)`: the {side} bound is NaN at t = {ts[k]:g}, index {i}")
        sides.append(v)
    lo, hi = sides
    if (lo > hi).any():
        k, *i = np.argwhere(lo > hi)[0]
        raise ValueError(
            f"`{name}(t)`: lower bound > upper bound at t = {ts[k]:g}, index {tuple(i)} "
            f"({lo[(k, *i)]} > {hi[(k, *i)]})"
        )
    return lo, hi


def check_bound_function(name: str, fn: Callable, t0: float, t1: float, free_time: bool,
                         shape: tuple, dtype) -> None:  # fmt: skip
    """A bound given as a function of time: a fixed final time, and a valid pair of the
    variable's shape at $t_0$, midway and $t_1$."""
    if free_time:
        raise ValueError(
            f"`{name}` as a function of time needs a fixed final time: with `t1_bounds` the "
            "times of the grid's nodes are decision variables"
        )
    bounds_along(name, fn, [t0, 0.5 * (t0 + t1), t1], shape, dtype)
