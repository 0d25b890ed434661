r"""Parameter identification: fit a parameter pytree to an observed trajectory.

Residuals $r = \big(m_{kj}(h_j(t_k, q_k, \dot q_k, p) - y_{kj})/\sigma_j\big)$ (plus
weighted continuity defects under multiple shooting), so that
$J = \tfrac12|r|^2$ is the Gaussian negative log-likelihood. The uncertainty of the
estimate is the Gauss–Newton (Fisher) approximation $\operatorname{Cov}\hat\theta
\approx s^2 (J_\theta^\top J_\theta)^{-1}$ from the same residual Jacobian
$J_\theta = \partial r/\partial\theta$, with $s^2 = 1$ for known noise $\sigma$ and
$s^2 = |r|^2/(N - P)$ otherwise.
"""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, ArrayLike, Float, PyTree

from .._checks import stabilisation_kinds
from .._custom_types import Params
from .._prescriptions import AbstractPrescription, DAlembert
from .._simulate import simulate
from .._solve import AbstractConstraintSolver, AutoSolver
from .._stabilisation import (
    VELOCITY_PROJECTION,
    AbstractStabilisation,
    stabilisation_dtmax,
)
from .._state import check_state
from .._system import System
from ._checkpoint import config_hash
from ._observations import Observations
from ._problem import AbstractProblem, set_simulate_options, simulate_options
from ._shooting import AbstractShooting, SegmentLayout, SingleShooting, segment_layout
from ._transforms import constrain, unconstrain


def _select(where: Callable | None, params: Params) -> PyTree:
    return params if where is None else where(params)


def _replace(where: Callable | None, params: Params, theta: PyTree) -> Params:
    return theta if where is None else eqx.tree_at(where, params, theta)


class IdentificationProblem(AbstractProblem):
    r"""Fit some parameters of `system` to `observations` of one trajectory.

    **Arguments:**

    - `system`: the `cx.System`; `q0`, `qd0`: the known initial state `(n,)`.
    - `observations`: a `cx.fit.Observations`.
    - `params`: the full parameter pytree: it fixes the structure and the values of the
      parameters that are not fitted.
    - `free`: `where(params) -> subtree` selecting the fitted leaves, as in
      `eqx.tree_at` (default: all of `params`). Compiled solves are cached on this
      function object: reuse one `free` across problems that differ only in data (e.g.
      noise seeds) to compile once. Say which combinations are
      identifiable: e.g. without a known external force only mass *ratios* are.
    - `transforms`: a pytree prefix of `free(params)` with `cx.fit.Positive()`,
      `cx.fit.Bounded(a, b)` or `cx.fit.Identity()` leaves (default identity).
    - `shooting`: `cx.fit.SingleShooting()` (default) or `cx.fit.MultipleShooting(S)`.
    - `t0`: initial time (`<=` the first observation time).
    - `solver`, `dt0`, `stepsize_controller`, `adjoint`, `max_steps`, `prescription`,
      `constraint_solver`, `stabilisation`: passed to `cx.simulate` (defaults `Tsit5`,
      `PIDController(rtol=1e-10, atol=1e-10)`, `AutoSolver`, `cx.StepProjection()`
      as in `cx.simulate`; the default adjoint is
      `RecursiveCheckpointAdjoint`, with one checkpoint per step under `ConstantStepSize`:
      see `cx.fit.default_adjoint`). `diffrax.BacksolveAdjoint()` (the continuous
      adjoint) is cheaper still, but its gradient only approximates the discrete one
      (measured: 3e-13 relative on the snake-cart identification of `benchmarks/`, 0.4%
      for a knife-edge trajectory problem with piecewise-linear controls and 200 steps)
      and it integrates backwards in time, which strongly dissipative systems do not
      tolerate. Multiple shooting `vmap`s the segments; the default `AutoSolver` then
      costs what `cx.KKT()` costs except in steps where some segment is singular. With
      `diffrax.ForwardMode()` the least-squares Jacobians (and optax
      gradients) use forward mode — the fast choice for a few parameters and many
      residuals — otherwise reverse mode.

    **Example:**

    ```python
    obs = cx.fit.Observations(ts, ys, coordinates=(0, 1, 2), sigma=1e-3)
    problem = cx.fit.IdentificationProblem(system, obs, q0, qd0, params,
        free=lambda p: (p["m"], p["I"]), transforms=cx.fit.Positive())
    res = cx.fit.solve(problem, guess)
    unc = cx.fit.uncertainty(problem, res.params)
    ```
    """

    system: System
    observations: Observations
    q0: Float[Array, " n"]
    qd0: Float[Array, " n"]
    params: Params
    free: Callable | None
    transforms: PyTree
    shooting: AbstractShooting
    t0: float = eqx.field(static=True)
    solver: diffrax.AbstractSolver
    dt0: float | None = eqx.field(static=True)
    stepsize_controller: diffrax.AbstractStepSizeController
    adjoint: diffrax.AbstractAdjoint
    max_steps: int = eqx.field(static=True)
    prescription: AbstractPrescription
    constraint_solver: AbstractConstraintSolver
    stabilisation: AbstractStabilisation | None
    layout: SegmentLayout

    def __init__(
        self,
        system: System,
        observations: Observations,
        q0: Float[ArrayLike, " n"],
        qd0: Float[ArrayLike, " n"],
        params: Params,
        *,
        free: Callable | None = None,
        transforms: PyTree = None,
        shooting: AbstractShooting = SingleShooting(),
        t0: float = 0.0,
        solver: diffrax.AbstractSolver = diffrax.Tsit5(),
        dt0: float | None = None,
        stepsize_controller: diffrax.AbstractStepSizeController | None = None,
        adjoint: diffrax.AbstractAdjoint | None = None,
        max_steps: int = 16384,
        prescription: AbstractPrescription = DAlembert(),
        constraint_solver: AbstractConstraintSolver = AutoSolver(),
        stabilisation: AbstractStabilisation | None = VELOCITY_PROJECTION,
    ):
        if not isinstance(system, System):
            raise TypeError(f"`system` must be a cx.System, got {type(system).__name__}")
        if not isinstance(observations, Observations):
            raise TypeError(
                f"`observations` must be cx.fit.Observations, got {type(observations).__name__}"
            )
        if not isinstance(shooting, AbstractShooting):
            raise TypeError(
                f"`shooting` must be SingleShooting() or MultipleShooting(S), got {shooting!r}"
            )
        q0, qd0 = check_state(q0, qd0)
        observations.check(q0.shape[0], t0)
        theta = _select(free, params)
        unconstrain(transforms, theta)  # structure check of `transforms`
        self.system = system
        self.observations = observations
        self.q0 = q0
        self.qd0 = qd0
        self.params = params
        self.free = free
        self.transforms = transforms
        self.shooting = shooting
        self.t0 = float(t0)
        if stabilisation is not None and not isinstance(stabilisation, AbstractStabilisation):
            raise TypeError(
                f"`stabilisation` must be {stabilisation_kinds()}, got {stabilisation!r}"
            )
        self.stabilisation = stabilisation
        self.layout = segment_layout(np.asarray(observations.ts), self.t0, shooting.num_segments)
        set_simulate_options(
            self,
            solver=solver,
            dt0=dt0,
            stepsize_controller=stepsize_controller,
            adjoint=adjoint,
            max_steps=max_steps,
            prescription=prescription,
            constraint_solver=constraint_solver,
            span=float(np.max(self.layout.ends - self.layout.starts)),
            dtmax=stabilisation_dtmax(stabilisation, bool(system.constraints)),
        )

    # -- decision variables ----------------------------------------------------------

    def init(self, params: Params, *, nodes: tuple[Array, Array] | None = None) -> tuple:
        """`z = (u, nodes)`: unconstrained fitted parameters, and for multiple shooting the
        node states `(q, qd)` of shape `(S - 1, n)` each (default: simulated from
        `params`)."""
        u = unconstrain(self.transforms, _select(self.free, params))
        if self.shooting.num_segments == 1:
            return (u, None)
        S, n = self.shooting.num_segments, self.q0.shape[0]
        if nodes is None:
            traj = self._simulate(params, self.layout.starts[1:])
            nodes = (traj.q, traj.qd)
        nodes = tuple(jnp.asarray(x, dtype=self.q0.dtype) for x in nodes)
        if len(nodes) != 2 or any(x.shape != (S - 1, n) for x in nodes):
            raise ValueError(
                f"`nodes` must be a pair (q, qd) of shape (S - 1, n) = ({S - 1}, {n}), got "
                f"{[x.shape for x in nodes]}"
            )
        return (u, nodes)

    def params_of(self, z) -> Params:
        return _replace(self.free, self.params, constrain(self.transforms, z[0]))

    def config(self) -> str:
        obs = self.observations
        fixed = eqx.filter(self.params, eqx.is_array)
        return config_hash(
            "identification",
            obs.ts,
            obs.values,
            obs.mask,
            obs.sigma,
            obs.coordinates,
            self.q0,
            self.qd0,
            self.t0,
            fixed,
            str(jax.tree.structure(_select(self.free, self.params))),
            repr(self.transforms),
            repr(self.shooting),
            [con.name for con in self.system.constraints],
        )

    # -- simulation and residuals -----------------------------------------------------

    def _simulate(self, params: Params, ts, *, q0=None, qd0=None, t0=None, t1=None, project=False):
        t0 = self.t0 if t0 is None else t0
        return simulate(
            self.system,
            self.q0 if q0 is None else q0,
            self.qd0 if qd0 is None else qd0,
            params,
            t0=t0,
            t1=ts[-1] if t1 is None else t1,
            saveat=diffrax.SaveAt(ts=ts),
            **simulate_options(self),
            stabilisation=self.stabilisation,
            project_initial=project,
        )

    def simulate(self, params: Params, ts: Float[ArrayLike, " k"] | None = None):
        """`cx.simulate` from the problem's initial state with `params`, saved at `ts`
        (default: the observation times). Returns a `cx.Trajectory`."""
        ts = self.observations.ts if ts is None else jnp.asarray(ts)
        return self._simulate(params, ts)

    def segment_residuals(self, params: Params, nodes, layout: SegmentLayout) -> Array:
        """Whitened data residuals and weighted defects for a segment layout."""
        obs = self.observations
        S = layout.starts.shape[0]
        if S == 1:
            q0s, qd0s = self.q0[None], self.qd0[None]
        else:
            q0s = jnp.concatenate([self.q0[None], nodes[0]])
            qd0s = jnp.concatenate([self.qd0[None], nodes[1]])
        project = S > 1 and len(self.system.constraints) > 0

        def segment(q0, qd0, t0, t1, ts, index, valid):
            traj = self._simulate(params, ts, q0=q0, qd0=qd0, t0=t0, t1=t1, project=project)
            pred = obs.predict(ts[:-1], traj.q[:-1], traj.qd[:-1], params)
            return obs.residuals(pred, index, valid), traj.q[-1], traj.qd[-1]

        args = (q0s, qd0s, layout.starts, layout.ends, layout.save_ts, layout.index, layout.valid)
        if S == 1:  # one segment: no vmap needed
            r, q_end, qd_end = jax.tree.map(lambda x: x[None], segment(*(a[0] for a in args)))
        else:
            r, q_end, qd_end = jax.vmap(segment)(*args)
        parts = [r.reshape(-1)]
        if S > 1:
            w = self.shooting.defect_weight
            parts += [
                w * (q_end[:-1] - nodes[0]).reshape(-1),
                w * (qd_end[:-1] - nodes[1]).reshape(-1),
            ]
        return jnp.concatenate(parts)

    def residuals(self, z) -> Float[Array, " r"]:
        return self.segment_residuals(self.params_of(z), z[1], self.layout)


class Uncertainty(eqx.Module):
    r"""Gauss–Newton (Fisher) uncertainty of fitted parameters.

    - `std`: standard deviations, structured like the fitted parameters.
    - `covariance`: $s^2 (J^\top J)^{-1}$ over the flattened fitted parameters `(P, P)`
      (in the parameters themselves, not the unconstrained values).
    - `information`: the Fisher information $J^\top J / s^2$ `(P, P)`; a (near-)singular
      one means the fitted parameters are not all identifiable from these data.
    - `noise_scale`: $s^2$ (1 for known $\sigma$, else $|r|^2/(N - P)$).
    - `dof`: $N - P$, observed scalars minus fitted parameters.
    """

    std: PyTree[Array]
    covariance: Float[Array, "P P"]
    information: Float[Array, "P P"]
    noise_scale: Float[Array, ""]
    dof: int


@eqx.filter_jit
def _jacobian(problem, params, layout):
    theta = _select(problem.free, params)
    flat, unravel = ravel_pytree(theta)

    def res(x):
        return problem.segment_residuals(_replace(problem.free, params, unravel(x)), None, layout)

    if isinstance(problem.adjoint, diffrax.ForwardMode):
        return res(flat), jax.jacfwd(res)(flat)
    return res(flat), jax.jacrev(res)(flat)


def uncertainty(problem: IdentificationProblem, params: Params) -> Uncertainty:
    r"""Standard errors of the fitted parameters at `params` (usually `solve(...).params`).

    $\operatorname{Cov}\hat\theta \approx s^2 (J^\top J)^{-1}$ with
    $J = \partial r/\partial\theta$ of the single-shooting whitened residuals (the
    classical Gauss–Newton / Fisher-information approximation; $s^2 = 1$ when the
    observations carry their noise `sigma`, else the residual variance). Valid for small
    noise, where the model is nearly linear in $\theta$ over the spread of the estimate.

    **Returns:** an `Uncertainty`.

    **Example:** `cx.fit.uncertainty(problem, res.params).std`
    """
    if not isinstance(problem, IdentificationProblem):
        raise TypeError(f"`problem` must be an IdentificationProblem, got {type(problem).__name__}")
    problem.check_params(params, "params")
    layout = segment_layout(np.asarray(problem.observations.ts), problem.t0, 1)
    r, J = _jacobian(problem, params, layout)
    N = problem.observations.num_observed
    P = J.shape[1]
    dof = N - P
    if dof <= 0:
        raise ValueError(f"{P} fitted parameters need more than {N} observed values")
    s2 = jnp.asarray(1.0) if problem.observations.sigma is not None else jnp.sum(r**2) / dof
    info = J.T @ J / s2
    cov = jnp.linalg.pinv(info, hermitian=True)
    _, unravel = ravel_pytree(_select(problem.free, params))
    return Uncertainty(unravel(jnp.sqrt(jnp.diag(cov))), cov, info, s2, dof)
