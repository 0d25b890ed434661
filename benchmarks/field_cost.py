"""Where one evaluation of the default vector field spends its time, against the field
written by hand, in one run.

    python -m benchmarks.field_cost [--out benchmarks/results]

`benchmarks/stabilisation.py` says what each option costs per rollout and per step; this
splits one evaluation of `cx.simulate`'s vector field into its parts, so that the gap between
the defaults and the hand-written field can be read off:

1. **The field** of the snake cart of `benchmarks/stabilisation.py` (n = 4, two Pfaffian
   rows: a 6 x 6 saddle matrix) and of the 5-link pendulum chain in maximal coordinates
   (n = 10, five holonomic rows: 15 x 15), per evaluation: the hand-written field
   (`jnp.linalg.solve` of the saddle matrix), then the engine's field with `KKT()` or
   `AutoSolver()`, with `stabilisation=None` or the default `StepProjection()`, with and
   without the consistency check of the rank-robust solvers (`consistency_rtol`), the
   defaults once more with LAPACK's triangular solves at every size (the engine before it
   wrote the substitutions of small saddle matrices out), and `StepProjection()`'s field
   taken apart with `KKT()`: the bias terms in a second pass at the state's velocity (no
   projection), and the projection's solve with the dynamics at the state's velocity (no
   second pass after it); each field and its VJP with respect to the state and the
   parameters (the reverse pass of a gradient). The same for the gymnasium humanoid
   imported from MJCF (nq = 24, its free joint's quaternion row; no hand-written field)
   where MuJoCo and gymnasium are installed.
2. **The dense linear algebra alone** at the sizes 4, 6, 8, 10, 12, 15 and 18: an LU
   factorisation (`jax.scipy.linalg.lu_factor`), the factorisation and one solve with it,
   the factorisation and two solves (what `StepProjection` needs: the projection of the
   velocity, then the accelerations) with LAPACK's triangular solves, the same with the
   engine's forward and back substitutions written out in `jax.numpy` (what `KKT` and
   `AutoSolver` use up to `constrax._solve.SUBSTITUTION_MAX_SIZE`), and
   `jnp.linalg.solve`: where the engine's threshold comes from. Each alone, and per
   element of a batch of 256 under `vmap` (200 evaluations of the batch per loop).

Each timing is one `lax.fori_loop` of 20 000 evaluations inside one `jit` (the state moved
a little at each iteration, so nothing is hoisted), divided by the number of evaluations:
no dispatch, no Python. The loops of one table's system run in turn, round after round, and
each keeps its fastest round (a burst of load on the shared machine slows a round of all of
them, not every repeat of one). Beside each, the seconds to lower and compile its loop.
float64, CPU.
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run as a script

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402

if __name__ == "__main__":  # the entry point: float64 before constrax makes an array
    jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
from benchmarks._cases import LAPACK_DEFAULTS, lapack_solves, require_x64  # noqa: E402
from benchmarks._report import loadavg, machine_info, write_results  # noqa: E402
from benchmarks.cases.chain import maximal_hand_vf  # noqa: E402
from benchmarks.stabilisation import SNAKE, SNAKE_SYSTEM, snake_hand_vf, snake_state  # noqa: E402
from constrax._simulate import _VectorField  # noqa: E402
from constrax._solve import SUBSTITUTION_MAX_SIZE, substitution_solve  # noqa: E402
from constrax._stabilisation import StabilisedTerms  # noqa: E402
from constrax._tolerances import consistency_rtol  # noqa: E402

EVALS = 20_000
SIZES = (4, 6, 8, 10, 12, 15, 18)  # of the saddle matrix, for the linear algebra alone
BATCH = 256  # for the linear algebra over a batch


def _compiled(body, x0, evals: int = EVALS) -> dict:
    """One jitted loop of `evals` calls of `body(i, x) -> x`, compiled, with the seconds
    its lowering and compilation took."""
    t = time.perf_counter()
    loop = jax.jit(lambda x: jax.lax.fori_loop(0, evals, body, x)).lower(x0).compile()
    compile_s = time.perf_counter() - t
    jax.block_until_ready(loop(x0))
    return dict(loop=loop, x0=x0, compile_s=compile_s, evals=evals)


def _per_call(loops: list[dict], repeats: int) -> list[float]:
    """Seconds per call of each compiled loop: the minimum over `repeats` rounds, each round
    running every loop once in turn (a burst of load on a shared machine then slows one
    round of all the loops, not every repeat of one)."""
    best = [np.inf] * len(loops)
    for _ in range(repeats):
        for k, c in enumerate(loops):
            t = time.perf_counter()
            jax.block_until_ready(c["loop"](c["x0"]))
            best[k] = min(best[k], time.perf_counter() - t)
    return [b / c["evals"] for b, c in zip(best, loops, strict=True)]


class _SecondPass(cx.StepProjection):
    """`StepProjection`'s field without its projection: $W$ and $A$ in one pass, the bias
    terms in a second one, at the state's velocity."""

    def terms(self, step):
        c_bias, f0 = step.bias_at(step.qd)
        return StabilisedTerms(velocity=step.qd, q_dot=step.qd, b=-c_bias, f0=f0)


class _ProjectionSolveOnly(cx.Baumgarte):
    """The projection's solve ($\dot q_P$ as the rate of $q$) with the dynamics at the
    state's velocity: no bias terms after the projection."""

    def terms(self, step):
        qd_p = step.qd - step.project(step.c)
        return StabilisedTerms(velocity=step.qd, q_dot=qd_p, b=-step.c_bias, f0=step.f0)


# `StepProjection`'s field, taken apart (with `KKT()`): what each part adds to `KKT(), None`.
PARTS = {
    "KKT(), the bias terms in a second pass": _SecondPass(),
    "KKT(), the projection's solve, dynamics at the state's velocity": _ProjectionSolveOnly(),
}


def _fields(system, hand_vf, mask):
    """The hand-written field (where there is one) and the engine's, by solver,
    stabilisation and check, and `StepProjection`'s field taken apart (`PARTS`)."""
    out = {} if hand_vf is None else {"hand-written field": hand_vf}
    for stab_name, stab in (("None", None), ("StepProjection()", cx.StepProjection())):
        for solver_name, solver in (("KKT()", cx.KKT()), ("AutoSolver()", cx.AutoSolver())):
            checks = (None, consistency_rtol(jnp.float64)) if solver.rank_robust else (None,)
            for rtol in checks:
                name = f"{solver_name}, {stab_name}" + (", consistency check" if rtol else "")
                vf = _VectorField(system, cx.DAlembert(), solver, stab, mask, rtol)
                out[name] = lambda t, y, p, vf=vf: vf.evaluate(t, y, p)
    # The defaults once more with LAPACK's triangular solves at every size (as before the
    # engine wrote small substitutions out), traced so (`lapack_solves`).
    vf = _VectorField(
        system, cx.DAlembert(), cx.AutoSolver(), cx.StepProjection(), mask,
        consistency_rtol(jnp.float64),
    )  # fmt: skip
    out[LAPACK_DEFAULTS] = lapack_solves(lambda t, y, p: vf.evaluate(t, y, p))
    for name, stab in PARTS.items():
        vf = _VectorField(system, cx.DAlembert(), cx.KKT(), stab, mask, None)
        out[name] = lambda t, y, p, vf=vf: vf.evaluate(t, y, p)
    return out


def field_rows(name, system, hand_vf, q0, qd0, p, repeats) -> list[dict]:
    """Each field, and its VJP with respect to the state and the parameters (the reverse
    pass of a gradient through a rollout), per evaluation."""
    mask = cx._layout.row_layout(system, jnp.zeros(()), q0, qd0, p).mask  # noqa: SLF001
    fields = _fields(system, hand_vf, mask)
    loops = []
    for f in fields.values():

        def body(i, y, f=f):
            out = f(1e-3 * i, y, p)
            return (y[0] + 1e-9 * out[0], y[1] + 1e-9 * out[1])

        def vjp_body(i, c, f=f):
            (y, pp) = c
            out, vjp = jax.vjp(lambda y, pp: f(1e-3 * i, y, pp), y, pp)
            gy, gp = vjp(out)
            y = (y[0] + 1e-9 * gy[0], y[1] + 1e-9 * gy[1])
            return y, jax.tree.map(lambda a, b: a + 1e-12 * b, pp, gp)

        loops += [_compiled(body, (q0, qd0)), _compiled(vjp_body, ((q0, qd0), p))]
    times = _per_call(loops, repeats)
    rows = []
    for k, label in enumerate(fields):
        rows.append(
            dict(
                system=name,
                part=label,
                us=times[2 * k] * 1e6,
                compile_s=loops[2 * k]["compile_s"],
                vjp_us=times[2 * k + 1] * 1e6,
                vjp_compile_s=loops[2 * k + 1]["compile_s"],
            )
        )
        print(rows[-1], flush=True)
    return rows


def algebra_rows(size: int, repeats: int) -> list[dict]:
    rng = np.random.default_rng(0)
    K0 = jnp.asarray(rng.normal(size=(size, size)) + size * np.eye(size))

    def factor(K, x):
        lu, _ = jsl.lu_factor(K)
        return x + lu[:, 0]

    def one(K, x):
        return jsl.lu_solve(jsl.lu_factor(K), x)

    def two(K, x):
        lu = jsl.lu_factor(K)
        return jsl.lu_solve(lu, jsl.lu_solve(lu, x) + x)

    def two_substituted(K, x):
        lu, _, perm = jax.lax.linalg.lu(K)
        return substitution_solve(lu, perm, substitution_solve(lu, perm, x) + x)

    parts = {
        "LU factorisation": factor,
        "LU + one solve": one,
        "LU + two solves": two,
        "LU + two solves, the engine's substitutions": two_substituted,
        "jnp.linalg.solve": jnp.linalg.solve,
    }
    # Each part alone, and over a batch of `BATCH` matrices under `vmap` (per element; as in
    # a batched rollout, where LAPACK's calls are made once per element).
    Kb = K0 + jnp.asarray(rng.normal(size=(BATCH, size, size)) * 1e-3)
    loops = []
    for fn in parts.values():

        def body(i, x, fn=fn):
            return x + 1e-9 * fn(K0 + 1e-9 * i, x)

        def batch_body(i, x, fn=fn):
            return x + 1e-9 * jax.vmap(fn)(Kb + 1e-9 * i, x)

        loops.append(_compiled(body, jnp.ones(size)))
        loops.append(_compiled(batch_body, jnp.ones((BATCH, size)), EVALS // 100))
    times = _per_call(loops, repeats)
    rows = []
    for k, label in enumerate(parts):
        rows.append(
            dict(
                system=f"{size} x {size}",
                part=label,
                us=times[2 * k] * 1e6,
                batch_us=times[2 * k + 1] / BATCH * 1e6,
                compile_s=loops[2 * k]["compile_s"],
            )
        )
        print(rows[-1], flush=True)
    return rows


def _report(result: dict) -> str:
    m = result["machine"]
    lines = [
        "# One evaluation of the vector field: where the time goes (CPU)",
        "",
        f"- date (UTC): {m['date_utc']}; machine: {m['cpu_model']}, {m['cpu_cores']} cores "
        f"({m['platform']}); load average (1, 5, 15 min) at start {m['loadavg_at_start']}, "
        f"at end {m['loadavg_at_end']}",
        f"- versions: python {m['python']}, jax {m['jax']}, diffrax {m['diffrax']}, "
        f"equinox {m['equinox']}, constrax {m['constrax']}",
        f"- µs per evaluation: one jitted `fori_loop` of {EVALS} evaluations per row, the "
        "loops of a table's system run in turn, minimum over the rounds; float64",
        (
            "- every saddle matrix is solved with the engine's substitutions"
            if SUBSTITUTION_MAX_SIZE == float("inf")
            else f"- saddle matrices up to {SUBSTITUTION_MAX_SIZE} x {SUBSTITUTION_MAX_SIZE} "
            "are solved with the engine's substitutions, larger ones with LAPACK's"
        ),
        "",
        "## The field, and its VJP with respect to the state and the parameters",
        "",
        "| system | field | µs | / first row | VJP µs | / first row | compile of the loops "
        "(field / VJP) [s] |",
        "|---|---|---|---|---|---|---|",
    ]
    base = {}
    for r in result["fields"]:
        b = base.setdefault(r["system"], r)
        lines.append(
            f"| {r['system']} | {r['part']} | {r['us']:.3f} | {r['us'] / b['us']:.2f} | "
            f"{r['vjp_us']:.3f} | {r['vjp_us'] / b['vjp_us']:.2f} | "
            f"{r['compile_s']:.2f} / {r['vjp_compile_s']:.2f} |"
        )
    lines += [
        "",
        "## The dense linear algebra",
        "",
        f"| system | part | µs | / first row | µs per element, batch of {BATCH} | / first row "
        "| compile of the loop [s] |",
        "|---|---|---|---|---|---|---|",
    ]
    base = {}
    for r in result["algebra"]:
        b = base.setdefault(r["system"], r)
        lines.append(
            f"| {r['system']} | {r['part']} | {r['us']:.3f} | {r['us'] / b['us']:.2f} | "
            f"{r['batch_us']:.3f} | {r['batch_us'] / b['batch_us']:.2f} | "
            f"{r['compile_s']:.2f} |"
        )
    lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default=None, help="folder for field_cost_cpu.{json,md}")
    args = parser.parse_args()
    require_x64()
    q0, qd0 = snake_state()
    p = {k: jnp.asarray(v) for k, v in SNAKE.items()}
    chain = cx.models.pendulum_chain(5, "maximal")
    fields = field_rows("snake cart", SNAKE_SYSTEM, snake_hand_vf, q0, qd0, p, args.repeats)
    fields += field_rows(
        "5-link chain, maximal", chain.system, maximal_hand_vf, chain.q0, chain.qd0,
        chain.params, args.repeats,
    )  # fmt: skip
    try:
        from benchmarks.batch_rollouts import _humanoid

        humanoid, hq, hqd, hp = _humanoid(1)
    except ImportError:  # MuJoCo or gymnasium missing: no humanoid rows
        print("the humanoid rows need MuJoCo and gymnasium (the mjcf extra)", flush=True)
    else:
        fields += field_rows(
            "humanoid (imported tree)", humanoid, None, jnp.asarray(hq[0]), jnp.asarray(hqd[0]),
            jax.tree.map(jnp.asarray, hp), args.repeats,
        )  # fmt: skip
    algebra = [row for size in SIZES for row in algebra_rows(size, args.repeats)]
    result = dict(machine=machine_info(), fields=fields, algebra=algebra)
    result["machine"]["loadavg_at_end"] = loadavg()
    report = _report(result)
    print(report)
    write_results(args.out, "field_cost_cpu", result, report)


if __name__ == "__main__":
    main()
