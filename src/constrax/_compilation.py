r"""Compile once, reuse: eager public calls are `equinox.filter_jit`-ed, and JAX's persistent
compilation cache is one call away (docs page "Getting started: compile time").

Every public function that evaluates a system at a state (`accelerations`, `energy`,
`constraint_residual`, …) and `simulate` run as one compiled XLA program, traced and
compiled once per system, argument structure and shape. Before the compiled program is
looked up, the *values* a user changes between calls — times, states, multipliers and the
floating-point leaves of the parameters — are turned into arrays, so that a new value of a
Python float is a new input, not a new program (`equinox.filter_jit` treats Python scalars
as static). Configuration (tolerances, solvers, step-size controllers, `max_steps`) stays
static: changing it compiles anew, as it should.
"""

import functools
import inspect
import os
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

#: Arguments whose every numeric leaf is data (a time, a state, multipliers).
_STATE_ARGS = frozenset({"q", "qd", "mu", "q0", "qd0", "mu0", "qs"})
#: Arguments whose floating-point leaves are data (parameters); integers and booleans
#: in them may be structural (a link count, a flag) and stay static.
_PARAM_ARGS = frozenset({"p"})


_DATA_ARGS = _STATE_ARGS | _PARAM_ARGS | frozenset({"t", "t0", "t1", "dt0"})


def _is_number(x) -> bool:
    return isinstance(x, (int, float, complex, np.number)) and not isinstance(x, (bool, np.bool_))


_TIME_ARGS = frozenset({"t", "t0", "t1", "dt0"})


def _state_leaf(x):
    return jnp.asarray(x) if _is_number(x) else x


def _time_leaf(x):
    return jnp.asarray(x, dtype=jnp.result_type(float)) if _is_number(x) else x


def _param_leaf(x):
    # Strongly typed, like the arrays a user passes the next time: a weak-typed array
    # would be a different program input than `jnp.asarray(1.0, float)`.
    if isinstance(x, (float, np.floating)):
        return jnp.asarray(x, dtype=jnp.result_type(float))
    if isinstance(x, (complex, np.complexfloating)):
        return jnp.asarray(x, dtype=jnp.result_type(complex))
    return x


def as_dynamic(name: str, value):
    """`value` with the leaves that are data (see module docstring) as JAX arrays."""
    if name in _TIME_ARGS:
        return jax.tree.map(_time_leaf, value)
    if name in _STATE_ARGS:
        if isinstance(value, (list, tuple)) and value and all(map(_is_number, value)):
            return jnp.asarray(value)
        return jax.tree.map(_state_leaf, value)
    if name in _PARAM_ARGS:
        return jax.tree.map(_param_leaf, value)
    return value


def _concrete_and_finite(value) -> bool:
    """False if a concrete (not traced) floating leaf of `value` holds NaN or inf."""
    for leaf in jax.tree.leaves(value):
        if isinstance(leaf, jax.core.Tracer) or not (
            isinstance(leaf, (jax.Array, np.ndarray, np.number, float, complex))
        ):
            continue
        a = np.asarray(leaf)
        if np.issubdtype(a.dtype, np.inexact) and not np.all(np.isfinite(a)):
            return False
    return True


def compiled(fn: Callable | None = None, *, precheck: Callable | None = None) -> Callable:
    """Run `fn` as one `equinox.filter_jit`-compiled program, with data arguments as arrays.

    The wrapper keeps `fn`'s signature and docstring. Inside an outer `jax.jit`, `vmap` or
    `grad` it only adds a nested (inlined) call. A concrete non-finite data argument (a NaN
    time, state or parameter) is handed to `fn` un-jitted instead, so that its argument
    checks raise their `ValueError` at once rather than a runtime error from inside XLA.
    `precheck(arguments)`, if given, runs on the bound arguments (data as arrays, concrete
    when the call is eager) before the compiled program: checks of values that are only
    errors in combination (a step pointing away from `t1`) raise there at once.
    """
    if fn is None:
        return functools.partial(compiled, precheck=precheck)
    signature = inspect.signature(fn)
    jitted = eqx.filter_jit(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{fn.__name__}{signature}: {e}") from None
        finite = True
        for name, value in bound.arguments.items():
            bound.arguments[name] = value = as_dynamic(name, value)
            if name in _DATA_ARGS:
                finite = finite and _concrete_and_finite(value)
        if not finite:
            return fn(*bound.args, **bound.kwargs)
        if precheck is not None:
            bound.apply_defaults()
            precheck(bound.arguments)
        return jitted(*bound.args, **bound.kwargs)

    wrapper.__wrapped_jit__ = jitted
    return wrapper


def enable_compilation_cache(
    path: str | os.PathLike | None = None, *, min_compile_time_secs: float = 0.5
) -> str:
    r"""Keep compiled programs on disk so that later runs start warm.

    Turns on JAX's persistent compilation cache (`jax_compilation_cache_dir`): an XLA
    program that took longer than `min_compile_time_secs` to compile is written to `path`
    and read back by any later process that compiles the same program with the same JAX
    version and device. Tracing still happens in each process; XLA compilation — most of a
    first gradient's cost — does not.

    **What is not cached.** JAX does not write programs that contain host callbacks to the
    persistent cache, and constrax's runtime checks (`equinox.error_if`: max steps, NaN,
    singular matrices) are host callbacks. With the checks on, only the small programs are
    kept; measured on the README quickstart (2-core CPU): 24.2 s CPU in a first process,
    22.5 s in a second. Setting `EQX_ON_ERROR=nan` in the environment before importing
    equinox makes a failed check return NaN instead of raising — no message, but the
    programs become cacheable: 23.9 s, then 12.4 s (what remains is tracing).

    Setting the environment variable `CONSTRAX_COMPILATION_CACHE` (to a directory, or to `1`
    for the default one) before `import constrax` does the same
    (`CONSTRAX_COMPILATION_CACHE_MIN_SECS` sets `min_compile_time_secs`).

    **Arguments:**

    - `path`: the cache directory; default `$XDG_CACHE_HOME/constrax/jax` (that is,
      `~/.cache/constrax/jax`).
    - `min_compile_time_secs`: programs that compile faster are not cached.

    **Returns:** the cache directory, as a string.

    **Example:**

    ```python
    import constrax as cx
    cx.enable_compilation_cache()  # once, before the first simulate/grad
    ```
    """
    if path is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "constrax", "jax")
    path = os.fspath(path)
    if not isinstance(min_compile_time_secs, (int, float)) or min_compile_time_secs < 0:
        raise ValueError(
            f"`min_compile_time_secs` must be a non-negative number, got {min_compile_time_secs!r}"
        )
    os.makedirs(path, exist_ok=True)
    # JAX latches its cache at the first compilation; start it anew so that the call also
    # takes effect after programs were already compiled in this process.
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


def _enable_from_environment() -> None:
    value = os.environ.get("CONSTRAX_COMPILATION_CACHE", "").strip()
    if value.lower() in ("", "0", "false", "no", "off"):
        return
    min_time = float(os.environ.get("CONSTRAX_COMPILATION_CACHE_MIN_SECS", "0.5"))
    path = None if value.lower() in ("1", "true", "yes", "on") else value
    enable_compilation_cache(path, min_compile_time_secs=min_time)
