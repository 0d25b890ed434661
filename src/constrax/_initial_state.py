r"""Consistent initial states: the projection of a state onto the constraint manifold
(`consistent_initial_state`) and the checks `simulate` makes of its initial state, all
entered through `prepare_initial_state` (docs/concepts/stabilisation.md)."""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float

from ._checks import check_system
from ._compilation import compiled
from ._custom_types import Params
from ._guards import checked
from ._layout import row_layout
from ._prescriptions import prescribed_terms
from ._solve import UdwadiaKalaba
from ._state import as_time, check_state
from ._system import System
from ._terms import constraint_terms, lagrangian_terms, position_residual, stacked_residual
from ._tolerances import (
    initial_tolerance as default_initial_tolerance,
    projection_tolerance,
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


def prepare_initial_state(
    system, prescription, constraint_solver, layout, t0, q0, qd0, mu0, p, *, project, tolerance
):
    r"""The initial state `simulate` integrates from, prepared in one place: `(q0, qd0)`
    projected onto the constraints (`project`: `consistent_initial_state`, whose own check
    replaces the one below), or checked against them — every row within `tolerance`
    (default $\max(10^{-8}, 1000\epsilon)$ of the dtype; no check without rows) — and, where
    `constraint_solver` does not see a mass matrix that is indefinite on ker A (e.g. a
    negative mass), the mass matrix checked once, here (`check_initial_state`)."""
    if project:
        q0, qd0 = consistent_initial_state(system, t0, q0, qd0, p, tolerance=tolerance)
        tolerance = None  # projected: nothing left to check
    elif sum(layout.counts) == 0:
        tolerance = None
    elif tolerance is None:
        tolerance = default_initial_tolerance(q0.dtype)
    mass = not constraint_solver.checks_mass_matrix
    if mass or tolerance is not None:
        q0 = check_initial_state(system, prescription, layout, t0, q0, qd0, mu0, p, tolerance, mass)
    return q0, qd0


class _InitialTerms(NamedTuple):
    """What the checks of an initial state read (`None` where not needed)."""

    violation: Array | None  # per row (`_row_violation`)
    W: Array | None
    A: Array | None


def _initial_terms(system, prescription, layout, state, rows: bool, mass: bool):
    """The terms of the checks, gathered in one pass on `stop_gradient`-ed values, without
    bias terms: the rows $c$ (with $A$ from the same trace where the mass is checked), their
    violation, and $W$."""
    t, q, qd, mu, p = jax.lax.stop_gradient(state)
    A = W = violation = None
    if mass:
        A, c, _ = constraint_terms(system, t, q, qd, p, bias=False)
    elif rows:
        c = stacked_residual(system, p)(t, q, qd)
    if rows:
        violation = _row_violation(system, layout, t, q, qd, p, c)
    if mass:
        W, _ = prescribed_terms(prescription, system, t, q, qd, mu, p, bias=False)
    return _InitialTerms(violation, W, A)


def _check_rows(q, violation, layout, tolerance, where):
    """`q`, or an error naming the row that violates its constraint by more than
    `tolerance`."""
    msgs = [
        f"{where}: the initial state violates constraint row {name} by more than "
        f"initial_tolerance={tolerance:g}. Project it with "
        "cx.consistent_initial_state(...), "
        + ("pass project_initial=True, " if where == "constrax.simulate" else "")
        + "or raise initial_tolerance."
        for name in layout.names
    ]
    return eqx.branched_error_if(q, jnp.max(violation) > tolerance, jnp.argmax(violation), msgs)


def _check_mass(q, W, A, where):
    """`q`, or an error if the mass matrix `W` is not positive definite on ker `A`."""
    factor = UdwadiaKalaba(throw=False).factor(W, A).L
    n = q.shape[0]
    bad = ~jnp.all(jnp.isfinite(jnp.ravel(factor)[:: n + 1]))
    return checked(q, bad, f"{where}: at the initial state, " + _MASS_MSG)


def check_initial_state(
    system, prescription, layout, t, q, qd, mu, p, tolerance, mass, where="constrax.simulate"
):
    """`q`, or an error if the initial state violates a constraint row by more than
    `tolerance` (skipped for `None`) or, with `mass`, if the mass matrix is not positive
    definite on ker A there. `where` names the caller in the messages.

    Checks, not results: they run on `stop_gradient`-ed values, so that differentiating
    `simulate` traces no tangent of them, and build $W$ and $A$ without their bias terms;
    the rows $c$ come with $A$ from one trace where both checks run (`_initial_terms`).
    """
    rows = tolerance is not None
    terms = _initial_terms(system, prescription, layout, (t, q, qd, mu, p), rows, mass)
    if rows:
        q = _check_rows(q, terms.violation, layout, tolerance, where)
    if mass:
        q = _check_mass(q, terms.W, terms.A, where)
    return q


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
            # Minimum-norm steps (an SVD pseudo-inverse of J): redundant rows (a closed
            # loop whose connect and weld fix the same freedom twice) leave J rank-deficient,
            # where a QR or LU step is NaN and the iteration would stop at `q0`.
            optx.GaussNewton(
                rtol=rtol, atol=atol, linear_solver=lx.AutoLinearSolver(well_posed=False)
            ),
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
    solver = UdwadiaKalaba()
    linear = all(con.linear_in_velocity for con in system.constraints)

    def project(qd, _):
        A, c, _ = constraint_terms(system, t0, q, qd, p, bias=False)
        W, _ = lagrangian_terms(system, t0, q, qd, p, bias=False)
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
