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
from ._terms import euler_lagrange_rhs, euler_lagrange_terms, stacked_residual


class AbstractPrescription(eqx.Module):
    """Turns a `System` into the effective Lagrangian of a saddle-point system."""

    multiplier_state: eqx.AbstractClassVar[bool]
    """Whether the multipliers `mu` are part of the state (vakonomic)."""

    @abc.abstractmethod
    def effective_lagrangian(
        self, system: System, mu: Float[Array, " m"] | None, p: Params
    ) -> Callable:
        """`(t, q, qd) -> scalar`, whose Euler–Lagrange equations carry reactions `A^T λ`."""

    @abc.abstractmethod
    def extra_lagrangian(
        self, system: System, mu: Float[Array, " m"] | None, p: Params
    ) -> Callable | None:
        """The effective Lagrangian minus the system's own, `(t, q, qd) -> scalar`, or `None`
        where they are equal. The Euler–Lagrange terms are linear in the Lagrangian, so a
        system with `dynamics` adds this part's terms (by autodiff) to those of its
        `dynamics`."""


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

    def extra_lagrangian(self, system, mu, p):
        return None


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

    def extra_lagrangian(self, system, mu, p):
        c = stacked_residual(system, p)
        return lambda t, q, qd: -(mu @ c(t, q, qd))


def prescribed_terms(
    prescription: AbstractPrescription, system: System, t, q, qd, mu, p: Params, bias: bool = True
) -> tuple[Float[Array, "n n"], Float[Array, " n"] | None]:
    r"""$(W_\ast, f_\ast)$: the Euler–Lagrange terms of the effective Lagrangian. Without
    `system.dynamics`, autodiff of `effective_lagrangian`; with it, the dynamics' terms of
    $L$ plus autodiff of `extra_lagrangian` (the terms are linear in the Lagrangian)."""
    if system.dynamics is None:
        L = prescription.effective_lagrangian(system, mu, p)
        return euler_lagrange_terms(L, t, q, qd, bias)
    W, f0 = system.dynamics.euler_lagrange_terms(t, q, qd, p, bias)
    extra = prescription.extra_lagrangian(system, mu, p)
    if extra is None:
        return W, f0
    W_extra, f_extra = euler_lagrange_terms(extra, t, q, qd, bias)
    return W + W_extra, (f0 + f_extra) if bias else None


def prescribed_split(prescription: AbstractPrescription, system: System, t, q, qd, mu, p: Params):
    r"""`(W_*, rhs)`: `prescribed_terms` without the bias, and `rhs(v)` $= f_\ast$ at
    `(t, q, v)`, sharing the work at `q` where `system.dynamics` can
    (`AbstractDynamics.euler_lagrange_split`)."""
    if system.dynamics is None:
        W, _ = prescribed_terms(prescription, system, t, q, qd, mu, p, bias=False)
        return W, lambda v: prescribed_rhs(prescription, system, t, q, v, mu, p)
    W, rhs = system.dynamics.euler_lagrange_split(t, q, qd, p)
    extra = prescription.extra_lagrangian(system, mu, p)
    if extra is None:
        return W, rhs
    W_extra, _ = euler_lagrange_terms(extra, t, q, qd, bias=False)
    return W + W_extra, lambda v: rhs(v) + euler_lagrange_rhs(extra, t, q, v)


def prescribed_rhs(
    prescription: AbstractPrescription, system: System, t, q, qd, mu, p: Params
) -> Float[Array, " n"]:
    r"""$f_\ast$ alone (`euler_lagrange_rhs` of the effective Lagrangian), as
    `prescribed_terms`."""
    if system.dynamics is None:
        return euler_lagrange_rhs(prescription.effective_lagrangian(system, mu, p), t, q, qd)
    f0 = system.dynamics.euler_lagrange_rhs(t, q, qd, p)
    extra = prescription.extra_lagrangian(system, mu, p)
    return f0 if extra is None else f0 + euler_lagrange_rhs(extra, t, q, qd)
