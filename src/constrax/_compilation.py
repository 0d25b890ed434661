r"""Compile once, reuse: eager public calls are `equinox.filter_jit`-ed, and JAX's persistent
compilation cache is one call away (docs page "Getting started: compile time").

Every public function that evaluates a system at a state (`accelerations`, `energy`,
`constraint_residual`, …) and `simulate` run as one compiled XLA program, traced and
compiled once per system, argument structure and shape. Before the compiled program is
looked up, the *values* a user changes between calls — times, states, multipliers and the
floating-point leaves of the parameters — are turned into arrays, so that a new value of a
Python float is a new input, not a new program (`equinox.filter_jit` treats Python scalars
as static). Which arguments are data is said at each use of `compiled`, never guessed from
their names. Configuration (tolerances, solvers, step-size controllers, `max_steps`) stays
static: changing it compiles anew, as it should.
"""

import functools
import inspect
import os
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

# XLA's CPU compiler generates the code of each fusion with its MLIR fusion emitters (the
# default of jaxlib 0.10) or with its older LLVM IR emitters. constrax's programs are long
# chains of small operations (nested derivatives of a Lagrangian), which the MLIR emitters
# compile much more slowly: 30-55 % of the XLA compile is saved, at the same values to
# round-off and the same run time to a few per cent (`benchmarks/xla_emitters.py`,
# `benchmarks/trajopt_compile.py`; docs page "Getting started").
_CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def compiler_options(backend: str) -> dict | None:
    """The XLA compiler options of constrax's own compiled programs on `backend`: the LLVM
    IR emitters on the CPU where this jaxlib knows the option (probed once by compiling a
    trivial program with it), else `None` (XLA's defaults)."""
    if backend != "cpu":
        return None
    try:
        jax.jit(lambda x: x + 1.0).lower(1.0).compile(_CPU_COMPILER_OPTIONS)
    except Exception:  # an XLA without the option: its defaults
        return None
    return dict(_CPU_COMPILER_OPTIONS)


def _staged() -> bool:
    """Whether the current call may be staged out into a larger program (under `jax.jit`,
    `jax.grad`'s linearisation, `lax.scan`, `jax.make_jaxpr`, ...): compiler options belong
    to the top-level program only, and JAX refuses them on a staged one. True unless every
    trace on JAX's trace stack evaluates, pushes tangents forward (`jax.jvp`, `jacfwd`) or
    batches (`jax.vmap`), which bind the compiled program again at the top level; also
    true if JAX's internals are not where they were (no options then: XLA's defaults)."""
    try:
        from jax._src import core
        from jax._src.interpreters import ad, batching

        top_level = (core.EvalTrace, ad.JVPTrace, batching.BatchTrace)
        trace = core.trace_ctx.trace
        while trace is not None:
            if type(trace) not in top_level:
                return True
            trace = getattr(trace, "parent_trace", None)
        return False
    except Exception:  # a JAX whose internals moved
        return True


def _is_number(x) -> bool:
    return isinstance(x, (int, float, complex, np.number)) and not isinstance(x, (bool, np.bool_))


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


def _times(value):
    return jax.tree.map(_time_leaf, value)


def _states(value):
    if isinstance(value, (list, tuple)) and value and all(map(_is_number, value)):
        return jnp.asarray(value)
    return jax.tree.map(_state_leaf, value)


def _params(value):
    return jax.tree.map(_param_leaf, value)


#: The kinds of data argument, and how each is made an array: `times` (every number a
#: scalar of the default float dtype), `states` (every numeric leaf: coordinates,
#: velocities, multipliers; a list of numbers is one array) and `params` (the
#: floating-point leaves only: integers and booleans in parameters may be structural, a
#: link count or a flag, and stay static).
_KINDS = {"times": _times, "states": _states, "params": _params}


def as_dynamic(kind: str, value):
    """`value` with the leaves that are data of `kind` (`"times"`, `"states"` or
    `"params"`, see `_KINDS`) as JAX arrays."""
    return _KINDS[kind](value)


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


def compiled(
    fn: Callable | None = None,
    *,
    times: Sequence[str] = (),
    states: Sequence[str] = (),
    params: Sequence[str] = (),
    precheck: Callable | None = None,
) -> Callable:
    """Run `fn` as one `equinox.filter_jit`-compiled program, with data arguments as arrays.

    The data arguments are named at each use site, by kind (see `_KINDS`), e.g.
    `@compiled(times=("t",), states=("q", "qd"), params=("p",))`; every other argument is
    configuration and stays static. A name that is not an argument of `fn` raises
    `TypeError` when `fn` is decorated, and so does a decorator that names none: a new
    entry point must say which of its arguments are data, not leave a Python float static.

    The wrapper keeps `fn`'s signature and docstring. Inside an outer `jax.jit`, `vmap` or
    `grad` it only adds a nested (inlined) call. A call that is not staged into a larger
    program is compiled with `compiler_options` (XLA's LLVM IR emitters on the CPU). A
    concrete non-finite data argument (a NaN time, state or parameter) is handed to `fn`
    un-jitted instead, so that its argument checks raise their `ValueError` at once rather
    than a runtime error from inside XLA.
    `precheck(arguments)`, if given, runs on the bound arguments (data as arrays, concrete
    when the call is eager) before the compiled program: checks of values that are only
    errors in combination (a step pointing away from `t1`) raise there at once.
    """
    kinds = {"times": times, "states": states, "params": params}
    for kind, names in kinds.items():
        if isinstance(names, str):
            raise TypeError(
                f"compiled: `{kind}` must be a tuple of argument names, got the string "
                f"{names!r}: write {kind}=({names!r},)"
            )
    if fn is None:
        return functools.partial(
            compiled, times=times, states=states, params=params, precheck=precheck
        )
    where = f"@compiled on {getattr(fn, '__qualname__', fn)}"
    dynamic = {name: kind for kind, names in kinds.items() for name in names}
    if not dynamic:
        raise TypeError(
            f"{where}: name the arguments that are data, e.g. "
            '@compiled(times=("t",), states=("q", "qd"), params=("p",)); every argument '
            "not named stays static, and a Python float there compiles a program per value"
        )
    if len(dynamic) != sum(len(names) for names in kinds.values()):
        seen = [name for names in kinds.values() for name in names]
        twice = sorted({name for name in seen if seen.count(name) > 1})
        raise TypeError(f"{where}: arguments {twice} are named under more than one kind")
    signature = inspect.signature(fn)
    unknown = [name for name in dynamic if name not in signature.parameters]
    if unknown:
        raise TypeError(
            f"{where}: {fn.__name__}{signature} has no argument(s) {unknown} (named as data)"
        )
    convert = {name: _KINDS[kind] for name, kind in dynamic.items()}

    @functools.cache
    def jitted(options: tuple | None) -> Callable:
        # Built at the first call, not at import: the backend is not known before.
        return eqx.filter_jit(fn, compiler_options=None if options is None else dict(options))

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{fn.__name__}{signature}: {e}") from None
        finite = True
        for name, value in bound.arguments.items():
            if name in convert:
                bound.arguments[name] = value = convert[name](value)
                finite = finite and _concrete_and_finite(value)
        if not finite:
            return fn(*bound.args, **bound.kwargs)
        if precheck is not None:
            bound.apply_defaults()
            precheck(bound.arguments)
        options = None if _staged() else compiler_options(jax.default_backend())
        return jitted(None if options is None else tuple(options.items()))(
            *bound.args, **bound.kwargs
        )

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
    kept, and a second process saves little. Setting `EQX_ON_ERROR=nan` in the environment
    before importing equinox makes a failed check return NaN instead of raising — no
    message, but the programs become cacheable, and a second process then only traces
    (docs page "Getting started" gives the times).

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
