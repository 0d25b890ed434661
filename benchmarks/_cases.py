r"""The benchmark cases' shared settings and their shape.

- the integration settings every contender uses (`solve_kwargs`, `hand_rollout`,
  `constrax_rollout`): `Tsit5`, `ConstantStepSize`, `dt0 = 0.01`, `SaveAt(t1=True)`,
  `RecursiveCheckpointAdjoint`, `max_steps = 16384`;
- `RolloutCase`: one benchmark system, its constrax and hand-written contenders;
  `model_case` builds one from a `cx.models` model and a hand-written field.

The benchmarks run in float64. Importing this module switches nothing: the scripts
(`run.py`, `jaxpr_counts.py`, `trajopt.py`) turn `jax_enable_x64` on in their `__main__`
block, before constrax or a case creates an array, and `main()` checks it
(`require_x64`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import constrax as cx

# The defaults once more, traced with `KKT`'s small-matrix substitutions off: LAPACK's
# triangular solves at every size, as the engine solved before 2026-11-27 (`lapack_solves`).
LAPACK_DEFAULTS = "AutoSolver(), StepProjection(), consistency check, LAPACK's solves"


def lapack_solves(f: Callable) -> Callable:
    """`f`, traced with `constrax._solve.SUBSTITUTION_MAX_SIZE = 0` (the saddle solves of
    every size by LAPACK's triangular solves; the setting is read when `f` is traced). JAX's
    caches are cleared before and after, so that no nested `jit` reuses a trace made under
    the other setting."""
    from constrax import _solve

    def traced(*args, **kwargs):
        saved = _solve.SUBSTITUTION_MAX_SIZE
        _solve.SUBSTITUTION_MAX_SIZE = 0
        jax.clear_caches()
        try:
            return f(*args, **kwargs)
        finally:
            _solve.SUBSTITUTION_MAX_SIZE = saved
            jax.clear_caches()

    return traced


def require_x64() -> None:
    """Raise unless `jax_enable_x64` is on (every benchmark figure is float64)."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "the benchmarks run in float64, but jax_enable_x64 is off: call "
            "jax.config.update('jax_enable_x64', True) before importing constrax and "
            "benchmarks.cases (the scripts do so when run as `python benchmarks/<script>.py`)"
        )


# ----------------------------------------------------------------------------------------
# Integration settings (identical for every contender).

T1 = 10.0
DT0 = 0.01
MAX_STEPS = 16384


def solve_kwargs(t1: float = T1, dt0: float = DT0) -> dict:
    """Keyword arguments of `diffrax.diffeqsolve` shared by every contender."""
    return dict(
        t0=0.0,
        t1=t1,
        dt0=dt0,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True),
        adjoint=diffrax.RecursiveCheckpointAdjoint(),
        max_steps=MAX_STEPS,
    )


def hand_rollout(vf: Callable, y0, p, t1: float = T1, dt0: float = DT0, **overrides):
    """Final state of `diffeqsolve(ODETerm(vf), ...)` with the shared settings."""
    kw = {**solve_kwargs(t1, dt0), **overrides}
    solver, t0, t1, dt0 = (kw.pop(k) for k in ("solver", "t0", "t1", "dt0"))
    sol = diffrax.diffeqsolve(diffrax.ODETerm(vf), solver, t0, t1, dt0, y0, args=p, **kw)
    return jax.tree_util.tree_map(lambda y: y[-1], sol.ys)


def _final_state(traj):
    if traj.mu is None:
        return traj.q[-1], traj.qd[-1]
    return traj.q[-1], traj.qd[-1], traj.mu[-1]


def constrax_rollout(system: cx.System, q0, qd0, p, t1: float = T1, dt0: float = DT0, **kwargs):
    """Final state `(q, qd[, mu])` of `cx.simulate(..., constraint_solver=cx.KKT(),
    stabilisation=None)` with the shared settings: the same equations as the hand-written
    fields (simulate's default stabilisation is opted out of; pass `stabilisation=` to
    measure it)."""
    kwargs = {"constraint_solver": cx.KKT(), "stabilisation": None, **kwargs}
    return _final_state(cx.simulate(system, q0, qd0, p, **{**solve_kwargs(t1, dt0), **kwargs}))


def defaults_rollout(system: cx.System, q0, qd0, p, t1: float = T1, dt0: float = DT0, **kwargs):
    """Final state of `cx.simulate` with its default `stabilisation` and
    `constraint_solver` (what users run) and the shared integration settings: the
    "defaults" contender beside the like-for-like `constrax_rollout`."""
    return _final_state(cx.simulate(system, q0, qd0, p, **{**solve_kwargs(t1, dt0), **kwargs}))


def final_state_loss(state) -> jax.Array:
    r"""$\sum$ of the squares of every entry of the final state (the gradient benchmarks'
    loss: $|q(t_1)|^2 + |\dot q(t_1)|^2\,[+ |\mu(t_1)|^2]$)."""
    return sum(jnp.sum(x**2) for x in jax.tree_util.tree_leaves(state))


@dataclasses.dataclass(frozen=True)
class RolloutCase:
    """One benchmark system: constrax against the hand-written vector field.

    - `rollouts(t1=..., dt0=...)` returns fresh `{"constrax": f, "hand": f}`, each
      `f(*args) -> final state`; `args()` returns the arguments, parameters last (the
      gradient is taken with respect to them).
    - `accelerations` maps each contender to `f(*acc_args()) -> qdd` with the time first:
      `cx.accelerations(...).qdd` as a user writes it, and the hand-written field's `qdd`.
    """

    name: str
    title: str
    rollouts: Callable[..., dict[str, Callable]]
    args: Callable[[], tuple]
    accelerations: dict[str, Callable]
    acc_args: Callable[[], tuple]
    t1: float = T1
    rollout_target: float | None = 1.2
    gradient_target: float | None = None

    def gradients(self, **kw) -> dict[str, Callable]:
        """`jax.grad` of `final_state_loss(rollout)` with respect to the parameters."""
        out = {}
        for name, fn in self.rollouts(**kw).items():

            def grad(*args, fn=fn):
                *rest, p = args
                return jax.grad(lambda p: final_state_loss(fn(*rest, p)))(p)

            out[name] = grad
        return out

    def smoke(self, t1: float = 0.05) -> tuple:
        """`(constrax_final, hand_final)` after a few steps (the smoke test's check)."""
        fns, args = self.rollouts(t1=t1), self.args()
        return jax.jit(fns["constrax"])(*args), jax.jit(fns["hand"])(*args)


def model_case(name: str, title: str, build: Callable, hand_vf: Callable, **kw) -> RolloutCase:
    """A `RolloutCase` of a `cx.models` model (`build()`) from its `q0, qd0, params`:
    `cx.simulate(model.system, ..., constraint_solver=cx.KKT(), stabilisation=None)`
    against `hand_vf(t, (q, qd), p) -> (qd, qdd)`."""
    model = build()

    def rollouts(**solve):
        system = build().system
        return {
            "constrax": lambda q0, qd0, p: constrax_rollout(
                system, q0, qd0, p, stabilisation=None, **solve
            ),
            "hand": lambda q0, qd0, p: hand_rollout(hand_vf, (q0, qd0), p, **solve),
            "defaults": lambda q0, qd0, p: defaults_rollout(system, q0, qd0, p, **solve),
        }

    accelerations = {
        "constrax": lambda t, q, qd, p: (
            cx.accelerations(model.system, t, q, qd, p, constraint_solver=cx.KKT()).qdd
        ),
        "hand": lambda t, q, qd, p: hand_vf(t, (q, qd), p)[1],
    }
    return RolloutCase(
        name=name,
        title=title,
        rollouts=rollouts,
        args=lambda: (model.q0, model.qd0, model.params),
        accelerations=accelerations,
        acc_args=lambda: (jnp.asarray(0.3), model.q0, model.qd0, model.params),
        **kw,
    )


def random_mujoco_states(m, imported, rng, batch: int):
    r"""`batch` random MuJoCo states `(qpos, qvel)` of the model `m` imported as `imported`:
    `qpos0` plus $N(0, 0.3^2)$ noise with unit quaternions drawn uniformly, `qvel`
    standard normal (the states of the MJCF benchmarks)."""
    import numpy as np

    qpos = np.array(m.qpos0) + 0.3 * rng.normal(size=(batch, m.nq))
    for s, e in imported.tree.quaternion_slices():
        x = rng.normal(size=(batch, 4))
        qpos[:, s:e] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return qpos, rng.normal(size=(batch, m.nv))


class RK4(diffrax.AbstractERK):
    """The classical fourth-order Runge–Kutta method (diffrax has none built in; MuJoCo's
    `mjINT_RK4` tableau), for fixed steps: no error estimate."""

    tableau: ClassVar[diffrax.ButcherTableau] = diffrax.ButcherTableau(
        c=np.array([0.5, 0.5, 1.0]),
        b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
        b_error=np.zeros(4),
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    )
    interpolation_cls: ClassVar = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        return 4
