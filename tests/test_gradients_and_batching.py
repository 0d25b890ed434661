r"""Gradients through trajectories, `jit`, and `vmap` over initial states.

* $\partial(\text{final position})/\partial(m, I, a)$ of the Chaplygin sleigh by `jax.grad`
  through `cx.simulate` equals central finite differences of the same discrete map
  (fixed-step Tsit5, so the map is smooth in the parameters) to $10^{-6}$ relative.
* `jax.vmap` over 64 initial states equals a Python loop of single `jax.jit` runs.
* The gradient through the Udwadia–Kalaba solve at the snake cart's rank-deficient
  configuration $\phi = \pi/2$ (Briggs 2016, §1.2) is finite, and matches central finite
  differences along a parameter that keeps the rank at 1; and (slow) the gradient of a
  whole fixed-step trajectory that crosses $\phi = \pi/2$ with `UdwadiaKalaba` and
  `Projection` matches central finite differences to $10^{-6}$ relative.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

# ----------------------------------------------------------------------------------------
# Chaplygin sleigh: contact point (x, y), heading th; centre of mass a ahead.


sleigh_L = cx.models.chaplygin_sleigh().system.lagrangian
knife_edge = cx.models.chaplygin_sleigh().system.constraints[0].omega


SLEIGH = cx.System(sleigh_L, [cx.Pfaffian(knife_edge)])
SLEIGH_P = dict(m=1.5, I=0.3, a=0.4)


def sleigh_state(x, y, th, v, w):
    return jnp.array([x, y, th]), jnp.array([v * jnp.cos(th), v * jnp.sin(th), w])


def _final_position(p, q0, qd0):
    traj = cx.simulate(
        SLEIGH,
        q0,
        qd0,
        p,
        t1=2.0,
        dt0=0.01,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        constraint_solver=cx.KKT(),
    )
    return traj.q[-1, :2]


@jax.jit
def _loss(p):
    q0, qd0 = sleigh_state(0.1, -0.2, 0.3, 1.0, 2.0)
    x, y = _final_position(p, q0, qd0)
    return x + 2.0 * y


def test_trajectory_gradient_matches_central_finite_differences():
    p = {k: jnp.asarray(v) for k, v in SLEIGH_P.items()}
    grad = jax.jit(jax.grad(_loss))(p)
    for k in p:
        h = 1e-5 * abs(SLEIGH_P[k])
        plus = dict(p, **{k: p[k] + h})
        minus = dict(p, **{k: p[k] - h})
        fd = (_loss(plus) - _loss(minus)) / (2 * h)
        g = float(grad[k])
        assert np.isfinite(g)
        assert abs(g) > 1e-3, k  # a non-trivial sensitivity
        assert abs(g - fd) <= 1e-6 * abs(fd), f"{k}: grad {g!r} vs finite difference {fd!r}"


# ----------------------------------------------------------------------------------------
# vmap over initial states vs a Python loop.

N_BATCH = 64
N_LOOP = 8


def _rollout(q0, qd0):
    traj = cx.simulate(
        SLEIGH,
        q0,
        qd0,
        {k: jnp.asarray(v) for k, v in SLEIGH_P.items()},
        t1=1.5,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 1.5, 7)),
    )
    return traj.q


def test_vmap_over_64_initial_states_equals_a_python_loop_of_jitted_runs():
    rng = np.random.default_rng(7)
    states = [sleigh_state(*rng.normal(size=3), *(rng.normal(size=2) * 2)) for _ in range(N_BATCH)]
    q0 = jnp.stack([s[0] for s in states])
    qd0 = jnp.stack([s[1] for s in states])
    batched = np.asarray(jax.jit(jax.vmap(_rollout))(q0, qd0))
    assert batched.shape == (N_BATCH, 7, 3)
    assert np.all(np.isfinite(batched))
    single = jax.jit(_rollout)
    idx = np.linspace(0, N_BATCH - 1, N_LOOP).astype(int)
    looped = np.stack([np.asarray(single(q0[i], qd0[i])) for i in idx])
    np.testing.assert_allclose(batched[idx], looped, rtol=1e-12, atol=1e-12)
    # Distinct initial states give distinct trajectories (the batch is not broadcast).
    assert len(np.unique(np.round(batched[:, -1, 0], 8))) == N_BATCH


# ----------------------------------------------------------------------------------------
# Gradient through the Udwadia–Kalaba solve at a rank-deficient configuration.


# The snake cart of the model zoo (Briggs 2016, §1.2): its Lagrangian and wheel rows (1.2.1).
ZOO_SNAKE = cx.models.snake_cart().system


def push(t, q, qd, p):
    return jnp.array([0.5, -0.2, 0.3, 0.4], dtype=q.dtype)  # a constant generalized force


SNAKE = cx.System(ZOO_SNAKE.lagrangian, ZOO_SNAKE.constraints, force=push)
SNAKE_P = dict(m_b=1.0, m_w=0.2, J_b=0.1, J_w=0.05, l=1.0)


@jax.jit
def _snake_loss(p, q, qd):
    out = cx.accelerations(SNAKE, 0.0, q, qd, p, constraint_solver=cx.UdwadiaKalaba())
    return jnp.sum(out.qdd**2) + jnp.sum(jnp.sin(out.qdd)), out.rank


@pytest.fixture
def singular_state():
    th, s = 0.4, 1.3
    # phi = pi/2: both wheels across the body; admissible: pure rotation about the centre,
    # plus any sideways body velocity (the kernel grows at the singular point).
    q = jnp.array([0.2, -0.1, th, jnp.pi / 2])
    qd = jnp.array([-0.3 * jnp.sin(th), 0.3 * jnp.cos(th), 2 * s, 0.7])
    return q, qd


def test_udwadia_kalaba_gradient_is_finite_at_rank_deficient_configuration(singular_state):
    q, qd = singular_state
    p = {k: jnp.asarray(v) for k, v in SNAKE_P.items()}
    (_, rank), grads = jax.value_and_grad(_snake_loss, argnums=(0, 1, 2), has_aux=True)(p, q, qd)
    assert int(rank) == 1
    for leaf in jax.tree_util.tree_leaves(grads):
        assert np.all(np.isfinite(leaf))


@pytest.mark.parametrize("name", ["l", "m_b", "m_w", "J_b", "J_w"])
def test_udwadia_kalaba_gradient_matches_finite_differences_at_rank_deficient_configuration(
    singular_state, name
):
    # Perturbing a parameter keeps phi = pi/2, so the rank stays 1 on the stencil.
    q, qd = singular_state
    p = {k: jnp.asarray(v) for k, v in SNAKE_P.items()}
    grad = jax.grad(lambda p: _snake_loss(p, q, qd)[0])(p)[name]
    h = 1e-6
    fd = (
        _snake_loss(dict(p, **{name: p[name] + h}), q, qd)[0]
        - _snake_loss(dict(p, **{name: p[name] - h}), q, qd)[0]
    ) / (2 * h)
    assert np.isfinite(grad)
    assert abs(fd) > 1e-3  # a non-trivial sensitivity
    assert abs(grad - fd) <= 1e-6 * abs(fd), f"grad {grad!r} vs fd {fd!r}"


# ----------------------------------------------------------------------------------------
# Gradient of a whole trajectory that crosses the singular steering phi = pi/2.


# The zoo's own steering torque tau_amp sin(tau_freq t) = 0.3 sin t.
STEERED = ZOO_SNAKE
STEERED_P = dict(SNAKE_P, tau_amp=0.3, tau_freq=1.0)


def _steered_loss(p):
    th, ph, s = 0.3, 1.2, 0.6  # admissible for l = 1: body velocity (s l cos ph, 0)
    q0 = jnp.array([0.0, 0.0, th, ph])
    xb = s * jnp.cos(ph)
    qd0 = jnp.array([xb * jnp.cos(th), xb * jnp.sin(th), 2 * s * jnp.sin(ph), 0.5])
    traj = cx.simulate(
        STEERED,
        q0,
        qd0,
        p,
        t1=1.0,  # phi = 1.2 + 0.5 t + 3 (t - sin t) crosses pi/2 at t ~ 0.55
        dt0=0.01,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        constraint_solver=cx.UdwadiaKalaba(),
        stabilisation=cx.Projection(10.0, 10.0),
        max_steps=200,
    )
    return traj.q[-1, 0] + traj.q[-1, 1] + traj.q[-1, 2]


@pytest.mark.slow
def test_trajectory_gradient_through_the_singular_steering_matches_finite_differences():
    p = {k: jnp.asarray(v) for k, v in STEERED_P.items()}
    grad = jax.jit(jax.grad(_steered_loss))(p)
    loss = jax.jit(_steered_loss)
    for k in ["m_b", "m_w", "J_b", "J_w"]:  # l would move the admissible initial state
        h = 1e-6
        fd = (loss(dict(p, **{k: p[k] + h})) - loss(dict(p, **{k: p[k] - h}))) / (2 * h)
        g = float(grad[k])
        assert np.isfinite(g)
        assert abs(g - fd) <= 1e-6 * abs(fd), f"{k}: grad {g!r} vs finite difference {fd!r}"
