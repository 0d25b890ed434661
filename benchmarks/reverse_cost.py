"""Where the reverse pass of a batched rollout spends its time: the vector field and its VJP
per element of a batch, taken apart, and the gradient of whole batched rollouts over their
forward pass, like for like against the defaults, in one run.

    python benchmarks/reverse_cost.py [--quick] [--out benchmarks/results]

Writes `reverse_cost_cpu.{json,md}` into `--out` (nothing without it).

1. **The field and its VJP under `vmap`**, per element of a batch of 256 states (each state
   the model's own, its velocity scaled by a factor from 0.5 to 1.5), for the snake cart,
   the 5-link chain in maximal coordinates and, where MuJoCo and gymnasium are installed,
   the gymnasium humanoid imported from MJCF (contacts and limits off):
   like for like (`KKT()`, `stabilisation=None`), `AutoSolver()` alone, `StepProjection()`
   alone with `KKT()`, the defaults (`AutoSolver()`, `StepProjection()`, the consistency
   check), and `StepProjection()`'s field taken apart with `KKT()` as in
   `benchmarks/field_cost.py`: its projection's solve with the dynamics at the state's
   velocity, the same with the projection's saddle matrix held constant in the reverse
   pass (a diagnostic only: it drops the derivative of the projection's metric, which is
   not zero off the constraints, so no option of the library does it), and its bias terms
   in a second pass with no projection. The VJP is taken with respect to the state and
   the parameters, as the reverse pass of a gradient through a rollout takes it. Each
   timing is one jitted `lax.fori_loop` of evaluations of the whole batch (the state moved
   a little at each iteration, so nothing is hoisted); the loops of one model run in turn,
   round after round, each keeping its fastest round.
2. **The gradient of a batched rollout over its forward pass**: 256 rollouts of 200 fixed
   steps (`diffrax.Euler` and `diffrax.Tsit5`) of each model under `vmap`, the sum of
   squares of the final states differentiated with respect to the initial states and the
   floating-point parameters (the default adjoint: `cx.simulate` stores every fixed step,
   `RecursiveCheckpointAdjoint(checkpoints=steps)`), like for like and with the defaults,
   compiled ahead and timed in turn.

float64, CPU. Compare ratios within one run: the machine may be shared.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

if __name__ == "__main__":  # float64, before constrax makes an array
    jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import constrax as cx  # noqa: E402
from benchmarks._cases import require_x64  # noqa: E402
from benchmarks._report import (  # noqa: E402
    loadavg,
    machine_info,
    machine_line,
    md_table,
    write_results,
)
from benchmarks.batch_rollouts import (  # noqa: E402
    MODELS,
    _cast,
    _compile,
    _time,
    float_params,
    summed_final_state,
)
from benchmarks.field_cost import _compiled, _ProjectionSolveOnly, _SecondPass  # noqa: E402
from constrax._layout import row_layout  # noqa: E402
from constrax._simulate import _VectorField  # noqa: E402
from constrax._tolerances import consistency_rtol  # noqa: E402

BATCH = 256
LIKE = "KKT(), None (like for like)"
DEFAULTS = "AutoSolver(), StepProjection(), consistency check (the defaults)"


class _FixedMetricKKT(cx.KKT):
    """`KKT()` whose projection holds its saddle matrix constant in the reverse pass (the
    diagnostic row; not an option of the library)."""

    def project(self, state, r):
        frozen = dataclasses.replace(state, K=jax.lax.stop_gradient(state.K))
        return super().project(frozen, r)


def _fields(system, mask) -> dict:
    """The fields compared, by name: `_VectorField(system, ...)` for each configuration."""
    rtol = consistency_rtol(jnp.float64)
    configs = {
        LIKE: (cx.KKT(), None, None),
        "AutoSolver(), None": (cx.AutoSolver(), None, None),
        "KKT(), StepProjection()": (cx.KKT(), cx.StepProjection(), None),
        "KKT(), the projection's solve, dynamics at the state's velocity": (
            cx.KKT(), _ProjectionSolveOnly(), None,
        ),
        "KKT(), the same, the projection's matrix constant in the reverse pass": (
            _FixedMetricKKT(), _ProjectionSolveOnly(), None,
        ),
        "KKT(), the bias terms in a second pass": (cx.KKT(), _SecondPass(), None),
        DEFAULTS: (cx.AutoSolver(), cx.StepProjection(), rtol),
    }  # fmt: skip
    return {
        name: _VectorField(system, cx.DAlembert(), solver, stab, mask, check)
        for name, (solver, stab, check) in configs.items()
    }


def field_rows(model: str, batch: int, evals: int, rounds: int) -> list[dict]:
    """Each field and its VJP under `vmap` over `batch` states, per element."""
    system, q, qd, p = MODELS[model](batch)
    q, qd, p = _cast(q, jnp.float64), _cast(qd, jnp.float64), _cast(p, jnp.float64)
    t0 = jnp.zeros((), jnp.float64)
    mask = row_layout(system, t0, q[0], qd[0], p).mask
    floats = float_params(p)
    rest = {k: v for k, v in p.items() if k not in floats}
    calls, compile_s = {}, {}
    for name, vf in _fields(system, mask).items():

        def field(y, f, vf=vf):
            return vf.evaluate(t0, y, {**rest, **f})

        def body(i, y, field=field):
            out = jax.vmap(field, in_axes=(0, None))(y, floats)
            return (y[0] + 1e-9 * out[0], y[1] + 1e-9 * out[1])

        def vjp_body(i, carry, field=field):
            y, f = carry

            def one(y1, f):
                out, pullback = jax.vjp(field, y1, f)
                return pullback(out)

            gy, gf = jax.vmap(one, in_axes=(0, None))(y, f)
            y = (y[0] + 1e-9 * gy[0], y[1] + 1e-9 * gy[1])
            return y, jax.tree.map(lambda a, b: a + 1e-12 * jnp.sum(b, 0), f, gf)

        fwd, rev = _compiled(body, (q, qd), evals), _compiled(vjp_body, ((q, qd), floats), evals)
        calls[name] = (fwd["loop"], (fwd["x0"],))
        calls[name + " VJP"] = (rev["loop"], (rev["x0"],))
        compile_s[name] = [round(fwd["compile_s"], 2), round(rev["compile_s"], 2)]
    best = _time(calls, rounds)
    rows = []
    for name in compile_s:
        us, vjp_us = (1e6 * best[k] / (evals * batch) for k in (name, name + " VJP"))
        row = dict(model=model, batch=batch, field=name, us=us, vjp_us=vjp_us)
        row.update({"vjp / field": vjp_us / us, "compile_s": compile_s[name]})
        print(row, flush=True)
        rows.append(row)
    return rows


def gradient_rows(model: str, batch: int, steps: int, rounds: int, solvers) -> list[dict]:
    """The gradient of `batch` rollouts of `steps` fixed steps over their forward pass, like
    for like and with the defaults."""
    system, q, qd, p = MODELS[model](batch)
    q, qd, p = _cast(q, jnp.float64), _cast(qd, jnp.float64), _cast(p, jnp.float64)
    floats = float_params(p)
    variants = {"like for like": dict(constraint_solver=cx.KKT(), stabilisation=None)}
    variants["defaults"] = {}
    rows = []
    for solver_name, solver in solvers.items():
        calls, row = {}, dict(model=model, batch=batch, steps=steps, solver=solver_name)
        for variant, options in variants.items():
            forward = summed_final_state(system, p, solver, steps, options)
            for kind, fn in (("forward", forward), ("gradient", jax.grad(forward))):
                compiled, trace, xla = _compile(fn, (floats, q, qd))
                calls[f"{variant} {kind}"] = (compiled, (floats, q, qd))
                row[f"{variant} {kind} compile_s"] = [round(trace, 2), round(xla, 2)]
        best = _time(calls, rounds)
        for variant in variants:
            fwd, grad = best[f"{variant} forward"], best[f"{variant} gradient"]
            row[f"{variant} forward s"], row[f"{variant} gradient s"] = fwd, grad
            row[f"{variant} gradient / forward"] = grad / fwd
        row["defaults gradient / like for like gradient"] = (
            best["defaults gradient"] / best["like for like gradient"]
        )
        print(row, flush=True)
        rows.append(row)
    return rows


def _report(result: dict) -> str:
    m = result["machine"]
    lines = [
        "# The reverse pass of batched rollouts, taken apart (CPU)",
        "",
        machine_line(m),
        f"- versions: python {m['python']}, jaxlib {m['jaxlib']}, diffrax {m['diffrax']}, "
        f"equinox {m['equinox']}; float64",
        f"- the field and its VJP (with respect to the state and the parameters) under `vmap` "
        f"over a batch of {result['batch']}, µs per element: one jitted `fori_loop` of "
        f"{result['evals']} evaluations of the batch per row, the loops of a model run in "
        "turn, fastest round each; compile = seconds to lower and compile the loops "
        "(field / VJP)",
        "",
        "## The field and its VJP, per element of a batch",
        "",
    ]
    header = ["model", "field", "field [µs]", "/ like", "VJP [µs]", "/ like", "VJP / field",
              "compile [s]"]  # fmt: skip
    body, base = [], {}
    for r in result["fields"]:
        b = base.setdefault(r["model"], r)
        body.append([
            r["model"], r["field"], f"{r['us']:.3f}", f"{r['us'] / b['us']:.2f}",
            f"{r['vjp_us']:.3f}", f"{r['vjp_us'] / b['vjp_us']:.2f}",
            f"{r['vjp / field']:.2f}", " / ".join(map(str, r["compile_s"])),
        ])  # fmt: skip
    lines += md_table(header, body)
    lines += [
        "",
        "## The gradient of batched rollouts over their forward pass",
        "",
        f"{result['batch']} rollouts of {result['steps']} fixed steps of 1e-3 under `vmap`; "
        "the gradient of the sum of squares of the final states with respect to the initial "
        "states and the floating-point parameters; compiled ahead, timed in turn, fastest "
        "round each.",
        "",
    ]
    header = ["model", "solver", "like: forward [ms]", "like: gradient / forward",
              "defaults: forward [ms]", "defaults: gradient / forward",
              "defaults / like, gradient", "compile, defaults' gradient [s]"]  # fmt: skip
    body = [
        [
            r["model"],
            r["solver"],
            f"{1e3 * r['like for like forward s']:.1f}",
            f"{r['like for like gradient / forward']:.2f}",
            f"{1e3 * r['defaults forward s']:.1f}",
            f"{r['defaults gradient / forward']:.2f}",
            f"{r['defaults gradient / like for like gradient']:.2f}",
            " / ".join(map(str, r["defaults gradient compile_s"])),
        ]  # fmt: skip
        for r in result["gradients"]
    ]
    lines += md_table(header, body)
    return "\n".join(lines) + "\n"


def main(out: str | None, quick: bool) -> dict:
    require_x64()
    models = list(MODELS)
    try:
        import gymnasium  # noqa: F401
        import mujoco  # noqa: F401
    except ImportError:
        models.remove("humanoid")
    if quick:
        models = ["snake cart"]
    batch, evals, steps, rounds = (8, 4, 10, 1) if quick else (BATCH, 100, 200, 5)
    solvers = {"Euler": diffrax.Euler(), "Tsit5": diffrax.Tsit5()}
    result = dict(machine=machine_info(), batch=batch, evals=evals, steps=steps)
    result["fields"] = [row for m in models for row in field_rows(m, batch, evals, rounds)]
    result["gradients"] = [
        row for m in models for row in gradient_rows(m, batch, steps, rounds, solvers)
    ]
    result["machine"]["loadavg_at_end"] = loadavg()
    report = _report(result)
    print(report)
    write_results(out, "reverse_cost_cpu", result, report)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the snake cart, B = 8, 10 steps")
    parser.add_argument("--out", default=None, help="folder for reverse_cost_cpu.{json,md}")
    args = parser.parse_args()
    main(args.out, args.quick)
