r"""The unconstrained dynamics of a `System`: the Euler–Lagrange terms of its Lagrangian,
$W = \partial^2L/\partial\dot q^2$ and
$f_0 = \partial L/\partial q - (\partial^2L/\partial\dot q\,\partial q)\dot q
- \partial^2L/\partial\dot q\,\partial t$ (docs/concepts/lagrangians.md).

`AbstractDynamics` is the interface the engine reads them through; `LagrangianDynamics`
computes them by autodiff of a Lagrangian (what the engine does for a `System` without
`dynamics`), `cx.rigid.TreeDynamics` by the composite-rigid-body and recursive
Newton–Euler algorithms of a kinematic tree. A `System` with `dynamics` takes the terms
from there; `lagrangian` stays the reference model (energy, diagnostics, linearisation read
it), and the contract is that both give the same terms. Since the Euler–Lagrange terms are
linear in the Lagrangian, a prescription's extra part (the vakonomic $-\mu\cdot c$) is added
to them by autodiff (`AbstractPrescription.extra_lagrangian`).
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import LagrangianFn, Params, Time


def _gradients(lagrangian: Callable) -> Callable:
    return jax.grad(lagrangian, argnums=(1, 2))


def euler_lagrange_terms(
    lagrangian: Callable, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], bias: bool = True
) -> tuple[Float[Array, "n n"], Float[Array, " n"] | None]:
    r"""$(W, f_0)$ with $W = \partial^2 L/\partial\dot q^2$ and
    $f_0 = \partial L/\partial q - (\partial^2 L/\partial\dot q\partial q)\dot q
    - \partial^2 L/\partial\dot q\partial t$, for `lagrangian(t, q, qd)`.

    $W$ is the forward Jacobian of $\partial L/\partial\dot q$ in $\dot q$ alone, $f_0$
    `euler_lagrange_rhs`: no tangents that are known to be zero. With `bias=False`, $W$
    and `None` (the caller evaluates $f_0$ elsewhere).
    """
    W = jax.jacfwd(jax.grad(lagrangian, argnums=2), argnums=2)(t, q, qd)
    return W, euler_lagrange_rhs(lagrangian, t, q, qd) if bias else None


def euler_lagrange_rhs(lagrangian: Callable, t, q, qd) -> Float[Array, " n"]:
    r"""$f_0$ alone: one `jax.jvp` of $(\partial L/\partial q, \partial L/\partial\dot q)$
    along $(1, \dot q)$ in $(t, q)$ with $\dot q$ fixed (no mass matrix)."""
    grads = _gradients(lagrangian)
    (Lq, _), (_, Lqd_dot) = jax.jvp(
        lambda t_, q_: grads(t_, q_, qd), (t, q), (jnp.ones_like(t), qd)
    )
    return Lq - Lqd_dot


class AbstractDynamics(eqx.Module):
    r"""The unconstrained Euler–Lagrange terms of `System.lagrangian`, computed another way:
    pass one as `cx.System(..., dynamics=...)`.

    An implementation must return exactly the terms that autodiff of the Lagrangian gives:
    the mass matrix $W = \partial^2L/\partial\dot q^2$ and the right-hand side
    $f_0 = \partial L/\partial q - (\partial^2L/\partial\dot q\,\partial q)\dot q
    - \partial^2L/\partial\dot q\,\partial t$, so that the unconstrained motion is
    $W\ddot q = f_0 + Q$ (Lagrange's equations of the second kind; Goldstein, Poole & Safko,
    *Classical Mechanics*, 2002, §1.4). Everything downstream (both prescriptions,
    stabilisation, the constraint solvers, `cx.mass_matrix`, `cx.consistent_initial_state`,
    `cx.impulsive_jump`, gradients, batching) reads the terms from here. Nothing checks the
    contract at run time: a `System` whose `dynamics` disagrees with its `lagrangian` is a
    different model (its energy and linearisation read the Lagrangian).

    Implementations: `cx.LagrangianDynamics` (autodiff, the default), and
    `cx.rigid.TreeDynamics` (composite-rigid-body mass matrix, recursive Newton–Euler bias;
    Featherstone, *Rigid Body Dynamics Algorithms*, 2008), which every `cx.rigid.from_mjcf`
    system carries.

    **Example:** a pendulum of mass $m$ and length $l$, angle $\theta$ from the downward
    vertical, $L = \tfrac12 m l^2\dot\theta^2 + m g l\cos\theta$:

    ```python
    class Pendulum(cx.AbstractDynamics):
        def euler_lagrange_terms(self, t, q, qd, p, bias=True):
            W = (p["m"] * p["l"] ** 2)[None, None]
            return W, self.euler_lagrange_rhs(t, q, qd, p) if bias else None

        def euler_lagrange_rhs(self, t, q, qd, p):
            return -p["m"] * 9.81 * p["l"] * jnp.sin(q)

    L = lambda t, q, qd, p: (0.5 * p["m"] * p["l"] ** 2 * qd[0] ** 2
                             + p["m"] * 9.81 * p["l"] * jnp.cos(q[0]))
    system = cx.System(L, dynamics=Pendulum())
    ```
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
        """`(W, f0)` at `(t, q, qd)`; with `bias=False`, `(W, None)` (the engine then
        needs the mass matrix alone: projections, initial states, impulses)."""

    @abc.abstractmethod
    def euler_lagrange_rhs(
        self, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], p: Params
    ) -> Float[Array, " n"]:
        """`f0` alone (no mass matrix where it can be avoided)."""

    def euler_lagrange_split(
        self, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], p: Params
    ) -> tuple[Float[Array, "n n"], Callable[[Float[Array, " n"]], Float[Array, " n"]]]:
        """`(W, rhs)`: `W` at `(t, q, qd)` and `rhs(v)`, `f0` at `(t, q, v)` (what the
        engine's velocity projection needs: the bias terms at the projected velocity).
        By default `euler_lagrange_terms(..., bias=False)` and `euler_lagrange_rhs`; an
        implementation whose two share work at `q` (a tree's kinematics) overrides it."""
        W, _ = self.euler_lagrange_terms(t, q, qd, p, bias=False)
        return W, lambda v: self.euler_lagrange_rhs(t, q, v, p)


class LagrangianDynamics(AbstractDynamics):
    r"""The Euler–Lagrange terms of a Lagrangian by autodiff: what the engine computes for a
    `System` without `dynamics`.

    $W = \partial^2L/\partial\dot q^2$ is the forward Jacobian of $\partial L/\partial\dot q$
    in $\dot q$; $f_0 = \partial L/\partial q - (\partial^2L/\partial\dot q\,\partial q)\dot q
    - \partial^2L/\partial\dot q\,\partial t$ is one `jax.jvp` of
    $(\partial L/\partial q, \partial L/\partial\dot q)$ along $(1, \dot q)$, never the full
    mixed Hessian. The reference an `AbstractDynamics` of one's own is checked against.

    **Arguments:** `lagrangian`: `L(t, q, qd, p) -> scalar`.

    **Example:**

    ```python
    W, f0 = cx.LagrangianDynamics(L).euler_lagrange_terms(0.0, q, qd, p)
    ```
    """

    lagrangian: LagrangianFn

    def euler_lagrange_terms(
        self,
        t: Time,
        q: Float[Array, " n"],
        qd: Float[Array, " n"],
        p: Params,
        bias: bool = True,
    ) -> tuple[Float[Array, "n n"], Float[Array, " n"] | None]:
        """`(W, f0)` by autodiff of `lagrangian`; with `bias=False`, `(W, None)`."""
        return euler_lagrange_terms(
            lambda t_, q_, qd_: self.lagrangian(t_, q_, qd_, p), t, q, qd, bias
        )

    def euler_lagrange_rhs(
        self, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], p: Params
    ) -> Float[Array, " n"]:
        """`f0` by one `jax.jvp` (no mass matrix)."""
        return euler_lagrange_rhs(lambda t_, q_, qd_: self.lagrangian(t_, q_, qd_, p), t, q, qd)
