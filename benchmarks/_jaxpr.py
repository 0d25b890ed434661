r"""Jaxpr equation counts of the benchmark contenders (deterministic; no timing).

- `count_equations` (recursive), `live_equations` (after dead-code elimination),
  `primitive_counts`;
- `capture_vector_field`: the vector field a rollout hands to `diffrax.diffeqsolve`;
- the counts of a function and of its VJP (`function_counts`), of a rollout's vector field
  (`vector_field_counts`), of the vector fields of several contenders side by side
  (`vf_counts`), and of a `RolloutCase` (`case_counts`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from unittest import mock

import diffrax
import jax
import jax.numpy as jnp
from jax.extend.core import ClosedJaxpr, Jaxpr

from ._cases import RolloutCase


def _sub_jaxprs(values: Iterable) -> Iterable[Jaxpr]:
    for v in values:
        if isinstance(v, ClosedJaxpr):
            yield v.jaxpr
        elif isinstance(v, Jaxpr):
            yield v
        elif isinstance(v, (tuple, list)):
            yield from _sub_jaxprs(v)


def count_equations(jaxpr: Jaxpr | ClosedJaxpr) -> int:
    """Number of equations of `jaxpr`, counted recursively.

    Every equation counts 1; an equation that holds sub-jaxprs in its parameters (`pjit`,
    `cond` — all branches —, `while` — condition and body —, `scan`, `custom_jvp_call`,
    `custom_vjp_call`, `custom_linear_solve`, `remat`, `closed_call`, ...) adds the count
    of each of them. A sub-jaxpr referenced by several equations counts each time (it is
    traced, lowered and compiled each time). Thunks that build a jaxpr only on demand (the
    JVP rule of a `custom_jvp`, the backward function of a `custom_vjp`) are not counted:
    they are not part of the traced program.

    The count is deterministic for given versions of jax, equinox and diffrax; it is a
    proxy for tracing and compile time, not a measure of run time.
    """
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for sub in _sub_jaxprs(eqn.params.values()):
            n += count_equations(sub)
    return n


def live_equations(jaxpr: ClosedJaxpr) -> int | None:
    """`count_equations` after JAX's dead-code elimination, which `jax.jit` applies before
    lowering: what is lowered and XLA-compiled, without the equations a trace computes and
    discards (the tangent of an output of a `jax.jvp` that is not used). `None` where this
    version of JAX does not expose `dce_jaxpr` where it is looked for."""
    try:
        from jax._src.interpreters import partial_eval as pe
    except ImportError:  # pragma: no cover - private module moved
        return None
    jaxpr_ = pe.convert_constvars_jaxpr(jaxpr.jaxpr)
    live, _ = pe.dce_jaxpr(jaxpr_, [True] * len(jaxpr_.outvars), instantiate=True)
    return count_equations(live)


def primitive_counts(jaxpr: Jaxpr | ClosedJaxpr, into: collections.Counter | None = None):
    """Equations of `jaxpr` per primitive name, counted like `count_equations`."""
    into = collections.Counter() if into is None else into
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    for eqn in jaxpr.eqns:
        into[eqn.primitive.name] += 1
        for sub in _sub_jaxprs(eqn.params.values()):
            primitive_counts(sub, into)
    return into


class _Captured(Exception):
    pass


def _struct(x):
    return jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))


def capture_vector_field(fn: Callable, *args):
    """The vector field that `fn(*args)` hands to `diffrax.diffeqsolve`.

    `fn` is run abstractly (`jax.eval_shape`) with `diffrax.diffeqsolve` replaced by a
    stub that records `terms.vf` and the shapes of `(t0, y0, args)` and stops. This is the
    function diffrax evaluates in every stage of every step, exactly as `cx.simulate` (or
    a hand-written rollout) builds it, without depending on constrax's internals.

    **Returns:** `(vf, (t, y, p))`, `vf(t, y, p)` and `jax.ShapeDtypeStruct`s.
    """
    box = {}

    def stub(terms, solver, t0, t1, dt0, y0, args=None, **kwargs):
        box["vf"] = terms.vf
        box["in"] = jax.tree_util.tree_map(_struct, (t0, y0, args))
        raise _Captured

    # `cx.simulate` is compiled once per system and shapes: clear JAX's caches so that a
    # program traced earlier in this process is traced again, through the stub.
    jax.clear_caches()
    with mock.patch.object(diffrax, "diffeqsolve", stub):
        try:
            jax.eval_shape(fn, *args)
        except _Captured:
            pass
    if "vf" not in box:
        raise RuntimeError(f"{fn!r} did not call diffrax.diffeqsolve")
    return box["vf"], box["in"]


def _vjp_of(f: Callable, n_static: int = 1) -> Callable:
    """`(args, ct) -> VJP of f` with respect to all arguments after the first `n_static`:
    the forward (linearised) pass and the transposed one, as `jax.grad` traces them."""

    def vjp(*args_ct):
        *args, ct = args_ct
        static, diff = args[:n_static], args[n_static:]
        _, pull = jax.vjp(lambda *d: f(*static, *d), *diff)
        return pull(ct)

    return vjp


def function_counts(f: Callable, args, n_static: int = 1, primitives: bool = False) -> dict:
    """Equation counts of `f(*args)` and of its VJP with respect to `args[n_static:]`.

    **Returns:** `{"eval": int, "vjp": int, "live": int}`, `live` the equations of `f` left
    after dead-code elimination (`live_equations`; absent if it cannot be computed), plus
    per-primitive counts if asked.
    """
    args = jax.tree_util.tree_map(_struct, tuple(args))
    jaxpr = jax.make_jaxpr(f)(*args)
    ct = jax.eval_shape(f, *args)
    jaxpr_vjp = jax.make_jaxpr(_vjp_of(f, n_static))(*args, ct)
    out = {"eval": count_equations(jaxpr), "vjp": count_equations(jaxpr_vjp)}
    live = live_equations(jaxpr)
    if live is not None:
        out["live"] = live
    if primitives:
        out["eval_primitives"] = dict(primitive_counts(jaxpr).most_common())
        out["vjp_primitives"] = dict(primitive_counts(jaxpr_vjp).most_common())
    return out


def vector_field_counts(fn: Callable, args, batch: int | None = None, **kw) -> dict:
    """Equation counts of one evaluation of the vector field that the rollout `fn(*args)`
    traces (`capture_vector_field`) and of its VJP with respect to `(y, p)` (what a
    reverse-mode adjoint differentiates). With `batch`, of `jax.vmap` of it over `y`."""
    vf, (t, y, p) = capture_vector_field(fn, *args)
    f = lambda t, y, p: vf(t, y, p)
    if batch is not None:
        f = jax.vmap(f, in_axes=(None, 0, None))
        y = jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct((batch, *s.shape), s.dtype), y)
    return function_counts(f, (t, y, p), **kw)


def named_counts(counts: dict, measure: str, live: bool = False) -> dict:
    """The counts of `function_counts` under the names of one measure: `eval`, `vjp` as
    `<measure>`, `<measure>_vjp`, with `live` `<measure>_live` (where computed), and the
    per-primitive counts, if any, as `{"primitives": {<measure>: ..., <measure>_vjp: ...}}`."""
    out = {measure: counts["eval"], f"{measure}_vjp": counts["vjp"]}
    if live and "live" in counts:
        out[f"{measure}_live"] = counts["live"]
    if "eval_primitives" in counts:
        out["primitives"] = {
            measure: counts["eval_primitives"],
            f"{measure}_vjp": counts["vjp_primitives"],
        }
    return out


def vf_counts(
    rollouts: dict[str, Callable],
    args,
    batch: int | None = None,
    live: bool = False,
    primitives: bool = False,
) -> dict:
    """Equation counts of the vector field of each contender, side by side.

    `rollouts` maps each contender (typically `"constrax"` and `"hand"`) to a rollout
    `f(*args)`; the field it hands to `diffrax.diffeqsolve` is counted by
    `vector_field_counts` (with `batch`, under `jax.vmap` over the state).

    **Returns:** `{contender: {"vf": int, "vf_vjp": int}}`, with `live` also `"vf_live"`
    and with `primitives` also `"primitives": {"vf": {...}, "vf_vjp": {...}}`.
    """
    return {
        name: named_counts(
            vector_field_counts(fn, args, batch=batch, primitives=primitives), "vf", live
        )
        for name, fn in rollouts.items()
    }


def case_counts(
    case: RolloutCase,
    contenders=("constrax", "hand"),
    measures=("vf", "acc"),
    primitives: bool = False,
) -> dict:
    """`{contender: {"vf", "vf_vjp", "vf_live", "acc", "acc_vjp"}}` of a `RolloutCase`: the
    vector field as the rollout traces it (`vf_counts`) and the accelerations as a user
    traces them (`function_counts` of `case.accelerations[contender]`), each with its VJP;
    `vf_live`, the field's equations left after dead-code elimination."""
    out = {}
    fns, args, acc_args = case.rollouts(), case.args(), case.acc_args()
    for name in contenders:
        out[name] = {}
        for measure in measures:
            if measure == "vf":
                c = vf_counts({name: fns[name]}, args, live=True, primitives=primitives)[name]
            else:
                counts = function_counts(case.accelerations[name], acc_args, primitives=primitives)
                c = named_counts(counts, measure)
            prims = c.pop("primitives", None)
            out[name].update(c)
            if prims is not None:
                out[name].setdefault("primitives", {}).update(prims)
    return out
