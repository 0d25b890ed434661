r"""`simulate`: integrate constrained dynamics with diffrax; `Trajectory`; consistent initial
states (docs/concepts/stabilisation.md).

The state is $(q, \dot q)$, plus $\mu$ under the vakonomic prescription; the vector field
is `_dynamics._step`. Every diffrax solver, step-size controller, `SaveAt`, adjoint and
progress meter passes through unchanged.
"""

import math
import warnings
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
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
from ._diagnostics import (
    ConstraintRank,
    ConstraintResidual,
    constraint_rank,
    effective_energy,
    energy as _energy,
)
from ._dynamics import (
    Accelerations,
    _step,
    accelerations,
    check_mu,
    inconsistent,
    project_state,
)
from ._guards import attach_check, checked
from ._prescriptions import AbstractPrescription, DAlembert
from ._solve import KKT, AbstractConstraintSolver, AutoSolver, UdwadiaKalaba
from ._stabilisation import (
    VELOCITY_PROJECTION,
    AbstractStabilisation,
    StepProjection,
    stabilisation_dtmax,
)
from ._step_projection import ProjectedSolver
from ._system import (
    System,
    as_time,
    check_state,
    constraint_terms,
    euler_lagrange_terms,
    position_residual,
    row_layout,
    stacked_residual,
)
from ._tolerances import (
    consistency_rtol as default_consistency_rtol,
    initial_tolerance as default_initial_tolerance,
    integration_tolerance,
    projection_tolerance,
)


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
_INCONSISTENT = (
    "constrax.simulate: the acceleration-level constraint rows are inconsistent at a "
    "singular configuration: the state satisfies the velocity constraints, but no "
    "acceleration satisfies their time derivatives (A qdd = b has no solution where A lost "
    "rank). Smooth motion cannot reach such a state; it needs an impulsive velocity jump: "
    "cx.impulsive_jump(system, t, q, qd, p).qd is the velocity after a plastic one. Or "
    "start from a state reached by the motion, or away from the singular configuration "
    "(cx.constraint_rank); Accelerations.acceleration_residual shows the mismatch. If it "
    "fires while integrating *through* a singular configuration, the drift of the "
    "integration made the rows inconsistent: use stabilisation=cx.Projection() or a "
    "tighter tolerance. consistency_rtol=None turns this check off."
    " More on the 'Sharp bits' page of the documentation (docs/sharp-bits.md)."
)
_MASS_MSG = (
    "the mass matrix W = d2L/dqd2 is not positive definite on the admissible velocities "
    "ker A (a negative or zero mass or inertia?). Check the Lagrangian and its parameters."
)


def _row_violation(system, layout, t, q, qd, p, c):
    r"""Per-row violation of a state with rows `c`: $|c|$ relative to
    $\max(1, |\dot q|_\infty)$, and at least $|g|$ on the position-level rows."""
    viol = jnp.abs(c) / jnp.maximum(1.0, jnp.max(jnp.abs(qd)))
    if layout.mask.any():
        g = position_residual(system, t, q, p)
        viol = viol.at[np.flatnonzero(layout.mask)].max(jnp.abs(g))
    return viol


def _check_initial_state(system, prescription, layout, t, q, qd, mu, p, tolerance, mass):
    """`q`, or an error if the initial state violates a constraint row by more than
    `tolerance` (skipped for `None`) or, with `mass`, if the mass matrix is not positive
    definite on ker A there.

    Checks, not results: they run on `stop_gradient`-ed values, so that differentiating
    `simulate` traces no tangent of them, and build $W$ and $A$ without their bias terms;
    the rows $c$ come with $A$ from one trace where both checks run.
    """
    t_, q_, qd_, mu_, p_ = jax.lax.stop_gradient((t, q, qd, mu, p))
    if mass:
        A, c, _ = constraint_terms(system, t_, q_, qd_, p_, bias=False)
    elif tolerance is not None:
        c = stacked_residual(system, p_)(t_, q_, qd_)
    if tolerance is not None:
        viol = _row_violation(system, layout, t_, q_, qd_, p_, c)
        msgs = [
            f"constrax.simulate: the initial state violates constraint row {name} by more than "
            f"initial_tolerance={tolerance:g}. Project it with "
            "cx.consistent_initial_state(...), pass project_initial=True, or raise "
            "initial_tolerance."
            for name in layout.names
        ]
        q = eqx.branched_error_if(q, jnp.max(viol) > tolerance, jnp.argmax(viol), msgs)
    if mass:
        L = prescription.effective_lagrangian(system, mu_, p_)
        W, _ = euler_lagrange_terms(L, t_, q_, qd_, bias=False)
        factor = UdwadiaKalaba(throw=False).factor(W, A).L
        n = q.shape[0]
        bad = ~jnp.all(jnp.isfinite(jnp.ravel(factor)[:: n + 1]))
        q = checked(q, bad, "constrax.simulate: at the initial state, " + _MASS_MSG)
    return q


class StepSizeWarning(UserWarning):
    r"""`cx.simulate` was given a fixed step beyond the stability limit of its explicit
    solver: a mode of the linearised dynamics at the initial state, which the exact flow
    does not amplify, is amplified by the solver at every step, so that the run grows
    without bound (silently: the values stay finite for a long time).

    Checked when `stepsize_controller` is `diffrax.ConstantStepSize`, the solver is an
    explicit Runge–Kutta method (`diffrax.Tsit5`, `Dopri5`, `Dopri8`, `Bosh3`, `Heun`,
    `Midpoint`, `Ralston`, or `Euler`) and the call is eager (concrete `dt0`, states and
    parameters): the eigenvalues $\lambda_i$ of the Jacobian of the vector field at
    $(t_0, y_0)$ are computed once (a small dense matrix, a program compiled apart from the
    run's), and the warning is emitted when $|R(\lambda_i\,dt_0)|^N$ exceeds 10 for one
    of them, where $R$ is the solver's stability function (from its Butcher tableau) and
    $N$ the number of steps to `t1`, growth the exact flow has (a mode with
    $\mathrm{Re}\,\lambda > 0$) divided out. The result of the run is never changed. See
    the docs page "Choosing the integrator".

    **Example:**

    ```python
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", cx.StepSizeWarning)   # make it an error here
        cx.simulate(system, q0, qd0, p, t1=1.0, dt0=0.01,
                    stepsize_controller=diffrax.ConstantStepSize())
    ```
    """


try:  # False while a transformation (jit, vmap, grad) traces
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # pragma: no cover
    _trace_state_clean = lambda: True  # noqa: E731

#: Growth of a mode over the run, beyond that of the exact flow, above which
#: `StepSizeWarning` is emitted.
_GROWTH_LIMIT = 10.0


def _stability_polynomial(solver) -> np.ndarray | None:
    r"""Coefficients $c_k$ (lowest first) of the stability function $R(z) = \sum c_k z^k$
    of an explicit Runge–Kutta `solver`, or `None` for any other solver."""
    if type(solver) is diffrax.Euler:
        return np.array([1.0, 1.0])
    if not isinstance(solver, diffrax.AbstractERK):
        return None
    tableau = getattr(solver, "tableau", None)
    if not isinstance(tableau, diffrax.ButcherTableau):
        return None
    b = np.asarray(tableau.b_sol, dtype=float)
    s = b.shape[0]
    A = np.zeros((s, s))
    for i, row in enumerate(tableau.a_lower):
        A[i + 1, : len(row)] = np.asarray(row, dtype=float)
    # R(z) = 1 + z b^T (I - zA)^{-1} 1 = 1 + sum_k z^k b^T A^{k-1} 1 (A nilpotent).
    coefs, v = [1.0], np.ones(s)
    for _ in range(s):
        coefs.append(float(b @ v))
        v = A @ v
    return np.array(coefs)


def _spurious_growth(coefs: np.ndarray, z: np.ndarray) -> np.ndarray:
    r"""Per-step amplification $|R(z)|$ beyond the exact flow's $\max(1, |e^z|)$."""
    R = np.abs(np.polyval(coefs[::-1], z))
    return R / np.maximum(1.0, np.exp(np.minimum(z.real, 700.0)))


def _step_limit(coefs, lam, n_steps_times_dt) -> float:
    r"""The largest $|\lambda|\,dt$ along the direction of `lam` for which the growth over
    the run stays below `_GROWTH_LIMIT` (the number of steps scales as $1/dt$)."""
    r = np.linspace(1e-3, abs(lam) * n_steps_times_dt, 4000)
    r = r[r <= 20.0] if np.any(r <= 20.0) else r[:1]
    z = r * lam / abs(lam)
    n = np.ceil(abs(lam) * n_steps_times_dt / r)
    ok = n * np.log(_spurious_growth(coefs, z)) <= math.log(_GROWTH_LIMIT)
    bad = np.flatnonzero(~ok)
    return float(r[bad[0] - 1]) if bad.size and bad[0] > 0 else float(r[0] if bad.size else r[-1])


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
    coefs = _stability_polynomial(solver)
    if coefs is None:
        return
    data = [args[k] for k in ("t0", "t1", "dt0", "q0", "qd0", "mu0", "p")]
    if not _trace_state_clean() or any(
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
    # KKT: the same accelerations as the rank-robust solvers on a regular state, and half
    # the compile time of AutoSolver's (0.9 s against 1.8 s for the Chaplygin sleigh).
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
    lam = np.linalg.eigvals(J)
    steps = min(math.ceil(abs(t1 - t0) / abs(dt) - 1e-9), args["max_steps"] or math.inf)
    growth = _spurious_growth(coefs, lam * abs(dt))
    log_total = steps * np.log(np.maximum(growth, 1.0))
    worst = int(np.argmax(log_total))
    if log_total[worst] <= math.log(_GROWTH_LIMIT):
        return
    lw = lam[worst]
    limit = _step_limit(coefs, lw, abs(t1 - t0))
    name = type(solver).__name__
    kind = "an undamped oscillation" if abs(lw.real) <= 1e-6 * abs(lw) else f"eigenvalue {lw:.4g}"
    warnings.warn(
        f"constrax.simulate: the fixed step dt0={dt:g} is beyond the stability limit of "
        f"{name} for this system: the linearised dynamics at the initial state have an "
        f"eigenvalue of magnitude |lambda| = {abs(lw):.4g} ({kind}), so |lambda|*dt0 = "
        f"{abs(lw) * abs(dt):.3g}, where {name} amplifies that mode by "
        f"{growth[worst]:.4g} a step, a factor of 10^{log_total[worst] / math.log(10):.0f} "
        f"over the {steps} steps to t1, which the exact motion does not have. Keeping the "
        f"growth below {_GROWTH_LIMIT:g}x needs |lambda|*dt0 <= {limit:.3g}, i.e. dt0 <= "
        f"{limit / abs(lw):.3g}. Use a smaller dt0, an adaptive controller "
        "(diffrax.PIDController, the default), or an implicit solver (diffrax.Kvaerno5) for "
        "a stiff system. The results are not changed; see the docs page 'Choosing the "
        "integrator'.",
        StepSizeWarning,
        stacklevel=5,  # the caller of cx.simulate
    )


def _precheck(args: dict) -> None:
    """What `simulate` checks eagerly, before its compiled program runs."""
    check_times(args["t0"], args["t1"], args["dt0"])
    _check_step_size(args)


def _check_finite(x, name):
    """`x`, or an error naming `name` if it holds NaN or inf (concrete: `ValueError` now)."""
    return check_finite(x, name, "constrax.simulate")


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
        q_dot, _, qdd, lam, _, A, b, _ = _step(
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
        )
        if self.consistency_rtol is not None and self.solver.rank_robust:
            # Only a rank-robust solve can return a least-squares answer; KKT raises instead.
            _, bad = inconsistent(A, qdd, b, self.consistency_rtol)
            qdd = checked(qdd, bad, _INCONSISTENT)
        if self.prescription.multiplier_state:
            return (q_dot, qdd, lam)
        return (q_dot, qdd)

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


class Trajectory(eqx.Module):
    r"""The result of `simulate`.

    - `ts`: save times `(k,)`; `q`, `qd`: `(k, n)`; `mu`: `(k, m)` under `Vakonomic`,
      else `None`.
    - `solution`: the underlying `diffrax.Solution` (dense output, `stats`, `result`).
    - `system`, `p`, `prescription`, `constraint_solver`, `stabilisation`: what produced it,
      used by the helper methods below (evaluated along the saved states with `vmap`).

    A `Trajectory` can be returned from (and passed into) `jax.jit` and `jax.vmap`: the
    `system` (the user's functions) is a static field, the rest are arrays.
    """

    ts: Float[Array, " k"]
    q: Float[Array, "k n"]
    qd: Float[Array, "k n"]
    mu: Float[Array, "k m"] | None
    solution: diffrax.Solution
    system: System = eqx.field(static=True)
    p: Params
    prescription: AbstractPrescription
    constraint_solver: AbstractConstraintSolver
    stabilisation: AbstractStabilisation | None

    @property
    def stats(self) -> dict:
        """diffrax statistics (`num_steps`, `num_accepted_steps`, ...)."""
        return self.solution.stats

    @property
    def result(self):
        """The `diffrax.RESULTS` outcome of the solve."""
        return self.solution.result

    def _map(self, fn):
        if self.mu is None:
            return jax.vmap(lambda t, q, qd: fn(t, q, qd, None))(self.ts, self.q, self.qd)
        return jax.vmap(fn)(self.ts, self.q, self.qd, self.mu)

    def accelerations(self) -> Accelerations:
        """`accelerations` at every saved state (fields gain a leading time axis)."""
        return self._map(
            lambda t, q, qd, mu: accelerations(
                self.system,
                t,
                q,
                qd,
                self.p,
                prescription=self.prescription,
                mu=mu,
                constraint_solver=self.constraint_solver,
                stabilisation=self.stabilisation,
            )
        )

    def multipliers(self) -> Float[Array, "k m"]:
        """$\\lambda$ (d'Alembert) or $\\dot\\mu$ (vakonomic) along the trajectory."""
        return self.accelerations().multipliers

    def reactions(self) -> Float[Array, "k n"]:
        """Reaction forces $R$ along the trajectory."""
        return self.accelerations().reactions

    def reaction_power(self) -> Float[Array, " k"]:
        """$\\dot q^\\top R$ along the trajectory."""
        return self.accelerations().reaction_power

    def energy(self) -> Float[Array, " k"]:
        """$E = \\dot q\\cdot\\partial L/\\partial\\dot q - L$ along the trajectory."""
        return self._map(lambda t, q, qd, mu: _energy(self.system, t, q, qd, self.p))

    def effective_energy(self) -> Float[Array, " k"]:
        """$E[L, M]$ (Sławianowski et al. 2013) along a vakonomic trajectory."""
        if self.mu is None:
            raise ValueError("effective_energy needs a vakonomic trajectory (with `mu`)")
        return self._map(lambda t, q, qd, mu: effective_energy(self.system, t, q, qd, mu, self.p))

    def constraint_residual(self) -> ConstraintResidual:
        """Position ($g$) and velocity ($c$) residuals along the trajectory."""
        return self._map(
            lambda t, q, qd, mu: ConstraintResidual(
                position_residual(self.system, t, q, self.p),
                stacked_residual(self.system, self.p)(t, q, qd),
            )
        )

    def constraint_rank(self, rtol: float | None = None) -> ConstraintRank:
        """Rank and singular values of $A(q)$ along the trajectory."""
        return self._map(
            lambda t, q, qd, mu: constraint_rank(self.system, t, q, qd, self.p, rtol=rtol)
        )

    def evaluate(self, t) -> tuple[Array, ...]:
        """Dense output `(q, qd[, mu])` at time `t` (needs `SaveAt(dense=True)`)."""
        return self.solution.evaluate(t)


@compiled(times=("t0",), states=("q0", "qd0"), params=("p",))
def consistent_initial_state(
    system: System,
    t0,
    q0: Float[Array, " n"],
    qd0: Float[Array, " n"],
    p: Params = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = 64,
    velocity_iterations: int = 8,
    tolerance: float | None = None,
    throw: bool = True,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    r"""Project an initial state onto the constraint manifold.

    Positions: Gauss–Newton (`optimistix.GaussNewton`, minimum-norm steps) on the
    holonomic residual $g(t_0, q) = 0$ starting from `q0`. Velocities: the $W$-orthogonal
    projection of `qd0` onto $\{c(t_0, q, \dot q) = 0\}$,
    $\dot q \leftarrow \dot q - W^{-1}A^\top(AW^{-1}A^\top)^+ c$ (exact in one step for
    linear constraints; iterated `velocity_iterations` times for nonlinear ones), with the
    rank-tolerant `UdwadiaKalaba` factorisation. `rtol`, `atol`: Gauss–Newton tolerances,
    default $\max(10^{-12}, 10\epsilon)$ of the dtype.

    The result is checked: if a row still has a residual above `tolerance` (absolute on
    $g$; relative to $\max(1, |\dot q|_\infty)$ on $c$) — the rows contradict each other
    (no state satisfies them all), or Gauss–Newton did not converge in `max_steps` — an
    error names the worst row (`equinox.EquinoxRuntimeError` under `jit`).

    **Arguments:**

    - `system`, `t0`, `q0`, `qd0`, `p`: the system and the state to project.
    - `rtol`, `atol`, `max_steps`: Gauss–Newton tolerances and step limit.
    - `velocity_iterations`: projections of the velocity for nonlinear velocity constraints.
    - `tolerance`: the largest residual accepted after projection (default `1e-8`, or
      `1000 * eps` of the dtype where that is larger).
    - `throw`: raise when the residual stays above `tolerance` (with `False`, check
      `cx.constraint_residual` yourself).

    **Returns:** `(q, qd)` satisfying the constraints.

    **Example:**

    ```python
    qd_slip = jnp.array([1.0, 0.3, 2.0])       # violates the knife edge
    q0, qd0 = cx.consistent_initial_state(system, 0.0, q, qd_slip, p)
    ```
    """
    check_system(system)
    q0, qd0 = check_state(q0, qd0)
    t0 = as_time(t0, q0)
    layout = row_layout(system, t0, q0, qd0, p)
    rtol = projection_tolerance(q0.dtype) if rtol is None else rtol
    atol = projection_tolerance(q0.dtype) if atol is None else atol
    q = q0
    converged = jnp.asarray(True)
    if any(con.has_position_rows for con in system.constraints):
        sol = optx.least_squares(
            lambda y, _: position_residual(system, t0, y, p),
            optx.GaussNewton(rtol=rtol, atol=atol),
            q0,
            max_steps=max_steps,
            throw=False,
            # g(q) = 0 fixes fewer than n coordinates: its solutions form a manifold and
            # J^T J is singular. The pseudo-inverse differentiates the projection as its
            # minimum-norm Gauss-Newton steps move q: dq/dp = -J^+ dg/dp.
            adjoint=optx.ImplicitAdjoint(lx.AutoLinearSolver(well_posed=False)),
        )
        q = sol.value
        converged = sol.result == optx.RESULTS.successful
    L = lambda t, q, qd: system.lagrangian(t, q, qd, p)
    solver = UdwadiaKalaba()
    linear = all(con.linear_in_velocity for con in system.constraints)

    def project(qd, _):
        A, c, _ = constraint_terms(system, t0, q, qd, p, bias=False)
        W, _ = euler_lagrange_terms(L, t0, q, qd, bias=False)
        return qd - solver.project(solver.factor(W, A), c), None

    qd, _ = jax.lax.scan(project, qd0, None, length=1 if linear else velocity_iterations)
    if throw and sum(layout.counts) > 0:
        q, qd = _check_projected(system, layout, t0, q, qd, p, converged, tolerance, max_steps)
    return q, qd


def _check_projected(system, layout, t0, q, qd, p, converged, tolerance, max_steps):
    """Error naming the worst row if the projected state still violates a constraint."""
    if tolerance is None:
        tolerance = default_initial_tolerance(q.dtype)
    names = layout.names
    c = stacked_residual(system, p)(t0, q, qd)
    viol = jax.lax.stop_gradient(_row_violation(system, layout, t0, q, qd, p, c))
    why = (
        "The constraints may contradict each other (no state satisfies every row: look for "
        "duplicated or dependent rows with incompatible values, e.g. equal one-form rows with "
        "different affine terms b)"
    )
    msgs = [
        f"constrax.consistent_initial_state: the initial state could not be made consistent: "
        f"constraint row {name} still has a residual above tolerance={tolerance:g} after "
        f"projection. {why}.{extra}"
        for extra in (
            "",
            f" Gauss-Newton on the holonomic rows also did not converge in max_steps="
            f"{max_steps} steps: raise `max_steps` or start closer to the constraints.",
        )
        for name in names
    ]
    index = jnp.argmax(viol) + len(names) * (~converged).astype(jnp.int32)
    bad = ~(jnp.max(viol) <= tolerance)  # NaN counts as a violation
    q = eqx.branched_error_if(q, bad, index, msgs)
    return q, qd


@forward_mode_hint
@compiled(
    times=("t0", "t1", "dt0"),
    states=("q0", "qd0", "mu0"),
    params=("p",),
    precheck=_precheck,
)
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
      float64, $1.2\times10^{-5}$ in float32) and `rate` the fastest decay rate an
      in-field stabilisation imposes (`Projection`, `Baumgarte`; no cap under the default
      `StepProjection`, without stabilisation or without constraints),
      `SaveAt(t1=True)`, `RecursiveCheckpointAdjoint()`. The cap keeps gradients right:
      an adaptive controller does not see the decaying modes on a consistent state, but
      derivatives excite them. Pass `dtmax` the same way to a controller of your own.
      With `diffrax.ConstantStepSize` and an explicit solver, a `dt0` beyond the solver's
      stability limit at the initial state emits a `cx.StepSizeWarning` (eager calls;
      docs page "Choosing the integrator").
    - `prescription`: `cx.DAlembert()` or `cx.Vakonomic()`; `mu0` the initial vakonomic
      multipliers `(m,)` (default zeros: $\mu_0$ is free initial data of that problem).
    - `constraint_solver`: `cx.AutoSolver()`, `cx.KKT()` or `cx.UdwadiaKalaba()`.
    - `stabilisation`: `cx.StepProjection()` (default), `cx.StepProjection(positions=True)`,
      `cx.Projection(...)`, `cx.Baumgarte(...)` or `None`. The default projects the
      velocity onto the constraints after every step and evaluates the dynamics at the
      projected velocity, so that the integration's drift never reaches the solve: this
      keeps gradients right through singular configurations (the snake cart's
      $\phi = \pm\pi/2$), where without it AD disagrees with finite differences by orders
      of magnitude (docs/concepts/gradients.md, "Through singular configurations"), and
      it leaves the steps of an adaptive controller those of the unstabilised equations
      (docs/concepts/stabilisation.md). `None` is cheaper per evaluation and fine away
      from singular configurations. Systems without constraints ignore it.
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
    check_system(system)
    check_options(
        prescription=prescription, constraint_solver=constraint_solver, stabilisation=stabilisation
    )
    check_diffrax_options(
        solver=solver, stepsize_controller=stepsize_controller, saveat=saveat, adjoint=adjoint
    )
    t0, t1 = check_times(t0, t1, dt0)
    q0, qd0 = check_state(q0, qd0)
    t0a = as_time(t0, q0)
    layout = row_layout(system, t0a, q0, qd0, p)
    m, mask = sum(layout.counts), layout.mask
    if prescription.multiplier_state and mu0 is None:
        mu0 = jnp.zeros((m,), q0.dtype)
    mu0 = check_mu(prescription, mu0, m, q0.dtype)
    q0 = _check_finite(q0, "q0")
    qd0 = _check_finite(qd0, "qd0")
    p = _check_finite(p, "p")
    if mu0 is not None:
        mu0 = _check_finite(mu0, "mu0")
    if project_initial:
        q0, qd0 = consistent_initial_state(system, t0a, q0, qd0, p, tolerance=initial_tolerance)
        initial_tolerance = None  # projected: nothing left to check
    elif m == 0:
        initial_tolerance = None
    elif initial_tolerance is None:
        initial_tolerance = default_initial_tolerance(q0.dtype)
    # The LU of the KKT path does not see a mass matrix that is indefinite on ker A (e.g. a
    # negative mass); UdwadiaKalaba's Cholesky does, at every step. Check once.
    mass = not isinstance(constraint_solver, UdwadiaKalaba)
    if mass or initial_tolerance is not None:
        q0 = _check_initial_state(
            system, prescription, layout, t0a, q0, qd0, mu0, p, initial_tolerance, mass
        )
    if stepsize_controller is None:
        tol = integration_tolerance(q0.dtype)
        dtmax = stabilisation_dtmax(stabilisation, bool(system.constraints))
        stepsize_controller = diffrax.PIDController(rtol=tol, atol=tol, dtmax=dtmax)
    if saveat is None:
        saveat = diffrax.SaveAt(t1=True)
    y0 = (q0, qd0) if mu0 is None else (q0, qd0, mu0)
    if consistency_rtol is _DEFAULT:
        consistency_rtol = default_consistency_rtol(q0.dtype)
    elif isinstance(consistency_rtol, str):
        raise ValueError(
            f"`consistency_rtol` must be a non-negative float or None, got {consistency_rtol!r}"
        )
    vf = _VectorField(
        system, prescription, constraint_solver, stabilisation, mask, consistency_rtol
    )
    if (
        isinstance(stabilisation, StepProjection)
        and m > 0
        and not isinstance(adjoint, diffrax.BacksolveAdjoint)  # its adjoint ODE has no step
    ):
        solver = ProjectedSolver(solver, vf, stabilisation.positions)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vf),
        solver,
        t0,
        t1,
        dt0,
        y0,
        args=p,
        saveat=saveat,
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        max_steps=max_steps,
        progress_meter=progress_meter,
        throw=False,
    )
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
        mu = ys[2] if mu0 is not None else None
    return Trajectory(
        ts=sol.ts,
        q=q,
        qd=qd,
        mu=mu,
        solution=sol,
        system=system,
        p=p,
        prescription=prescription,
        constraint_solver=constraint_solver,
        stabilisation=stabilisation,
    )
