r"""Fixed-step solvers that carry the vector field at the end of each step
(docs/integrators.md).

* `SemiImplicitEuler`: the semi-implicit (symplectic) Euler step of a constrained state
  $(q, \dot q)$ — velocities first, then positions with the new velocities — the
  integrator of MuJoCo and MJX (Todorov, Erez & Tassa, "MuJoCo: A physics engine for
  model-based control", 2012; Hairer, Lubich & Wanner, *Geometric Numerical Integration*,
  2006, §I.1.2 and §VI.3).
* `EulerFirstSameAsLast`: `diffrax.Euler`'s explicit step, the field at the step's end
  evaluated once and handed to the next step as its first stage (how `cx.StepProjection`
  runs `diffrax.Euler`: the projection then reads the projected velocity off that field).

Both keep diffrax's first-same-as-last solver state, `(first_step, f1)`: `init` evaluates
the field at the initial state, a step evaluates it once, at its end, with no loop in the
step (a loop of two evaluations only after a jump), and the projection of
`cx.StepProjection` reads the projected velocity off it at no cost
(`_step_projection.py`). Neither estimates its error: like `diffrax.Euler`, an adaptive
step-size controller refuses them.
"""

import abc
from collections.abc import Callable
from typing import ClassVar, Literal

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp


class AbstractCarriedFieldSolver(diffrax.AbstractSolver):
    """A one-stage fixed-step solver whose state carries the field at the step's end:
    `(first_step, f1)`, as diffrax's first-same-as-last Runge–Kutta solvers."""

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.LocalLinearInterpolation]] = (
        diffrax.LocalLinearInterpolation
    )
    scan_kind: Literal["lax", "checkpointed", "bounded"] | None = None
    """The kind of the loop over a step's two evaluations after a jump
    (`equinox.internal.while_loop`), as the `scan_kind` of diffrax's Runge–Kutta solvers:
    `None` (`"checkpointed"`) for reverse mode, `"lax"` under `diffrax.ForwardMode`,
    `"bounded"` under `diffrax.DirectAdjoint` (`cx.simulate` sets it from its `adjoint`,
    `for_adjoint`)."""

    @abc.abstractmethod
    def advance(self, y0, f0, dt):
        """The state at the step's end from `y0`, the field `f0` there, and the step `dt`."""

    def order(self, terms):
        return 1

    def init(self, terms, t0, t1, y0, args):
        """`(False, f(t0, y0))`: the field at the initial state, evaluated once before the
        first step, so that a step evaluates the field once, at its end, with no loop."""
        return jnp.array(False), terms.vf(t0, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        first_step, carried = solver_state
        dt = terms.contr(t0, t1)
        if made_jump is False:  # diffrax's static "no jump": the carried field is f(t0, y0)
            y1 = self.advance(y0, carried, dt)
            f1 = terms.vf(t1, y1, args)
        else:
            fresh = first_step | made_jump
            f0, f1 = self._fresh_start(terms, t0, t1, dt, y0, args, fresh, carried)
            y1 = self.advance(y0, f0, dt)
        return y1, None, dict(y0=y0, y1=y1), (jnp.array(False), f1), diffrax.RESULTS.successful

    def _fresh_start(self, terms, t0, t1, dt, y0, args, fresh, carried):
        """`(f(t0, y0), f(t1, y1))` after a jump (or where a wrapper changed the state
        between steps and says so by `made_jump`, as `cx.StepProjection(positions=True)`
        does): the carried field is not the field at y0, and the step evaluates it too (for
        the whole of a `vmap`ped batch if for any element, as diffrax's first-same-as-last
        solvers do). Both evaluations are the iterations of one loop, as diffrax runs the
        stages of a Runge–Kutta step, so that the field is traced once here, not twice."""

        def evaluate(val):
            i, f0, _ = val
            start = i == 0
            y = jax.tree.map(lambda a, b: jnp.where(start, a, b), y0, self.advance(y0, f0, dt))
            f = terms.vf(jnp.where(start, t0, t1), y, args)
            return i + 1, jax.tree.map(lambda a, b: jnp.where(start, a, b), f, f0), f

        init = (jnp.where(eqxi.unvmap_any(fresh), 0, 1), carried, carried)
        _, f0, f1 = eqxi.while_loop(
            lambda val: val[0] < 2, evaluate, init, max_steps=2,
            kind="checkpointed" if self.scan_kind is None else self.scan_kind,
        )  # fmt: skip
        return f0, f1

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


class EulerFirstSameAsLast(AbstractCarriedFieldSolver):
    r"""Explicit Euler, $y_1 = y_0 + h f(t_0, y_0)$, with $f(t_1, y_1)$ carried to the next
    step (the steps of `diffrax.Euler`; `cx.StepProjection` runs `diffrax.Euler` so)."""

    def advance(self, y0, f0, dt):
        return jax.tree.map(lambda y, f: y + dt * f, y0, f0)


class SemiImplicitEuler(AbstractCarriedFieldSolver):
    r"""The semi-implicit (symplectic) Euler method of a constrained system, as MuJoCo and
    MJX step: velocities first, then positions with the new velocities,

    $$\dot q_1 = \dot q_0 + h\,\ddot q(t_0, q_0, \dot q_0), \qquad
    q_1 = q_0 + h\,\dot q_1$$

    (Hairer, Lubich & Wanner, *Geometric Numerical Integration*, 2006, §VI.3; Todorov,
    Erez & Tassa 2012). First order; for a separable Hamiltonian it is symplectic, so the
    energy error of a conservative system stays bounded over long runs instead of growing
    as under explicit Euler. The vakonomic multipliers, where the state has them, take an
    explicit Euler step. Under the default `cx.StepProjection()` the velocity at the end
    of each step is projected onto the constraints, at no extra evaluation (the field at
    the step's end, which the next step starts from, already carries the projected
    velocity): the step stays on the constraint manifold's velocity level.

    Fixed steps only (`diffrax.ConstantStepSize()` with `dt0`): it has no error estimate.
    For `cx.simulate` and `cx.rollout_batch`, whose state is $(q, \dot q)$ or
    $(q, \dot q, \mu)$; it is not diffrax's `diffrax.SemiImplicitEuler`, which takes two
    terms.

    **Example:**

    ```python
    traj = cx.simulate(system, q0, qd0, p, t1=1.0, dt0=1e-3, solver=cx.SemiImplicitEuler(),
                       stepsize_controller=diffrax.ConstantStepSize())
    ```
    """

    def advance(self, y0, f0, dt):
        # f0 = (dq/dt, qdd, ...): dq/dt is the (projected) velocity the field used; the
        # position rate with the new velocity is that plus h qdd.
        q0, qd0, *rest = y0
        q_rate, qdd, *rest_rates = f0
        qd1 = qd0 + dt * qdd
        q1 = q0 + dt * (q_rate + dt * qdd)
        return (q1, qd1, *(y + dt * f for y, f in zip(rest, rest_rates, strict=True)))


def carries_end_field(solver: diffrax.AbstractSolver) -> bool:
    """Whether `solver`'s state is `(first_step, f1)` with `f1` the field at the end of
    the last step: a first-same-as-last explicit Runge–Kutta solver, or one of the above."""
    if isinstance(solver, AbstractCarriedFieldSolver):
        return True
    tableau = getattr(solver, "tableau", None)
    return (
        isinstance(solver, diffrax.AbstractERK)
        and isinstance(tableau, diffrax.ButcherTableau)
        and tableau.fsal
    )


def single_term_solver(solver: diffrax.AbstractSolver) -> bool:
    """Whether `solver` integrates one ODE term (what `cx.simulate` hands it)."""
    structure = getattr(solver, "term_structure", None)
    return isinstance(structure, type) and issubclass(diffrax.ODETerm, structure)


# The loop kinds diffrax gives its Runge–Kutta solvers' stages under these adjoints
# (forward-mode autodiff cannot go through the checkpointed loop's `custom_vjp`).
_ADJOINT_LOOP_KINDS = {diffrax.ForwardMode: "lax", diffrax.DirectAdjoint: "bounded"}


def for_adjoint(solver: diffrax.AbstractSolver, adjoint) -> diffrax.AbstractSolver:
    """`solver`, with the carried-field solver in it (itself, or the one a wrapper such as
    `cx.StepProjection`'s wraps) given the loop kind `adjoint` needs, as diffrax does for
    its Runge–Kutta solvers, which it recognises and these it does not."""
    kind = _ADJOINT_LOOP_KINDS.get(type(adjoint))
    if kind is None:
        return solver
    if isinstance(solver, diffrax.AbstractWrappedSolver):  # first: `isinstance` sees through it
        return eqx.tree_at(lambda s: s.solver, solver, for_adjoint(solver.solver, adjoint))
    if isinstance(solver, AbstractCarriedFieldSolver) and solver.scan_kind is None:
        return eqx.tree_at(lambda s: s.scan_kind, solver, kind, is_leaf=lambda x: x is None)
    return solver
