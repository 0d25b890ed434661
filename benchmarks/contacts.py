r"""Contact runs (`cx.rigid.simulate_contacts`): compile time and run time.

What a user of frictional contacts waits for: one-contact runs of a ball, compiled from cold
caches (trace, lower, XLA compile, each timed) and run (steady state), with the size of the
traced program (jaxpr equations, sub-jaxprs included):

- `skid`: a ball launched without spin skids, then rolls (one switch; Coriolis' closed form);
- `bounce`: a ball dropped from 1 m with restitution 0.5 bounces nine times and comes to
  rest (ten impacts, `max_switches=12`);
- `skid, grad`: `jax.grad` of the skid's switching time in $\mu_k$;

in float64, with `simulate_contacts`' defaults (Tsit5, PID tolerances $10^{-8}$, projection
stabilisation). Then what a user of the eager call waits for (the bouncing ball, wall
time of each `simulate_contacts` call, from cold caches): the first call, the same call
again, a call with 9 save times after one with 5, and one with `max_switches=10` after 12
(save times and the switch budget within their capacities run the compiled program).
Last, the program's growth with the number of contacts: N = 1, 2, 4, 8 balls dropped side
by side from different heights, one contact each, compiled from cold caches (`--contacts`
sets the counts).
The aims: a one-contact run compiles in at most 20 s on the 2-core CPU (met); its first
eager call takes at most 6 s (issue 56; not met). The run time per switch is the run time
over the number of segments.

Usage: `python benchmarks/contacts.py [--repeats 3] [--out benchmarks/results]`; writes
`contacts_cpu.{json,md}`.
"""

from __future__ import annotations

import argparse
import os
import sys

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

G = 9.81
CASES = ("skid", "bounce", "skid, grad")


def _problem():
    """The ball, its system and contact, and the two runs as functions of `mu_k`."""
    import jax.numpy as jnp

    import constrax as cx

    ball = cx.rigid.RigidBody(1.0, jnp.full(3, 0.004), name="ball")
    system = cx.System(
        lambda t, q, qd, p: ball.kinetic_energy(q, qd) - G * q[2], [ball.orientation_constraint()]
    )
    contact = cx.rigid.FrictionalContact(
        ball,
        cx.rigid.Sphere(0.1),
        static_friction=0.4,
        kinetic_friction=lambda p: p,
        restitution=0.5,
    )

    def skid(mu_k):
        q0, qd0 = ball.state(
            jnp.array([0, 0, 0.1]), jnp.eye(3), jnp.array([3.0, 0, 0]), jnp.zeros(3)
        )
        out = cx.rigid.simulate_contacts(
            system, [contact], q0, qd0, mu_k, modes=["sliding"], t1=1.0, max_switches=4
        )
        return out.switch_times[0], out.num_switches

    def bounce(mu_k):
        q0, qd0 = ball.state(jnp.array([0, 0, 1.1]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
        out = cx.rigid.simulate_contacts(
            system, [contact], q0, qd0, mu_k, modes=["separated"], t1=2.0, max_switches=12
        )
        return out.switch_times[9], out.num_switches

    return skid, bounce


def _functions():
    import jax

    skid, bounce = _problem()
    return {
        "skid": skid,
        "bounce": bounce,
        "skid, grad": lambda mu: (jax.grad(lambda m: skid(m)[0])(mu), skid(mu)[1]),
    }


def measure(repeats: int) -> dict:
    import jax
    import jax.numpy as jnp

    from benchmarks._jaxpr import count_equations
    from benchmarks._timing import cold_compile_settings, compile_once, time_calls, with_sums

    jax.config.update("jax_enable_x64", True)
    cold_compile_settings()
    mu = jnp.asarray(0.2)
    rows = {}
    for name, fn in _functions().items():
        compiled, t = compile_once(fn, (mu,))
        t = with_sums(t)
        equations = count_equations(jax.make_jaxpr(fn)(mu))
        stats, outputs = time_calls({name: compiled}, (mu,), repeats)
        value, switches = outputs[name]
        rows[name] = {
            "trace_s": t["trace"][0],
            "lower_s": t["lower"][0],
            "xla_s": t["xla"][0],
            "compile_total_s": t["total"][0],
            "jaxpr_equations": equations,
            "run_min_s": stats[name]["min_s"],
            "run_median_s": stats[name]["median_s"],
            "segments": int(switches) + 1,
            "output": float(value),
        }
    return rows


def measure_eager() -> dict:
    """Wall seconds of eager `simulate_contacts` calls of the bouncing ball (docstring)."""
    import time

    import jax
    import jax.numpy as jnp

    import constrax as cx

    ball = cx.rigid.RigidBody(1.0, jnp.full(3, 0.004), name="ball")
    system = cx.System(
        lambda t, q, qd, p: ball.kinetic_energy(q, qd) - G * q[2], [ball.orientation_constraint()]
    )
    contact = cx.rigid.FrictionalContact(
        ball, cx.rigid.Sphere(0.1), static_friction=0.4, kinetic_friction=0.2, restitution=0.5
    )
    q0, qd0 = ball.state(jnp.array([0, 0, 1.1]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))

    def call(k, budget):
        t = time.perf_counter()
        ts = jnp.linspace(0.0, 2.0, k)
        out = cx.rigid.simulate_contacts(
            system, [contact], q0, qd0, modes=["separated"], t1=2.0, ts=ts, max_switches=budget
        )
        jax.block_until_ready(out.q_final)
        return time.perf_counter() - t, float(out.switch_times[9])

    jax.clear_caches()
    rows = {}
    for name, k, budget in (
        ("first call (5 save times, max_switches=12)", 5, 12),
        ("the same call again", 5, 12),
        ("9 save times", 9, 12),
        ("max_switches=10", 9, 10),
    ):
        seconds, t10 = call(k, budget)
        rows[name] = {"wall_s": seconds, "tenth_impact": t10}
    return rows


def _balls(N: int):
    """`N` balls (radius 0.1 m, 1 kg) side by side over the floor, ball i dropped from
    1 + 0.1 i m, one `FrictionalContact` each: `(run, q0, qd0)`."""
    import jax.numpy as jnp

    import constrax as cx

    bodies = [
        cx.rigid.RigidBody(1.0, jnp.full(3, 0.004), offset=7 * i, name=f"ball{i}") for i in range(N)
    ]

    def lagrangian(t, q, qd, p):
        return sum(b.kinetic_energy(q, qd) - G * q[b.offset + 2] for b in bodies)

    system = cx.System(lagrangian, [b.orientation_constraint() for b in bodies])
    contacts = [
        cx.rigid.FrictionalContact(
            b, cx.rigid.Sphere(0.1), static_friction=0.4, kinetic_friction=0.2, restitution=0.5
        )
        for b in bodies
    ]
    states = [
        b.state(jnp.array([0.5 * i, 0.0, 1.1 + 0.1 * i]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
        for i, b in enumerate(bodies)
    ]
    q0 = jnp.concatenate([s[0] for s in states])
    qd0 = jnp.concatenate([s[1] for s in states])

    def run(q0, qd0):
        out = cx.rigid.simulate_contacts(
            system, contacts, q0, qd0, modes=["separated"] * N, t1=1.0, max_switches=16
        )
        return out.q_final, out.num_switches

    return run, q0, qd0


def measure_contacts(counts) -> dict:
    """Compile (trace, lower, XLA) and jaxpr size of the dropped balls for each count."""
    import jax

    from benchmarks._jaxpr import count_equations
    from benchmarks._timing import compile_once, with_sums

    rows = {}
    for N in counts:
        run, q0, qd0 = _balls(N)
        compiled, t = compile_once(run, (q0, qd0))
        t = with_sums(t)
        _, switches = compiled(q0, qd0)
        rows[str(N)] = {
            "trace_s": t["trace"][0],
            "lower_s": t["lower"][0],
            "xla_s": t["xla"][0],
            "compile_total_s": t["total"][0],
            "jaxpr_equations": count_equations(jax.make_jaxpr(run)(q0, qd0)),
            "switches": int(switches),
        }
    return rows


def report(result: dict) -> str:
    from benchmarks._report import machine_line, md_table

    lines = [
        "# Contact runs: compile and run time",
        "",
        machine_line(result["machine"]),
        f"- float64; compiles from cold caches, one each; run times the minimum of "
        f"{result['repeats']} calls.",
        "",
    ]
    header = [
        "case",
        "trace (s)",
        "lower (s)",
        "XLA (s)",
        "compile total (s)",
        "jaxpr equations",
        "run (ms)",
        "segments",
        "run per segment (ms)",
        "output",
    ]
    body = []
    for name, r in result["cases"].items():
        body.append(
            [
                name,
                f"{r['trace_s']:.2f}",
                f"{r['lower_s']:.2f}",
                f"{r['xla_s']:.2f}",
                f"{r['compile_total_s']:.2f}",
                r["jaxpr_equations"],
                f"{1e3 * r['run_min_s']:.1f}",
                r["segments"],
                f"{1e3 * r['run_min_s'] / r['segments']:.1f}",
                f"{r['output']:.10g}",
            ]
        )
    lines += md_table(header, body)
    lines += [
        "",
        "Outputs: the skid's switching time $2v_0/(7\\mu_k g)$ = 0.4369 s for $v_0$ = 3 m/s, "
        "$\\mu_k$ = 0.2; the tenth impact of the bouncing ball (it comes to rest); the "
        "derivative of the skid's switching time, $-2v_0/(7\\mu_k^2 g)$ = -2.184.",
    ]
    if "eager" in result:
        lines += ["", "Eager calls of the bouncing ball, one after the other (wall time):", ""]
        body = [
            [name, f"{r['wall_s']:.3f}", f"{r['tenth_impact']:.10g}"]
            for name, r in result["eager"].items()
        ]
        lines += md_table(["call", "wall (s)", "tenth impact (s)"], body)
    if "contacts" in result:
        lines += ["", "Balls dropped side by side, one contact each, to t = 1 s:", ""]
        body = [
            [N, f"{r['trace_s']:.2f}", f"{r['lower_s']:.2f}", f"{r['xla_s']:.2f}",
             f"{r['compile_total_s']:.2f}", r["jaxpr_equations"], r["switches"]]
            for N, r in result["contacts"].items()
        ]  # fmt: skip
        header = ["contacts", "trace (s)", "lower (s)", "XLA (s)", "compile total (s)",
                  "jaxpr equations", "switches"]  # fmt: skip
        lines += md_table(header, body)
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    from benchmarks._report import loadavg, machine_info, write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    parser.add_argument("--contacts", default="1,2,4,8", help="contact counts, e.g. 1,2")
    args = parser.parse_args(argv)
    machine = machine_info()
    cases = measure(args.repeats)
    eager = measure_eager()
    counts = [int(c) for c in args.contacts.split(",") if c]
    scaling = measure_contacts(counts)
    machine["loadavg_at_end"] = loadavg()
    result = {"machine": machine, "repeats": args.repeats, "cases": cases, "eager": eager,
              "contacts": scaling}  # fmt: skip
    write_results(args.out, "contacts_cpu", result, report(result))


if __name__ == "__main__":
    main()
