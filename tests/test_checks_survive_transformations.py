"""Checks that guard a result fire in every composition of jit, grad and vmap.

`equinox.error_if` on a value the caller never reads is dead code under `jax.jit`, and
under `jax.grad` the *value* of the trajectory is never read: a failed solve used to give
a finite, wrong gradient under `jax.jit(jax.grad(...))`.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import constrax as cx

PENDULUM = cx.models.pendulum_chain(1)


def _pendulum_loss(g, **kw):
    p = {**PENDULUM.params, "g": g}
    return cx.simulate(PENDULUM.system, PENDULUM.q0, PENDULUM.qd0, p, t1=1.0, **kw).q[-1, 0]


def _blow_up_loss(k):
    # V = -k q^4: the particle reaches infinity in finite time; fixed steps carry it to inf/NaN.
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd + p * q[0] ** 4)
    traj = cx.simulate(
        system,
        jnp.array([1.0]),
        jnp.array([1.0]),
        k,
        t1=10.0,
        dt0=0.05,
        stepsize_controller=diffrax.ConstantStepSize(),
    )
    return traj.q[-1, 0]


def _compositions(loss):
    grad = jax.grad(loss)
    return {
        "eager": lambda x: loss(x),
        "jit": jax.jit(loss),
        "grad": grad,
        "jit(grad)": jax.jit(grad),
        "vmap(grad)": lambda x: jax.vmap(grad)(jnp.stack([x, x])),
        "jit(vmap(grad))": lambda x: jax.jit(jax.vmap(grad))(jnp.stack([x, x])),
        "jit(value_and_grad)": jax.jit(jax.value_and_grad(loss)),
    }


@pytest.mark.parametrize("composition", list(_compositions(lambda x: x)))
def test_max_steps_error_fires_under_every_composition(composition):
    fn = _compositions(lambda g: _pendulum_loss(g, max_steps=5))[composition]
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="max_steps"):
        jax.block_until_ready(fn(jnp.asarray(9.81)))


@pytest.mark.parametrize("composition", ["jit", "jit(grad)", "jit(vmap(grad))"])
def test_non_finite_trajectory_error_fires_under_jit_and_grad(composition):
    fn = _compositions(_blow_up_loss)[composition]
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="NaN or inf"):
        jax.block_until_ready(fn(jnp.asarray(1.0)))


def test_a_successful_solve_keeps_its_gradient_under_jit():
    # The check multiplies the trajectory by one: values and gradients are unchanged.
    g = jnp.asarray(9.81)
    eager = jax.grad(_pendulum_loss)(g)
    jitted = jax.jit(jax.grad(_pendulum_loss))(g)
    h = 1e-5
    fd = (_pendulum_loss(g + h) - _pendulum_loss(g - h)) / (2 * h)
    assert jnp.allclose(eager, jitted, rtol=1e-12, atol=0)
    assert jnp.allclose(jitted, fd, rtol=1e-5)
