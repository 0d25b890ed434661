r"""Diagnostics: energy, effective energy, constraint residuals, reaction power, rank.

DESIGN.md §1 ("Energy", "Geometry"); seed 001 §5.4.2 (ideal constraints do no work),
seed 002 "Nonlinear vakonomic constraints" (effective energy $E[L, M]$).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._checks import check_system
from ._custom_types import Params, Time
from ._dynamics import accelerations
from ._prescriptions import AbstractPrescription, DAlembert
from ._solve import AbstractConstraintSolver, AutoSolver
from ._system import (
    System,
    as_time,
    check_state,
    constraint_row_counts,
    constraint_terms,
    position_residual,
    stacked_residual,
)


def _prepare(system, t, q, qd, p):
    check_system(system)
    q, qd = check_state(q, qd)
    t = as_time(t, q)
    constraint_row_counts(system, t, q, qd, p)
    return t, q, qd


def energy(system: System, t: Time, q, qd, p: Params = None) -> Float[Array, ""]:
    r"""Energy function $E = \dot q\cdot\partial L/\partial\dot q - L$.

    Conserved by conservative, scleronomic systems under d'Alembert reactions; its balance
    with forces is $\dot E = Q\cdot\dot q - \partial L/\partial t$.

    **Example:** `cx.energy(system, 0.0, q, qd, p)`.
    """
    t, q, qd = _prepare(system, t, q, qd, p)
    L, dL = jax.jvp(lambda v: system.lagrangian(t, q, v, p), (qd,), (qd,))
    return dL - L


def effective_energy(system: System, t: Time, q, qd, mu, p: Params = None) -> Float[Array, ""]:
    r"""Vakonomic effective energy $E[L, M] = E - \mu^a\dot q^i\,\partial c_a/\partial\dot q^i$.

    Seed 002, "Nonlinear vakonomic constraints (cont.)": conserved by the vakonomic
    motion without dissipation. The seed writes $L[\mu] = L + \mu^a F_a$ and
    $E + \mu^a\dot q^i\partial F_a/\partial\dot q^i$; constrax uses
    $\Lambda = L - \mu\cdot c$ (so its $\mu$ is minus the seed's), hence the minus sign:
    this is the energy function of $\Lambda$ on $c = 0$.

    **Example:** `cx.effective_energy(system, t, q, qd, mu, p)`.
    """
    t, q, qd = _prepare(system, t, q, qd, p)
    c = stacked_residual(system, p)
    _, A_qd = jax.jvp(lambda v: c(t, q, v), (qd,), (qd,))
    return energy(system, t, q, qd, p) - jnp.asarray(mu, q.dtype) @ A_qd


class ConstraintResidual(eqx.Module):
    """Residuals of the constraints: `position` ($g$ of holonomic rows, `(h,)`) and
    `velocity` ($c$ of all rows, `(m,)`)."""

    position: Float[Array, " h"]
    velocity: Float[Array, " m"]

    def max(self) -> Float[Array, ""]:
        """Largest absolute residual (position and velocity together)."""
        both = jnp.concatenate([jnp.abs(self.position), jnp.abs(self.velocity)])
        return jnp.max(both, initial=0.0)


def constraint_residual(system: System, t: Time, q, qd, p: Params = None) -> ConstraintResidual:
    r"""Position residual $g(t, q)$ (holonomic rows) and velocity residual $c(t, q, \dot q)$.

    **Example:** `cx.constraint_residual(system, t, q, qd, p).velocity`.
    """
    t, q, qd = _prepare(system, t, q, qd, p)
    return ConstraintResidual(
        position=position_residual(system, t, q, p),
        velocity=stacked_residual(system, p)(t, q, qd),
    )


def constraint_jacobian(system: System, t: Time, q, qd, p: Params = None) -> Float[Array, "m n"]:
    r"""$A = \partial c/\partial\dot q$: the stacked one-form rows (for linear constraints,
    independent of `qd`)."""
    t, q, qd = _prepare(system, t, q, qd, p)
    return constraint_terms(system, t, q, qd, p)[0]


class ConstraintRank(eqx.Module):
    """`rank` of $A(q)$ and its `singular_values` (descending)."""

    rank: Int[Array, ""]
    singular_values: Float[Array, " k"]


def constraint_rank(
    system: System, t: Time, q, qd, p: Params = None, *, rtol: float | None = None
) -> ConstraintRank:
    r"""Numerical rank and singular values of $A(q)$; `rtol` defaults to $\sqrt\epsilon$.

    The constraint distribution $D_q = \ker A(q)$ has dimension $n - \operatorname{rank}$;
    a drop in rank marks a singular configuration (seed 003 Definition 5.3, Corollary 5.5).
    `qd` only matters for nonlinear velocity constraints.
    """
    A = constraint_jacobian(system, t, q, qd, p)
    if A.shape[0] == 0:
        return ConstraintRank(jnp.zeros((), jnp.int32), jnp.zeros((0,), A.dtype))
    sv = jnp.linalg.svd(A, compute_uv=False)
    rtol = float(np.sqrt(np.finfo(A.dtype).eps)) if rtol is None else rtol
    return ConstraintRank(jnp.sum(sv > rtol * sv[0]).astype(jnp.int32), sv)


def reaction_power(
    system: System,
    t: Time,
    q,
    qd,
    p: Params = None,
    *,
    prescription: AbstractPrescription = DAlembert(),
    mu=None,
    constraint_solver: AbstractConstraintSolver = AutoSolver(),
) -> Float[Array, ""]:
    r"""Power of the reactions $\dot q^\top R$ (zero for ideal scleronomic d'Alembert
    constraints, seed 001 Definition 5.3; generally not for vakonomic ones)."""
    return accelerations(
        system, t, q, qd, p, prescription=prescription, mu=mu, constraint_solver=constraint_solver
    ).reaction_power
