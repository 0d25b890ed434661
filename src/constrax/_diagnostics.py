r"""Diagnostics: energy, effective energy, constraint residuals, reaction power, rank.

docs/concepts/prescriptions.md (ideal constraints do no work; the effective energy
$E[L, M]$), docs/concepts/singular.md (the rank of $A$).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ._checks import check_system
from ._compilation import compiled
from ._custom_types import Params, Time
from ._dynamics import accelerations
from ._layout import row_layout
from ._prescriptions import AbstractPrescription, DAlembert
from ._solve import AbstractConstraintSolver, AutoSolver
from ._state import as_time, check_state
from ._system import System
from ._terms import constraint_terms, position_residual, stacked_residual
from ._tolerances import rank_rtol


def _prepare(system, t, q, qd, p):
    check_system(system)
    q, qd = check_state(q, qd)
    t = as_time(t, q)
    row_layout(system, t, q, qd, p)  # the trace-time shape checks
    return t, q, qd


@compiled(times=("t",), states=("q", "qd"), params=("p",))
def energy(system: System, t: Time, q, qd, p: Params = None) -> Float[Array, ""]:
    r"""Energy function $E = \dot q\cdot\partial L/\partial\dot q - L$.

    Conserved by conservative, scleronomic systems under d'Alembert reactions; its balance
    with forces is $\dot E = Q\cdot\dot q - \partial L/\partial t$.

    **Example:**

    ```python
    cx.energy(system, 0.0, q, qd, p)
    ```
    """
    t, q, qd = _prepare(system, t, q, qd, p)
    L, dL = jax.jvp(lambda v: system.lagrangian(t, q, v, p), (qd,), (qd,))
    return dL - L


@compiled(times=("t",), states=("q", "qd", "mu"), params=("p",))
def effective_energy(system: System, t: Time, q, qd, mu, p: Params = None) -> Float[Array, ""]:
    r"""Vakonomic effective energy $E[L, M] = E - \mu^a\dot q^i\,\partial c_a/\partial\dot q^i$.

    Sławianowski et al. 2013: conserved by the vakonomic
    motion without dissipation. The paper writes $L[\mu] = L + \mu^a F_a$ and
    $E + \mu^a\dot q^i\partial F_a/\partial\dot q^i$; constrax uses
    $\Lambda = L - \mu\cdot c$ (so its $\mu$ is minus the paper's), hence the minus sign:
    this is the energy function of $\Lambda$ on $c = 0$.

    **Example:**

    ```python
    mu = jnp.array([0.5])                      # one multiplier per constraint row
    cx.effective_energy(system, 0.0, q, qd, mu, p)
    ```
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


@compiled(times=("t",), states=("q", "qd"), params=("p",))
def constraint_residual(system: System, t: Time, q, qd, p: Params = None) -> ConstraintResidual:
    r"""Position residual $g(t, q)$ (holonomic rows) and velocity residual $c(t, q, \dot q)$.

    **Example:**

    ```python
    res = cx.constraint_residual(system, 0.0, q, qd, p)
    res.position, res.velocity                 # (h,) holonomic rows, (m,) all rows
    ```
    """
    t, q, qd = _prepare(system, t, q, qd, p)
    return ConstraintResidual(
        position=position_residual(system, t, q, p),
        velocity=stacked_residual(system, p)(t, q, qd),
    )


@compiled(times=("t",), states=("q", "qd"), params=("p",))
def constraint_jacobian(system: System, t: Time, q, qd, p: Params = None) -> Float[Array, "m n"]:
    r"""$A = \partial c/\partial\dot q$: the stacked one-form rows (for linear constraints,
    independent of `qd`).

    **Example:**

    ```python
    cx.constraint_jacobian(system, 0.0, q, qd, p)   # (m, n)
    ```
    """
    t, q, qd = _prepare(system, t, q, qd, p)
    return constraint_terms(system, t, q, qd, p)[0]


class ConstraintRank(eqx.Module):
    """`rank` of $A(q)$ and its `singular_values` (descending)."""

    rank: Int[Array, ""]
    singular_values: Float[Array, " k"]


@compiled(times=("t",), states=("q", "qd"), params=("p",))
def constraint_rank(
    system: System, t: Time, q, qd, p: Params = None, *, rtol: float | None = None
) -> ConstraintRank:
    r"""Numerical rank and singular values of $A(q)$; `rtol` defaults to $\sqrt\epsilon$.

    The constraint distribution $D_q = \ker A(q)$ has dimension $n - \operatorname{rank}$;
    a drop in rank marks a singular configuration (Briggs 2016, Definition 5.3, Corollary 5.5).
    `qd` only matters for nonlinear velocity constraints.

    **Example:**

    ```python
    r = cx.constraint_rank(system, 0.0, q, qd, p)
    r.rank, r.singular_values
    ```
    """
    A = constraint_jacobian(system, t, q, qd, p)
    if A.shape[0] == 0:
        return ConstraintRank(jnp.zeros((), jnp.int32), jnp.zeros((0,), A.dtype))
    sv = jnp.linalg.svd(A, compute_uv=False)
    rtol = rank_rtol(A.dtype) if rtol is None else rtol
    return ConstraintRank(jnp.sum(sv > rtol * sv[0]).astype(jnp.int32), sv)


@compiled(times=("t",), states=("q", "qd", "mu"), params=("p",))
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
    constraints, docs/concepts/constraints.md; generally not for vakonomic ones).

    **Example:**

    ```python
    cx.reaction_power(system, 0.0, q, qd, p)   # 0 for the knife edge
    ```
    """
    return accelerations(
        system, t, q, qd, p, prescription=prescription, mu=mu, constraint_solver=constraint_solver
    ).reaction_power
