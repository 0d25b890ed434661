r"""`AbstractDynamics`: the unconstrained Euler–Lagrange terms of a `System`'s Lagrangian,
computed another way than by autodiff (e.g. by the composite-rigid-body and recursive
Newton–Euler algorithms of a kinematic tree, `cx.rigid.from_mjcf`).

The engine's default reads $W = \partial^2L/\partial\dot q^2$ and
$f_0 = \partial L/\partial q - (\partial^2L/\partial\dot q\,\partial q)\dot q
- \partial^2L/\partial\dot q\,\partial t$ from autodiff of `System.lagrangian`
(`_terms.euler_lagrange_terms`). A `System` with `dynamics` takes them from there instead;
`lagrangian` stays the reference model (energy, diagnostics, linearisation read it), and the
contract is that both give the same terms. Since the Euler–Lagrange terms are linear in the
Lagrangian, a prescription's extra part (the vakonomic $-\mu\cdot c$) is added to them by
autodiff (`AbstractPrescription.extra_lagrangian`).
"""

import abc

import equinox as eqx
from jaxtyping import Array, Float

from ._custom_types import Params, Time


class AbstractDynamics(eqx.Module):
    r"""The unconstrained Euler–Lagrange terms of `System.lagrangian`, computed another way.

    An implementation must return exactly the terms that autodiff of the Lagrangian gives:
    the mass matrix $W = \partial^2L/\partial\dot q^2$ and the right-hand side
    $f_0 = \partial L/\partial q - (\partial^2L/\partial\dot q\,\partial q)\dot q
    - \partial^2L/\partial\dot q\,\partial t$, so that the unconstrained motion is
    $W\ddot q = f_0 + Q$ (Lagrange's equations of the second kind; Goldstein, Poole & Safko,
    *Classical Mechanics*, 2002, §1.4). Nothing checks this at run time: a `System` whose
    `dynamics` disagrees with its `lagrangian` is a different model.
    """

    @abc.abstractmethod
    def euler_lagrange_terms(
        self,
        t: Time,
        q: Float[Array, " n"],
        qd: Float[Array, " n"],
        p: Params,
        bias: bool = True,
    ) -> tuple[Float[Array, "n n"], Float[Array, " n"] | None]:
        """`(W, f0)` at `(t, q, qd)`; with `bias=False`, `(W, None)`."""

    @abc.abstractmethod
    def euler_lagrange_rhs(
        self, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], p: Params
    ) -> Float[Array, " n"]:
        """`f0` alone (no mass matrix where it can be avoided)."""
