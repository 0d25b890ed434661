"""Drift control: the error dynamics that `Projection` and `Baumgarte` promise, in closed form."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx


def _free_particle(t, q, qd, p):
    return 0.5 * qd @ qd


def _ts():
    return jnp.linspace(0.0, 1.0, 11)


def _run(system, q0, qd0, stabilisation):
    return cx.simulate(
        system,
        q0,
        qd0,
        None,
        t1=1.0,
        saveat=diffrax.SaveAt(ts=_ts()),
        stabilisation=stabilisation,
        initial_tolerance=1.0,
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-12),
    )


def test_projection_relaxes_the_velocity_error_exponentially_at_rate_alpha():
    # Pfaffian constraint yd = 0 violated initially by eps: eps * exp(-alpha t) afterwards.
    system = cx.System(_free_particle, [cx.Pfaffian(lambda t, q, p: jnp.array([0.0, 1.0]))])
    eps, alpha = 1e-3, 5.0
    traj = _run(system, jnp.zeros(2), jnp.array([1.0, eps]), cx.Projection(alpha=alpha, beta=0.0))
    np.testing.assert_allclose(traj.qd[:, 1], eps * jnp.exp(-alpha * _ts()), rtol=1e-7)
    np.testing.assert_allclose(traj.qd[:, 0], 1.0, rtol=1e-12)


def test_projection_relaxes_the_position_error_exponentially_at_rate_beta():
    system = cx.System(_free_particle, [cx.Holonomic(lambda t, q, p: q[1])])
    eps, beta = 1e-3, 4.0
    traj = _run(system, jnp.array([0.0, eps]), jnp.array([1.0, 0.0]), cx.Projection(10.0, beta))
    np.testing.assert_allclose(traj.q[:, 1], eps * jnp.exp(-beta * _ts()), rtol=1e-7)
    np.testing.assert_allclose(traj.q[:, 0], _ts(), rtol=1e-10, atol=1e-12)


def test_baumgarte_position_error_is_a_critically_damped_oscillator_when_alpha_equals_beta():
    # g'' + 2 a g' + a^2 g = 0 with g(0) = eps, g'(0) = 0  ->  g = eps (1 + a t) exp(-a t).
    system = cx.System(_free_particle, [cx.Holonomic(lambda t, q, p: q[1])])
    eps, a = 1e-3, 6.0
    traj = _run(system, jnp.array([0.0, eps]), jnp.array([1.0, 0.0]), cx.Baumgarte(a, a))
    t = _ts()
    np.testing.assert_allclose(traj.q[:, 1], eps * (1 + a * t) * jnp.exp(-a * t), rtol=1e-7)


@pytest.mark.parametrize("stabilisation", [None, cx.Baumgarte(), cx.Projection()])
def test_stabilisation_does_not_change_motion_that_is_on_the_constraints(stabilisation):
    # Planar pendulum in Cartesian coordinates, started on the constraint: all variants agree.
    def L(t, q, qd, p):
        return 0.5 * qd @ qd - 9.81 * q[1]

    system = cx.System(L, [cx.Holonomic(lambda t, q, p: q @ q - 1.0)])
    q0 = jnp.array([jnp.sin(0.4), -jnp.cos(0.4)])
    ref = _run(system, q0, jnp.zeros(2), None)
    traj = _run(system, q0, jnp.zeros(2), stabilisation)
    np.testing.assert_allclose(traj.q, ref.q, atol=1e-8)


def _pendulum_of_length():
    def L(t, q, qd, p):
        return 0.5 * qd @ qd - 9.81 * q[1]

    return cx.System(L, [cx.Holonomic(lambda t, q, p: q @ q - p["l"] ** 2)])


def test_consistent_initial_state_differentiates_as_the_radial_projection():
    # On a circle of radius l, minimum-norm Gauss-Newton steps move q0 along the normal 2q:
    # the projection is l q0/|q0|, so dq/dl = q0/|q0|; the tangential velocity
    # qd - q (q.qd)/|q|^2 does not depend on l. (g = 0 fixes one of two coordinates: the
    # implicit derivative needs the pseudo-inverse, it was NaN with a plain solve.)
    system = _pendulum_of_length()
    q0, qd0 = jnp.array([1.1, -0.4]), jnp.array([0.3, 1.0])

    def projected(l):
        return cx.consistent_initial_state(system, 0.0, q0, qd0, {"l": l})

    dq, dqd = jax.jacfwd(projected)(1.3)
    np.testing.assert_allclose(dq, q0 / jnp.linalg.norm(q0), rtol=1e-10)
    np.testing.assert_allclose(dqd, 0.0, atol=1e-10)
    gq = jax.grad(lambda l: projected(l)[0] @ jnp.array([1.0, 2.0]))(1.3)
    np.testing.assert_allclose(gq, (q0 / jnp.linalg.norm(q0)) @ jnp.array([1.0, 2.0]), rtol=1e-10)


def test_consistent_initial_state_projects_through_redundant_rows():
    # The circle written twice (and once more as a multiple): J = dg/dq has rank 1 with 3
    # rows, where a QR or LU Gauss-Newton step is NaN and the projection stopped at q0
    # (issue 21). Minimum-norm steps project as for the single row: l q0/|q0| (the
    # closed form above), dq/dl = q0/|q0|, under jit, vmap and grad as well.
    circle = lambda t, q, p: q @ q - p["l"] ** 2
    L = _pendulum_of_length().lagrangian
    twice = lambda t, q, p: jnp.stack([circle(t, q, p), 2.0 * circle(t, q, p)])
    system = cx.System(L, [cx.Holonomic(circle), cx.Holonomic(twice)])
    q0, qd0 = jnp.array([1.1, -0.4]), jnp.array([0.3, 1.0])

    def projected(l, q0=q0):
        return cx.consistent_initial_state(system, 0.0, q0, qd0, {"l": l})

    for fn in (projected, jax.jit(projected)):
        q, qd = fn(1.3)
        np.testing.assert_allclose(q, 1.3 * q0 / jnp.linalg.norm(q0), rtol=1e-12)
        np.testing.assert_allclose(q @ qd, 0.0, atol=1e-12)
    q, _ = cx.consistent_initial_state(system, 0.0, q0, qd0, {"l": 1.3}, throw=False)
    np.testing.assert_allclose(q, 1.3 * q0 / jnp.linalg.norm(q0), rtol=1e-12)
    batch = jnp.stack([q0, 2.0 * q0, jnp.array([-0.5, 0.9])])
    qb, _ = jax.vmap(lambda x: projected(1.3, x))(batch)
    np.testing.assert_allclose(
        qb, 1.3 * batch / jnp.linalg.norm(batch, axis=1, keepdims=True), rtol=1e-12
    )
    dq = jax.jacfwd(lambda l: projected(l)[0])(1.3)
    np.testing.assert_allclose(dq, q0 / jnp.linalg.norm(q0), rtol=1e-10)


def test_gradient_of_simulate_with_project_initial_matches_central_differences():
    # The initial state follows the parameter onto its own constraint manifold, so the
    # derivative is that of a consistent motion (with a fixed q0 it would be the derivative
    # of an inconsistent one, which depends on the stabilisation).
    system = _pendulum_of_length()
    q0, qd0 = jnp.array([0.6, -0.8]), jnp.array([0.8, 0.6])

    def x_final(l):
        traj = cx.simulate(system, q0, qd0, {"l": l}, t1=1.0, project_initial=True)
        return traj.q[-1, 0]

    l, h = 1.2, 1e-5
    ad = jax.jit(jax.grad(x_final))(l)
    fd = (x_final(l + h) - x_final(l - h)) / (2 * h)
    np.testing.assert_allclose(ad, fd, rtol=1e-6)


def _solves(fn, *args) -> int:
    """Number of linear solves (`custom_linear_solve` equations) in the jaxpr of `fn`."""
    jaxpr = jax.make_jaxpr(fn)(*args)
    return str(jaxpr).count("custom_linear_solve")


def test_a_concrete_zero_position_rate_leaves_the_position_correction_out_of_the_trace():
    # The default Projection(10, 0) must not trace beta * W^-1 A^T (A W^-1 A^T)^+ g for a
    # zero beta; a traced beta (an array, e.g. one being differentiated) keeps the term and
    # its derivative d(qdot)/d(beta) = -W^-1 A^T (A W^-1 A^T)^+ g, here -(0, g) = -(0, q_y).
    system = cx.System(_free_particle, [cx.Holonomic(lambda t, q, p: q[1])])
    q, qd = jnp.array([0.0, 1e-3]), jnp.array([1.0, 0.2])

    def velocity(beta):
        stab = cx.Projection(10.0, beta)
        return cx.accelerations(system, 0.0, q, qd, stabilisation=stab, constraint_solver=cx.KKT())

    concrete = _solves(lambda: velocity(0.0).velocity)
    traced = _solves(lambda b: velocity(b).velocity, jnp.asarray(0.0))
    assert concrete == traced - 1
    np.testing.assert_array_equal(velocity(0.0).velocity, velocity(jnp.asarray(0.0)).velocity)
    np.testing.assert_allclose(velocity(0.0).velocity, [1.0, 0.0], atol=1e-15)
    d_beta = jax.jacfwd(lambda b: velocity(b).velocity)(jnp.asarray(0.0))
    np.testing.assert_allclose(d_beta, [0.0, -1e-3], rtol=1e-12, atol=1e-15)
