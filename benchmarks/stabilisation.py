"""What each stabilisation costs, against the same equations written by hand, in one run.

    python -m benchmarks.stabilisation [--quick] [--out benchmarks/results]

Three measurements, each option of `stabilisation=` beside the hand-written vector field:

1. **Adaptive** (the snake cart without singular crossing, damped and driven; Tsit5,
   PIDController rtol = atol = 1e-9, t in [0, 10]): accepted and rejected steps, rollout
   and gradient time (gradient of the squared final state with respect to the five
   parameters), compile (trace + lower, XLA) and jaxpr size of the rollout, the largest
   velocity residual at t1. `cx.simulate`'s other defaults (AutoSolver, its step cap).
   Beside them the defaults traced with LAPACK's triangular solves for the 6 x 6 saddle
   matrix, as the engine solved before it wrote small substitutions out
   (`benchmarks._cases.lapack_solves`).
2. **Fixed step** (5-link pendulum chain in maximal coordinates, `cx.models.pendulum_chain`;
   Tsit5 at dt = 1e-3 to t = 1, one state and a batch of 256): time per step. Then the
   classical fourth-order Runge–Kutta method (`benchmarks._cases.RK4`: diffrax has none), the
   hand-written field beside the default and `None` only, and the hand-written field again
   in the first-same-as-last form `StepProjection` runs RK4 in (what that form of the
   tableau costs diffrax's stage loop, with no projection).
3. **Protection** (1e5 steps of dt = 1e-3, Tsit5): the largest position and velocity
   residual at the end, on the snake cart, the tilted rolling disk and a 3-link chain in
   maximal coordinates, for the default and for `None` (skipped with --quick).

The contenders of a table are compiled ahead of time and timed in turn, round after round,
each keeping its fastest round (a burst of load on the shared machine then slows one round
of all of them, not every repeat of one); the one-state fixed-step rows take five times the
rounds (`SINGLE_STATE_ROUNDS`). Compile times from cold caches. float64, CPU.
"""

import argparse
import json
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
from benchmarks._cases import LAPACK_DEFAULTS, RK4, lapack_solves, require_x64  # noqa: E402
from benchmarks._report import loadavg, machine_info  # noqa: E402
from benchmarks.cases.chain import maximal_hand_vf  # noqa: E402
from constrax._step_projection import first_same_as_last  # noqa: E402

# ---- the adaptive case: the snake cart without singular crossing -----------------------

SNAKE = dict(l=1.0, m_b=2.0, m_w=0.5, J_b=0.3, J_w=0.05, U0=0.05, c=0.01)


def _snake_masses(p):
    M = p["m_b"] + 2 * p["m_w"]
    J = p["J_b"] + 2 * p["J_w"] + 0.5 * p["l"] ** 2 * p["m_w"]
    return M, J


def _snake_lagrangian(t, q, qd, p):
    M, J = _snake_masses(p)
    return 0.5 * M * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * J * qd[2] ** 2 + p["J_w"] * qd[3] ** 2


def _snake_rows(q, p):
    _, _, th, ph = q
    h = 0.5 * p["l"] * jnp.cos(ph)
    z = jnp.zeros_like(h)
    return jnp.stack(
        [
            jnp.stack([-jnp.sin(th + ph), jnp.cos(th + ph), h, z]),
            jnp.stack([jnp.sin(th - ph), -jnp.cos(th - ph), h, z]),
        ]
    )


def _snake_force(t, q, qd, p):
    return -p["c"] * qd + jnp.zeros_like(q).at[3].set(p["U0"] * jnp.sin(t))


SNAKE_SYSTEM = cx.System(
    _snake_lagrangian,
    [cx.Pfaffian(lambda t, q, p: _snake_rows(q, p), name="wheels")],
    force=_snake_force,
)


def snake_hand_vf(t, y, p):
    r"""Diagonal $W$, $A(q)$, $\dot A\dot q$ written out, `jnp.linalg.solve` of the
    $6\times6$ saddle matrix."""
    q, qd = y
    _, _, th, ph = q
    xd, yd, thd, phd = qd
    M, J = _snake_masses(p)
    W = jnp.diag(jnp.stack([M, M, J, 2 * p["J_w"]]))
    A = _snake_rows(q, p)
    sp, cp, sm, cm = jnp.sin(th + ph), jnp.cos(th + ph), jnp.sin(th - ph), jnp.cos(th - ph)
    hd = -0.5 * p["l"] * jnp.sin(ph) * phd
    Adot_qd = jnp.stack(
        [
            -cp * (thd + phd) * xd - sp * (thd + phd) * yd + hd * thd,
            cm * (thd - phd) * xd + sm * (thd - phd) * yd + hd * thd,
        ]
    )
    K = jnp.block([[W, A.T], [A, jnp.zeros((2, 2), W.dtype)]])
    sol = jnp.linalg.solve(K, jnp.concatenate([_snake_force(t, q, qd, p), -Adot_qd]))
    return qd, sol[:4]


def snake_state():
    r"""$\theta = 0$, $\phi = 0.3$, $\dot x = 1$, $\dot\theta = 2\tan\phi\,\dot x/\ell$,
    $\dot\phi = -U_0/(2J_w)$: $\phi$ stays near 0.3, far from $\pm\pi/2$."""
    phi = 0.3
    q0 = jnp.array([0.0, 0.0, 0.0, phi])
    qd0 = jnp.array([1.0, 0.0, 2 * np.tan(phi) / SNAKE["l"], -SNAKE["U0"] / (2 * SNAKE["J_w"])])
    return q0, qd0


OPTIONS = {
    "StepProjection() (default)": cx.StepProjection(),
    "StepProjection(positions=True)": cx.StepProjection(positions=True),
    "Projection(10, 0) (default before 2026-11-25)": cx.Projection(10.0, 0.0),
    "Projection(10, 10)": cx.Projection(10.0, 10.0),
    "Baumgarte(10, 10)": cx.Baumgarte(10.0, 10.0),
    "None": None,
}
RK4_OPTIONS = ("StepProjection() (default)", "None")
HAND_FSAL = "hand-written field, first-same-as-last form"
SINGLE_STATE_ROUNDS = 5  # times the rounds of a batch, for the one-state fixed-step rows


def _min_time(f, *args, repeats):
    jax.block_until_ready(f(*args))
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t)
    return best


def _compile(f, *args):
    t = time.perf_counter()
    lowered = jax.jit(f).lower(*args)
    t_lower = time.perf_counter() - t
    t = time.perf_counter()
    lowered.compile()
    return t_lower, time.perf_counter() - t


def _eqns(f, *args) -> int:
    def count(jaxpr):
        n = 0
        for eqn in jaxpr.eqns:
            n += 1
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                n += count(sub)
        return n

    return count(jax.make_jaxpr(f)(*args).jaxpr)


def _loss(state):
    return sum(jnp.sum(x**2) for x in jax.tree.leaves(state))


def adaptive(repeats: int) -> list[dict]:
    q0, qd0 = snake_state()
    p = {k: jnp.asarray(v) for k, v in SNAKE.items()}
    controller = diffrax.PIDController(rtol=1e-9, atol=1e-9)
    rows = []

    def hand(q0, qd0, p):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(snake_hand_vf), diffrax.Tsit5(), 0.0, 10.0, None, (q0, qd0),
            args=p, stepsize_controller=controller, max_steps=16384,
        )  # fmt: skip
        return (sol.ys[0][-1], sol.ys[1][-1]), sol.stats

    contenders = {"hand-written field": hand}
    for name, stab in OPTIONS.items():
        kw = {} if name.endswith("(default)") else {"stabilisation": stab}

        def run(q0, qd0, p, stab=stab, kw=kw):
            tr = cx.simulate(
                SNAKE_SYSTEM, q0, qd0, p, t1=10.0, stepsize_controller=_controller(stab), **kw
            )
            return (tr.q[-1], tr.qd[-1]), tr.stats

        contenders[name] = run
    contenders[LAPACK_DEFAULTS] = lapack_solves(contenders["StepProjection() (default)"])
    compiled = {}
    for name, fn in contenders.items():
        rollout = lambda q0, qd0, p, fn=fn: fn(q0, qd0, p)[0]  # noqa: E731
        grad = jax.grad(lambda p, fn=fn: _loss(fn(q0, qd0, p)[0]))
        (y1, stats) = jax.jit(fn)(q0, qd0, p)
        residual = float(jnp.max(jnp.abs(_snake_rows(y1[0], p) @ y1[1])))
        jax.clear_caches()  # every contender's compile from cold caches (`lapack_solves`)
        t_lower, t_xla = _compile(rollout, q0, qd0, p)
        compiled[name] = (
            jax.jit(rollout).lower(q0, qd0, p).compile(),
            jax.jit(grad).lower(p).compile(),
        )
        rows.append(
            dict(
                option=name,
                accepted=int(stats["num_accepted_steps"]),
                rejected=int(stats["num_rejected_steps"]),
                trace_lower_s=t_lower,
                xla_s=t_xla,
                jaxpr_eqns=_eqns(rollout, q0, qd0, p),
                velocity_residual=residual,
            )
        )
    # Timed round after round, every contender once per round (compiled ahead of time: the
    # cache clearing of `lapack_solves` does not touch them).
    rollouts = _interleaved([r for r, _ in compiled.values()], (q0, qd0, p), repeats)
    grads = _interleaved([g for _, g in compiled.values()], (p,), max(1, repeats // 2))
    for row, rollout_s, gradient_s in zip(rows, rollouts, grads, strict=True):
        row["rollout_s"], row["gradient_s"] = rollout_s, gradient_s
        print(row, flush=True)
    return rows


def _controller(stab):
    """simulate's default controller for the snake's tolerance: rtol = atol = 1e-9 and the
    step cap of the stabilisation (as `cx.simulate` sets it by default)."""
    dtmax = cx._stabilisation.stabilisation_dtmax(stab)  # noqa: SLF001
    return diffrax.PIDController(rtol=1e-9, atol=1e-9, dtmax=dtmax)


def fixed_step(repeats: int, batch: int) -> list[dict]:
    model = cx.models.pendulum_chain(5, "maximal")
    p, q0, qd0 = model.params, model.q0, model.qd0
    steps, dt = 1000, 1e-3
    rows = []
    for solver, options in ((diffrax.Tsit5(), OPTIONS), (RK4(), RK4_OPTIONS)):
        kw = dict(
            solver=solver, dt0=dt, stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=steps + 1,
        )  # fmt: skip

        def hand(q0, qd0, p, solver=solver):
            sol = diffrax.diffeqsolve(
                diffrax.ODETerm(maximal_hand_vf), solver, 0.0, steps * dt, dt, (q0, qd0),
                args=p, stepsize_controller=diffrax.ConstantStepSize(), max_steps=steps + 1,
            )  # fmt: skip
            return sol.ys[0][-1]

        contenders = {"hand-written field": hand}
        if isinstance(solver, RK4):
            # The same field in the first-same-as-last form `StepProjection` runs RK4 in
            # (the field at the step's end appended as a stage of weight zero): what that
            # form costs diffrax's stage loop, apart from any projection.
            fsal = first_same_as_last(solver)
            contenders[HAND_FSAL] = lambda q0, qd0, p, fsal=fsal: hand(q0, qd0, p, solver=fsal)
        for name in options:
            extra = {} if name.endswith("(default)") else {"stabilisation": OPTIONS[name]}
            contenders[name] = lambda q0, qd0, p, extra=extra, kw=kw: cx.simulate(
                model.system, q0, qd0, p, t1=steps * dt, **kw, **extra
            ).q[-1]
        for b in (1, batch):
            qb, qdb = jnp.tile(q0, (b, 1)), jnp.tile(qd0, (b, 1))
            fs = {
                name: jax.jit(jax.vmap(fn, in_axes=(0, 0, None))).lower(qb, qdb, p).compile()
                for name, fn in contenders.items()
            }
            # One state's rollout takes 20-50 ms, and on a shared machine its fastest of 10
            # rounds scattered by a quarter between two passes in one process: 5x the rounds.
            rounds = SINGLE_STATE_ROUNDS * repeats if b == 1 else repeats
            times = _interleaved(list(fs.values()), (qb, qdb, p), rounds)
            for t, name in zip(times, fs, strict=True):
                solver_name = type(solver).__name__
                us = t / (b * steps) * 1e6
                rows.append(dict(solver=solver_name, option=name, batch=b, us_per_state_step=us))
                print(rows[-1], flush=True)
    return rows


def _interleaved(fs: list, args: tuple, repeats: int) -> list[float]:
    """The fastest of `repeats` rounds of each compiled `f(*args)`, every round running each
    `f` once in turn (after one untimed call of each)."""
    for f in fs:
        jax.block_until_ready(f(*args))
    best = [np.inf] * len(fs)
    for _ in range(repeats):
        for k, f in enumerate(fs):
            t = time.perf_counter()
            jax.block_until_ready(f(*args))
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def protection() -> list[dict]:
    models = {
        "snake cart": cx.models.snake_cart(),
        "tilted rolling disk": cx.models.tilted_rolling_disk(),
        "3-link chain, maximal": cx.models.pendulum_chain(3, "maximal"),
    }
    n = 100_000
    rows = []
    for name, m in models.items():
        for option in ("StepProjection() (default)", "None"):
            extra = {} if option.endswith("(default)") else {"stabilisation": None}
            tr = cx.simulate(
                m.system, m.q0, m.qd0, m.params, t1=n * 1e-3, dt0=1e-3,
                stepsize_controller=diffrax.ConstantStepSize(), max_steps=n + 1, **extra,
            )  # fmt: skip
            r = tr.constraint_residual()
            g = float(jnp.max(jnp.abs(r.position))) if r.position.size else 0.0
            c = float(jnp.max(jnp.abs(r.velocity)))
            rows.append(dict(model=name, option=option, position=g, velocity=c))
            print(rows[-1], flush=True)
    return rows


def _report(result: dict) -> str:
    base = {r["option"]: r for r in result["adaptive"]}["hand-written field"]
    m = result["machine"]
    lines = [
        "# Stabilisation: what each option costs (CPU)",
        "",
        f"- date (UTC): {m['date_utc']}; machine: {m['cpu_model']}, {m['cpu_cores']} cores "
        f"({m['platform']}); load average (1, 5, 15 min) at start {m['loadavg_at_start']}, "
        f"at end {m['loadavg_at_end']}",
        f"- versions: python {m['python']}, jax {m['jax']}, diffrax {m['diffrax']}, "
        f"equinox {m['equinox']}, constrax {m['constrax']}",
        "- one run; the contenders (compiled ahead, one untimed call each) run in turn, "
        "round after round, each keeping its fastest round (the one-state fixed-step rows "
        f"{SINGLE_STATE_ROUNDS}x the rounds); compile columns from cold caches; compare "
        "ratios within this run",
        f"- `{LAPACK_DEFAULTS}`: the defaults traced with LAPACK's triangular solves for the "
        "saddle matrix (the engine before 2026-11-27; the snake cart's is 6 x 6, solved "
        "with written-out substitutions since)",
        "",
        "## Adaptive: snake cart without singular crossing (Tsit5, rtol = atol = 1e-9, "
        "t in [0, 10])",
        "",
        "| option | accepted (rejected) steps | rollout [ms] | / hand | gradient [ms] | / hand "
        "| compile [s] (trace+lower / XLA) | jaxpr eqns | velocity residual at t1 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["adaptive"]:
        lines.append(
            f"| {r['option']} | {r['accepted']} ({r['rejected']}) | {r['rollout_s'] * 1e3:.2f} "
            f"| {r['rollout_s'] / base['rollout_s']:.2f} | {r['gradient_s'] * 1e3:.1f} "
            f"| {r['gradient_s'] / base['gradient_s']:.2f} "
            f"| {r['trace_lower_s'] + r['xla_s']:.2f} ({r['trace_lower_s']:.2f} / "
            f"{r['xla_s']:.2f}) | {r['jaxpr_eqns']} | {r['velocity_residual']:.1e} |"
        )
    lines += [
        "",
        "## Fixed step: 5-link chain, maximal coordinates (dt = 1e-3, 1000 steps)",
        "",
        "| solver | option | batch | µs per state and step | / hand |",
        "|---|---|---|---|---|",
    ]
    hand = {
        (r["solver"], r["batch"]): r["us_per_state_step"]
        for r in result["fixed_step"]
        if r["option"] == "hand-written field"
    }
    for r in result["fixed_step"]:
        ratio = r["us_per_state_step"] / hand[r["solver"], r["batch"]]
        lines.append(
            f"| {r['solver']} | {r['option']} | {r['batch']} | {r['us_per_state_step']:.2f} "
            f"| {ratio:.2f} |"
        )
    if result.get("protection"):
        lines += [
            "",
            "## Protection: 1e5 steps of dt = 1e-3 (Tsit5)",
            "",
            "| model | option | max \\|g\\| at t1 | max \\|c\\| at t1 |",
            "|---|---|---|---|",
        ]
        for r in result["protection"]:
            lines.append(
                f"| {r['model']} | {r['option']} | {r['position']:.1e} | {r['velocity']:.1e} |"
            )
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no protection runs")
    parser.add_argument("--out", default=None, help="folder for stabilisation_cpu.{json,md}")
    args = parser.parse_args()
    require_x64()
    repeats = 3 if args.quick else 10
    result = dict(
        machine=machine_info(),
        adaptive=adaptive(repeats),
        fixed_step=fixed_step(repeats, 256 if not args.quick else 16),
        protection=[] if args.quick else protection(),
    )
    result["machine"]["loadavg_at_end"] = loadavg()
    report = _report(result)
    print(report)
    if args.out:
        out = pathlib.Path(args.out)
        (out / "stabilisation_cpu.json").write_text(json.dumps(result, indent=1) + "\n")
        (out / "stabilisation_cpu.md").write_text(report)


if __name__ == "__main__":
    main()
