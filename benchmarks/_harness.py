r"""Shared harness of the constrax benchmarks.

- the integration settings every contender uses (`solve_kwargs`, `hand_rollout`,
  `constrax_rollout`): `Tsit5`, `ConstantStepSize`, `dt0 = 0.01`, `SaveAt(t1=True)`,
  `RecursiveCheckpointAdjoint`, `max_steps = 16384`;
- `RolloutCase`: one benchmark system, its constrax and hand-written contenders;
- timing: `compile_times` (trace, lower, XLA compile from cold caches) and `time_calls`
  (steady state, contenders interleaved, wall and process CPU time, min and median);
- `count_equations` and the jaxpr counts of a vector field and of its VJP
  (`vector_field_counts`, `function_counts`);
- `machine_info` (machine, versions, date) and the JSON / markdown writers.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from unittest import mock

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.extend.core import ClosedJaxpr, Jaxpr  # noqa: E402

import constrax as cx  # noqa: E402

# ----------------------------------------------------------------------------------------
# Integration settings (identical for every contender).

T1 = 10.0
DT0 = 0.01
MAX_STEPS = 16384


def solve_kwargs(t1: float = T1, dt0: float = DT0) -> dict:
    """Keyword arguments of `diffrax.diffeqsolve` shared by every contender."""
    return dict(
        t0=0.0,
        t1=t1,
        dt0=dt0,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True),
        adjoint=diffrax.RecursiveCheckpointAdjoint(),
        max_steps=MAX_STEPS,
    )


def hand_rollout(vf: Callable, y0, p, t1: float = T1, dt0: float = DT0, **overrides):
    """Final state of `diffeqsolve(ODETerm(vf), ...)` with the shared settings."""
    kw = {**solve_kwargs(t1, dt0), **overrides}
    solver, t0, t1, dt0 = (kw.pop(k) for k in ("solver", "t0", "t1", "dt0"))
    sol = diffrax.diffeqsolve(diffrax.ODETerm(vf), solver, t0, t1, dt0, y0, args=p, **kw)
    return jax.tree_util.tree_map(lambda y: y[-1], sol.ys)


def constrax_rollout(system: cx.System, q0, qd0, p, t1: float = T1, dt0: float = DT0, **kwargs):
    """Final state `(q, qd[, mu])` of `cx.simulate(..., constraint_solver=cx.KKT(),
    stabilisation=None)` with the shared settings: the same equations as the hand-written
    fields (simulate's default `Projection` is opted out of; pass `stabilisation=` to
    measure it)."""
    kwargs = {"constraint_solver": cx.KKT(), "stabilisation": None, **kwargs}
    traj = cx.simulate(system, q0, qd0, p, **{**solve_kwargs(t1, dt0), **kwargs})
    if traj.mu is None:
        return traj.q[-1], traj.qd[-1]
    return traj.q[-1], traj.qd[-1], traj.mu[-1]


def final_state_loss(state) -> jax.Array:
    r"""$\sum$ of the squares of every entry of the final state (the gradient benchmarks'
    loss: $|q(t_1)|^2 + |\dot q(t_1)|^2\,[+ |\mu(t_1)|^2]$)."""
    return sum(jnp.sum(x**2) for x in jax.tree_util.tree_leaves(state))


@dataclasses.dataclass(frozen=True)
class RolloutCase:
    """One benchmark system: constrax against the hand-written vector field.

    - `rollouts(t1=..., dt0=...)` returns fresh `{"constrax": f, "hand": f}`, each
      `f(*args) -> final state`; `args()` returns the arguments, parameters last (the
      gradient is taken with respect to them).
    - `accelerations` maps each contender to `f(*acc_args()) -> qdd` with the time first:
      `cx.accelerations(...).qdd` as a user writes it, and the hand-written field's `qdd`.
    """

    name: str
    title: str
    rollouts: Callable[..., dict[str, Callable]]
    args: Callable[[], tuple]
    accelerations: dict[str, Callable]
    acc_args: Callable[[], tuple]
    t1: float = T1
    rollout_target: float | None = 1.2
    gradient_target: float | None = None

    def gradients(self, **kw) -> dict[str, Callable]:
        """`jax.grad` of `final_state_loss(rollout)` with respect to the parameters."""
        out = {}
        for name, fn in self.rollouts(**kw).items():

            def grad(*args, fn=fn):
                *rest, p = args
                return jax.grad(lambda p: final_state_loss(fn(*rest, p)))(p)

            out[name] = grad
        return out

    def smoke(self, t1: float = 0.05) -> tuple:
        """`(constrax_final, hand_final)` after a few steps (the smoke test's check)."""
        fns, args = self.rollouts(t1=t1), self.args()
        return jax.jit(fns["constrax"])(*args), jax.jit(fns["hand"])(*args)


# ----------------------------------------------------------------------------------------
# Jaxpr equation counts.


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


def _rename_primitives(counts: dict, measure: str) -> dict:
    """Rename `eval_primitives`, `vjp_primitives` to `<measure>`, `<measure>_vjp`."""
    return {measure: counts["eval_primitives"], f"{measure}_vjp": counts["vjp_primitives"]}


def case_counts(
    case: RolloutCase,
    contenders=("constrax", "hand"),
    measures=("vf", "acc"),
    primitives: bool = False,
) -> dict:
    """`{contender: {"vf", "vf_vjp", "vf_live", "acc", "acc_vjp"}}` of a `RolloutCase`: the
    vector field as the rollout traces it (`vector_field_counts`) and the accelerations as
    a user traces them (`function_counts` of `case.accelerations[contender]`), each with
    its VJP; `vf_live`, the field's equations left after dead-code elimination."""
    out = {}
    fns, args, acc_args = case.rollouts(), case.args(), case.acc_args()
    for name in contenders:
        out[name] = {}
        for measure in measures:
            if measure == "vf":
                c = vector_field_counts(fns[name], args, primitives=primitives)
            else:
                c = function_counts(case.accelerations[name], acc_args, primitives=primitives)
            out[name].update({measure: c["eval"], f"{measure}_vjp": c["vjp"]})
            if measure == "vf" and "live" in c:
                out[name]["vf_live"] = c["live"]
            if primitives:
                out[name].setdefault("primitives", {}).update(_rename_primitives(c, measure))
    return out


# ----------------------------------------------------------------------------------------
# Timing.


def cold_compile_settings() -> None:
    """Turn the persistent compilation cache off, so that every compile is a real one."""
    jax.config.update("jax_enable_compilation_cache", False)
    jax.config.update("jax_compilation_cache_dir", None)


def _stats(wall: list[float], cpu: list[float]) -> dict:
    return {
        "min_s": min(wall),
        "median_s": statistics.median(wall),
        "cpu_min_s": min(cpu),
        "cpu_median_s": statistics.median(cpu),
        "repeats": len(wall),
        "samples_s": wall,
        "cpu_samples_s": cpu,
    }


def _clock():
    return time.perf_counter(), time.process_time()


def compile_once(fn: Callable, args) -> tuple:
    """Trace, lower and XLA-compile `jax.jit(fn)` from cold caches (`jax.clear_caches()`).

    **Returns:** `(compiled, {"trace": (wall, cpu), "lower": ..., "xla": ...})`, seconds.
    """
    jax.clear_caches()
    c0 = _clock()
    traced = jax.jit(fn).trace(*args)
    c1 = _clock()
    lowered = traced.lower()
    c2 = _clock()
    compiled = lowered.compile()
    c3 = _clock()
    d = lambda a, b: (b[0] - a[0], b[1] - a[1])
    return compiled, {"trace": d(c0, c1), "lower": d(c1, c2), "xla": d(c2, c3)}


def compile_times(factories: dict[str, Callable[[], Callable]], args, repeats: int):
    """Compile every contender `repeats` times, interleaved, each from cold caches.

    `factories[name]()` builds a fresh function each time. **Returns:**
    `(compiled, {name: {"trace", "lower", "trace_lower", "xla", "total": stats}})`.
    """
    samples = {name: collections.defaultdict(lambda: ([], [])) for name in factories}
    compiled = {}
    for _ in range(repeats):
        for name, factory in factories.items():
            compiled[name], t = compile_once(factory(), args)
            for stage, (wall, cpu) in with_sums(t).items():
                samples[name][stage][0].append(wall)
                samples[name][stage][1].append(cpu)
    stats = {n: {stage: _stats(*s) for stage, s in d.items()} for n, d in samples.items()}
    return compiled, stats


def with_sums(t: dict) -> dict:
    """Add `trace_lower` and `total` (wall, cpu) to the stages of `compile_once`."""
    t["trace_lower"] = tuple(a + b for a, b in zip(t["trace"], t["lower"], strict=True))
    t["total"] = tuple(a + b for a, b in zip(t["trace_lower"], t["xla"], strict=True))
    return t


_RUN_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")


def compile_times_fresh(case: str, kind: str, names, repeats: int) -> dict:
    """Compile statistics like `compile_times`, each sample taken in a new Python process
    (`run.py --compile-one case kind name`: import, warm-up compile, one cold compile)."""
    samples = {name: collections.defaultdict(lambda: ([], [])) for name in names}
    for _ in range(repeats):
        for name in names:
            cmd = [sys.executable, _RUN_PY, "--compile-one", case, kind, name]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            for stage, (wall, cpu) in json.loads(proc.stdout.splitlines()[-1]).items():
                samples[name][stage][0].append(wall)
                samples[name][stage][1].append(cpu)
    return {n: {stage: _stats(*s) for stage, s in d.items()} for n, d in samples.items()}


def time_calls(compiled: dict[str, Callable], args, repeats: int):
    """Steady-state time per call: one warm-up call each, then `repeats` rounds, the
    contenders interleaved in each round, every call `block_until_ready`-ed.

    **Returns:** `({name: stats}, {name: output of the warm-up call})`.
    """
    outputs = {name: jax.block_until_ready(f(*args)) for name, f in compiled.items()}
    wall = {k: [] for k in compiled}
    cpu = {k: [] for k in compiled}
    for _ in range(repeats):
        for name, f in compiled.items():
            c0 = _clock()
            jax.block_until_ready(f(*args))
            c1 = _clock()
            wall[name].append(c1[0] - c0[0])
            cpu[name].append(c1[1] - c0[1])
    return {name: _stats(wall[name], cpu[name]) for name in compiled}, outputs


def add_ratios(res: dict, num: str = "constrax", den: str = "hand", prefix: str = "") -> dict:
    """`res[prefix + "ratio_min"]` etc. = `res[num][...] / res[den][...]`."""
    for key in ("min_s", "median_s", "cpu_min_s", "cpu_median_s"):
        res[f"{prefix}ratio_{key[:-2]}"] = res[num][key] / res[den][key]
    return res


def verdict(timings: dict, target: float | None, prefix: str = "") -> dict | None:
    if target is None:
        return None
    return {
        "ratio_max": target,
        "met_cpu_time": timings[f"{prefix}ratio_cpu_min"] <= target,
        "met_wall_time": timings[f"{prefix}ratio_min"] <= target,
    }


def max_abs_diff(a, b) -> float:
    return max(
        float(jnp.max(jnp.abs(x - y)))
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    )


def bench_pair(
    factories: dict[str, Callable[[], Callable]],
    args,
    repeats: int,
    compiles: int,
    fresh: tuple[str, str] | None = None,
):
    """Compile (cold, interleaved) and time (interleaved) constrax against hand-written.

    With `fresh = (case, kind)` the compile times come from new processes
    (`compile_times_fresh`) instead.

    **Returns:** `{"run": timings with ratios, "compile": compile stats with ratios,
    "max_abs_diff": max |constrax - hand| of the outputs, "max_rel_diff": the same over
    the largest |hand| entry}`.
    """
    compiled, ctimes = compile_times(factories, args, 1 if fresh else compiles)
    if fresh:
        ctimes = compile_times_fresh(*fresh, list(factories), compiles)
    timings, outputs = time_calls(compiled, args, repeats)
    add_ratios(timings)
    for stage in ("trace_lower", "xla", "total"):
        for key in ("min_s", "cpu_min_s"):
            a, b = ctimes["constrax"][stage][key], ctimes["hand"][stage][key]
            ctimes.setdefault("ratios", {})[f"{stage}_{key[:-2]}"] = a / b
    diff = max_abs_diff(outputs["constrax"], outputs["hand"])
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree_util.tree_leaves(outputs["hand"]))
    return {
        "run": timings,
        "compile": ctimes,
        "max_abs_diff": diff,
        "max_rel_diff": diff / scale,  # relative to the largest entry of the hand output
    }


def bench_rollout_case(case: RolloutCase, cfg: dict) -> dict:
    """Rollout and gradient of a `RolloutCase`: compile times, run times, agreement,
    jaxpr equation counts."""
    args = case.args()
    out = {"title": case.title, "t1": case.t1, "dt0": DT0, "n_steps": round(case.t1 / DT0)}
    for kind, make, reps, creps, target in (
        ("rollout", case.rollouts, cfg["repeats"], cfg["compile_repeats"], case.rollout_target),
        ("gradient", case.gradients, cfg["grad_repeats"], cfg["grad_compile_repeats"],
         case.gradient_target),
    ):  # fmt: skip
        print(f"  {case.name} {kind}", flush=True)
        factories = {k: (lambda k=k, make=make: make()[k]) for k in ("constrax", "hand")}
        fresh = (case.name, kind) if cfg.get("fresh_process") else None
        out[kind] = bench_pair(factories, args, reps, creps, fresh)
        out[kind]["target"] = verdict(out[kind]["run"], target)
    out["jaxpr_counts"] = case_counts(case)
    return out


# ----------------------------------------------------------------------------------------
# Metadata and output.


def _cmd(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=10).stdout
    except Exception:  # informational only
        return ""


def loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict:
    """CPU model and cores, platform, versions (python, jax, jaxlib, diffrax, equinox,
    constrax), backend, date (UTC), load average, whether the persistent compilation
    cache is on."""
    import equinox
    import jaxlib

    lscpu = _cmd(["lscpu"])
    model = next(
        (ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")),
        platform.processor(),
    )
    return {
        "cpu_model": model,
        "cpu_cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "diffrax": diffrax.__version__,
        "equinox": equinox.__version__,
        "constrax": cx.__version__,
        "jax_backend": jax.default_backend(),
        "persistent_compilation_cache": bool(jax.config.jax_enable_compilation_cache)
        and jax.config.jax_compilation_cache_dir is not None,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_at_start": loadavg(),
    }


def versions() -> dict:
    """The versions that determine the jaxpr counts."""
    m = machine_info()
    return {k: m[k] for k in ("python", "jax", "jaxlib", "diffrax", "equinox", "constrax")}


def write_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=1)
        fh.write("\n")


def md_cell(value) -> str:
    """`value` as the text of one Markdown table cell. A `|` in it (`max |a − b|`) would end
    the cell, and a header row with one cell too many is no table at all: outside code spans
    it is escaped (`\\|`, rendered as `|`); inside one the table parser leaves it alone, and
    an escape would show."""
    parts = re.split(r"(`[^`]*`)", str(value).replace("\n", " "))
    return "".join(p if p.startswith("`") else re.sub(r"(?<!\\)\|", r"\\|", p) for p in parts)


def md_table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table, every cell of the header and the rows through `md_cell`."""
    line = lambda cells: "| " + " | ".join(md_cell(c) for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows)]


def ms(x: float) -> str:
    return f"{1e3 * x:.2f}"


def yes(flag: bool) -> str:
    return "yes" if flag else "no"


def model_case(name: str, title: str, build: Callable, hand_vf: Callable, **kw) -> RolloutCase:
    """A `RolloutCase` of a `cx.models` model (`build()`) from its `q0, qd0, params`:
    `cx.simulate(model.system, ..., constraint_solver=cx.KKT(), stabilisation=None)`
    against `hand_vf(t, (q, qd), p) -> (qd, qdd)`."""
    model = build()

    def rollouts(**solve):
        system = build().system
        return {
            "constrax": lambda q0, qd0, p: constrax_rollout(
                system, q0, qd0, p, stabilisation=None, **solve
            ),
            "hand": lambda q0, qd0, p: hand_rollout(hand_vf, (q0, qd0), p, **solve),
        }

    accelerations = {
        "constrax": lambda t, q, qd, p: (
            cx.accelerations(model.system, t, q, qd, p, constraint_solver=cx.KKT()).qdd
        ),
        "hand": lambda t, q, qd, p: hand_vf(t, (q, qd), p)[1],
    }
    return RolloutCase(
        name=name,
        title=title,
        rollouts=rollouts,
        args=lambda: (model.q0, model.qd0, model.params),
        accelerations=accelerations,
        acc_args=lambda: (jnp.asarray(0.3), model.q0, model.qd0, model.params),
        **kw,
    )
