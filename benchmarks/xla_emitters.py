"""XLA's CPU compiler with its default (MLIR) fusion emitters against its LLVM IR emitters
(`XLA_FLAGS=--xla_cpu_use_fusion_emitters=false`): compile and run time of constrax programs.

    python -m benchmarks.xla_emitters [--repeats 2] [--out benchmarks/results]

Each measurement runs in a new process (the flag is read when XLA starts), the two settings
alternating, `--repeats` processes each:

- the snake cart of `benchmarks/stabilisation.py`, adaptive (Tsit5, rtol = atol = 1e-9,
  t in [0, 10]), with `cx.simulate`'s defaults: the rollout and its gradient with respect to
  the parameters;
- the 5-link pendulum chain in maximal coordinates, 1000 fixed Tsit5 steps of 1e-3,
  `jax.vmap` over 256 states.

For each: trace + lower and XLA compile of the `jax.jit` program (cold caches), and the run
time (minimum over repeats after the compiling call). float64, CPU.
"""

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script


def measure() -> dict:
    """All measurements in this process (its XLA_FLAGS as set by the parent)."""
    import diffrax
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    import constrax as cx
    from benchmarks.stabilisation import SNAKE, SNAKE_SYSTEM, _compile, _min_time, snake_state

    q0, qd0 = snake_state()
    p = {k: jnp.asarray(v) for k, v in SNAKE.items()}
    controller = diffrax.PIDController(rtol=1e-9, atol=1e-9)

    def snake(q0, qd0, p):
        return cx.simulate(SNAKE_SYSTEM, q0, qd0, p, t1=10.0, stepsize_controller=controller).q[-1]

    def gradient(p):
        return jax.grad(lambda p: jnp.sum(snake(q0, qd0, p) ** 2))(p)

    chain = cx.models.pendulum_chain(5, "maximal")
    fixed = dict(dt0=1e-3, stepsize_controller=diffrax.ConstantStepSize(), max_steps=1001)
    batch = jax.vmap(
        lambda q, qd: cx.simulate(chain.system, q, qd, chain.params, t1=1.0, **fixed).q[-1]
    )
    qb, qdb = jnp.tile(chain.q0, (256, 1)), jnp.tile(chain.qd0, (256, 1))
    out = {}
    for name, fn, args, repeats in (
        ("snake cart, adaptive rollout", snake, (q0, qd0, p), 20),
        ("snake cart, gradient", gradient, (p,), 5),
        ("5-link chain, 1000 fixed steps, vmap over 256", batch, (qb, qdb), 3),
    ):
        lower, xla = _compile(fn, *args)
        out[name] = dict(
            trace_lower_s=lower, xla_s=xla, run_s=_min_time(jax.jit(fn), *args, repeats=repeats)
        )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None, help="folder for xla_emitters_cpu.{json,md}")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure()))
        return
    from benchmarks._report import (
        LLVM_IR_EMITTERS,
        XLA_SETTINGS,
        loadavg,
        machine_info,
        machine_line,
        run_fresh,
        write_results,
    )

    machine = machine_info()
    samples = {s: [] for s in XLA_SETTINGS}
    for _ in range(args.repeats):
        for setting, flag in XLA_SETTINGS.items():
            samples[setting].append(run_fresh("benchmarks.xla_emitters", flag))
            print(setting, samples[setting][-1], flush=True)
    machine["loadavg_at_end"] = loadavg()
    lines = [
        "# XLA's CPU fusion emitters against its LLVM IR emitters",
        "",
        machine_line(machine),
        f"- `XLA_FLAGS={LLVM_IR_EMITTERS}` against the default; each setting in "
        f"{args.repeats} processes, alternating; the range over processes",
        "",
        "| program | setting | trace + lower [s] | XLA compile [s] | run [ms] |",
        "|---|---|---|---|---|",
    ]

    def span(values, scale=1.0, digits=2):
        lo, hi = min(values) * scale, max(values) * scale
        return (
            f"{lo:.{digits}f}"
            if f"{lo:.{digits}f}" == f"{hi:.{digits}f}"
            else (f"{lo:.{digits}f}–{hi:.{digits}f}")
        )

    for program in samples["LLVM IR emitters"][0]:
        for setting in XLA_SETTINGS:
            runs = [s[program] for s in samples[setting]]
            lines.append(
                f"| {program} | {setting} | {span([r['trace_lower_s'] for r in runs])} "
                f"| {span([r['xla_s'] for r in runs])} | {span([r['run_s'] for r in runs], 1e3)} |"
            )
    report = "\n".join(lines) + "\n"
    print(report)
    result = dict(machine=machine, flag=LLVM_IR_EMITTERS, samples=samples)
    write_results(args.out, "xla_emitters_cpu", result, report)


if __name__ == "__main__":
    main()
