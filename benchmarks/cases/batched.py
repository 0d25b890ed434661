r"""Batched throughput of the snake cart: `jax.vmap` of the rollout over consistent initial
states (`snake.batch`), constrax against the hand-written field (`snake.py`);
env-steps/s = batch × steps / time."""

import jax

from .._cases import DT0
from .._jaxpr import vf_counts
from .._report import md_table
from .._timing import bench_pair
from . import snake


def rollouts(t1: float) -> dict:
    return {k: jax.vmap(f, in_axes=(0, 0, None)) for k, f in snake.CASE.rollouts(t1=t1).items()}


def bench(cfg: dict) -> dict:
    p = snake.params()
    out = {"dt0": DT0, "batches": {}}
    for batch, n_steps in cfg["batches"].items():
        t1 = n_steps * DT0
        reps = cfg["batch_repeats"] if batch < 4096 else 2
        factories = {k: (lambda k=k, t1=t1: rollouts(t1)[k]) for k in ("constrax", "hand")}
        res = bench_pair(factories, (*snake.batch(batch), p), reps, 1)
        res["n_steps"] = n_steps
        for name in ("constrax", "hand"):
            r = res["run"][name]
            r["env_steps_per_s"] = batch * n_steps / r["min_s"]
            r["env_steps_per_cpu_s"] = batch * n_steps / r["cpu_min_s"]
        out["batches"][str(batch)] = res
        print(
            f"  batch {batch:6d}: constrax {res['run']['constrax']['env_steps_per_s']:.3e} "
            f"steps/s, hand {res['run']['hand']['env_steps_per_s']:.3e} steps/s, time ratio "
            f"{res['run']['ratio_min']:.3f} (cpu {res['run']['ratio_cpu_min']:.3f})",
            flush=True,
        )
    out["jaxpr_counts"] = counts()
    return out


def counts(batch: int = 16, primitives: bool = False) -> dict:
    """Equation counts of the vector field under `vmap` (the same for every batch size)."""
    fns = {k: f for k, f in snake.CASE.rollouts().items() if k in ("constrax", "hand")}
    return vf_counts(fns, snake.CASE.args(), batch=batch, primitives=primitives)


_HEADER = (
    "batch | steps | constrax steps/s (wall) | hand steps/s (wall) | constrax steps/CPU-s "
    "| hand steps/CPU-s | time ratio CPU | time ratio wall | compile constrax / hand"
).split(" | ")


def markdown(res: dict, cfg: dict) -> list[str]:
    rows = []
    for batch, r in res["batches"].items():
        a, b = r["run"]["constrax"], r["run"]["hand"]
        ca, cb = r["compile"]["constrax"]["total"], r["compile"]["hand"]["total"]
        rows.append(
            [batch, r["n_steps"], f"{a['env_steps_per_s']:.3e}", f"{b['env_steps_per_s']:.3e}",
             f"{a['env_steps_per_cpu_s']:.3e}", f"{b['env_steps_per_cpu_s']:.3e}",
             f"{r['run']['ratio_cpu_min']:.2f}", f"{r['run']['ratio_min']:.2f}",
             f"{ca['cpu_min_s']:.2f} / {cb['cpu_min_s']:.2f}"]
        )  # fmt: skip
    return [
        "",
        "## Batched snake cart",
        "",
        "`vmap` of the rollout over initial states, Tsit5 steps of "
        f"dt = {res['dt0']} (fewer steps for the largest batches to bound the run time); "
        "env-steps/s = batch × steps / time (minimum over repeats), per wall second and per "
        "CPU second; compile = trace + lower + XLA, CPU s, one cold compile:",
        "",
        *md_table(_HEADER, rows),
    ]
