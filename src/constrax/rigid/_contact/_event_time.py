r"""The time derivative of the dense output at a segment's event, from the vector field
(`simulate_contacts`, docs page "Rolling or sliding").

diffrax locates an `Event` by a root find on the step's dense output $u(t)$, the
solver's interpolating polynomial, and differentiates the located time by the implicit
function theorem on $\phi(t, u(t; \theta), \theta) = 0$:

$$
\frac{dt^*}{d\theta} = -\frac{\partial_\theta\phi + \partial_y\phi\,\partial_\theta u}
{\partial_t\phi + \partial_y\phi\,\dot u(t^*)}.
$$

The polynomial's value is accurate to the step's local error, but its slope $\dot u$ is
an order less accurate than its value. A ball rolling under a gravity that turns at rate
$\omega$ leaves the static friction cone at $t^* = \arctan(7\mu_s/2)/\omega$; with
`Tsit5` at the default tolerances ($10^{-8}$) the located $t^*$ was right to
$9\cdot10^{-10}$ but $dt^*/d\mu_s$ (where $\partial_\theta u = 0$: only the slope enters) and
$dt^*/d\omega$ only to $5\cdot10^{-7}$. Where the motion is a polynomial of low degree in
$t$ (a constant or a linearly growing force) the dense output is exact and the error
vanishes, which is why the closed forms of such cases did not show it; it is no matter of
the explicit time dependence (an autonomous harmonic oscillator shows the same, its error
shrinking with the tolerance as the slope's does). The slope also enters the state's
derivative at the event, $dy^*/d\theta = \partial_\theta u + \dot u\,dt^*/d\theta$, where
the next segment starts.

`exact_rate(solver, term, args)` wraps the solver so that its dense output keeps its
values and its derivatives in everything but $t$ (the discrete scheme's
$\partial_\theta u$), but takes its derivative in $t$ from the vector field, $f(t, u(t))$:
a Newton root find's steps, the implicit derivative and $dy^*/d\theta$ then use
$\partial_t\phi + \partial_y\phi\,f$, the rate of the exact flow, as accurate as the state
(the same ball: $dt^*/d\mu_s$ right to $6\cdot10^{-9}$, $dt^*/d\omega$ to $10^{-8}$). The
field is evaluated only where the dense output is differentiated in $t$ (a `custom_jvp`
whose value is zero): the implicit derivative (and a Newton root find's steps), not
the forward run's save times. The derivative is then that of the exact switching time
rather than of the computed one: central differences of the run, which differentiate the
root of the polynomial, agree with it only to the polynomial's slope.

Every `isinstance` check on the solver is forwarded to the wrapped one
(`diffrax.AbstractWrappedSolver`); its steps, error estimates and saved values are
unchanged.
"""

from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from ..._wrapped_solver import ForwardingSolver


def _stop(tree):
    return jtu.tree_map(lambda x: jax.lax.stop_gradient(x) if eqx.is_inexact_array(x) else x, tree)


class _ExactRateInterpolation(diffrax.AbstractLocalInterpolation):
    """A step's dense output `inner` whose derivative in `t` is `term`'s vector field at
    the interpolated state (module docstring); its values are `inner`'s."""

    inner: diffrax.AbstractLocalInterpolation
    term: diffrax.AbstractTerm
    args: Any

    @property
    def t0(self):
        return self.inner.t0

    @property
    def t1(self):
        return self.inner.t1

    def evaluate(self, t0, t1=None, left: bool = True):
        del left  # the dense outputs of ODE solvers are continuous
        if t1 is not None:
            a, b = self.evaluate(t0), self.evaluate(t1)
            return jtu.tree_map(lambda x, y: y - x, a, b)
        # The value and its derivative in everything but t (the step's states and stages,
        # the discrete scheme's) at a fixed t; then t's derivative from the vector field,
        # evaluated only where t is differentiated (`_shift`).
        t = jax.lax.stop_gradient(t0)
        y = self.inner.evaluate(t)
        shift = _shift(self.term, y, self.args)
        return jtu.tree_map(lambda yi, si: yi + si, y, shift(t0))


def _shift(term, y, args):
    """`t -> 0` (a tree like `y`) whose derivative in `t` is `term`'s vector field at
    `(t, y)`, without derivatives of its own: the field is traced only into programs
    that differentiate `t` (the event's root find and its implicit derivative), not into
    the forward run's saves. The arrays of `y` and `args` are explicit inputs of the
    `custom_jvp` (a closed-over tracer would leak out of it under `vmap`); `term` must
    close over none (the contact run passes its model in `args`)."""
    dynamic, static = eqx.partition((y, args), eqx.is_array)

    @jax.custom_jvp
    def shift(t, dynamic):
        y, _ = eqx.combine(dynamic, static)
        return jtu.tree_map(jnp.zeros_like, y)

    @shift.defjvp
    def shift_jvp(primals, tangents):
        (t, dynamic), (t_dot, _) = primals, tangents
        y, args = eqx.combine(dynamic, static)
        rate = _stop(term.vf(jax.lax.stop_gradient(t), y, args))
        return shift(t, dynamic), jtu.tree_map(lambda r: r * t_dot, rate)

    return lambda t: shift(t, _stop(dynamic))


class _ExactRateSolver(ForwardingSolver):
    """`solver` with the dense output of `_ExactRateInterpolation`; everything else
    forwarded."""

    solver: diffrax.AbstractSolver
    term: diffrax.AbstractTerm
    args: Any

    @property
    def interpolation_cls(self) -> Callable[..., diffrax.AbstractLocalInterpolation]:
        inner_cls, term, args = self.solver.interpolation_cls, self.term, self.args

        def make(**kwargs):
            return _ExactRateInterpolation(inner_cls(**kwargs), term, args)

        return make


def exact_rate(solver: diffrax.AbstractSolver, term: diffrax.AbstractTerm, args) -> Any:
    """`solver` for a `diffrax.diffeqsolve(term, ..., args=args, event=...)` whose event
    time and state are differentiated with `term`'s vector field as the dense output's
    rate (module docstring)."""
    return _ExactRateSolver(solver, term, args)
