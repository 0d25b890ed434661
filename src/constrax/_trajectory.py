"""`Trajectory`: the result of `simulate`, and the quantities along it."""

import diffrax
import equinox as eqx
import jax
from jaxtyping import Array, Float

from ._custom_types import Params
from ._diagnostics import (
    ConstraintRank,
    ConstraintResidual,
    constraint_rank,
    effective_energy,
    energy as _energy,
)
from ._dynamics import Accelerations, accelerations
from ._prescriptions import AbstractPrescription
from ._solve import AbstractConstraintSolver
from ._stabilisation import AbstractStabilisation
from ._system import System
from ._terms import position_residual, stacked_residual


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
