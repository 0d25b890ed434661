r"""Parameter identification gradient (snake cart, `snake.py`): data $y_k$ = coordinates
simulated at 50 times $t_k\in[0.2, 10]$ with `TRUE`; loss $\sum_k|q(t_k; p) - y_k|^2$ at
the nominal parameters; `jax.grad` with respect to the whole parameter dict against the
forward loss, with diffrax's default `RecursiveCheckpointAdjoint()`, one checkpoint per
step, and `BacksolveAdjoint()`; `cx.fit.IdentificationProblem.residuals` and
`jax.grad(problem.loss)`; the hand-written field's loss and gradients as a reference."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import constrax as cx

from .._cases import DT0, MAX_STEPS, T1, solve_kwargs
from .._jaxpr import vf_counts
from .._report import md_table, ms, yes
from .._timing import add_ratios, compile_times, max_abs_diff, time_calls, verdict
from . import snake

TS = np.linspace(0.2, T1, 50)  # observation times
TRUE = {"m_b": 1.2, "J_w": 0.22, "tau": 0.35}  # parameters that generate the data
N_STEPS = round(float(TS[-1]) / DT0)


def _solve(adjoint=diffrax.RecursiveCheckpointAdjoint()) -> dict:
    kw = solve_kwargs(float(TS[-1]))
    return {**kw, "saveat": diffrax.SaveAt(ts=jnp.asarray(TS)), "adjoint": adjoint}


def data() -> jax.Array:
    """Snake-cart coordinates `(len(TS), 4)` simulated with `TRUE` (noise-free)."""
    p = {**snake.params(), **{k: jnp.asarray(v) for k, v in TRUE.items()}}
    q0, qd0 = snake.initial_state()
    sim = lambda p: cx.simulate(
        snake.system(), q0, qd0, p, constraint_solver=cx.KKT(), stabilisation=None, **_solve()
    )
    return jax.jit(lambda p: sim(p).q)(p)


def problem(y) -> cx.fit.IdentificationProblem:
    return cx.fit.IdentificationProblem(
        snake.system(), cx.fit.Observations(TS, y, sigma=1.0), *snake.initial_state(),
        snake.params(), dt0=DT0, stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=MAX_STEPS, constraint_solver=cx.KKT(), stabilisation=None,
    )  # fmt: skip


def functions(y) -> dict:
    """Contenders, all functions of `(p, z, q0, qd0, data)` (`args(y)`)."""
    system, prob = snake.system(), problem(y)
    every_step = diffrax.RecursiveCheckpointAdjoint(checkpoints=N_STEPS + 1)

    def loss(p, q0, qd0, y, adjoint=diffrax.RecursiveCheckpointAdjoint()):
        traj = cx.simulate(
            system, q0, qd0, p, constraint_solver=cx.KKT(), stabilisation=None, **_solve(adjoint)
        )
        return jnp.sum((traj.q - y) ** 2)

    def hand_loss(p, q0, qd0, y, adjoint=diffrax.RecursiveCheckpointAdjoint()):
        kw = _solve(adjoint)
        solver, t0, t1, dt0 = (kw.pop(k) for k in ("solver", "t0", "t1", "dt0"))
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(snake.hand_vf), solver, t0, t1, dt0, (q0, qd0), args=p, **kw
        )
        return jnp.sum((sol.ys[0] - y) ** 2)

    def grad(fn, adjoint=diffrax.RecursiveCheckpointAdjoint()):
        return lambda p, z, q0, qd0, y: jax.grad(fn)(p, q0, qd0, y, adjoint)

    return {
        "loss": lambda p, z, q0, qd0, y: loss(p, q0, qd0, y),
        "grad": grad(loss),
        "grad_every_step": grad(loss, every_step),
        "grad_backsolve": grad(loss, diffrax.BacksolveAdjoint()),
        "hand_loss": lambda p, z, q0, qd0, y: hand_loss(p, q0, qd0, y),
        "hand_grad": grad(hand_loss),
        "hand_grad_every_step": grad(hand_loss, every_step),
        "problem_residuals": lambda p, z, q0, qd0, y: prob.residuals(z),
        "problem_grad": lambda p, z, q0, qd0, y: jax.grad(prob.loss)(z),
    }


def args(y) -> tuple:
    p = snake.params()
    return (p, problem(y).init(p), *snake.initial_state(), y)


# label -> (gradient, forward)
PAIRS = {
    "constrax, diffrax's default checkpoints (`RecursiveCheckpointAdjoint()`)": ("grad", "loss"),
    "constrax, one checkpoint per step": ("grad_every_step", "loss"),
    "constrax, continuous adjoint (`BacksolveAdjoint`)": ("grad_backsolve", "loss"),
    "`cx.fit.IdentificationProblem` (its default adjoint): `residuals` / `grad(loss)`": (
        "problem_grad",
        "problem_residuals",
    ),
    "hand-written vector field, default checkpoints (reference)": ("hand_grad", "hand_loss"),
    "hand-written vector field, one checkpoint per step": ("hand_grad_every_step", "hand_loss"),
}
TARGET = 4.0


def bench(cfg: dict) -> dict:
    y = data()
    a = args(y)
    names = list(functions(y))
    out = {"t1": float(TS[-1]), "dt0": DT0, "n_steps": N_STEPS, "n_obs": len(TS)}
    out.update(true_params=TRUE, problem_adjoint=repr(problem(y).adjoint))
    factories = {k: (lambda k=k: functions(y)[k]) for k in names}
    compiled, out["compile"] = compile_times(factories, a, cfg["grad_compile_repeats"])
    t, outs = time_calls(compiled, a, cfg["grad_repeats"])
    for grd, fwd in PAIRS.values():
        add_ratios(t, grd, fwd, f"{grd}_over_{fwd}_")
    add_ratios(t, "loss", "hand_loss", "loss_constrax_over_hand_")
    add_ratios(t, "grad", "hand_grad", "grad_constrax_over_hand_")
    out["timings"] = t
    g = outs["grad"]
    out["loss_value"] = float(outs["loss"])
    out["loss_max_abs_diff_hand"] = abs(float(outs["loss"]) - float(outs["hand_loss"]))
    out["grad_max_abs_diff_hand"] = max_abs_diff(g, outs["hand_grad"])
    out["grad_every_step_max_abs_diff"] = max_abs_diff(outs["grad_every_step"], g)
    out["grad_backsolve_max_rel_diff"] = max(
        abs(float(outs["grad_backsolve"][k] - g[k])) / abs(float(g[k])) for k in g
    )
    # problem.loss = 1/2 |r|^2 = 1/2 loss (sigma = 1, all parameters free, identity transform)
    twice = jax.tree_util.tree_map(lambda x: 2.0 * x, outs["problem_grad"][0])
    out["problem_grad_max_abs_diff"] = max_abs_diff(twice, g)
    out["targets"] = {
        f"{grd}_over_{fwd}": verdict(t, TARGET, f"{grd}_over_{fwd}_") for grd, fwd in PAIRS.values()
    }
    out["jaxpr_counts"] = counts(y)
    return out


def counts(y=None, primitives: bool = False) -> dict:
    """Equation counts of the vector field that the forward losses trace (constrax:
    `cx.simulate` with `SaveAt(ts=...)`; hand: the hand-written field)."""
    y = jnp.zeros((len(TS), 4)) if y is None else y
    fns = functions(y)
    rollouts = {"constrax": fns["loss"], "hand": fns["hand_loss"]}
    return vf_counts(rollouts, args(y), primitives=primitives)


_HEADER = (
    "contender | forward CPU | forward wall | gradient CPU | gradient wall | ratio CPU "
    "| ratio wall | target | met (CPU / wall)"
).split(" | ")


def markdown(fi: dict, cfg: dict) -> list[str]:
    t = fi["timings"]

    def cells(name):  # CPU and wall, two cells
        r = t[name]
        return [
            f"{ms(r['cpu_min_s'])} ({ms(r['cpu_median_s'])})",
            f"{ms(r['min_s'])} ({ms(r['median_s'])})",
        ]

    rows = []
    for label, (grd, fwd) in PAIRS.items():
        key = f"{grd}_over_{fwd}"
        v = fi["targets"][key]
        rows.append(
            [label, *cells(fwd), *cells(grd), f"{t[f'{key}_ratio_cpu_min']:.2f}",
             f"{t[f'{key}_ratio_min']:.2f}", f"≤ {v['ratio_max']}",
             f"{yes(v['met_cpu_time'])} / {yes(v['met_wall_time'])}"]
        )  # fmt: skip
    c = fi["compile"]
    crow = [
        [k, f"{c[k]['trace_lower']['cpu_min_s']:.2f}", f"{c[k]['xla']['cpu_min_s']:.2f}",
         f"{c[k]['total']['cpu_min_s']:.2f} ({c[k]['total']['min_s']:.2f})"]
        for k in c
    ]  # fmt: skip
    return [
        "",
        "## Parameter identification gradient",
        "",
        f"Snake cart, {fi['n_steps']} Tsit5 steps, loss = sum of squared differences of q at "
        f"{fi['n_obs']} times against data simulated with {fi['true_params']}; `jax.grad` "
        "with respect to the whole parameter dict. Per call, minimum (median) over "
        f"{cfg['grad_repeats']} interleaved repeats, in ms; ratio = gradient / forward, of "
        f"the minima. `cx.fit` uses `{fi['problem_adjoint']}` here:",
        "",
        *md_table(_HEADER, rows),
        "",
        "constrax / hand-written, CPU time: forward "
        f"{t['loss_constrax_over_hand_ratio_cpu_min']:.2f}, gradient "
        f"{t['grad_constrax_over_hand_ratio_cpu_min']:.2f}. Agreement: |loss − hand| "
        f"{fi['loss_max_abs_diff_hand']:.1e}, max |grad − hand| "
        f"{fi['grad_max_abs_diff_hand']:.1e}, max |2·grad(problem.loss) − grad(loss)| "
        f"{fi['problem_grad_max_abs_diff']:.1e}, max |grad(one checkpoint per step) − grad| "
        f"{fi['grad_every_step_max_abs_diff']:.1e}, max relative |grad(backsolve) − grad| "
        f"{fi['grad_backsolve_max_rel_diff']:.1e} (the continuous adjoint approximates the "
        "discrete gradient).",
        "",
        "Compile time of each function (cold caches, CPU s, minimum over "
        f"{cfg['grad_compile_repeats']}):",
        "",
        *md_table(["function", "trace + lower", "XLA compile", "total CPU (wall)"], crow),
    ]
