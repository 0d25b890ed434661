r"""Timing of the benchmark contenders.

- `compile_times` (trace, lower, XLA compile from cold caches; `compile_once`,
  `compile_times_fresh` in new processes) and `time_calls` (steady state, contenders
  interleaved, wall and process CPU time, min and median);
- `bench_pair`: both, for constrax against the hand-written contender, with their ratios
  (`add_ratios`), the targets (`verdict`) and the agreement of the outputs (`max_abs_diff`).
"""

from __future__ import annotations

import collections
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp


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
    """Compile (cold, interleaved) and time (interleaved) constrax against hand-written,
    and a `"defaults"` contender (constrax with its default options) where `factories`
    has one (its ratios to hand-written under the prefix `defaults_`).

    With `fresh = (case, kind)` the compile times come from new processes
    (`compile_times_fresh`) instead.

    **Returns:** `{"run": timings with ratios, "compile": compile stats with ratios,
    "max_abs_diff": max |constrax - hand| of the outputs, "max_rel_diff": the same over
    the largest |hand| entry[, "defaults_max_abs_diff", "defaults_max_rel_diff"]}`.
    """
    compiled, ctimes = compile_times(factories, args, 1 if fresh else compiles)
    if fresh:
        ctimes = compile_times_fresh(*fresh, list(factories), compiles)
    timings, outputs = time_calls(compiled, args, repeats)
    contenders = [c for c in ("constrax", "defaults") if c in factories]
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree_util.tree_leaves(outputs["hand"]))
    out = {"run": timings, "compile": ctimes}
    for name in contenders:
        prefix = "" if name == "constrax" else f"{name}_"
        add_ratios(timings, num=name, prefix=prefix)
        for stage in ("trace_lower", "xla", "total"):
            for key in ("min_s", "cpu_min_s"):
                a, b = ctimes[name][stage][key], ctimes["hand"][stage][key]
                ctimes.setdefault(f"{prefix}ratios", {})[f"{stage}_{key[:-2]}"] = a / b
        diff = max_abs_diff(outputs[name], outputs["hand"])
        out[f"{prefix}max_abs_diff"] = diff
        # relative to the largest entry of the hand output
        out[f"{prefix}max_rel_diff"] = diff / scale
    return out
