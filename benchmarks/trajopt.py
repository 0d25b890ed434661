r"""Trajectory optimisation: constrax (`cx.fit.HermiteSimpson` or `cx.fit.Trapezoidal` +
`cx.fit.IPOPT`) against CasADi + IPOPT (`casadi.Opti`, trapezoidal and Hermite–Simpson
collocation, equations typed in by hand). Like for like means the same transcription on
the same grid: constrax's trapezoidal rows against CasADi's trapezoid, its (default)
Hermite–Simpson rows against CasADi's Hermite–Simpson (on the cart-pole, whose coordinates
are the same on both sides, the same discrete problems: the optima agree to the digits
printed).

Usage (from the repository root):

    python benchmarks/trajopt.py                  # -> benchmarks/results/trajopt_cpu.{json,md}
    python benchmarks/trajopt.py --out /tmp/bench --repeats 3 --note "..."
    python benchmarks/trajopt.py --compile-repeats 1    # one cold compile per structure

The run takes about 9 minutes on a loaded 2-core machine (most of it the constrax compiles:
`--repeats` cold compiles of ~10 s per structure, plus the first solve's own).

CasADi is optional (`pip install casadi`); without it its rows are skipped with a note.
constrax's IPOPT comes from `cyipopt` (`pip install 'constrax[trajopt]'`).

Problems (docs page "Trajectory optimisation"):

- **parking** — knife edge (`cx.models.knife_edge()`, $m = 1$, $I = 0.1$) driven by a push
  $u_1$ along the heading and a torque $u_2$: from rest at the origin to rest at
  $(0, 1, 0)$ (a sideways move) in $t_1 = 5$, minimising $\int_0^{t_1}|u|^2dt$. constrax
  solves the constrained system in $(x, y, \theta)$ with the no-side-slip row; CasADi the
  reduced equations with the constraint eliminated by hand ($v$ the forward speed):
  $m\dot v = u_1$, $I\ddot\theta = u_2$, $\dot x = v\cos\theta$, $\dot y = v\sin\theta$.
- **cart-pole swing-up** (Kelly, SIAM Review 2017, §6): $m_1 = 1$, $m_2 = 0.3$, $l = 0.5$,
  $g = 9.81$, from $(0, 0)$ to $(1, \pi)$ at rest in $t_1 = 2$, $|u| \le 20$, $|x| \le 2$,
  minimising $\int u^2dt$. constrax from the Lagrangian; CasADi with Kelly's closed-form
  equations of motion.
- **minimum-time cart-pole** (constrax only): the same boundary conditions, $t_1$ free in
  $[0.1, 10]$, terminal cost $t_1$.
- **parking by direct multiple shooting** (constrax only): 25 segments of 8 Tsit5 steps,
  exact Hessian and L-BFGS, in the default coordinates and on quasi-velocities.

Both sides start from the same linear interpolation of the end states (velocities and
controls zero) and run IPOPT (MUMPS) with the same options (`tol = 1e-9`,
`constr_viol_tol = 1e-10`, `mu_strategy = adaptive`). constrax by default moves that guess
by seeded relative noise of size `jitter = 1e-2` (`solve_optimal_control`); CasADi's
trapezoid is run from the exact guess and from the same kind of perturbation
(`1e-2 * max(1, |z|) * N(0, 1)` on the free node states and the controls, numpy seed 0),
its Hermite–Simpson from the perturbed guess (the midpoint states and controls moved too).
At the end: interleaved pairs of solves (one process, alternating, 15 rounds) and a survey
of 10 seeded starts.

Per row: objective, IPOPT status and iterations, solve wall time (min and median over
`--repeats` solves, after a first one: compile/build excluded), the largest constraint or
bound violation, and the replay error: the controls (constrax: its piecewise-quadratic
control, `sol.replay_error()`; CasADi: its node controls interpolated linearly, or
quadratically through the midpoint control for Hermite–Simpson) applied to
`cx.simulate` of the constrained system (rtol = atol = 1e-12) from the first node, the
largest difference from the node states. For constrax also the compile time of the three
programs behind IPOPT's callbacks (objective and constraints; gradient and Jacobian values;
Hessian values): trace + lower and XLA compile, each from cold caches
(`jax.clear_caches()`), `--repeats` times, plus the first solve minus the median of the later
ones (the same cost seen by a user).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

if __name__ == "__main__":  # the entry point: float64 before constrax makes an array
    jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
from benchmarks._cases import require_x64  # noqa: E402
from benchmarks._report import loadavg, machine_info, write_json  # noqa: E402
from benchmarks._timing import cold_compile_settings  # noqa: E402
from benchmarks._trajopt.casadi_side import HS, casadi_parking_guess, run_casadi  # noqa: E402
from benchmarks._trajopt.comparisons import INTERLEAVED, interleaved, seed_survey  # noqa: E402
from benchmarks._trajopt.harness import (  # noqa: E402
    IPOPT_OPTIONS,
    REPLAY_TOL,
    run_constrax,
    run_constrax_again,
)
from benchmarks._trajopt.problems import (  # noqa: E402
    cartpole_problem,
    knife_basis,
    parking_problem,
)
from benchmarks._trajopt.report import _e, _g, markdown  # noqa: E402

try:
    import casadi as ca
except ImportError:  # optional
    ca = None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--compile-repeats",
        type=int,
        default=None,
        help="cold compiles per structure (default: --repeats; 1 for a quicker run)",
    )
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    require_x64()
    cold_compile_settings()
    import cyipopt

    start = time.perf_counter()
    machine = machine_info()
    machine["cyipopt"] = cyipopt.__version__
    machine["casadi"] = ca.__version__ if ca is not None else None
    R = args.repeats
    RC = R if args.compile_repeats is None else args.compile_repeats
    rows = []

    def log(r):
        print(
            f"{r['problem']:>9} N={r['N']:<4} {r['contender']:<8} {r.get('guess', ''):<26} "
            f"obj={_g(r.get('objective'))} {r.get('status', r.get('skipped'))} "
            f"it={r.get('iterations')} viol={_e(r.get('max_violation'))} "
            f"replay={_e(r.get('replay_error'))}",
            flush=True,
        )
        rows.append(r)

    problems = {"parking": parking_problem(), "cart-pole": cartpole_problem()}
    for name, problem in problems.items():
        for N in (50, 100):
            row, _ = run_constrax(name, problem, N, R, compile_repeats=RC)
            log(row)
            if name == "parking":  # the exact straight-line guess
                log(run_constrax_again(name, problem, N, R, jitter=0.0))
            # The transcription CasADi's rows use (like for like on the same grid).
            row, _ = run_constrax(
                name, problem, N, R, compile_repeats=RC, transcription=cx.fit.Trapezoidal(N)
            )
            log(row)
            if name == "parking":  # the node states of CasADi's model: (q, v)
                for scheme in (cx.fit.HermiteSimpson, cx.fit.Trapezoidal):
                    quasi = scheme(N, velocity_basis=knife_basis)
                    row, _ = run_constrax(
                        name, problem, N, R, compile_repeats=RC, transcription=quasi
                    )
                    log(row)
                # CasADi's program, from CasADi's starting point: the same iterates.
                log(
                    run_constrax_again(
                        name, problem, N, R, 0.0, transcription=quasi,
                        guess=casadi_parking_guess(N), guess_name="casadi's perturbed guess",
                    )
                )  # fmt: skip
            for perturb in (None, 1e-2):
                if ca is None:
                    log(
                        {
                            "problem": name,
                            "N": N,
                            "contender": "casadi",
                            "skipped": "casadi not importable (pip install casadi)",
                        }
                    )
                    break
                log(run_casadi(name, N, R, perturb))
            if ca is not None:  # like for like with constrax's default transcription
                log(run_casadi(name, N, R, 1e-2, scheme=HS))
    row, _ = run_constrax(
        "cart-pole min-time", cartpole_problem(min_time=True), 50, R, compile_repeats=RC
    )
    log(row)
    for basis in (None, knife_basis):
        for hessian in ("exact", "limited-memory"):
            shooting = cx.fit.DirectMultipleShooting(25, 8, velocity_basis=basis)
            row, _ = run_constrax(
                "parking", problems["parking"], 25, R, compile_repeats=RC,
                transcription=shooting, hessian=hessian,
            )  # fmt: skip
            log(row)
    pairs = [interleaved(problems["parking"], N, *pair) for N in (50, 100) for pair in INTERLEAVED]
    for r in pairs:
        if r is not None:
            print(f"  interleaved N={r['N']} {r['pair']}: ratio {r['ratio_min']:.2f}", flush=True)
    survey = seed_survey(problems["parking"], range(10))
    for r in survey["rows"]:
        print(f"  survey N={r['N']} {r['contender']}: {r['reached']} / {len(r['ok'])}", flush=True)
    machine["loadavg_at_end"] = loadavg()
    result = {
        "config": {
            "repeats": R,
            "compile_repeats": RC,
            "ipopt_options": IPOPT_OPTIONS,
            "replay_tol": REPLAY_TOL,
            "jitter": 1e-2,
            "perturbation_seed": 0,
        },
        "note": args.note,
        "machine": machine,
        "rows": rows,
        "survey": survey,
        "interleaved": [r for r in pairs if r is not None],
        "wall_s": time.perf_counter() - start,
    }
    write_json(os.path.join(args.out, "trajopt_cpu.json"), result)
    with open(os.path.join(args.out, "trajopt_cpu.md"), "w") as fh:
        fh.write(markdown(result))
    print(f"wrote {args.out}/trajopt_cpu.{{json,md}} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
