r"""How reactions are prescribed: Lagrange–d'Alembert or vakonomic (Hamilton–Lusternik).

Both reduce to the same saddle-point system (docs/concepts/prescriptions.md)

$$W_\ast \ddot q = f_\ast + A^\top\lambda, \qquad A\ddot q = -c_\text{bias} - \text{stab},$$

built from an *effective Lagrangian*: $L$ itself for d'Alembert (Neimark & Fufaev 1972;
Bloch 2003; docs/concepts/prescriptions.md), and $\Lambda = L - \mu\cdot c(t, q, \dot q)$ with the
multiplier $\mu(t)$ part of the state for the vakonomic prescription (Sławianowski et al. 2013;
docs/concepts/prescriptions.md), whose Euler–Lagrange equations give
$W_\mu\ddot q - A^\top\dot\mu = Q + \partial\Lambda/\partial q
- (\partial^2\Lambda/\partial\dot q\partial q)\dot q - \partial^2\Lambda/\partial\dot q\partial t$,
i.e. $\lambda = \dot\mu$. A new prescription is a new effective Lagrangian.
"""

import abc
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
from jaxtyping import Array, Float

from ._custom_types import Params
from ._system import System
from ._terms import stacked_residual


class AbstractPrescription(eqx.Module):
    """Turns a `System` into the effective Lagrangian of a saddle-point system."""

    multiplier_state: eqx.AbstractClassVar[bool]
    """Whether the multipliers `mu` are part of the state (vakonomic)."""

    @abc.abstractmethod
    def effective_lagrangian(
        self, system: System, mu: Float[Array, " m"] | None, p: Params
    ) -> Callable:
        """`(t, q, qd) -> scalar`, whose Euler–Lagrange equations carry reactions `A^T λ`."""


class DAlembert(AbstractPrescription):
    r"""Lagrange–d'Alembert prescription: ideal reactions $R = A^\top\lambda$.

    Neimark & Fufaev 1972; docs/concepts/prescriptions.md. For a nonlinear
    constraint $F(t, q, \dot q) = 0$ this is Chetaev's rule,
    $R = (\partial F/\partial\dot q)^\top\lambda$. Reactions do no work on admissible
    velocities of scleronomic linear constraints: $\dot q^\top R = 0$.
    """

    multiplier_state: ClassVar[bool] = False

    def effective_lagrangian(self, system, mu, p):
        return lambda t, q, qd: system.lagrangian(t, q, qd, p)


class Vakonomic(AbstractPrescription):
    r"""Vakonomic (Hamilton–Lusternik) prescription: $\delta\int L\,dt = 0$ on constrained curves.

    Sławianowski et al. 2013. The multipliers $\mu$ are part of the state and
    $\dot\mu = \lambda$ comes out of the saddle solve. For one-forms the reaction is
    $R_i = \dot\mu^a\omega_{ai} + \mu^a(\partial_j\omega_{ai} - \partial_i\omega_{aj})\dot q^j$
    (the curl $d\omega$); for holonomic rows the curl vanishes and the motion is the
    d'Alembert one with $\lambda = \dot\mu$. The initial value $\mu_0$ is free initial data of
    the vakonomic problem (different $\mu_0$ give different motions).

    A system with no constraints is allowed: $\mu$ is then empty and the motion is the
    unconstrained Euler–Lagrange motion.
    """

    multiplier_state: ClassVar[bool] = True

    def effective_lagrangian(self, system, mu, p):
        c = stacked_residual(system, p)
        return lambda t, q, qd: system.lagrangian(t, q, qd, p) - mu @ c(t, q, qd)
