r"""Guesses from what a user knows of the motion (`cx.fit.path_guess`,
`cx.fit.simulated_guess`).

Reference nobody here derived: the kinetic-energy-nearest velocity of a knife edge (unit
mass) heading at θ to a sideways velocity (0, v) is its projection on the blade, (v s c,
v s²): at θ = 45°, (v/2, v/2)."""

import jax.numpy as jnp
import numpy as np
import pytest
from test_optimal_control import parking

import constrax as cx

pytest.importorskip("cyipopt")

fit = cx.fit


def test_path_velocities_are_put_on_the_no_slip_distribution_nearest_in_kinetic_energy():
    """A sideways slide at heading 45° keeps its blade component (v/2, v/2); a path along
    the blade keeps its velocity; every guessed state satisfies the no-slip row."""
    problem = parking()
    v = 0.2
    slide = fit.path_guess(problem, lambda t: jnp.stack([0.0 * t, v * t, jnp.pi / 4 + 0.0 * t]))
    for t in (0.0, 1.3, 5.0):
        q, qd, u = slide(t)
        np.testing.assert_allclose(q, [0.0, v * t, np.pi / 4], atol=1e-14)
        np.testing.assert_allclose(qd, [v / 2, v / 2, 0.0], atol=1e-14)
        np.testing.assert_array_equal(u, np.zeros(2))
    along = fit.path_guess(
        problem, lambda t: jnp.stack([jnp.cos(0.3) * t, jnp.sin(0.3) * t, 0.3 + 0.0 * t])
    )
    q, qd, _ = along(2.0)
    np.testing.assert_allclose(qd, [np.cos(0.3), np.sin(0.3), 0.0], atol=1e-14)
    turning = fit.path_guess(problem, lambda t: jnp.stack([jnp.sin(t), t**2 / 25, t / 5]))
    for t in np.linspace(0.0, 5.0, 7):
        q, qd, _ = turning(t)
        residual = cx.constraint_residual(
            problem.system, t, jnp.asarray(q), jnp.asarray(qd), problem.params
        )
        assert float(jnp.max(jnp.abs(residual.velocity))) <= 1e-13


def test_parking_solves_from_a_sketched_path_at_the_optimum():
    """An S-shaped sketch of the manoeuvre: solved, at single shooting's optimum 0.21846."""
    problem = parking()
    path = lambda t: jnp.stack(
        [0.3 * jnp.sin(2 * jnp.pi * t / 5), t / 5, 0.5 * jnp.sin(jnp.pi * t / 5)]
    )  # noqa: E731
    sol = fit.solve_optimal_control(
        problem, fit.path_guess(problem, path), transcription=fit.HermiteSimpson(40), progress=False
    )
    assert sol.success, sol.advice
    assert abs(sol.objective - 0.21846) <= 5e-3 * 0.21846


def test_bad_path_guess_arguments_raise_naming_the_argument():
    problem = parking()
    with pytest.raises(TypeError, match="`path` must be a function"):
        fit.path_guess(problem, jnp.zeros(3))
    with pytest.raises(ValueError, match="`path\\(t\\)` must return q of shape \\(3,\\)"):
        fit.path_guess(problem, lambda t: jnp.zeros(2))
    with pytest.raises(ValueError, match="`u` must have shape \\(2,\\)"):
        fit.path_guess(problem, lambda t: jnp.zeros(3) * t, u=np.zeros(3))
    with pytest.raises(TypeError, match="`problem`"):
        fit.path_guess("parking", lambda t: jnp.zeros(3))


def test_a_simulated_guess_is_the_motion_under_the_given_control():
    """The unit mass under the least-effort control u = 6(1 - 2t) moves along
    q = 3t² - 2t³ (closed form) and reaches q1 at rest: the guess is that motion and
    that control, and the solve started from it is already at the optimum 12."""
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, force=lambda t, q, qd, p: p["u"])
    problem = fit.OptimalControlProblem(
        system, {"u": jnp.zeros(1)}, control=lambda p: p["u"], t1=1.0, q0=jnp.zeros(1),
        qd0=jnp.zeros(1), q1=jnp.ones(1), qd1=jnp.zeros(1),
        running_cost=lambda t, q, qd, u, p: u @ u,
    )  # fmt: skip
    guess = fit.simulated_guess(problem, lambda t: jnp.atleast_1d(6.0 * (1.0 - 2.0 * t)),
                                num_points=11)  # fmt: skip
    for t in np.linspace(0.0, 1.0, 11):  # the saved times: the motion to the tolerances
        q, qd, u = guess(t)
        np.testing.assert_allclose(q, [3 * t**2 - 2 * t**3], atol=1e-7)
        np.testing.assert_allclose(qd, [6 * t - 6 * t**2], atol=1e-7)
        np.testing.assert_allclose(u, [6.0 * (1 - 2 * t)], atol=1e-14)
    sol = fit.solve_optimal_control(problem, guess, transcription=fit.HermiteSimpson(10),
                                    progress=False)  # fmt: skip
    assert sol.success and abs(sol.objective - 12.0) <= 1e-8


def test_a_simulated_guess_of_the_knife_edge_keeps_its_no_slip_row():
    problem = parking()
    guess = fit.simulated_guess(problem, lambda t: jnp.stack([jnp.cos(t), 0.3 + 0.0 * t]))
    for t in np.linspace(0.0, 5.0, 9):
        q, qd, u = guess(t)
        residual = cx.constraint_residual(
            problem.system, t, jnp.asarray(q), jnp.asarray(qd), problem.params
        )
        assert float(jnp.max(jnp.abs(residual.velocity))) <= 1e-7
        np.testing.assert_allclose(u, [np.cos(t), 0.3], atol=1e-14)


def test_bad_simulated_guess_arguments_raise_naming_the_argument():
    problem = parking()
    with pytest.raises(ValueError, match=r"`u\(t\)` must return a control of shape \(2,\)"):
        fit.simulated_guess(problem, lambda t: jnp.zeros(3))
    with pytest.raises(TypeError, match="`u` must be a function"):
        fit.simulated_guess(problem, jnp.zeros(2))
    with pytest.raises(ValueError, match="`num_points` must be an int >= 2"):
        fit.simulated_guess(problem, lambda t: jnp.zeros(2), num_points=1)
    with pytest.raises(ValueError, match="needs the initial state"):
        fit.simulated_guess(parking(q0=None), lambda t: jnp.zeros(2))
