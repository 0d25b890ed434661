r"""Trajectory optimisation: controls inside the parameters, steered through diffrax.

Objective (running effort plus terminal cost)
$$J = \tfrac{w_u}{2}\int_{t_0}^{t_1} |u(t)|^2\,dt
      + \tfrac{w_T}{2}\big(|q(t_1) - q^\star|^2 + |\dot q(t_1) - \dot q^\star|^2\big),$$
written as $\tfrac12|r|^2$ with the exact effort residuals of the control
(`AbstractControl.effort_residuals`). The constraints hold along every candidate
trajectory because they are part of the dynamics (docs/concepts/constraints.md), not penalties.
"""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._custom_types import Params
from .._prescriptions import AbstractPrescription, DAlembert
from .._simulate import simulate
from .._solve import AbstractConstraintSolver, AutoSolver
from .._stabilisation import (
    VELOCITY_PROJECTION,
    AbstractStabilisation,
    stabilisation_dtmax,
)
from .._state import check_state
from .._system import System
from .._trajectory import Trajectory
from ._checkpoint import config_hash
from ._controls import AbstractControl
from ._problem import AbstractProblem, set_simulate_options, simulate_options


class TrajectoryProblem(AbstractProblem):
    r"""Steer `system` from `(q0, qd0)` at `t0` towards a goal at `t1` with least effort.

    **Arguments:**

    - `system`: a `cx.System` whose force reads the control from the parameters, e.g.
      `force=lambda t, q, qd, p: B(q) @ p["u"](t)`.
    - `q0`, `qd0`: initial state `(n,)` (must satisfy the constraints).
    - `params`: the parameter pytree holding the physical parameters and the control.
    - `controls`: `where(params) -> AbstractControl` locating the control (optimised).
    - `t1`, `t0`: horizon.
    - `goal_q`, `goal_qd`: target state `(n,)` at `t1`; `None` leaves it free.
    - `terminal_weight` $w_T$ (scalar or `(n,)` per coordinate), `effort_weight` $w_u$.
    - `solver`, `dt0`, `stepsize_controller`, `adjoint`, `max_steps`, `prescription`,
      `stabilisation`, `constraint_solver`: passed to `cx.simulate` (defaults as there,
      `cx.StepProjection()` stabilisation included; default adjoint
      `RecursiveCheckpointAdjoint`, one checkpoint per step under `ConstantStepSize`:
      `cx.fit.default_adjoint`; e.g. `diffrax.BacksolveAdjoint()` or
      `diffrax.ForwardMode()` also work).

    Fixed steps (`dt0` with `diffrax.ConstantStepSize()`) make the objective a smooth
    function of the controls and its reverse-mode gradient independent of how the compiler
    recomputes the steps; adaptive steps at `cx.fit`'s tight tolerance depend on that
    recomputation repeating the forward pass's step decisions (docs/concepts/gradients.md,
    "Adaptive steps and the recomputation").

    **Example:**

    ```python
    params = {"m": 1.0, "I": 0.1, "u": cx.fit.PiecewiseLinear(knots0, 0.0, 4.0)}
    problem = cx.fit.TrajectoryProblem(system, q0, qd0, params, controls=lambda p: p["u"],
                                       t1=4.0, goal_q=jnp.array([0.0, 1.0, 0.0]),
                                       goal_qd=jnp.zeros(3), effort_weight=1e-3,
                                       dt0=0.05, stepsize_controller=diffrax.ConstantStepSize())
    res = cx.fit.solve(problem, params)
    ```
    """

    system: System
    q0: Float[Array, " n"]
    qd0: Float[Array, " n"]
    params: Params
    controls: Callable
    goal_q: Float[Array, " n"] | None
    goal_qd: Float[Array, " n"] | None
    terminal_weight: Float[Array, " n"]
    effort_weight: float
    t0: float = eqx.field(static=True)
    t1: float = eqx.field(static=True)
    solver: diffrax.AbstractSolver
    dt0: float | None = eqx.field(static=True)
    stepsize_controller: diffrax.AbstractStepSizeController
    adjoint: diffrax.AbstractAdjoint
    max_steps: int = eqx.field(static=True)
    prescription: AbstractPrescription
    stabilisation: AbstractStabilisation | None
    constraint_solver: AbstractConstraintSolver

    def __init__(
        self,
        system: System,
        q0: Float[ArrayLike, " n"],
        qd0: Float[ArrayLike, " n"],
        params: Params,
        *,
        controls: Callable,
        t1: float,
        t0: float = 0.0,
        goal_q: Float[ArrayLike, " n"] | None = None,
        goal_qd: Float[ArrayLike, " n"] | None = None,
        terminal_weight: Float[ArrayLike, " n"] | float = 1.0,
        effort_weight: float = 1.0,
        solver: diffrax.AbstractSolver = diffrax.Tsit5(),
        dt0: float | None = None,
        stepsize_controller: diffrax.AbstractStepSizeController | None = None,
        adjoint: diffrax.AbstractAdjoint | None = None,
        max_steps: int = 16384,
        prescription: AbstractPrescription = DAlembert(),
        stabilisation: AbstractStabilisation | None = VELOCITY_PROJECTION,
        constraint_solver: AbstractConstraintSolver = AutoSolver(),
    ):
        if not isinstance(system, System):
            raise TypeError(f"`system` must be a cx.System, got {type(system).__name__}")
        q0, qd0 = check_state(q0, qd0)
        n = q0.shape[0]
        if not callable(controls) or not isinstance(controls(params), AbstractControl):
            raise ValueError(
                "`controls` must be a function where(params) returning the AbstractControl "
                "(e.g. a cx.fit.PiecewiseLinear) inside `params`"
            )
        if not float(t1) > float(t0):
            raise ValueError(f"expected t1 > t0, got t0={t0}, t1={t1}")
        if goal_q is None and goal_qd is None:
            raise ValueError("give a target: `goal_q` and/or `goal_qd`")
        goals = []
        for name, g in (("goal_q", goal_q), ("goal_qd", goal_qd)):
            if g is not None:
                g = jnp.asarray(g, dtype=q0.dtype)
                if g.shape != (n,):
                    raise ValueError(f"`{name}` must have shape (n,) = ({n},), got {g.shape}")
            goals.append(g)
        w = (
            jnp.broadcast_to(jnp.asarray(terminal_weight, dtype=q0.dtype), (n,))
            if jnp.ndim(terminal_weight) == 0
            else jnp.asarray(terminal_weight, dtype=q0.dtype)
        )
        if w.shape != (n,):
            raise ValueError(f"`terminal_weight` must be a scalar or shape ({n},), got {w.shape}")
        if effort_weight < 0:
            raise ValueError(f"`effort_weight` must be >= 0, got {effort_weight}")
        self.system = system
        self.q0, self.qd0 = q0, qd0
        self.params = params
        self.controls = controls
        self.goal_q, self.goal_qd = goals
        self.terminal_weight = w
        self.effort_weight = float(effort_weight)
        self.t0, self.t1 = float(t0), float(t1)
        set_simulate_options(
            self,
            solver=solver,
            dt0=dt0,
            stepsize_controller=stepsize_controller,
            adjoint=adjoint,
            max_steps=max_steps,
            prescription=prescription,
            constraint_solver=constraint_solver,
            span=self.t1 - self.t0,
            dtmax=stabilisation_dtmax(stabilisation, bool(system.constraints)),
        )
        self.stabilisation = stabilisation

    def init(self, params: Params) -> Params:
        """`z`: the control (an `AbstractControl`) taken from `params`."""
        return self.controls(params)

    def params_of(self, z) -> Params:
        return eqx.tree_at(self.controls, self.params, z)

    def config(self) -> str:
        return config_hash(
            "trajectory",
            self.q0,
            self.qd0,
            self.goal_q,
            self.goal_qd,
            self.terminal_weight,
            self.effort_weight,
            self.t0,
            self.t1,
            eqx.filter(eqx.tree_at(self.controls, self.params, replace=None), eqx.is_array),
            [con.name for con in self.system.constraints],
        )

    def simulate(self, params: Params, ts: Float[ArrayLike, " k"] | None = None) -> Trajectory:
        """`cx.simulate` of the controlled system with `params`, saved at `ts` (default
        `t1` only)."""
        saveat = diffrax.SaveAt(t1=True) if ts is None else diffrax.SaveAt(ts=jnp.asarray(ts))
        return simulate(
            self.system,
            self.q0,
            self.qd0,
            params,
            t0=self.t0,
            t1=self.t1,
            saveat=saveat,
            **simulate_options(self),
            stabilisation=self.stabilisation,
        )

    def terminal_error(self, params: Params) -> Float[Array, " r"]:
        """Unweighted $(q(t_1) - q^\\star, \\dot q(t_1) - \\dot q^\\star)$ (given parts)."""
        traj = self.simulate(params)
        parts = []
        if self.goal_q is not None:
            parts.append(traj.q[-1] - self.goal_q)
        if self.goal_qd is not None:
            parts.append(traj.qd[-1] - self.goal_qd)
        return jnp.concatenate(parts)

    def residuals(self, z) -> Float[Array, " r"]:
        params = self.params_of(z)
        err = self.terminal_error(params)
        k = err.shape[0] // self.q0.shape[0]
        w = jnp.sqrt(jnp.tile(self.terminal_weight, k))
        effort = jnp.sqrt(self.effort_weight) * z.effort_residuals()
        return jnp.concatenate([effort, w * err])
