"""A fixed-step run's default adjoint stores every step (as a scan's reverse pass), with
the derivative of diffrax's recomputing checkpoints."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import constrax as cx
from constrax._simulate import STORE_EVERY_STEP_MAX, fixed_step_adjoint


def test_the_default_adjoint_of_a_fixed_step_run_checkpoints_every_step():
    default, fixed = diffrax.RecursiveCheckpointAdjoint(), diffrax.ConstantStepSize()
    chosen = fixed_step_adjoint(default, fixed, (0.0, 0.2, 1e-3), 16384)
    assert chosen.checkpoints == 200
    # Adaptive steps, a user's own checkpoints or adjoint, traced times, too many steps:
    # as given.
    pid = diffrax.PIDController(rtol=1e-6, atol=1e-6)
    assert fixed_step_adjoint(default, pid, (0.0, 0.2, 1e-3), 16384) is default
    own = diffrax.RecursiveCheckpointAdjoint(checkpoints=7)
    assert fixed_step_adjoint(own, fixed, (0.0, 0.2, 1e-3), 16384) is own
    direct = diffrax.DirectAdjoint()
    assert fixed_step_adjoint(direct, fixed, (0.0, 0.2, 1e-3), 16384) is direct
    long = (0.0, 2.0 * STORE_EVERY_STEP_MAX * 1e-3, 1e-3)
    assert fixed_step_adjoint(default, fixed, long, None) is default
    seen = []

    def traced(t1):
        seen.append(fixed_step_adjoint(default, fixed, (0.0, t1, 1e-3), 16384))
        return t1

    jax.make_jaxpr(traced)(0.2)
    assert seen == [default]  # the step count is not known when tracing


def test_storing_every_step_gives_the_recomputing_checkpoints_derivative():
    model = cx.models.pendulum_chain(3, "maximal")

    def loss(g, adjoint):
        traj = cx.simulate(
            model.system, model.q0, model.qd0, {**model.params, "g": g}, t1=0.3, dt0=1e-2,
            solver=diffrax.Heun(), stepsize_controller=diffrax.ConstantStepSize(),
            adjoint=adjoint,
        )  # fmt: skip
        return jnp.sum(traj.q[-1] ** 2) + jnp.sum(traj.qd[-1] ** 2)

    g0 = jnp.asarray(9.0)
    stored = jax.grad(loss)(g0, diffrax.RecursiveCheckpointAdjoint())
    recomputed = jax.grad(loss)(g0, diffrax.RecursiveCheckpointAdjoint(checkpoints=3))
    np.testing.assert_allclose(stored, recomputed, rtol=1e-12)
    h, default = 1e-6, diffrax.RecursiveCheckpointAdjoint()
    fd = (loss(g0 + h, default) - loss(g0 - h, default)) / (2 * h)
    np.testing.assert_allclose(stored, fd, rtol=1e-6)
