r"""`simulate`: integrate the constrained equations of motion with diffrax
(docs/concepts/stabilisation.md).

The state is $(q, \dot q)$, plus $\mu$ under the vakonomic prescription; the vector field
is `_dynamics._step`. Every diffrax solver, step-size controller, `SaveAt`, adjoint and
progress meter passes through unchanged. The result is a `Trajectory` (`_trajectory.py`).

`simulate` is a composition of named steps, each entered once: `_check` (the arguments),
`prepare_initial_state` (`_initial_state.py`: the initial state projected, or checked,
in one place), `_build_terms` (the vector field, the step-size controller and the solver),
`_integrate` (`diffrax.diffeqsolve`) and `_trajectory` (the result, with the checks of a
failed solve attached).
"""

from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import (
    check_diffrax_options,
    check_finite,
    check_options,
    check_system,
    check_times,
    forward_mode_hint,
)
from ._compilation import compiled
from ._custom_types import Params
from ._dynamics import _step, check_mu, project_state
from ._guards import attach_check
from ._initial_state import prepare_initial_state
from ._layout import row_layout
from ._precision import full_precision
from ._prescriptions import AbstractPrescription, DAlembert
from ._solve import KKT, AbstractConstraintSolver, AutoSolver
from ._solvers import for_adjoint
from ._stabilisation import (
    VELOCITY_PROJECTION,
    AbstractStabilisation,
    stabilisation_dtmax,
)
from ._state import as_time, check_state
from ._step_size import stability_polynomial, trace_state_clean, warn_if_unstable
from ._system import System
from ._tolerances import (
    consistency_rtol as default_consistency_rtol,
    integration_tolerance,
)
from ._trajectory import Trajectory


class _DtypeDefault:
    """The default of an option whose value depends on the working dtype (read in its
    docstring); a distinct object, so that `None` stays free to mean "off"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dtype default>"


_DEFAULT: Any = _DtypeDefault()  # `Any`: a valid default of any annotated option

_MAX_STEPS = (
    "constrax.simulate: the solver took `max_steps` steps without reaching t1. Increase "
    "`max_steps`, loosen the step-size controller's rtol/atol, or look for stiffness or a "
    "singular configuration (cx.constraint_rank) along the trajectory."
    " More on the 'Sharp bits' page of the documentation (docs/sharp-bits.md)."
)
_FAILED = (
    "constrax.simulate: the diffrax solve did not succeed (step size underflow, non-finite "
    "values or an internal failure). Inspect `Trajectory.result` with `throw=False`."
)
_NONFINITE = (
    "constrax.simulate: the trajectory contains NaN or inf. Check the parameters, the "
    "initial state, and whether the motion reaches a configuration where the mass matrix "
    "is singular on ker A."
)


class _VectorField(eqx.Module):
    system: System
    prescription: AbstractPrescription
    solver: AbstractConstraintSolver
    stabilisation: AbstractStabilisation | None
    mask: np.ndarray = eqx.field(static=True, converter=lambda x: tuple(bool(v) for v in x))
    consistency_rtol: float | None = eqx.field(static=True, default=None)

    def __call__(self, t, y, p):
        # A nested `jit`: JAX caches the traced field, and its JVP, partial evaluation
        # and transpose per jaxpr, so that the repeated traces of one solver step that a
        # checkpointed reverse pass makes (equinox's fixed point on which loop carries
        # have nonzero cotangents) reuse them (tests/test_compilation.py counts the
        # traces; docs/benchmarks.md gives the trace times). XLA inlines the call, so
        # run time is unchanged.
        return _vector_field(self, t, y, p)

    def evaluate(self, t, y, p):
        q, qd = y[0], y[1]
        mu = y[2] if self.prescription.multiplier_state else None
        step = _step(
            self.system,
            self.prescription,
            self.solver,
            self.stabilisation,
            t,
            q,
            qd,
            mu,
            p,
            np.asarray(self.mask, dtype=bool),
            self.consistency_rtol,
        )
        qdd = step.qdd
        if self.prescription.multiplier_state:
            return (step.q_dot, qdd, step.lam)
        return (step.q_dot, qdd)

    def project(self, t, y, p, positions: bool):
        """The state `y` projected onto the constraints (`StepProjection`)."""
        mu = y[2] if self.prescription.multiplier_state else None
        q, qd = project_state(
            self.system,
            self.prescription,
            self.solver,
            t,
            y[0],
            y[1],
            mu,
            p,
            np.asarray(self.mask, dtype=bool),
            positions,
        )
        return (q, qd, *y[2:])


@eqx.filter_jit
def _vector_field(vf: _VectorField, t, y, p):
    return vf.evaluate(t, y, p)


@eqx.filter_jit
def _field_jacobian(vf: "_VectorField", t0, y0, p):
    """The dense Jacobian of the vector field with respect to the flattened state."""
    flat, unravel = jax.flatten_util.ravel_pytree(y0)
    fn = lambda y: jax.flatten_util.ravel_pytree(vf.evaluate(t0, unravel(y), p))[0]
    return jax.jacfwd(fn)(flat)


def _check_step_size(args: dict) -> None:
    """`StepSizeWarning` if a fixed step is beyond the stability limit of an explicit
    solver at the initial state (see `StepSizeWarning`). Runs before the compiled program
    (`compiled`'s precheck), on concrete values only: inside `simulate`'s program `dt0`
    and the state are traced, and the check must add nothing to it."""
    controller, solver, dt0 = args["stepsize_controller"], args["solver"], args["dt0"]
    if not isinstance(controller, diffrax.ConstantStepSize) or dt0 is None:
        return
    coefs = stability_polynomial(solver)
    if coefs is None:
        return
    data = [args[k] for k in ("t0", "t1", "dt0", "q0", "qd0", "mu0", "p")]
    if not trace_state_clean() or any(
        isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(data)
    ):
        return  # under jit, vmap or grad: nothing concrete to look at, nothing to add
    system, prescription = args["system"], args["prescription"]
    check_system(system)
    q0, qd0 = check_state(args["q0"], args["qd0"])
    t0, t1, dt = float(args["t0"]), float(args["t1"]), float(dt0)
    t0a = as_time(t0, q0)
    p = args["p"]
    layout = row_layout(system, t0a, q0, qd0, p)
    m, mu0 = sum(layout.counts), args["mu0"]
    if prescription.multiplier_state and mu0 is None:
        mu0 = jnp.zeros((m,), q0.dtype)
    mu0 = check_mu(prescription, mu0, m, q0.dtype)  # simulate's own errors, raised here
    y0 = (q0, qd0) if mu0 is None else (q0, qd0, mu0)
    # KKT: the same accelerations as the rank-robust solvers on a regular state, in a
    # program that compiles faster than AutoSolver's.
    vf = _VectorField(system, prescription, KKT(), args["stabilisation"], layout.mask)
    try:
        J = _field_jacobian(vf, t0a, y0, p)
    except eqx.EquinoxRuntimeError:
        return  # a singular or inconsistent initial state: the run itself says why
    if isinstance(J, jax.core.Tracer):
        return
    J = np.asarray(J, dtype=float)
    if J.size == 0 or not np.all(np.isfinite(J)):
        return
    warn_if_unstable(solver, coefs, J, t0, t1, dt, args["max_steps"])


def _precheck(args: dict) -> None:
    """What `simulate` checks eagerly, before its compiled program runs."""
    check_times(args["t0"], args["t1"], args["dt0"])
    _check_step_size(args)


def _check_finite(x, name):
    """`x`, or an error naming `name` if it holds NaN or inf (concrete: `ValueError` now)."""
    return check_finite(x, name, "constrax.simulate")


@forward_mode_hint
@compiled(
    times=("t0", "t1", "dt0"),
    states=("q0", "qd0", "mu0"),
    params=("p",),
    precheck=_precheck,
)
@full_precision
def simulate(
    system: System,
    q0: Float[Array, " n"],
    qd0: Float[Array, " n"],
    p: Params = None,
    *,
    t0=0.0,
    t1,
    dt0=None,
    solver: diffrax.AbstractSolver = diffrax.Tsit5(),
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    saveat: diffrax.SaveAt | None = None,
    adjoint: diffrax.AbstractAdjoint = diffrax.RecursiveCheckpointAdjoint(),
    max_steps: int | None = 16384,
    progress_meter: diffrax.AbstractProgressMeter = diffrax.NoProgressMeter(),
    prescription: AbstractPrescription = DAlembert(),
    mu0: Float[Array, " m"] | None = None,
    constraint_solver: AbstractConstraintSolver = AutoSolver(),
    stabilisation: AbstractStabilisation | None = VELOCITY_PROJECTION,
    project_initial: bool = False,
    initial_tolerance: float | None = None,
    consistency_rtol: float | None = _DEFAULT,
    throw: bool = True,
) -> Trajectory:
    r"""Integrate the constrained equations of motion with `diffrax.diffeqsolve`.

    The ODE is $\dot q = \dot q$, $\ddot q$ from the saddle solve of `accelerations`
    (and $\dot\mu = \lambda$ under `Vakonomic`), docs/concepts/prescriptions.md.

    **Arguments:**

    - `system`, `q0`, `qd0`, `p`: the system, initial coordinates/velocities `(n,)`, and
      parameters (any pytree; differentiate with respect to it freely).
    - `t0`, `t1`, `dt0`: time span and initial step (`dt0=None` lets an adaptive controller
      choose; required with `diffrax.ConstantStepSize`).
    - `solver`, `stepsize_controller`, `saveat`, `adjoint`, `max_steps`, `progress_meter`:
      passed to diffrax. Defaults: `Tsit5()`, `PIDController(rtol=tol, atol=tol,
      dtmax=1/rate)` with `tol` $= \max(10^{-8}, 100\epsilon)$ of the dtype ($10^{-8}$ in
      float64, $1.2\times10^{-5}$ in float32) and `rate` the fastest decay rate of the
      stabilisation (the default's: 10/s, so steps of at most 0.1 s; no cap without
      stabilisation or constraints), `SaveAt(t1=True)`, `RecursiveCheckpointAdjoint()`
      (for `N` fixed steps of `ConstantStepSize` with concrete times, up to 10 000, with
      `checkpoints=N`: the reverse pass stores every step instead of recomputing them, as
      a `lax.scan`'s does).
      The cap keeps gradients right: an adaptive controller does not see the decaying
      modes on a consistent state, but derivatives excite them. Pass `dtmax` the same
      way to a controller of your own. With `diffrax.ConstantStepSize` and an explicit
      solver, a `dt0` beyond the solver's stability limit at the initial state emits a
      `cx.StepSizeWarning` (eager calls; docs page "Choosing the integrator").
    - `prescription`: `cx.DAlembert()` or `cx.Vakonomic()`; `mu0` the initial vakonomic
      multipliers `(m,)` (default zeros: $\mu_0$ is free initial data of that problem).
    - `constraint_solver`: `cx.AutoSolver()`, `cx.KKT()` or `cx.UdwadiaKalaba()`.
    - `stabilisation`: `cx.Projection(alpha=10.0, beta=0.0)` (default: the velocity
      projection), `cx.Projection()` (also corrects the position drift of holonomic
      rows), `cx.Baumgarte(...)` or `None`. The default evaluates the dynamics at the
      velocity projected onto the constraints, so that the integration's drift never
      reaches the solve: this is what keeps gradients right through singular
      configurations (the snake cart's $\phi = \pm\pi/2$), where without it AD disagrees
      with finite differences by orders of magnitude (docs/concepts/gradients.md,
      "Through singular configurations"). `beta=0` because the position correction makes
      redundant holonomic rows stiff (docs/concepts/stabilisation.md). `None` is cheaper
      per step and fine away from singular configurations. Systems without constraints
      ignore it.
    - `project_initial`: project `(q0, qd0)` with `consistent_initial_state` first.
      Otherwise an initial state that violates a constraint by more than
      `initial_tolerance` (absolute on $g$; relative to $\max(1, |\dot q|_\infty)$ on
      $c$; default $\max(10^{-8}, 1000\epsilon)$ of the dtype) raises an error naming the
      constraint.
    - `consistency_rtol`: with a rank-robust `constraint_solver`, raise where the
      acceleration-level rows are inconsistent — $|A\ddot q - b|_\infty$ above
      `consistency_rtol` times the rows' scale (see `Accelerations.acceleration_residual`);
      default `0.05` in float64 (`0.2` in float32): contradicting rows miss by a finite
      fraction of their scale, while the drift of an unstabilised run through a singular
      configuration stays below (docs page "Precision"); `None` turns the check off.
      Only a least-squares answer is checked: `AutoSolver`'s where it takes its
      rank-robust path, `UdwadiaKalaba`'s at every evaluation.
    - `throw`: raise on a failed solve (max steps, non-finite values); with `False`
      inspect `Trajectory.result`.

    **Returns:** a `Trajectory`.

    **Example:**

    ```python
    traj = cx.simulate(system, q0, qd0, p, t0=0.0, t1=10.0,
                       saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 10.0, 101)))
    traj.q, traj.energy()
    ```
    """
    t0, t1, t0a, q0, qd0, mu0, p, layout, consistency_rtol = _check(
        system,
        q0,
        qd0,
        p,
        mu0,
        times=(t0, t1, dt0),
        options=(prescription, constraint_solver, stabilisation, consistency_rtol),
        diffrax_options=(solver, stepsize_controller, saveat, adjoint),
    )
    q0, qd0 = prepare_initial_state(
        system,
        prescription,
        constraint_solver,
        layout,
        t0a,
        q0,
        qd0,
        mu0,
        p,
        project=project_initial,
        tolerance=initial_tolerance,
    )
    vf, solver, stepsize_controller, saveat = _build_terms(
        system,
        layout,
        q0.dtype,
        options=(prescription, constraint_solver, stabilisation, consistency_rtol),
        diffrax_options=(solver, stepsize_controller, saveat, adjoint),
    )
    y0 = (q0, qd0) if mu0 is None else (q0, qd0, mu0)
    sol = _integrate(
        vf,
        solver,
        (t0, t1, dt0),
        y0,
        p,
        saveat=saveat,
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        max_steps=max_steps,
        progress_meter=progress_meter,
    )
    return _trajectory(sol, vf, p, multipliers=mu0 is not None, throw=throw)


def _check(system, q0, qd0, p, mu0, *, times, options, diffrax_options):
    """Step 1 of `simulate`, the checks of its arguments (at trace time where they can be,
    `equinox.error_if` otherwise): the system, the options, the times, the state, the
    multipliers and the parameters (finite). Returns the times (`t0a`: `t0` as an array of
    the state's dtype), the state, `p`, the rows' layout and the resolved
    `consistency_rtol`."""
    prescription, constraint_solver, stabilisation, consistency_rtol = options
    solver, stepsize_controller, saveat, adjoint = diffrax_options
    check_system(system)
    check_options(
        prescription=prescription, constraint_solver=constraint_solver, stabilisation=stabilisation
    )
    check_diffrax_options(
        solver=solver, stepsize_controller=stepsize_controller, saveat=saveat, adjoint=adjoint
    )
    t0, t1 = check_times(*times)
    q0, qd0 = check_state(q0, qd0)
    t0a = as_time(t0, q0)
    layout = row_layout(system, t0a, q0, qd0, p)
    m = sum(layout.counts)
    if prescription.multiplier_state and mu0 is None:
        mu0 = jnp.zeros((m,), q0.dtype)
    mu0 = check_mu(prescription, mu0, m, q0.dtype)
    q0 = _check_finite(q0, "q0")
    qd0 = _check_finite(qd0, "qd0")
    p = _check_finite(p, "p")
    if mu0 is not None:
        mu0 = _check_finite(mu0, "mu0")
    if consistency_rtol is _DEFAULT:
        consistency_rtol = default_consistency_rtol(q0.dtype)
    elif isinstance(consistency_rtol, str):
        raise ValueError(
            f"`consistency_rtol` must be a non-negative float or None, got {consistency_rtol!r}"
        )
    return t0, t1, t0a, q0, qd0, mu0, p, layout, consistency_rtol


def _build_terms(system, layout, dtype, *, options, diffrax_options):
    """Step 3 of `simulate`: the vector field and what integrates it. The default step-size
    controller (`PIDController` at `integration_tolerance`, steps capped by the
    stabilisation's rate), the default `SaveAt(t1=True)`, and the solver wrapped by the
    stabilisation where it acts between steps (`StepProjection`; not under
    `BacksolveAdjoint`, whose adjoint ODE has no step to act between)."""
    prescription, constraint_solver, stabilisation, consistency_rtol = options
    solver, stepsize_controller, saveat, adjoint = diffrax_options
    if stepsize_controller is None:
        tol = integration_tolerance(dtype)
        dtmax = stabilisation_dtmax(stabilisation, bool(system.constraints))
        stepsize_controller = diffrax.PIDController(rtol=tol, atol=tol, dtmax=dtmax)
    if saveat is None:
        saveat = diffrax.SaveAt(t1=True)
    vf = _VectorField(
        system, prescription, constraint_solver, stabilisation, layout.mask, consistency_rtol
    )
    m = sum(layout.counts)
    if stabilisation is not None and m > 0 and not isinstance(adjoint, diffrax.BacksolveAdjoint):
        solver = stabilisation.wrap_solver(solver, vf)
    return vf, solver, stepsize_controller, saveat


# Fixed-step runs of up to this many steps store every step for the reverse pass.
STORE_EVERY_STEP_MAX = 10_000


def fixed_step_adjoint(adjoint, stepsize_controller, times, max_steps):
    """`RecursiveCheckpointAdjoint(checkpoints=N)` for a run of `N` fixed steps (concrete
    times, `ConstantStepSize`, `N` up to `STORE_EVERY_STEP_MAX` and `max_steps`) where
    `adjoint` is diffrax's default `RecursiveCheckpointAdjoint()`: the reverse pass then
    stores every step, as the reverse pass of a `lax.scan` does, instead of recomputing
    steps from a logarithmic number of checkpoints (on the snake cart, 256 rollouts of 200
    steps, the gradient cost 3.0x the forward pass instead of 5.1x, one loaded run). The
    same derivative; memory grows with `N`. Any other `adjoint` as it is."""
    if not (
        type(adjoint) is diffrax.RecursiveCheckpointAdjoint
        and adjoint.checkpoints is None
        and isinstance(stepsize_controller, diffrax.ConstantStepSize)
    ):
        return adjoint
    try:
        t0, t1, dt0 = (float(x) for x in times)
    except (TypeError, jax.errors.ConcretizationTypeError):
        return adjoint  # traced times: the step count is not known when tracing
    steps = int(np.ceil((t1 - t0) / dt0 - 1e-9)) if dt0 else 0
    if not 0 < steps <= min(STORE_EVERY_STEP_MAX, max_steps or STORE_EVERY_STEP_MAX):
        return adjoint
    return diffrax.RecursiveCheckpointAdjoint(checkpoints=steps)


def _integrate(vf, solver, times, y0, p, **diffrax_options):
    """Step 4 of `simulate`: `diffrax.diffeqsolve` of the vector field from `y0`, with
    `throw=False` (`_trajectory` attaches the checks of the result), and the default
    adjoint storing every step of a fixed-step run (`fixed_step_adjoint`)."""
    t0, t1, dt0 = times
    diffrax_options["adjoint"] = fixed_step_adjoint(
        diffrax_options["adjoint"],
        diffrax_options["stepsize_controller"],
        times,
        diffrax_options["max_steps"],
    )
    solver = for_adjoint(solver, diffrax_options["adjoint"])
    return diffrax.diffeqsolve(
        diffrax.ODETerm(vf), solver, t0, t1, dt0, y0, args=p, throw=False, **diffrax_options
    )


def _trajectory(sol, vf: _VectorField, p, *, multipliers: bool, throw: bool) -> Trajectory:
    """Step 5 of `simulate`: the `Trajectory` of the solution, with (`throw`) an error
    attached to its values where the solve failed: max steps, another failure, or
    non-finite values."""
    ys = sol.ys
    if throw and ys is not None:
        ok = sol.result == diffrax.RESULTS.successful
        max_steps_reached = sol.result == diffrax.RESULTS.max_steps_reached
        finite = jnp.all(
            jnp.stack([jnp.all(jnp.isfinite(y) | jnp.isinf(sol.ts)[:, None]) for y in ys])
        )
        reason = jnp.where(max_steps_reached, 0, jnp.where(~ok, 1, 2))
        ys = attach_check(ys, ~ok | ~finite, reason, [_MAX_STEPS, _FAILED, _NONFINITE])
    if ys is None:
        q = qd = mu = None
    else:
        q, qd = ys[0], ys[1]
        mu = ys[2] if multipliers else None
    return Trajectory(
        ts=sol.ts,
        q=q,
        qd=qd,
        mu=mu,
        solution=sol,
        system=vf.system,
        p=p,
        prescription=vf.prescription,
        constraint_solver=vf.solver,
        stabilisation=vf.stabilisation,
    )
