"""Drift control: the error dynamics that `Projection` and `Baumgarte` promise, in closed form."""

import diffrax
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
