r"""Trajectory optimisation (constrax.fit): piecewise-linear controls, gradients through
diffrax, and steering the knife edge sideways.

The knife edge (`cx.models.knife_edge`) cannot slip sideways: $-\sin\theta\,\dot x +
\cos\theta\,\dot y = 0$. It is driven by a push $u_1$ along its heading and a torque
$u_2$, $Q = (u_1\cos\theta, u_1\sin\theta, u_2)$. Moving it straight sideways is
impossible; reaching $(0, 1, 0)$ at rest needs a manoeuvre (a Lie bracket).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import constrax as cx
import constrax.fit as fit
from constrax import models

T = 4.0
N = 12


def force(t, q, qd, p):
    u = p["u"](t)
    th = q[2]
    return jnp.stack([u[0] * jnp.cos(th), u[0] * jnp.sin(th), u[1]])


MODEL = models.knife_edge()
SYSTEM = cx.System(MODEL.system.lagrangian, MODEL.system.constraints, force=force)
Q0 = jnp.zeros(3)
QD0 = jnp.zeros(3)
GOAL = jnp.array([0.0, 1.0, 0.0])
KNOTS0 = 0.5 * jax.random.normal(jax.random.PRNGKey(0), (N, 2))
PARAMS = {**MODEL.params, "u": fit.PiecewiseLinear(KNOTS0, 0.0, T)}
CONTROLS = lambda p: p["u"]


def problem(adjoint=diffrax.RecursiveCheckpointAdjoint(), **kw):
    options = dict(
        constraint_solver=cx.KKT(),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )
    options.update(kw)
    return fit.TrajectoryProblem(
        SYSTEM,
        Q0,
        QD0,
        PARAMS,
        controls=CONTROLS,
        t1=T,
        goal_q=GOAL,
        goal_qd=jnp.zeros(3),
        effort_weight=1e-3,
        terminal_weight=1e3,
        adjoint=adjoint,
        **options,
    )


def test_piecewise_linear_interpolates_knots_and_effort_is_exact():
    knots = jnp.array([[0.0, 1.0], [2.0, -1.0], [-1.0, 0.5], [0.5, 0.5]])
    u = fit.PiecewiseLinear(knots, 1.0, 4.0)
    for i, t in enumerate(u.times):
        np.testing.assert_allclose(u(t), knots[i], rtol=0, atol=1e-15)
    np.testing.assert_allclose(u(1.5), 0.5 * (knots[0] + knots[1]), rtol=1e-15)
    np.testing.assert_allclose(u(0.0), knots[0])  # held constant outside [t0, t1]
    np.testing.assert_allclose(u(9.0), knots[-1])
    # Simpson's rule is exact for the quadratic |u|^2 on each interval
    a, b = knots[:-1], knots[1:]
    h = 1.0
    simpson = h / 6 * (jnp.sum(a**2) + 4 * jnp.sum(((a + b) / 2) ** 2) + jnp.sum(b**2))
    np.testing.assert_allclose(jnp.sum(u.effort_residuals() ** 2), simpson, rtol=1e-14)


def test_gradient_through_diffrax_matches_finite_differences():
    """Reverse-mode gradient of J through diffrax (default RecursiveCheckpointAdjoint)
    against central differences along random directions of the knots. A fixed step
    makes the discrete solution a smooth function of the knots, so finite differences
    are not polluted by adaptive step-size changes."""
    prob = problem(stepsize_controller=diffrax.ConstantStepSize(), dt0=T / 200)
    z = prob.init(PARAMS)
    grad = eqx.filter_jit(eqx.filter_grad(lambda z: prob.loss(z)))(z)
    loss = eqx.filter_jit(lambda k: prob.loss(eqx.tree_at(lambda c: c.knots, z, k)))
    eps = 1e-5
    for seed in (1, 2):
        d = jax.random.normal(jax.random.PRNGKey(seed), KNOTS0.shape)
        fd = (loss(z.knots + eps * d) - loss(z.knots - eps * d)) / (2 * eps)
        np.testing.assert_allclose(jnp.sum(grad.knots * d), fd, rtol=1e-6)


def test_default_adjoint_checkpoints_every_fixed_step_with_the_same_gradient():
    """Without an `adjoint`, a fixed-step problem stores one checkpoint per step (N + 1 for
    N = 200 steps) and an adaptive one keeps diffrax's default; the gradient is the same
    discrete gradient as with diffrax's default `RecursiveCheckpointAdjoint()`."""
    fixed = dict(stepsize_controller=diffrax.ConstantStepSize(), dt0=T / 200)
    prob = problem(adjoint=None, **fixed)
    assert isinstance(prob.adjoint, diffrax.RecursiveCheckpointAdjoint)
    assert prob.adjoint.checkpoints == 201
    assert problem(adjoint=None).adjoint.checkpoints is None  # adaptive steps
    z = prob.init(PARAMS)

    def grad_of(pr):
        return eqx.filter_jit(eqx.filter_grad(lambda z: pr.loss(z)))(z).knots

    g = grad_of(prob)
    np.testing.assert_allclose(grad_of(problem(**fixed)), g, rtol=1e-12, atol=1e-12)


def test_knife_edge_steered_sideways():
    """Levenberg–Marquardt on the knots (forward-mode Jacobians through diffrax):
    terminal error <= 1e-3 while the no-slip constraint holds to <= 1e-8 along the path."""
    prob = problem(adjoint=diffrax.ForwardMode())
    res = fit.solve(
        prob, PARAMS, optx.LevenbergMarquardt(rtol=1e-9, atol=1e-9), steps=40, throw=False
    )
    ts = jnp.linspace(0.0, T, 201)
    traj = prob.simulate(res.params, ts)
    err = jnp.concatenate([traj.q[-1] - GOAL, traj.qd[-1]])
    assert float(jnp.max(jnp.abs(err))) <= 1e-3, err
    assert float(jnp.max(jnp.abs(traj.constraint_residual().velocity))) <= 1e-8
    assert float(jnp.max(jnp.abs(traj.q[:, 1]))) > 0.5  # it did move sideways
    # ... which it cannot do going straight: without torque theta stays 0 and y = 0
    straight = eqx.tree_at(
        lambda p: p["u"].knots, res.params, res.params["u"].knots.at[:, 1].set(0.0)
    )
    traj = prob.simulate(straight, ts)
    assert float(jnp.max(jnp.abs(traj.q[:, 1:]))) == 0.0


def test_unconverged_fit_with_reverse_mode_through_adaptive_steps_names_the_recomputation():
    """A Levenberg–Marquardt run that hits `steps` on adaptive steps with reverse-mode
    Jacobians (`RecursiveCheckpointAdjoint`) says that those Jacobians depend on the
    backward pass recomputing the steps exactly, and what does not; with fixed steps or
    forward mode the error does not say so."""
    with pytest.raises(RuntimeError, match=r"stopped after 1 of `steps`=1 steps") as err:
        fit.solve(problem(), PARAMS, steps=1)
    message = str(err.value)
    assert "recomputes the forward steps exactly" in message, message
    assert "diffrax.ConstantStepSize()" in message and "diffrax.ForwardMode()" in message
    assert message.endswith("or pass throw=False to get the FitResult")
    fixed = problem(stepsize_controller=diffrax.ConstantStepSize(), dt0=T / 200)
    for quiet in (fixed, problem(adjoint=diffrax.ForwardMode())):
        assert "recomputes" not in fit._solve._unconverged_advice(quiet)


def test_trajectory_problem_errors():
    with pytest.raises(ValueError, match=r"`knots` must have shape \(N, d\) with N >= 2"):
        fit.PiecewiseLinear(jnp.zeros((1, 2)), 0.0, 1.0)
    with pytest.raises(ValueError, match="expected t0 < t1"):
        fit.PiecewiseLinear(jnp.zeros((3, 2)), 1.0, 1.0)
    with pytest.raises(ValueError, match=r"`goal_q` must have shape \(n,\) = \(3,\)"):
        fit.TrajectoryProblem(SYSTEM, Q0, QD0, PARAMS, controls=CONTROLS, t1=T, goal_q=jnp.zeros(2))
    with pytest.raises(ValueError, match="`controls` must be a function where"):
        fit.TrajectoryProblem(SYSTEM, Q0, QD0, PARAMS, controls=lambda p: p["m"], t1=T, goal_q=GOAL)
    with pytest.raises(ValueError, match="give a target"):
        fit.TrajectoryProblem(SYSTEM, Q0, QD0, PARAMS, controls=CONTROLS, t1=T)
    with pytest.raises(ValueError, match="expected t1 > t0"):
        fit.TrajectoryProblem(SYSTEM, Q0, QD0, PARAMS, controls=CONTROLS, t1=0.0, goal_q=GOAL)
    with pytest.raises(ValueError, match=r"`terminal_weight` must be a scalar or shape \(3,\)"):
        fit.TrajectoryProblem(
            SYSTEM,
            Q0,
            QD0,
            PARAMS,
            controls=CONTROLS,
            t1=T,
            goal_q=GOAL,
            terminal_weight=jnp.ones(2),
        )
    prob = problem()
    with pytest.raises(ValueError, match="`init` must have the same tree structure"):
        fit.solve(prob, {"u": PARAMS["u"]})
