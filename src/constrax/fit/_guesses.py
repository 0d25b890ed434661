r"""Guesses for `solve_optimal_control` made from what a user knows of the motion (docs page
"Trajectory optimisation", section "Guesses")."""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._initial_state import consistent_initial_state
from .._simulate import simulate
from .._system import System
from ._ocp import OptimalControlProblem


def _shape_at_t0(fn: Callable, name: str, problem: OptimalControlProblem) -> tuple:
    """The shape `fn(t)` returns on a scalar time of the problem's dtype; `ValueError`
    naming `name` where it fails."""
    t0 = jnp.asarray(problem.t0, jnp.asarray(problem.t1).dtype)
    try:
        return jax.eval_shape(fn, t0).shape
    except Exception as e:  # noqa: BLE001 - re-raised with the argument named
        raise ValueError(f"`{name}(t)` failed on a scalar time: {e!r}") from e


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
    shape = _shape_at_t0(path, "path", problem)
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


def simulated_guess(
    problem: OptimalControlProblem,
    u: Callable[[Float[Array, ""]], Float[Array, " nu"]],
    *,
    num_points: int = 201,
    **simulate_options,
) -> Callable:
    r"""A guess `t -> (q, qd, u)` for `cx.fit.solve_optimal_control` from simulating the
    problem's system under a control `u(t) -> (nu,)` that a user expects to do roughly
    the job (a hand-tuned feedback, a recorded input, a bang-bang sketch).

    The system is integrated by `cx.simulate` from the problem's fixed `q0`, `qd0` over
    $[t_0, t_1]$ with the problem's prescription and constraint solver, the control
    entering the force where `problem.control` locates it; the guess is that motion
    (linear between `num_points` saved times) and `u(t)` itself. The motion satisfies
    every constraint row; it does not in general reach the terminal state, which the solve
    then corrects.

    **Arguments:**

    - `problem`: a `cx.fit.OptimalControlProblem` with fixed `q0` and `qd0`.
    - `u`: the control, a JAX function of the time.
    - `num_points`: the saved times of the motion.
    - `simulate_options`: keyword arguments of `cx.simulate` (`stepsize_controller`,
      `max_steps`, ...).

    **Example:** a unit mass pushed by the least-effort control of the rest-to-rest motion
    by 1 in 1 s, $u = 6(1 - 2t)$: the guess is the solution itself.

    ```python
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, force=lambda t, q, qd, p: p["u"])
    problem = cx.fit.OptimalControlProblem(
        system, {"u": jnp.zeros(1)}, control=lambda p: p["u"], t1=1.0,
        q0=jnp.zeros(1), qd0=jnp.zeros(1), q1=jnp.ones(1), qd1=jnp.zeros(1),
        running_cost=lambda t, q, qd, u, p: u @ u)
    guess = cx.fit.simulated_guess(problem, lambda t: jnp.atleast_1d(6.0 * (1.0 - 2.0 * t)))
    guess(1.0)[0]   # [1.]: the guess reaches q1
    ```
    """
    if not isinstance(problem, OptimalControlProblem):
        raise TypeError(f"`problem` must be a cx.fit.OptimalControlProblem, got {problem!r}")
    if problem.q0 is None or problem.qd0 is None:
        raise ValueError(
            "simulated_guess needs the initial state: `problem.q0` and `problem.qd0` fixed "
            "(a state fixed in part has no motion to simulate; use cx.fit.path_guess)"
        )
    if not callable(u):
        raise TypeError(f"`u` must be a function t -> control ({problem.nu},), got {u!r}")
    if not isinstance(num_points, int) or num_points < 2:
        raise ValueError(f"`num_points` must be an int >= 2, got {num_points!r}")
    dtype = jnp.asarray(problem.t1).dtype
    shape = _shape_at_t0(u, "u", problem)
    if shape != (problem.nu,):
        raise ValueError(f"`u(t)` must return a control of shape ({problem.nu},), got {shape}")
    system, control = problem.system, problem.control

    def force(t, q, qd, p):
        return system.force(t, q, qd, eqx.tree_at(control, p, u(t).astype(q.dtype)))

    driven = System(system.lagrangian, system.constraints, force, dynamics=system.dynamics)
    t0, t1 = float(problem.t0), float(problem.t1)
    ts = np.linspace(t0, t1, num_points)
    traj = simulate(driven, problem.q0, problem.qd0, problem.params, t0=t0, t1=t1,
                    saveat=diffrax.SaveAt(ts=jnp.asarray(ts, dtype)),
                    prescription=problem.prescription, mu0=problem.mu0,
                    constraint_solver=problem.constraint_solver, **simulate_options)  # fmt: skip
    Q, Qd = np.asarray(traj.q, np.float64), np.asarray(traj.qd, np.float64)
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(Qd))):
        raise ValueError("simulated_guess: the simulated motion is not finite (see cx.simulate)")
    u_jit = jax.jit(u)

    def guess(t):
        t = float(t)
        q = np.array([np.interp(t, ts, col) for col in Q.T])
        qd = np.array([np.interp(t, ts, col) for col in Qd.T])
        return q, qd, np.asarray(u_jit(jnp.asarray(t, dtype)), np.float64)

    return guess
