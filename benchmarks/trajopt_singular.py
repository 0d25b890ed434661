"""The snake cart steered through seven singular crossings: where collocation in the default
coordinates stops, and collocation on quasi-velocities goes through.

    python -m benchmarks.trajopt_singular [--out benchmarks/results]

The problem of `tests/fit/test_optimal_control.py::
test_snake_cart_steered_through_two_singular_crossings_with_less_effort` over 10 s instead of
3 s: the snake cart (`cx.models.snake_cart`, Briggs 2016, §1.2) steered by its torque, least
∫τ² dt, to the pose its default torque τ = 0.3 sin t reaches at t = 10 s through seven
crossings of φ = ±π/2, where its two wheel rows coincide. `cx.fit.HermiteSimpson(100)`,
IPOPT with its defaults, the guess the default torque's own trajectory (states and control:
feasible up to the collocation error). For `HermiteSimpson(N)`, N = 80, 100, 120, and each
`constraint_solver` (`cx.KKT()`, the default of `cx.fit.OptimalControlProblem`, and the
rank-robust `cx.AutoSolver()`), `max_iter` 400: status (or the error raised), objective,
crossings of the solution, the largest manifold and terminal violations, the smallest
|cos φ| over the nodes (0 at a singular configuration), the replay error where the replay
integrates, wall time (compile included). Then `HermiteSimpson(N, velocity_basis=snake_basis)`:
node states (q, v) on a smooth basis of the closure of the distribution, whose Maggi
equations are regular at φ = ±π/2 (docs page "Trajectory optimisation", section
"Quasi-velocities").
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

if __name__ == "__main__":  # the entry point: float64 before constrax makes an array
    jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
from benchmarks._cases import require_x64  # noqa: E402
from benchmarks._report import loadavg, machine_info, machine_line, write_results  # noqa: E402

T = 10.0


def snake_basis(t, q, p):
    """(cos φ cos θ, cos φ sin θ, (2/l) sin φ, 0) and (0, 0, 0, 1): full column rank for every
    φ (at φ = ±π/2 the first column is the turn on the spot)."""
    th, ph = q[2], q[3]
    c, z = jnp.cos(ph), jnp.zeros_like(ph)
    return jnp.array(
        [[c * jnp.cos(th), z], [c * jnp.sin(th), z], [2.0 / p["l"] * jnp.sin(ph), z], [z, z + 1.0]]
    )


def crossings(phi) -> int:
    """The number of crossings of φ = π/2 + kπ."""
    return int(np.abs(np.diff(np.round((np.asarray(phi) - np.pi / 2) / np.pi))).sum())


def problem_and_guess(constraint_solver):
    model = cx.models.snake_cart()
    ts = jnp.linspace(0.0, T, 1001)
    ref = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=T,
                      saveat=diffrax.SaveAt(ts=ts))  # fmt: skip
    amp, w = model.params["tau_amp"], model.params["tau_freq"]
    effort = float(jnp.trapezoid((amp * jnp.sin(w * ts)) ** 2, ts))
    force = lambda t, q, qd, p: jnp.stack([0 * t, 0 * t, 0 * t, p["u"][0]])  # noqa: E731
    system = cx.System(model.system.lagrangian, model.system.constraints, force=force)
    problem = cx.fit.OptimalControlProblem(
        system,
        {**model.params, "u": jnp.zeros(1)},
        control=lambda p: p["u"],
        t1=T,
        q0=model.q0,
        qd0=model.qd0,
        terminal_constraint=lambda t, q, qd, p: q - ref.q[-1],
        running_cost=lambda t, q, qd, u, p: u @ u,
        constraint_solver=constraint_solver,
    )

    def guess(t):
        q = jnp.stack([jnp.interp(t, ts, ref.q[:, i]) for i in range(4)])
        qd = jnp.stack([jnp.interp(t, ts, ref.qd[:, i]) for i in range(4)])
        return q, qd, jnp.atleast_1d(amp * jnp.sin(w * t))

    return problem, guess, dict(crossings=crossings(ref.q[:, 3]), effort=effort)


def solve(problem, guess, N, velocity_basis=None) -> dict:
    t0 = time.perf_counter()
    try:
        sol = cx.fit.solve_optimal_control(
            problem, guess, transcription=cx.fit.HermiteSimpson(N, velocity_basis=velocity_basis),
            solver=cx.fit.IPOPT(max_iter=400), coarse=None, progress=False,
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - a node on the singular configuration under KKT
        message = str(e)
        first = message[message.find("constrax:") :].split(".")[0] if "constrax:" in message else ""
        return dict(status=f"raised {type(e).__name__}: {first}", wall_s=time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    try:
        replay = float(sol.replay_error())
    except Exception as e:  # noqa: BLE001 - the replay of a wandering iterate may fail
        replay = f"fails: {type(e).__name__}"
    phi = np.asarray(sol.q[:, 3])
    return dict(
        status=sol.status,
        success=bool(sol.success),
        message=sol.message,
        iterations=int(sol.iterations),
        objective=float(sol.objective),
        crossings=crossings(phi),
        manifold_violation=float(sol.manifold_violation),
        terminal_error=float(sol.terminal_error),
        min_abs_cos_phi=float(np.min(np.abs(np.cos(phi)))),
        replay_error=replay,
        wall_s=wall,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for trajopt_singular_cpu.{json,md}")
    args = parser.parse_args()
    require_x64()
    machine = machine_info()
    rows = []
    for N in (80, 100, 120):
        for name, solver in (("KKT()", cx.KKT()), ("AutoSolver()", cx.AutoSolver())):
            problem, guess, reference = problem_and_guess(solver)
            rows.append(dict(N=N, constraint_solver=name, **solve(problem, guess, N)))
            print(rows[-1], flush=True)
        problem, guess, reference = problem_and_guess(cx.AutoSolver())
        rows.append(
            dict(
                N=N,
                constraint_solver="quasi-velocities (snake_basis)",
                **solve(problem, guess, N, velocity_basis=snake_basis),
            )
        )
        print(rows[-1], flush=True)
    machine["loadavg_at_end"] = loadavg()
    lines = [
        "# Snake cart through seven singular crossings (CPU)",
        "",
        machine_line(machine),
        f"- T = {T} s; the default torque's trajectory: "
        f"{reference['crossings']} crossings, effort {reference['effort']:.6g}",
        "",
        "| N | constraint_solver | status | iterations | objective | crossings | manifold "
        "violation | terminal error | min \\|cos φ\\| at the nodes | replay error | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "objective" not in r:
            lines.append(
                f"| {r['N']} | {r['constraint_solver']} | {r['status']} | | | | | | | "
                f"| {r['wall_s']:.1f} |"
            )
            continue
        replay = r["replay_error"]
        replay = f"{replay:.1e}" if isinstance(replay, float) else replay
        lines.append(
            f"| {r['N']} | {r['constraint_solver']} | {r['status']} | {r['iterations']} "
            f"| {r['objective']:.6g} | {r['crossings']} | {r['manifold_violation']:.1e} "
            f"| {r['terminal_error']:.1e} | {r['min_abs_cos_phi']:.1e} | {replay} "
            f"| {r['wall_s']:.1f} |"
        )
    lines += ["", "IPOPT's messages of the unsuccessful solves:", ""]
    lines += [
        f"- N = {r['N']}, {r['constraint_solver']}: {r['message']}"
        for r in rows
        if "message" in r and not r["success"]
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    result = dict(machine=machine, reference=reference, rows=rows)
    write_results(args.out, "trajopt_singular_cpu", result, report)


if __name__ == "__main__":
    main()
