r"""Argument checks shared by the public entry points (`simulate`, `accelerations`,
`consistent_initial_state`, the diagnostics).

Mistakes of type and shape raise `TypeError`/`ValueError` at trace time, naming the
argument, what was expected and what was given, and what to do. Values that are only known
at run time (NaN in a state or a parameter) are checked with `equinox.error_if`, which
raises `equinox.EquinoxRuntimeError` under `jit`; concrete inputs are checked at once.
"""

import functools
import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._kinds import kinds
from ._prescriptions import AbstractPrescription
from ._solve import AbstractConstraintSolver
from ._solvers import single_term_solver
from ._stabilisation import AbstractStabilisation
from ._system import System

_OPTIONS = {
    "prescription": AbstractPrescription,
    "constraint_solver": AbstractConstraintSolver,
}


def stabilisation_kinds() -> str:
    """The choices of `stabilisation=`, as the errors name them."""
    return f"None, {kinds(AbstractStabilisation, '(...)')}"


def _class_hint(name: str, value, expected: str) -> str | None:
    if isinstance(value, type):
        return (
            f"`{name}` must be an instance such as {expected}, got the class "
            f"{value.__name__}: write {name}={_public(value)}()"
        )
    return None


def _public(cls: type) -> str:
    module = cls.__module__
    return f"cx.{cls.__name__}" if module.startswith("constrax") else cls.__name__


def check_options(
    *,
    prescription=None,
    constraint_solver=None,
    stabilisation=None,
) -> None:
    """`TypeError` for a class given where an instance is expected, or a value of the
    wrong kind (a string, a function)."""
    for name, value in (("prescription", prescription), ("constraint_solver", constraint_solver)):
        if value is None:
            continue
        base = _OPTIONS[name]
        expected = kinds(base, "()")
        hint = _class_hint(name, value, expected)
        if hint is not None:
            raise TypeError(hint)
        if not isinstance(value, base):
            raise TypeError(f"`{name}` must be {expected}, got {value!r}")
    if stabilisation is not None:
        expected = stabilisation_kinds()
        hint = _class_hint("stabilisation", stabilisation, expected)
        if hint is not None:
            raise TypeError(hint)
        if not isinstance(stabilisation, AbstractStabilisation):
            raise TypeError(
                f"unknown stabilisation {stabilisation!r}: `stabilisation` must be {expected}"
            )


def check_diffrax_options(*, solver, stepsize_controller, saveat, adjoint) -> None:
    """`TypeError` for diffrax options of the wrong kind (e.g. `solver='tsit5'`)."""
    if isinstance(solver, str):
        raise TypeError(
            f"`solver` must be a diffrax solver instance, got the string {solver!r}: pass "
            f"e.g. solver=diffrax.{_solver_name(solver)}()"
        )
    for name, value, base, example in (
        ("solver", solver, diffrax.AbstractSolver, "diffrax.Tsit5()"),
        (
            "stepsize_controller",
            stepsize_controller,
            diffrax.AbstractStepSizeController,
            "diffrax.PIDController(rtol=1e-8, atol=1e-8)",
        ),
        ("saveat", saveat, diffrax.SaveAt, "diffrax.SaveAt(ts=...)"),
        ("adjoint", adjoint, diffrax.AbstractAdjoint, "diffrax.RecursiveCheckpointAdjoint()"),
    ):
        if value is None and name in ("stepsize_controller", "saveat"):
            continue
        if isinstance(value, type):
            raise TypeError(
                f"`{name}` must be an instance such as {example}, got the class "
                f"{value.__name__}: write {name}=diffrax.{value.__name__}(...)"
            )
        if not isinstance(value, base):
            raise TypeError(
                f"`{name}` must be a {base.__module__.split('.')[0]}.{base.__name__} "
                f"instance such as {example}, got {type(value).__name__}"
            )
    if not single_term_solver(solver):
        hint = (
            " (for the semi-implicit Euler step of a constrained state, use cx.SemiImplicitEuler())"
            if isinstance(solver, diffrax.SemiImplicitEuler)
            else ""
        )
        raise TypeError(
            f"`solver`: {type(solver).__name__} integrates "
            f"{getattr(solver, 'term_structure', 'several terms')}, but constrax integrates "
            f"one ODE term, its vector field{hint}. Supported: diffrax's ODE solvers "
            f"(Euler, Heun, Midpoint, Ralston, Bosh3, Tsit5, Dopri5, Dopri8, the implicit "
            f"Kvaerno3/4/5, ...) and cx.SemiImplicitEuler()"
        )


def _solver_name(s: str) -> str:
    names = {n.lower(): n for n in dir(diffrax) if not n.startswith("_")}
    return names.get(s.lower().replace("_", ""), "Tsit5")


# ----------------------------------------------------------------------------------------
# Times.


def _concrete_float(x) -> float | None:
    """`float(x)` for a concrete scalar, `None` for a tracer or a non-scalar."""
    if isinstance(x, jax.core.Tracer):
        return None
    try:
        return float(x)
    except (TypeError, ValueError, jax.errors.ConcretizationTypeError):
        return None


def check_times(t0, t1, dt0):
    """Finite `t0`, `t1` (and `dt0`, non-zero, pointing from `t0` to `t1`).

    Concrete values raise `ValueError` at once; traced ones are checked with
    `equinox.error_if`. Returns `(t0, t1)` (traced times threaded through the check).
    """
    for name, t in (("t0", t0), ("t1", t1)):
        if jnp.ndim(t) != 0:
            raise ValueError(f"`{name}` must be a scalar time, got shape {jnp.shape(t)}")
    c0, c1 = _concrete_float(t0), _concrete_float(t1)
    for name, c in (("t0", c0), ("t1", c1)):
        if c is not None and not math.isfinite(c):
            raise ValueError(f"constrax.simulate: `{name}` must be a finite time, got {c}")
    if dt0 is not None:
        if jnp.ndim(dt0) != 0:
            raise ValueError(f"`dt0` must be a scalar step or None, got shape {jnp.shape(dt0)}")
        d = _concrete_float(dt0)
        if d is not None:
            if not math.isfinite(d) or d == 0:
                raise ValueError(
                    f"constrax.simulate: `dt0` must be a finite, non-zero initial step (or "
                    f"None to let an adaptive controller choose), got {d}"
                )
            if c0 is not None and c1 is not None and (c1 - c0) * d < 0:
                raise ValueError(
                    f"constrax.simulate: `dt0`={d} points away from t1: integrating from "
                    f"t0={c0} to t1={c1} needs dt0 of the sign of t1 - t0"
                )
    msg = "constrax.simulate: `{}` must be a finite time, got NaN or inf"
    if c0 is None and eqx.is_array(t0):
        t0 = eqx.error_if(t0, ~jnp.isfinite(t0), msg.format("t0"))
    if c1 is None and eqx.is_array(t1):
        t1 = eqx.error_if(t1, ~jnp.isfinite(t1), msg.format("t1"))
    return t0, t1


# ----------------------------------------------------------------------------------------
# Finite values.


def _inexact_leaves(x) -> list:
    return [
        leaf
        for leaf in jax.tree_util.tree_leaves(x)
        if eqx.is_array_like(leaf) and jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
    ]


def check_finite(x, name: str, where: str):
    """Raise if any inexact leaf of `x` is NaN or inf.

    Concrete values (Python scalars, NumPy arrays, JAX arrays outside `jit`) raise
    `ValueError` immediately; traced ones get an `equinox.error_if`. Returns `x` (threaded
    through the check when traced).
    """
    leaves = _inexact_leaves(x)
    if not leaves:
        return x
    msg = f"{where}: `{name}` contains NaN or inf."
    traced = [leaf for leaf in leaves if isinstance(leaf, jax.core.Tracer)]
    for leaf in leaves:
        if not isinstance(leaf, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(leaf))):
            raise ValueError(msg)
    if not traced:
        return x
    bad = jnp.any(jnp.stack([~jnp.all(jnp.isfinite(leaf)) for leaf in traced]))
    return eqx.error_if(x, bad, msg)


# ----------------------------------------------------------------------------------------
# Forward-mode autodiff through `simulate`.

_FORWARD_HINT = (
    "constrax.simulate: forward-mode autodiff (jax.jvp, jax.jacfwd) cannot go through the "
    "default adjoint diffrax.RecursiveCheckpointAdjoint(), which supports reverse mode only. "
    "Pass adjoint=diffrax.ForwardMode() to simulate (cheaper when there are few inputs), or "
    "use jax.jacrev / jax.grad."
    " More on the 'Sharp bits' page of the documentation (docs/sharp-bits.md)."
)


def forward_mode_hint(fn):
    """Re-raise JAX's 'custom_vjp' forward-mode error from `fn` with the `ForwardMode` hint."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            if "forward-mode autodiff" in str(e) and "custom_vjp" in str(e):
                raise TypeError(_FORWARD_HINT) from e
            raise

    return wrapped


def check_system(system) -> None:
    """`TypeError` unless `system` is a `cx.System` (a `Model` gets a hint)."""
    if isinstance(system, System):
        return
    if hasattr(system, "system") and isinstance(system.system, System):
        raise TypeError(
            f"`system` must be a cx.System, got a {type(system).__name__}: pass "
            "`model.system` (and `model.params` as `p`)"
        )
    raise TypeError(f"`system` must be a cx.System, got {type(system).__name__}")
