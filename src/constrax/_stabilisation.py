r"""Drift control for the index-reduced equations (docs/concepts/stabilisation.md).

Differentiating the constraints to acceleration level makes $g = 0$ and $c = 0$ invariant
but not attractive: integration error accumulates. Three remedies:

* `Baumgarte(alpha, beta)`: $A\ddot q = -c_\text{bias} - (2\alpha c + \beta^2 g)$ on
  holonomic rows and $-\alpha c$ on velocity rows, so $\ddot g + 2\alpha\dot g + \beta^2 g = 0$
  and $\dot c = -\alpha c$.
* `StepProjection()` (the default of `cx.simulate`): the state projected onto the
  constraints after every solver step, the field evaluated at the projected velocity
  without a decay term (Hairer, Lubich & Wanner 2006, §IV.4).
* `Projection(alpha, beta)`: the vector field is evaluated at the $W$-orthogonal
  projection $\dot q_P$ of the velocity onto the constraint set, with
  $A\ddot q = -c_\text{bias}(q, \dot q_P) - \alpha c(q, \dot q)$ and
  $\dot q$-equation $\dot q_\text{pos} = \dot q_P - \beta\,W^{-1}A^\top(AW^{-1}A^\top)^+ g$.
  The velocity error $\delta = \dot q - \dot q_P$ then obeys $\dot\delta = -\alpha\delta$ and
  the position error $\dot g = -\beta g$, *measured in velocity units*, not in units of
  $c$. This is what keeps the snake cart of Briggs 2016, §1.2 on its constraints as it
  crosses $\phi = \pm\pi/2$: there a constraint row degenerates like $\cos\phi$, so a
  residual $c$ corresponds to a velocity error $c/\cos\phi$, which plain Baumgarte lets
  grow without bound. Use it with `UdwadiaKalaba` or `AutoSolver` across singularities.

Rates are in 1/time units of the problem: choose them a few times faster than the
fastest physical rate and slower than the integrator's step can resolve (`alpha * dt`
well below 1 for explicit solvers).
"""

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

if TYPE_CHECKING:
    import diffrax


def static_zero(rate) -> bool:
    """Whether `rate` is a concrete zero (a Python or NumPy number, not a JAX array): its
    term is then left out of the trace rather than multiplied by zero, which XLA does not
    fold (`0 * x` is NaN for non-finite `x`)."""
    return isinstance(rate, (int, float, np.number)) and rate == 0


class StepTerms(NamedTuple):
    r"""What a stabilisation reads of one evaluation of the dynamics at $(t, q, \dot q)$,
    with $A$ and $W$ factored."""

    qd: Float[Array, " n"]
    """The velocity of the state."""
    c: Float[Array, " m"]
    r"""The constraint rows $c(t, q, \dot q)$."""
    c_bias: Float[Array, " m"] | None
    r"""$c_\text{bias}$ at $\dot q$ (`None` unless the scheme's `bias_at_state_velocity`)."""
    f0: Float[Array, " n"] | None
    r"""$f_0$ of the Lagrangian at $\dot q$ (`None` unless `bias_at_state_velocity`)."""
    mask: np.ndarray
    """Static boolean mask of the rows with a position level."""
    position_rows: bool
    """Whether the position-level terms are traced: some rows have a position level."""
    project: Callable[[Array], Array]
    r"""$r \mapsto$ the minimum-$W$-norm $\delta$ with $A\delta = r$."""
    bias_at: Callable[[Array], tuple[Array, Array]]
    r"""$v \mapsto (c_\text{bias}, f_0)$ at the velocity $v$."""
    position_residual: Callable[[], Array]
    """The position residual $g$ on the rows of `mask`, zeros on the others."""


class StabilisedTerms(NamedTuple):
    r"""A stabilisation's contribution to one evaluation of the dynamics: the saddle system
    $W\ddot q = f_0 + Q + A^\top\lambda$, $A\ddot q = b$ is solved at `velocity`, and
    the time derivative of $q$ is `q_dot`."""

    velocity: Float[Array, " n"]
    """The velocity the dynamics are evaluated at (the force $Q$ too)."""
    q_dot: Float[Array, " n"]
    """The time derivative of $q$."""
    b: Float[Array, " m"]
    r"""The right-hand side of the acceleration-level rows $A\ddot q = b$."""
    f0: Float[Array, " n"]
    """The Lagrangian part $f_0$ of the right-hand side, at `velocity`."""


def unstabilised(step: StepTerms) -> StabilisedTerms:
    r"""The terms without stabilisation: $b = -c_\text{bias}$ at the state's velocity."""
    return StabilisedTerms(velocity=step.qd, q_dot=step.qd, b=-step.c_bias, f0=step.f0)


class AbstractStabilisation(eqx.Module):
    """Base class of drift-control schemes (`Baumgarte`, `Projection`).

    A scheme contributes to each evaluation of the vector field (`terms`, reading the
    bias at the state's velocity or not, `bias_at_state_velocity`) and may change the
    integration itself (`wrap_solver`).

    The rates `alpha` and `beta` must be non-negative and finite (checked when they are
    concrete numbers; traced rates, e.g. under `jax.grad`, are taken as given).
    """

    alpha: eqx.AbstractVar[float]
    beta: eqx.AbstractVar[float]
    bias_at_state_velocity: eqx.AbstractClassVar[bool]
    r"""Whether `terms` reads $c_\text{bias}$ and $f_0$ at the state's velocity $\dot q$
    (computed with $A$ and $W$ in one pass); `False` for a scheme that evaluates them at a
    velocity of its own (`StepTerms.bias_at`), so that they are not computed twice."""

    @abc.abstractmethod
    def fastest_rate(self) -> float:
        """The fastest decay rate (1/time) the scheme imposes on constraint errors."""

    @abc.abstractmethod
    def terms(self, step: StepTerms) -> StabilisedTerms:
        """Its contribution to one evaluation of the dynamics."""

    @abc.abstractmethod
    def wrap_solver(
        self, solver: "diffrax.AbstractSolver", vector_field
    ) -> "diffrax.AbstractSolver":
        """The diffrax solver `simulate` integrates `vector_field` with: `solver` itself for
        a scheme that acts through the vector field alone, a wrapper of it for one that
        also acts on the state between steps."""

    def __check_init__(self):
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, jax.core.Tracer):
                continue
            try:
                x = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                raise TypeError(
                    f"cx.{type(self).__name__}: `{name}` must be a non-negative rate (1/time), "
                    f"got {value!r}"
                ) from None
            if not np.all(np.isfinite(x) & (x >= 0)):
                raise ValueError(
                    f"cx.{type(self).__name__}: `{name}` must be a non-negative finite rate "
                    f"(1/time), got {value!r} (a negative rate makes the constraint drift grow "
                    f"instead of decay); use e.g. {name}=10.0"
                )


class Baumgarte(AbstractStabilisation):
    r"""Baumgarte stabilisation: $\ddot g + 2\alpha\dot g + \beta^2 g = 0$, $\dot c = -\alpha c$.

    **Arguments:**

    - `alpha`: velocity-level rate (1/time), default `10.0`.
    - `beta`: position-level rate (1/time) for holonomic rows, default `10.0`.
    """

    alpha: float = 10.0
    beta: float = 10.0

    bias_at_state_velocity: ClassVar[bool] = True

    def fastest_rate(self):
        r"""The fastest decay rate it imposes: $\max(2\alpha, \beta)$ (the roots of
        $s^2 + 2\alpha s + \beta^2$ and $-\alpha$)."""
        return max(2.0 * float(self.alpha), float(self.beta))

    def terms(self, step):
        r"""$b = -c_\text{bias} - 2\alpha c - \beta^2 g$ on the rows with a position level,
        $b = -c_\text{bias} - \alpha c$ on the others."""
        stab = jnp.where(step.mask, 2 * self.alpha, self.alpha) * step.c
        if step.position_rows and not static_zero(self.beta):
            stab = stab + self.beta**2 * step.position_residual()
        return StabilisedTerms(velocity=step.qd, q_dot=step.qd, b=-step.c_bias - stab, f0=step.f0)

    def wrap_solver(self, solver, vector_field):
        return solver


class Projection(AbstractStabilisation):
    r"""Evaluate the dynamics on the projected velocity; relax errors at rates `alpha`, `beta`.

    **Arguments:**

    - `alpha`: decay rate (1/time) of the velocity's distance from the constraint set,
      default `10.0`.
    - `beta`: decay rate (1/time) of the holonomic position residual $g$, default `10.0`.
    """

    alpha: float = 10.0
    beta: float = 10.0

    bias_at_state_velocity: ClassVar[bool] = False

    def fastest_rate(self):
        r"""The fastest decay rate it imposes: $\max(\alpha, \beta)$."""
        return max(float(self.alpha), float(self.beta))

    def terms(self, step):
        r"""The dynamics at the projected velocity $\dot q_P = \dot q - W^{-1}A^\top
        (AW^{-1}A^\top)^+ c$: $b = -c_\text{bias}(q, \dot q_P) - \alpha c$ and
        $\dot q_\text{pos} = \dot q_P - \beta\,W^{-1}A^\top(AW^{-1}A^\top)^+ g$."""
        with jax.named_scope("projection"):
            qd_p = step.qd - step.project(step.c)
            c_bias, f0 = step.bias_at(qd_p)
            b = -c_bias - self.alpha * step.c
            q_dot = qd_p
            if step.position_rows and not static_zero(self.beta):
                q_dot = qd_p - self.beta * step.project(step.position_residual())
        return StabilisedTerms(velocity=qd_p, q_dot=q_dot, b=b, f0=f0)

    def wrap_solver(self, solver, vector_field):
        return solver


class StepProjection(AbstractStabilisation):
    r"""Project the state onto the constraints after every solver step; evaluate the
    dynamics at the projected velocity (the default of `cx.simulate`).

    The projection method (Hairer, Lubich & Wanner, *Geometric Numerical Integration*,
    2006, §IV.4; Ascher, Chin & Reich, "Stabilization of DAEs and invariant manifolds",
    1994): the solver integrates the index-reduced equations and, after each step, the
    velocity is replaced by its $W$-orthogonal projection onto the velocity constraints,

    $$\dot q_P = \dot q - W^{-1}A^\top(AW^{-1}A^\top)^+ c(t, q, \dot q),$$

    and, with `positions=True`, the coordinates by one Gauss–Newton step on the holonomic
    rows, $q_P = q - W^{-1}G^\top(GW^{-1}G^\top)^+ g(t, q)$. Inside a step the vector field
    is evaluated at $\dot q_P$ as under `Projection`, but with no decay term: the field is
    unchanged on the constraints, so the error estimate — and the steps an adaptive
    controller takes — are those of the unstabilised equations, while the
    acceleration-level rows stay consistent at every stage (which keeps gradients right
    through singular configurations, docs/concepts/gradients.md).

    Cost: with a first-same-as-last solver (`diffrax.Tsit5`, the default, `Dopri5`,
    `Dopri8`, `Bosh3`) the projected velocity at the end of a step *is* the first stage of
    the next one, so the velocity projection adds no evaluation. Another explicit
    Runge–Kutta solver (the classical RK4, `Heun`, `Midpoint`, `Ralston`) is run in its
    first-same-as-last form, the field at the step's end appended as a stage of weight
    zero: the same steps and solution, and again no evaluation added. Other solvers
    (implicit ones), and `positions=True`, factor $(W, A)$ once more per step. The
    pseudo-inverse of the rank-robust solvers keeps the projection defined where $A$ loses
    rank, and as a step, not a term of the ODE, it adds no stiffness there
    (docs/concepts/stabilisation.md).
    Under `diffrax.BacksolveAdjoint` (the continuous adjoint, whose adjoint ODE has no
    projection step) only the evaluation at the projected velocity remains.

    **Arguments:**

    - `positions`: also project the coordinates onto the holonomic rows after every step
      (default `False`: the velocity projection alone holds the position drift of the
      holonomic rows at the integrator's tolerance over long runs). For independent
      holonomic rows only: with redundant ones (loop closures imported from MJCF) the
      Gauss–Newton step divides by the singular value that vanishes on the manifold, and
      an adaptive run stalls (docs/concepts/stabilisation.md).
    """

    positions: bool = eqx.field(static=True, default=False)

    @property
    def alpha(self) -> float:
        return 0.0

    @property
    def beta(self) -> float:
        return 0.0

    bias_at_state_velocity: ClassVar[bool] = False

    def fastest_rate(self):
        """`0.0`: the projection is a step, not a decay the solver must resolve."""
        return 0.0

    def terms(self, step):
        r"""The dynamics at the projected velocity
        $\dot q_P = \dot q - W^{-1}A^\top(AW^{-1}A^\top)^+ c$, with
        $b = -c_\text{bias}(q, \dot q_P)$ and $\dot q_\text{pos} = \dot q_P$: no decay term."""
        with jax.named_scope("projection"):
            qd_p = step.qd - step.project(step.c)
            c_bias, f0 = step.bias_at(qd_p)
        return StabilisedTerms(velocity=qd_p, q_dot=qd_p, b=-c_bias, f0=f0)

    def wrap_solver(self, solver, vector_field):
        """`solver`, its state projected after every step (`ProjectedSolver`)."""
        from ._step_projection import ProjectedSolver, first_same_as_last

        if not self.positions:  # a position step re-evaluates the field after it anyway
            solver = first_same_as_last(solver)
        return ProjectedSolver(solver, vector_field, self.positions)


VELOCITY_PROJECTION = StepProjection()
"""The default stabilisation of `cx.simulate`, `rollout_batch` and `cx.fit`:
`StepProjection()`, the velocity projected onto the constraints after every step and
inside the vector field. The position correction is off by default: as a term of the
vector field (`Projection(alpha, beta)` with `beta > 0`) it divides by the smallest
singular value of $A$ off the constraint manifold, which makes redundant holonomic rows
(loop closures) stiff (docs/concepts/stabilisation.md counts the steps on an MJCF loop)."""


def stabilisation_dtmax(
    stabilisation: AbstractStabilisation | None, constrained: bool = True
) -> float | None:
    r"""The largest step that resolves the decay the stabilisation imposes, $1/\text{rate}$
    (`None` without stabilisation, for a system without constraints (`constrained=False`),
    or with zero or traced rates).

    On a consistent state the decaying modes are not excited, so an adaptive controller
    sees no error from them and may take steps with $\text{rate}\cdot\Delta t \gg 1$;
    derivatives (forward or reverse) *do* excite them, and an explicit step that far
    outside its stability region returns a wrong gradient with a right forward value.
    Capping $\Delta t \le 1/\text{rate}$ keeps the step inside it, and AD agrees with
    finite differences again (docs/concepts/gradients.md has the figures).
    """
    if stabilisation is None or not constrained:
        return None
    try:
        rate = stabilisation.fastest_rate()
    except (TypeError, jax.errors.ConcretizationTypeError):
        return None
    return 1.0 / rate if rate > 0 else None
