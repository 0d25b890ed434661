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


def _singular_saddle_loss(x, solver):
    # Two identical Pfaffian rows: A loses rank, the KKT saddle matrix is singular.
    system = cx.System(
        lambda t, q, qd, p: 0.5 * qd @ qd - p * q[1],
        [cx.Pfaffian(lambda t, q, p: jnp.array([[1.0, 0.0], [1.0, 0.0]]))],
    )
    out = cx.accelerations(
        system, 0.0, jnp.array([0.0, x]), jnp.zeros(2), x, constraint_solver=solver
    )
    return out.qdd[1]


def _negative_mass_loss(x, solver):
    # W = diag(1, -1) is indefinite on ker A = span(e2): no physical motion.
    system = cx.System(
        lambda t, q, qd, p: 0.5 * qd[0] ** 2 - 0.5 * qd[1] ** 2 - p * q[1],
        [cx.Pfaffian(lambda t, q, p: jnp.array([1.0, 0.0]))],
    )
    out = cx.accelerations(system, 0.0, jnp.zeros(2), jnp.zeros(2), x, constraint_solver=solver)
    return out.qdd[1]


@pytest.mark.parametrize("composition", ["eager", "jit", "jit(grad)", "jit(vmap(grad))"])
def test_singular_saddle_error_of_kkt_fires_under_every_composition(composition):
    fn = _compositions(lambda x: _singular_saddle_loss(x, cx.KKT()))[composition]
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="singular"):
        jax.block_until_ready(fn(jnp.asarray(2.0)))


@pytest.mark.parametrize("composition", ["eager", "jit", "jit(grad)", "jit(vmap(grad))"])
@pytest.mark.parametrize("solver", [cx.UdwadiaKalaba(), cx.AutoSolver()], ids=["uk", "auto"])
def test_rank_robust_solvers_answer_the_singular_saddle_with_finite_gradients(composition, solver):
    fn = _compositions(lambda x: _singular_saddle_loss(x, solver))[composition]
    out = jax.block_until_ready(fn(jnp.asarray(2.0)))
    assert jnp.all(jnp.isfinite(jnp.asarray(out[0] if isinstance(out, tuple) else out)))


@pytest.mark.parametrize("composition", ["eager", "jit(grad)", "jit(vmap(grad))"])
def test_mass_not_positive_on_ker_a_is_refused_by_udwadia_kalaba(composition):
    fn = _compositions(lambda x: _negative_mass_loss(x, cx.UdwadiaKalaba()))[composition]
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="positive"):
        jax.block_until_ready(fn(jnp.asarray(2.0)))


@pytest.mark.parametrize("solver", [cx.AutoSolver(), cx.KKT()], ids=["auto", "kkt"])
def test_simulate_refuses_a_mass_matrix_indefinite_on_ker_a_with_every_solver(solver):
    system = cx.System(
        lambda t, q, qd, p: 0.5 * qd[0] ** 2 + 0.5 * p * qd[1] ** 2,
        [cx.Pfaffian(lambda t, q, p: jnp.array([1.0, 0.0]))],
    )
    for composition in ["eager", "jit(grad)"]:
        loss = lambda m: cx.simulate(
            system, jnp.zeros(2), jnp.array([0.0, 1.0]), m, t1=0.1, constraint_solver=solver
        ).q[-1, 1]
        fn = _compositions(loss)[composition]
        with pytest.raises(
            (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="not positive definite"
        ):
            jax.block_until_ready(fn(jnp.asarray(-1.0)))
    # A positive mass passes the same check.
    assert jnp.isfinite(_compositions(loss)["eager"](jnp.asarray(2.0)))
