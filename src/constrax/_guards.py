"""Runtime checks that survive every composition of `jit`, `grad` and `vmap`."""

import equinox as eqx
import jax
import jax.numpy as jnp


def attach_check(ys, pred, index, msgs: list[str]):
    """`ys`, with a runtime check that fires however the result is used.

    `equinox.error_if(ys, pred)` alone is dead code under `jax.jit(jax.grad(loss))`: the
    gradient never needs the checked *value* of `ys`, so the check is removed and a failed
    solve yields a finite, wrong gradient. Here the check produces a scalar `one`
    (`1.0`, or an error) and `ys` is multiplied by it: the value is unchanged, and the
    derivative of `ys * one` is `one`, which the backward pass needs — so the check runs
    in every composition of `jit`, `grad` and `vmap`.
    """
    dtype = jax.tree.leaves(ys)[0].dtype
    one = eqx.branched_error_if(jnp.ones((), dtype), pred, index, msgs)
    return jax.tree.map(lambda y: y * one.astype(y.dtype), ys)


def checked(x, pred, msg: str):
    """`attach_check` with a single message: `x` (any pytree of float arrays), or an error."""
    return attach_check(x, pred, jnp.zeros((), jnp.int32), [msg])
