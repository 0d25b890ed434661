r"""Guesses for `solve_optimal_control` made from what a user knows of the motion (docs page
"Trajectory optimisation", section "Guesses")."""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._initial_state import consistent_initial_state
from ._ocp import OptimalControlProblem


def path_guess(
    problem: OptimalControlProblem,
    path: Callable[[Float[Array, ""]], Float[Array, " n"]],
    u: Float[ArrayLike, " nu"] | None = None,
) -> Callable:
    r"""A guess `t -> (q, qd, u)` for `cx.fit.solve_optimal_control` from a path of
    positions `path(t) -> q (n,)` (a JAX function of `t`: the poses a user expects, e.g.
    a sketch of a parking manoeuvre).

    At each time the positions are put on the holonomic constraints (Gauss–Newton from
    `path(t)`) and the velocities on the constraint distribution: $\dot q$ is the
    kinetic-energy-nearest velocity to the path's derivative $d\,\text{path}/dt$
    (`jax.jvp`) that satisfies every velocity row, $\dot q - W^{-1}A^\top(A W^{-1}
    A^\top)^+ c$ (`cx.consistent_initial_state` with `throw=False`). A path that already
    moves along the distribution keeps its velocities; a sideways slide of a wheeled
    vehicle loses its sideways part. The control is `u` (default: its value in
    `problem.params`).

    **Example:**

    ```python
    knife = cx.Pfaffian(lambda t, q, p: jnp.array([-jnp.sin(q[2]), jnp.cos(q[2]), 0.0]))
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, [knife],
                       force=lambda t, q, qd, p: p["u"])
    problem = cx.fit.OptimalControlProblem(
        system, {"u": jnp.zeros(3)}, control=lambda p: p["u"], t1=1.0,
        q0=jnp.array([0.0, 0.0, 0.5]), qd0=jnp.zeros(3), q1=jnp.array([1.0, 0.5, 0.5]),
        qd1=jnp.zeros(3), running_cost=lambda t, q, qd, u, p: u @ u)
    path = lambda t: jnp.stack([t, 0.5 * t, 0.5 + 0.0 * t])  # a straight sketch
    guess = cx.fit.path_guess(problem, path)   # its sideways slide projected out
    sol = cx.fit.solve_optimal_control(problem, guess, transcription=cx.fit.HermiteSimpson(10))
    ```
    """
    if not isinstance(problem, OptimalControlProblem):
        raise TypeError(f"`problem` must be a cx.fit.OptimalControlProblem, got {problem!r}")
    if not callable(path):
        raise TypeError(f"`path` must be a function t -> q (n,), got {path!r}")
    dtype = jnp.asarray(problem.t1).dtype
    try:
        shape = jax.eval_shape(path, jnp.asarray(problem.t0, dtype)).shape
    except Exception as e:  # noqa: BLE001 - re-raised with the argument named
        raise ValueError(f"`path(t)` failed on a scalar time: {e!r}") from e
    if shape != (problem.n,):
        raise ValueError(f"`path(t)` must return q of shape ({problem.n},), got shape {shape}")
    u0 = np.asarray(problem.control(problem.params) if u is None else u, np.float64)
    if u0.shape != (problem.nu,):
        raise ValueError(f"`u` must have shape ({problem.nu},), got {u0.shape}")

    @jax.jit
    def state(t):
        q, qd = jax.jvp(path, (t,), (jnp.ones_like(t),))
        return consistent_initial_state(problem.system, t, q, qd, problem.params, throw=False)

    def guess(t):
        q, qd = state(jnp.asarray(t, dtype))
        return np.asarray(q), np.asarray(qd), u0

    return guess
