r"""Accelerations and multipliers at one state: prescription → saddle system → solve.

The pipeline reads like the physics (docs/concepts/index.md): Lagrangian terms $(W, f)$ →
constraint terms $(A, c, c_\text{bias})$ → optional stabilisation → saddle solve for
$(\ddot q, \lambda)$ → reactions.
"""

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._checks import check_finite, check_options, check_system
from ._compilation import compiled
from ._custom_types import Params, Time
from ._layout import row_layout
from ._precision import full_precision
from ._prescriptions import (
    AbstractPrescription,
    DAlembert,
    prescribed_rhs,
    prescribed_split,
    prescribed_terms,
)
from ._solve import AbstractConstraintSolver, AutoSolver, for_rows
from ._stabilisation import AbstractStabilisation, StepTerms, unstabilised
from ._state import as_time, check_state
from ._system import System
from ._terms import (
    constraint_bias,
    constraint_terms,
    generalized_force,
    lagrangian_terms,
    position_residual,
    scatter_holonomic,
)


class Accelerations(eqx.Module):
    r"""Output of `accelerations`.

    - `qdd`: accelerations $\ddot q$, shape `(n,)`.
    - `multipliers`: $\lambda$ (d'Alembert) or $\dot\mu$ (vakonomic), shape `(m,)`, in the
      order of the stacked constraint rows; minimum-norm where `A` is rank-deficient.
    - `mu_dot`: $\dot\mu$ under `Vakonomic`, `None` under `DAlembert`.
    - `reactions`: total reaction force
      $R = \frac{d}{dt}\partial L/\partial\dot q - \partial L/\partial q - Q$, shape `(n,)`.
    - `reactions_multiplier`: the part $A^\top\lambda$ (all of $R$ for d'Alembert; the
      $\dot\mu^a\omega_a$ part for vakonomic).
    - `reactions_curl`: $R - A^\top\lambda$ (zero for d'Alembert; the curl part
      $\mu^a(\partial_j\omega_{ai} - \partial_i\omega_{aj})\dot q^j$ plus, for nonlinear
      constraints, the acceleration terms, for vakonomic).
    - `force`: the non-constraint generalized force $Q$, reported apart from reactions.
    - `reaction_power`: $\dot q^\top R$.
    - `rank`: numerical rank of $A$ used by the solve (`-1`: singular KKT system).
    - `velocity`: the velocity the vector field used ($\dot q$, or its projection under
      `Projection`), i.e. the time derivative of `q`.
    - `acceleration_residual`: $A\ddot q - b$, the residual of the acceleration-level
      constraint rows ($b = -c_\text{bias}$ minus stabilisation terms). Zero up to rounding
      wherever the rows are consistent; where $A$ lost rank and the rows contradict each
      other (a state no smooth motion reaches: it needs an impulsive velocity jump), the
      rank-robust solvers return the least-squares accelerations and this residual says by
      how much they miss. `simulate` raises in that case.
    """

    qdd: Float[Array, " n"]
    multipliers: Float[Array, " m"]
    mu_dot: Float[Array, " m"] | None
    reactions: Float[Array, " n"]
    reactions_multiplier: Float[Array, " n"]
    reactions_curl: Float[Array, " n"]
    force: Float[Array, " n"]
    reaction_power: Float[Array, ""]
    rank: Int[Array, ""]
    velocity: Float[Array, " n"]
    acceleration_residual: Float[Array, " m"]


def check_mu(prescription: AbstractPrescription, mu, m: int, dtype) -> Array | None:
    """Validate the vakonomic multipliers against the number of constraint rows."""
    if not prescription.multiplier_state:
        if mu is not None:
            raise ValueError(
                f"`mu` is only used by the vakonomic prescription, got prescription="
                f"{type(prescription).__name__}; drop `mu`"
            )
        return None
    if mu is None:
        raise ValueError(
            f"the vakonomic prescription needs the multipliers `mu` (shape ({m},), one per "
            f"constraint row): pass mu=... (mu0=... to simulate)"
        )
    mu = jnp.asarray(mu, dtype=dtype)
    if mu.shape != (m,):
        raise ValueError(
            f"`mu` must have one entry per constraint row: expected shape ({m},), got {mu.shape}"
        )
    return mu


class _Step(NamedTuple):
    """What one evaluation of the dynamics computes (`_step`); read by field name."""

    q_dot: Array  # the time derivative of q
    qd_used: Array  # the velocity the dynamics were evaluated at (projected under Projection)
    qdd: Array
    lam: Array
    state: Any  # the constraint solver's factorisation
    A: Array
    b: Array
    force: Array  # the generalized force Q at (t, q, qd_used)


@full_precision
def _step(
    system: System,
    prescription: AbstractPrescription,
    solver: AbstractConstraintSolver,
    stabilisation: AbstractStabilisation | None,
    t,
    q,
    qd,
    mu,
    p,
    mask: np.ndarray,
    consistency_rtol: float | None = None,
    active: Array | None = None,
) -> _Step:
    """Core of the vector field and of `accelerations` (`consistency_rtol`: see
    `AbstractConstraintSolver.solve`).

    `active` (optional, boolean `(m,)`, traced) switches rows off at run time: a row that
    is off is left out of the dynamics (its multiplier is zero; its residuals and bias
    are not corrected), with the shapes of the system with every row on
    (`AbstractConstraintSolver.factor`'s `inactive`)."""
    if mask.shape[0] == 0:
        stabilisation = None  # nothing to project or relax
    solver = for_rows(solver, system.constraints)
    # The bias terms at the state's velocity, unless the stabilisation evaluates them at
    # a velocity of its own.
    bias = stabilisation is None or stabilisation.bias_at_state_velocity
    on = (lambda x: x) if active is None else (lambda x: x * active.astype(x.dtype))
    with jax.named_scope("constraint_terms"):
        A, c, c_bias = constraint_terms(system, t, q, qd, p, bias)
        if active is not None:  # nothing traced otherwise
            A, c = A * active[:, None].astype(A.dtype), on(c)
            c_bias = None if c_bias is None else on(c_bias)
    with jax.named_scope("lagrangian_terms"):
        if bias:
            W, f0 = prescribed_terms(prescription, system, t, q, qd, mu, p, bias)
            rhs_at = lambda v: prescribed_rhs(prescription, system, t, q, v, mu, p)  # noqa: E731
        else:  # the bias terms at the stabilisation's velocity, sharing the work at q
            (W, rhs_at), f0 = prescribed_split(prescription, system, t, q, qd, mu, p), None
    with jax.named_scope("factor"):
        if active is None:
            state = solver.factor(W, A)
        else:
            state = solver.factor(W, A, inactive=~active)

    def bias_at(v):
        _, c_bias_v = constraint_bias(system, t, q, v, p)
        return on(c_bias_v), rhs_at(v)

    step = StepTerms(
        qd=qd,
        c=c,
        c_bias=c_bias,
        f0=f0,
        mask=mask,
        # The position-level terms are traced only where some row has a position level
        # (and, in the stabilisation, unless their rate is a concrete zero).
        position_rows=bool(mask.any()),
        project=lambda r: solver.project(state, r),
        bias_at=bias_at,
        position_residual=lambda: on(scatter_holonomic(mask, position_residual(system, t, q, p))),
    )
    terms = unstabilised(step) if stabilisation is None else stabilisation.terms(step)
    force = generalized_force(system, t, q, terms.velocity, p)
    with jax.named_scope("saddle_solve"):
        qdd, lam = solver.solve(state, terms.f0 + force, terms.b, consistency_rtol)
    return _Step(
        q_dot=terms.q_dot,
        qd_used=terms.velocity,
        qdd=qdd,
        lam=lam,
        state=state,
        A=A,
        b=terms.b,
        force=force,
    )


@full_precision
def project_state(
    system: System,
    prescription: AbstractPrescription,
    solver: AbstractConstraintSolver,
    t,
    q,
    qd,
    mu,
    p,
    mask: np.ndarray,
    positions: bool,
) -> tuple[Array, Array]:
    r"""$(q_P, \dot q_P)$: the velocity projected onto the velocity constraints,
    $\dot q_P = \dot q - W^{-1}A^\top(AW^{-1}A^\top)^+ c$, and with `positions` first the
    coordinates by one Gauss–Newton step on the holonomic rows,
    $q_P = q - W^{-1}G^\top(GW^{-1}G^\top)^+ g$ (then the velocity at $q_P$: a second
    factorisation of $(W, A)$) (`StepProjection`)."""

    solver = for_rows(solver, system.constraints)

    def factor(q):
        A, c, _ = constraint_terms(system, t, q, qd, p, bias=False)
        W, _ = prescribed_terms(prescription, system, t, q, qd, mu, p, bias=False)
        return solver.factor(W, A), c

    state, c = factor(q)
    if positions and mask.any():
        # The coordinates first, then the velocity at the projected coordinates.
        q = q - solver.project(state, scatter_holonomic(mask, position_residual(system, t, q, p)))
        state, c = factor(q)
    return q, qd - solver.project(state, c)


@compiled(times=("t",), states=("q", "qd", "mu"), params=("p",))
@full_precision
def accelerations(
    system: System,
    t: Time,
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    p: Params = None,
    *,
    prescription: AbstractPrescription = DAlembert(),
    mu: Float[Array, " m"] | None = None,
    constraint_solver: AbstractConstraintSolver = AutoSolver(),
    stabilisation: AbstractStabilisation | None = None,
) -> Accelerations:
    r"""Accelerations, multipliers and reactions of a constrained system at one state.

    Solves $W_\ast\ddot q = f_\ast + A^\top\lambda$, $A\ddot q = -c_\text{bias}$ (plus
    stabilisation terms if asked), docs/concepts/solve.md; under `Vakonomic` the effective
    Lagrangian is $L - \mu\cdot c$ and $\lambda = \dot\mu$ (Sławianowski et al. 2013).

    **Arguments:**

    - `system`: the `System`.
    - `t`, `q`, `qd`, `p`: time, coordinates `(n,)`, velocities `(n,)`, parameters.
    - `prescription`: `cx.DAlembert()` (default) or `cx.Vakonomic()`.
    - `mu`: vakonomic multipliers `(m,)` (required with `Vakonomic`).
    - `constraint_solver`: `cx.AutoSolver()` (default), `cx.KKT()` or `cx.UdwadiaKalaba()`.
    - `stabilisation`: `None`, `cx.Baumgarte(...)` or `cx.Projection(...)`.

    **Returns:** an `Accelerations` (`qdd`, `multipliers`, `reactions`, ...).

    **Example:**

    ```python
    out = cx.accelerations(system, 0.0, q, qd, p)
    out.qdd, out.multipliers, out.reactions
    ```
    """
    check_system(system)
    check_options(
        prescription=prescription, constraint_solver=constraint_solver, stabilisation=stabilisation
    )
    q, qd = check_state(q, qd)
    t = as_time(t, q)
    layout = row_layout(system, t, q, qd, p)
    mask = layout.mask
    mu = check_mu(prescription, mu, sum(layout.counts), q.dtype)
    where = "constrax.accelerations"
    t = check_finite(t, "t", where)
    q = check_finite(q, "q", where)
    qd = check_finite(qd, "qd", where)
    p = check_finite(p, "p", where)
    if mu is not None:
        mu = check_finite(mu, "mu", where)
    solver = for_rows(constraint_solver, system.constraints)
    step = _step(system, prescription, solver, stabilisation, t, q, qd, mu, p, mask)
    residual = step.A @ step.qdd - step.b
    R_mult = step.A.T @ step.lam
    if prescription.multiplier_state:
        # Total reaction with the *original* Lagrangian: R = W qdd - f0 - Q.
        W, f0 = lagrangian_terms(system, t, q, step.qd_used, p)
        R = W @ step.qdd - f0 - step.force
    else:
        R = R_mult
    return Accelerations(
        qdd=step.qdd,
        multipliers=step.lam,
        mu_dot=step.lam if prescription.multiplier_state else None,
        reactions=R,
        reactions_multiplier=R_mult,
        reactions_curl=R - R_mult,
        force=step.force,
        reaction_power=step.qd_used @ R,
        rank=solver.rank(step.state),
        velocity=step.q_dot,
        acceleration_residual=residual,
    )
