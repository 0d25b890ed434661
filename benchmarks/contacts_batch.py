r"""Batches of contact runs: `jax.vmap` of `cx.rigid.simulate_contacts` against one run.

What a batch user of exact contacts gets from batching: the run time per member of
`jax.jit(jax.vmap(run))` over a batch of `B` members, as a multiple of one run's
(`jax.jit(run)`), both compiled first and timed warm, in float64 and in float32 (x64
off, the tolerances `simulate_contacts` picks for it):

- `bouncing balls`: a ball (radius 0.1 m, 1 kg) dropped on the floor with restitutions
  drawn from [0.3, 0.6] and heights from [0.6, 1.4] m, to t = 2 s (`max_switches=12`:
  6 to 12 impacts, then rest), B = 1024;
- `tippe tops`: the tippe top of the docs (an eccentric sphere, R = 2 cm, 1 kg, spun at
  150 rad/s about the vertical with its axis tilted by 0.3 rad, sliding with
  $\mu_s = \mu_k$ = 0.6) with $I_1/I_3$ drawn from [0.8, 1.2], for 0.05 s, B = 256.

Each batch is timed twice: with the members drawn as above (`varied`) and with `B` copies of
one member (`identical`). The batched program runs the scan over segments in lock step: the
segment of one scan step integrates until its slowest member has reached its event, the
members already there (or finished) waiting; identical members never wait, so the ratio of
the two times is the cost of waiting and the identical batch's per-member cost that of the
batched evaluation itself.

Usage: `python benchmarks/contacts_batch.py [--balls 1024] [--tops 256]
[--out benchmarks/results]`; writes `contacts_batch_cpu.{json,md}`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

G = 9.81


def _ball():
    """`(run, draw)`: one bouncing ball's run `(e, h) -> (switches, status)` and the
    batch's draws."""
    import jax.numpy as jnp
    import numpy as np

    import constrax as cx

    ball = cx.rigid.RigidBody(1.0, jnp.full(3, 0.004), name="ball")
    system = cx.System(
        lambda t, q, qd, p: ball.kinetic_energy(q, qd) - G * q[2], [ball.orientation_constraint()]
    )
    contact = cx.rigid.FrictionalContact(
        ball,
        cx.rigid.Sphere(0.1),
        static_friction=0.4,
        kinetic_friction=0.3,
        restitution=lambda p: p["e"],
    )

    def run(e, h):
        q0, qd0 = ball.state(jnp.stack([0.0, 0.0, h]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
        out = cx.rigid.simulate_contacts(
            system, [contact], q0, qd0, {"e": e}, modes=["separated"], t1=2.0,
            max_switches=12, throw=False,
        )  # fmt: skip
        return out.num_switches, out.status

    def draw(B, dtype):
        rng = np.random.default_rng(0)
        return (
            jnp.asarray(rng.uniform(0.3, 0.6, B), dtype),
            jnp.asarray(rng.uniform(0.6, 1.4, B), dtype),
        )

    return run, draw, (0.5, 1.1)


def _top():
    """`(run, draw)`: the docs' tippe top's run `gamma -> (switches, status)` (`I_1/I_3 =
    gamma`) and the batch's draws."""
    import jax.numpy as jnp
    import numpy as np

    import constrax as cx

    R, alpha, m = 0.02, 0.3, 1.0
    I3 = 0.4 * m * R**2
    top = cx.rigid.RigidBody(m, jnp.full(3, I3), name="top")
    ez = jnp.array([0.0, 0.0, 1.0])

    def lagrangian(t, q, qd, p):
        body = top.with_parameters(m, jnp.stack([p * I3, p * I3, jnp.full_like(p, I3)]))
        return body.kinetic_energy(q, qd) - m * G * top.position(q)[2]

    system = cx.System(lagrangian, [top.orientation_constraint()])
    shape = cx.rigid.Sphere(R, centre=(0.0, 0.0, alpha * R))
    contact = cx.rigid.FrictionalContact(top, shape, static_friction=0.6, kinetic_friction=0.6)

    def run(gamma):
        c, s = jnp.cos(0.3), jnp.sin(0.3)
        rot = jnp.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]], gamma.dtype)
        q, _ = top.state(jnp.zeros(3, gamma.dtype), rot, jnp.zeros(3), jnp.zeros(3))
        delta = shape.contact_offset(top, q, ez.astype(gamma.dtype), None)
        q0, qd0 = top.state(-delta, rot, jnp.zeros(3), 150.0 * ez)
        out = cx.rigid.simulate_contacts(
            system, [contact], q0, qd0, gamma, modes=["sliding"], t1=0.05,
            max_switches=16, max_steps=20_000, throw=False,
        )  # fmt: skip
        return out.num_switches, out.status

    def draw(B, dtype):
        rng = np.random.default_rng(1)
        return (jnp.asarray(rng.uniform(0.8, 1.2, B), dtype),)

    return run, draw, (1.0,)


CASES = {"bouncing balls": _ball, "tippe tops": _top}


def _best(f, args, repeats):
    import jax

    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t)
    return best


def measure(name: str, B: int, float64: bool) -> dict:
    """One case in one precision: compile and run times of one run and of the batch."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    with jax.enable_x64(float64):
        dtype = jnp.float64 if float64 else jnp.float32
        run, draw, one_args = CASES[name]()
        one_args = tuple(jnp.asarray(a, dtype) for a in one_args)
        one = jax.jit(run)
        t = time.perf_counter()
        jax.block_until_ready(one(*one_args))
        compile_one = time.perf_counter() - t
        t_one = _best(one, one_args, 5)
        varied = draw(B, dtype)
        same = tuple(jnp.full(B, a) for a in one_args)
        many = jax.jit(jax.vmap(run))
        t = time.perf_counter()
        switches, status = jax.block_until_ready(many(*varied))
        compile_batch = time.perf_counter() - t
        t_varied = _best(many, varied, 2)
        t_same = _best(many, same, 2)
        switches, status = np.asarray(switches), np.asarray(status)
    return {
        "case": name,
        "dtype": "float64" if float64 else "float32",
        "B": B,
        "compile_one_s": compile_one,
        "compile_batch_s": compile_batch,
        "one_run_ms": 1e3 * t_one,
        "batch_varied_ms": 1e3 * t_varied,
        "batch_identical_ms": 1e3 * t_same,
        "per_member_varied": t_varied / B / t_one,
        "per_member_identical": t_same / B / t_one,
        "switches": [int(switches.min()), int(switches.max())],
        "statuses": sorted(int(s) for s in np.unique(status)),
    }


def report(result: dict) -> str:
    from benchmarks._report import md_table

    m = result["machine"]
    lines = [
        "# Batches of contact runs: `jax.vmap(simulate_contacts)` against one run",
        "",
        f"- date (UTC): {m['date_utc']}; {m['cpu_model']}, {m['cpu_cores']} cores; load "
        f"average at start {m['loadavg_at_start']}, at end {m['loadavg_at_end']}; jax "
        f"{m['jax']}, constrax {m['constrax']}",
        "- one run: `jax.jit(run)`, the minimum of 5 calls; a batch: `jax.jit(jax.vmap(run))`, "
        "the minimum of 2; compile times: the first call of each, from warm caches of "
        "everything else in the process.",
        "",
    ]
    rows = [
        [
            r["case"], r["dtype"], r["B"], f"{r['compile_one_s']:.1f}",
            f"{r['compile_batch_s']:.1f}", f"{r['one_run_ms']:.2f}",
            f"{r['batch_varied_ms']:.0f}", f"{r['per_member_varied']:.3f}",
            f"{r['batch_identical_ms']:.0f}", f"{r['per_member_identical']:.3f}",
            f"{r['switches'][0]}-{r['switches'][1]}", ",".join(map(str, r["statuses"])),
        ]
        for r in result["cases"]
    ]  # fmt: skip
    header = [
        "case", "dtype", "B", "compile one (s)", "compile batch (s)", "one run (ms)",
        "batch, varied (ms)", "per member / one run", "batch, identical (ms)",
        "per member / one run", "switches", "status",
    ]  # fmt: skip
    lines += md_table(header, rows)
    lines += [
        "",
        "Status 0: reached t1; 2: the switch budget spent (a ball still bouncing at "
        "`max_switches`). Varied members wait for the slowest in every segment; identical "
        "ones do not.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    from benchmarks._report import loadavg, machine_info, write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--balls", type=int, default=1024)
    parser.add_argument("--tops", type=int, default=256)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    machine = machine_info()
    cases = []
    for name, B in (("bouncing balls", args.balls), ("tippe tops", args.tops)):
        for float64 in (True, False):
            cases.append(measure(name, B, float64))
            print(cases[-1], flush=True)
    machine["loadavg_at_end"] = loadavg()
    result = {"machine": machine, "cases": cases}
    text = report(result)
    print(text)
    write_results(args.out, "contacts_batch_cpu", result, text)


if __name__ == "__main__":
    main()
