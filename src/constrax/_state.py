"""State coercion: every array a user passes as a time, coordinates, velocities or
3-vectors (the entry points, the geometry, `rollout_batch`, `cx.rigid`) is made a float
array by `as_float` and, if its shape is wrong, refused by `shape_error`, which names the
argument."""

import jax.numpy as jnp
from jaxtyping import Array


def as_time(t, q: Array) -> Array:
    """`t` as a scalar array of the dtype of `q`."""
    t = jnp.asarray(t)
    if t.ndim != 0:
        raise ValueError(f"`t` must be a scalar time, got shape {t.shape}")
    return t.astype(q.dtype)


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
