r"""What the rank-robust default costs where it is not needed: `cx.AutoSolver()` (the
default; `UdwadiaKalaba` where the KKT pivots say singular) and `cx.UdwadiaKalaba()`
against `cx.KKT()`, all three in constrax, on the snake cart (`snake.py`) on states that
stay regular: one rollout of 1000 Tsit5 steps and `jax.vmap` over B = 1024 initial states
(`snake.batch`, 100 steps), without stabilisation and with `cx.Projection()`, which on
the snake cart (no position-level rows) traces what `cx.simulate`'s default
`Projection(10, 0)` traces: two solves with one factorisation per evaluation.

For this case the jaxpr counts compare the default path (`AutoSolver`, `Projection`) as
"constrax" with the same field solved by `cx.KKT()` in place of "hand": the guard in
`tests/test_jaxpr_budget.py` then covers the vector field a user gets by default.
"""

import jax

import constrax as cx

from .._cases import DT0, constrax_rollout
from .._jaxpr import vf_counts
from .._report import md_table, ms
from .._timing import compile_once, max_abs_diff, time_calls
from . import snake

SOLVERS = {"KKT": cx.KKT(), "AutoSolver": cx.AutoSolver(), "UdwadiaKalaba": cx.UdwadiaKalaba()}
STABILISATIONS = {"none": None, "Projection": cx.Projection()}
SHAPES = {"single": (1, 1000), "batched": (1024, 100)}


def rollout(solver, stabilisation, batch: int, n_steps: int):
    """Final state of the snake cart; `vmap`ped over initial states if `batch > 1`."""
    system = snake.system()

    def one(q0, qd0, p):
        return constrax_rollout(
            system, q0, qd0, p, t1=n_steps * DT0,
            constraint_solver=solver, stabilisation=stabilisation,
        )  # fmt: skip

    if batch == 1:
        return lambda q0s, qd0s, p: one(q0s[0], qd0s[0], p)
    return jax.vmap(one, in_axes=(0, 0, None))


def bench(cfg: dict) -> dict:
    p = snake.params()
    out = {"rows": []}
    for stab_name, stab in STABILISATIONS.items():
        for shape_name, (batch, n_steps) in SHAPES.items():
            args = (*snake.batch(batch), p)
            compiled = {
                name: compile_once(rollout(solver, stab, batch, n_steps), args)[0]
                for name, solver in SOLVERS.items()
            }
            reps = cfg["repeats"] if batch == 1 else cfg["batch_repeats"]
            timings, outputs = time_calls(compiled, args, reps)
            row = {
                "stabilisation": stab_name, "batch": batch, "n_steps": n_steps,
                "timings": timings,
                "ratio_cpu": {k: timings[k]["cpu_min_s"] / timings["KKT"]["cpu_min_s"]
                              for k in SOLVERS},
                "max_abs_diff": {k: max_abs_diff(outputs[k], outputs["KKT"]) for k in SOLVERS},
            }  # fmt: skip
            out["rows"].append(row)
            print(
                f"  {stab_name:10s} {shape_name:7s} "
                + "  ".join(f"{k} {v:.3f}" for k, v in row["ratio_cpu"].items()),
                flush=True,
            )
    out["jaxpr_counts"] = counts()
    return out


def counts(primitives: bool = False) -> dict:
    """Equation counts of the default field (`AutoSolver`, `Projection`) as "constrax"
    and of the same field with `KKT` as "hand" (see the module docstring)."""
    rollouts = {
        who: lambda q0, qd0, p, solver=solver: constrax_rollout(
            snake.system(), q0, qd0, p, constraint_solver=solver, stabilisation=cx.Projection()
        )
        for who, solver in (("constrax", cx.AutoSolver()), ("hand", cx.KKT()))
    }
    return vf_counts(rollouts, snake.CASE.args(), primitives=primitives)


_HEADER = [
    "stabilisation", "batch × steps", "KKT CPU ms", "AutoSolver / KKT", "UdwadiaKalaba / KKT",
    "max |AutoSolver − KKT|",
]  # fmt: skip


def markdown(res: dict, cfg: dict) -> list[str]:
    rows = []
    for r in res["rows"]:
        rows.append(
            [r["stabilisation"], f"{r['batch']} × {r['n_steps']}",
             ms(r["timings"]["KKT"]["cpu_min_s"]), f"{r['ratio_cpu']['AutoSolver']:.2f}",
             f"{r['ratio_cpu']['UdwadiaKalaba']:.2f}", f"{r['max_abs_diff']['AutoSolver']:.1e}"]
        )  # fmt: skip
    c = res["jaxpr_counts"]
    return [
        "",
        "## The default constraint solver on regular states",
        "",
        "Snake cart, constrax with each constraint solver; CPU time per call, minimum over "
        "interleaved repeats, as a ratio to `cx.KKT()` in the same run:",
        "",
        *md_table(_HEADER, rows),
        "",
        f"Equations of the default field (`AutoSolver`, `Projection`) and of its VJP: "
        f"{c['constrax']['vf']} / {c['constrax']['vf_vjp']}; with `KKT`: "
        f"{c['hand']['vf']} / {c['hand']['vf_vjp']}.",
    ]
