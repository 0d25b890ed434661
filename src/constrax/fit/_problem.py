r"""`AbstractProblem`: a least-squares objective $J(z) = \tfrac12|r(z)|^2$ over decision
variables $z$ (a pytree of arrays) built from a parameter pytree."""

import abc

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .._custom_types import Params
from .._prescriptions import AbstractPrescription
from .._solve import AbstractConstraintSolver
from .._tolerances import fit_integration_tolerance


class AbstractProblem(eqx.Module):
    """Interface shared by `IdentificationProblem` and `TrajectoryProblem`.

    `solve` needs only `init`, `residuals` and `params_of`; `config` feeds checkpoint
    fingerprints.
    """

    params: eqx.AbstractVar[Params]

    @abc.abstractmethod
    def init(self, params: Params, **kwargs) -> PyTree[Array]:
        """Decision variables $z$ for a starting parameter pytree."""

    @abc.abstractmethod
    def residuals(self, z: PyTree[Array]) -> Float[Array, " r"]:
        """The residual vector $r(z)$."""

    @abc.abstractmethod
    def params_of(self, z: PyTree[Array]) -> Params:
        """The full parameter pytree at decision variables `z`."""

    @abc.abstractmethod
    def config(self) -> str:
        """A hash of everything that defines the problem (data, fixed values, settings)."""

    def loss(self, z: PyTree[Array]) -> Float[Array, ""]:
        r"""$J(z) = \tfrac12 |r(z)|^2$."""
        r = self.residuals(z)
        return 0.5 * jnp.sum(r**2)

    def check_params(self, params: Params, name: str = "init") -> None:
        """Refuse a parameter pytree whose structure, shapes or dtypes differ from `params`."""
        check_like(params, self.params, name, "the problem's `params`")


def check_like(tree, reference, name: str, what: str) -> None:
    """`ValueError` naming the difference if `tree` is not structured like `reference`."""
    s1, s2 = jax.tree.structure(tree), jax.tree.structure(reference)
    if s1 != s2:
        raise ValueError(
            f"`{name}` must have the same tree structure as {what}: got {s1}, expected {s2}"
        )
    for path, a, b in zip(
        jax.tree_util.tree_flatten_with_path(tree)[0],
        jax.tree.leaves(tree),
        jax.tree.leaves(reference),
        strict=True,
    ):
        where = jax.tree_util.keystr(path[0])
        if np.shape(a) != np.shape(b):
            raise ValueError(
                f"`{name}{where}` has shape {np.shape(a)}, expected {np.shape(b)} as in {what}"
            )
        da, db = jnp.asarray(a).dtype, jnp.asarray(b).dtype
        if jnp.issubdtype(da, jnp.inexact) != jnp.issubdtype(db, jnp.inexact):
            raise ValueError(f"`{name}{where}` has dtype {da}, expected {db} as in {what}")


def default_adjoint(
    stepsize_controller: diffrax.AbstractStepSizeController, dt0: float | None, span: float
) -> diffrax.RecursiveCheckpointAdjoint:
    r"""The adjoint a problem uses when none is given: `RecursiveCheckpointAdjoint`, with one
    checkpoint per step when the steps are fixed (`ConstantStepSize`, `dt0` given).

    With $N = \lceil\text{span}/dt_0\rceil$ steps known, storing all $N + 1$ states (memory
    $N\times$ the state, small for mechanical systems) spares the $O(N\log N)$
    recomputation of diffrax's default $\log N$ checkpoints: the same (discrete) gradient,
    about 1.2x faster on the snake cart (`benchmarks/`). Adaptive steps, and fixed steps
    beyond `_MAX_STEP_CHECKPOINTS`, keep diffrax's default. `span` is the longest interval
    integrated in one solve.
    """
    if isinstance(stepsize_controller, diffrax.ConstantStepSize) and dt0 is not None:
        steps = max(int(np.ceil(span / dt0 - 1e-9)), 1)
        if steps < _MAX_STEP_CHECKPOINTS:
            return diffrax.RecursiveCheckpointAdjoint(checkpoints=steps + 1)
    return diffrax.RecursiveCheckpointAdjoint()


_MAX_STEP_CHECKPOINTS = 100_000


def set_simulate_options(
    problem: AbstractProblem,
    *,
    solver: diffrax.AbstractSolver,
    dt0: float | None,
    stepsize_controller: diffrax.AbstractStepSizeController | None,
    adjoint: diffrax.AbstractAdjoint | None,
    max_steps: int,
    prescription: AbstractPrescription,
    constraint_solver: AbstractConstraintSolver,
    span: float,
    dtmax: float | None = None,
) -> None:
    r"""Store the `cx.simulate` options of a problem (call inside its `__init__`); the
    default step-size controller is `PIDController(rtol=tol, atol=tol, dtmax=dtmax)` with
    `tol` $= \max(10^{-10}, 100\epsilon)$ of the default float dtype and `dtmax` the
    stabilisation's step cap (`cx.simulate`), the default
    adjoint `default_adjoint(...)` over the longest interval `span` of one solve."""
    problem.solver = solver
    problem.dt0 = None if dt0 is None else float(dt0)
    problem.stepsize_controller = (
        diffrax.PIDController(
            rtol=fit_integration_tolerance(jnp.result_type(float)),
            atol=fit_integration_tolerance(jnp.result_type(float)),
            dtmax=dtmax,
        )
        if stepsize_controller is None
        else stepsize_controller
    )
    if adjoint is None:
        adjoint = default_adjoint(problem.stepsize_controller, problem.dt0, span)
    if not isinstance(adjoint, diffrax.AbstractAdjoint):
        raise TypeError(f"`adjoint` must be a diffrax adjoint or None, got {adjoint!r}")
    problem.adjoint = adjoint
    problem.max_steps = max_steps
    problem.prescription = prescription
    problem.constraint_solver = constraint_solver


def simulate_options(problem: AbstractProblem) -> dict:
    """The options stored by `set_simulate_options`, as `cx.simulate` keyword arguments."""
    return dict(
        solver=problem.solver,
        dt0=problem.dt0,
        stepsize_controller=problem.stepsize_controller,
        adjoint=problem.adjoint,
        max_steps=problem.max_steps,
        prescription=problem.prescription,
        constraint_solver=problem.constraint_solver,
    )
