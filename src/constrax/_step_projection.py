r"""The solver side of `StepProjection`: a diffrax solver that projects the state returned
by each step of the solver it wraps (docs/concepts/stabilisation.md).

The projection method (Hairer, Lubich & Wanner, *Geometric Numerical Integration*, 2006,
§IV.4): the wrapped solver integrates the index-reduced equations unchanged — its stages,
its error estimate and hence the steps an adaptive controller takes are its own — and the
state at the end of each step, $(q_1, \dot q_1)$, is replaced by $(q_1, \dot q_P)$ with
$\dot q_P = \dot q_1 - W^{-1}A^\top(AW^{-1}A^\top)^+ c(t_1, q_1, \dot q_1)$ (and, with
`positions=True`, $q_1$ by one Gauss–Newton step on the holonomic rows).

Under `StepProjection` the vector field returns $\dot q_P$ as the derivative of $q$, so a
first-same-as-last solver (whose state carries the field at the end of the step for the
next step's first stage) already holds $\dot q_P$ at $(t_1, q_1, \dot q_1)$: the velocity
projection is read from it, at no cost. The field is invariant under the projection
($\dot q_P$ projects onto itself), so that carried derivative is also the field at the
projected state. An explicit Runge–Kutta solver whose tableau is not first-same-as-last
(the classical RK4, `Heun`, `Midpoint`, `Ralston`) is run in its first-same-as-last form:
the same tableau with one stage more, the field at the step's end, whose weight in the
solution is zero (Hairer, Nørsett & Wanner, *Solving Ordinary Differential Equations I*,
1993, §II.5). The solution and the error estimate are the solver's; the extra stage is the
next step's first, so the projection again costs no factorisation, and a Hermite
interpolant gets the field at the step's end. `diffrax.Euler` is run as the one-stage
tableau it is, in that form too (`EulerFirstSameAsLast`), and `cx.SemiImplicitEuler`
carries the field at the step's end itself. Other solvers (implicit ones), and
`positions=True`, evaluate the projection.

The dense output of a step is the wrapped solver's interpolant plus the correction
$\theta\,(y_P - y_1)$, $\theta = (t - t_0)/(t_1 - t_0)$: continuous across steps and equal
to the projected state at the step's end.
"""

import dataclasses
import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from ._solvers import EulerFirstSameAsLast, carries_end_field
from ._wrapped_solver import ForwardingSolver


@functools.cache
def projected_interpolation(inner: type) -> type:
    """The local interpolation of a projected step: `inner`'s interpolant plus the linear
    correction to the projected step end. One class per `inner`, so that it is a stable
    static field of `diffrax.DenseInterpolation` (no recompilation between calls)."""

    class Projected(diffrax.AbstractLocalInterpolation):
        t0: Array
        t1: Array
        interpolation: diffrax.AbstractLocalInterpolation
        correction: PyTree[Array]

        def __init__(self, *, t0, t1, correction, **info):
            self.t0 = t0
            self.t1 = t1
            self.interpolation = inner(t0=t0, t1=t1, **info)
            self.correction = correction

        def evaluate(self, t0, t1=None, left=True):
            y = self.interpolation.evaluate(t0, t1, left)
            span = self.t1 - self.t0
            span = jnp.where(span == 0, 1, span)
            theta = (t0 - self.t0) / span if t1 is None else (t1 - t0) / span
            return jax.tree.map(lambda a, d: a + theta.astype(d.dtype) * d, y, self.correction)

    Projected.__name__ = Projected.__qualname__ = f"Projected{getattr(inner, '__name__', '')}"
    return Projected


def first_same_as_last_tableau(tableau: diffrax.ButcherTableau) -> diffrax.ButcherTableau:
    """An explicit tableau with the stage $k_{s+1} = f(t_1, y_1)$ appended: $c_{s+1} = 1$,
    $a_{s+1, j} = b_j$, and weight zero in the solution and in the error estimate."""
    return diffrax.ButcherTableau(
        c=np.append(tableau.c, 1.0),
        b_sol=np.append(tableau.b_sol, 0.0),
        b_error=np.append(tableau.b_error, 0.0),
        a_lower=(*tableau.a_lower, np.asarray(tableau.b_sol, dtype=float)),
    )


# Interpolations that read only the first and last stages, or none: a stage appended keeps
# them valid (others may weight the tableau's own stages, so those solvers are left alone).
_END_STAGE_INTERPOLATIONS = (
    diffrax.ThirdOrderHermitePolynomialInterpolation.from_k,
    diffrax.LocalLinearInterpolation,
)


@functools.cache
def _first_same_as_last_class(cls: type) -> type:
    """`cls` (an explicit Runge–Kutta solver) with its tableau in first-same-as-last form;
    one class per `cls`, so that it is a stable static part of a compiled program."""
    name = f"{cls.__name__}FirstSameAsLast"
    attrs = {"tableau": first_same_as_last_tableau(cls.tableau), "__module__": __name__}
    return type(name, (cls,), attrs)


def first_same_as_last(solver: diffrax.AbstractSolver) -> diffrax.AbstractSolver:
    """`solver` in its first-same-as-last form where that saves `ProjectedSolver` a
    factorisation per step: `diffrax.Euler` (a one-stage tableau, `EulerFirstSameAsLast`),
    an explicit Runge–Kutta solver with a tableau that is not already so and an
    interpolation that reads only the end stages; any other as it is."""
    if type(solver) is diffrax.Euler:
        return EulerFirstSameAsLast()
    tableau = getattr(type(solver), "tableau", None)
    if not (
        isinstance(solver, diffrax.AbstractERK)
        and isinstance(tableau, diffrax.ButcherTableau)
        and not tableau.fsal
        and not tableau.implicit
        and solver.interpolation_cls in _END_STAGE_INTERPOLATIONS
    ):
        return solver
    cls = _first_same_as_last_class(type(solver))
    fields = {f.name: getattr(solver, f.name) for f in dataclasses.fields(solver) if f.init}
    return cls(**fields)


class ProjectedSolver(ForwardingSolver):
    """Wraps a diffrax `solver`; projects the state each of its steps returns onto the
    constraints of `field` (a constrax vector field; see the module docstring)."""

    solver: diffrax.AbstractSolver
    field: eqx.Module
    positions: bool = eqx.field(static=True, default=False)

    @property
    def interpolation_cls(self):
        return projected_interpolation(self.solver.interpolation_cls)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        if self.positions and carries_end_field(self.solver):
            # The field the solver carries is that of the state before its coordinates were
            # projected: a jump at t0 for the solver, which evaluates the field afresh at
            # the projected state, or a position correction leaves its first stage stale.
            made_jump = True
        y1, y_error, dense_info, solver_state, result = self.solver.step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        carried = _first_same_as_last(self.solver, solver_state, y1)
        if carried is not None and not self.positions:
            y_p = (y1[0], carried[0], *y1[2:])  # the field's dq/dt at (t1, y1) is qd_P
        else:
            y_p = self.field.project(t1, y1, args, self.positions)
        correction = jax.tree.map(lambda a, b: a - b, y_p, y1)
        return y_p, y_error, dict(dense_info, correction=correction), solver_state, result


def _first_same_as_last(solver, solver_state, y) -> PyTree[Array] | None:
    """The vector field at the end of the step, if the solver state carries it: diffrax's
    explicit Runge–Kutta solvers keep `(first_step, f1)` for a first-same-as-last tableau,
    and so do `EulerFirstSameAsLast` and `SemiImplicitEuler` (an implicit solver's last
    stage is the end of the step only to its root finder's tolerance, so it is projected
    explicitly)."""
    if not (
        carries_end_field(solver) and isinstance(solver_state, tuple) and len(solver_state) == 2
    ):
        return None
    f1 = solver_state[1]
    if jax.tree.structure(f1) != jax.tree.structure(y):
        return None
    pairs = zip(jax.tree.leaves(f1), jax.tree.leaves(y), strict=True)
    same = all(np.shape(a) == np.shape(b) for a, b in pairs)
    return f1 if same else None
