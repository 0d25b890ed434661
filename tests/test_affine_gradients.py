"""Gradients through affine-body rollouts w.r.t. the inertia J and the elastic moduli
match central finite differences (Sławianowski et al. 2013 body, St Venant–Kirchhoff V(G))."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
from constrax import affine as af

PHI0 = jnp.array([[1.1, 0.2], [-0.1, 0.9]])
PHID0 = jnp.array([[0.3, -0.5], [0.4, 0.1]])


def _loss_fn(system, det0=None):
    def loss(theta):
        J = jnp.array([[theta[0], theta[1]], [theta[1], theta[2]]])
        body = af.AffineBody(1.0, J, potential=af.StVenantKirchhoff(theta[3], theta[4]))
        q0, qd0 = af.join(jnp.zeros(2), PHI0), af.join(jnp.zeros(2), PHID0)
        if det0 is not None:  # make the initial velocity isochoric: tr(Omega) = 0
            Om = jnp.linalg.solve(PHI0.T, PHID0.T).T
            qd0 = af.join(jnp.zeros(2), (Om - jnp.trace(Om) / 2 * jnp.eye(2)) @ PHI0)
        traj = cx.simulate(
            system,
            q0,
            qd0,
            body,
            t1=1.0,
            dt0=0.02,
            solver=diffrax.Tsit5(),
            stepsize_controller=diffrax.ConstantStepSize(),
        )
        phi = traj.q[-1, 2:].reshape(2, 2)
        return jnp.sum(phi * jnp.array([[1.0, -2.0], [0.5, 3.0]])) + jnp.sum(traj.qd[-1] ** 2)

    return loss


THETA = jnp.array([1.2, 0.3, 0.8, 2.0, 1.0])  # J11, J12, J22, lambda, mu


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["free", "isochoric"])
def test_rollout_gradient_wrt_inertia_and_moduli_matches_finite_differences(kind):
    if kind == "free":
        loss = _loss_fn(af.affine_system())
    else:
        det0 = jnp.linalg.det(PHI0)
        loss = _loss_fn(af.affine_system(af.isochoric(det0)), det0)
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    f = jax.jit(loss)
    _, grad = value_and_grad(THETA)
    h = 1e-6
    fd = np.array([(f(THETA + h * e) - f(THETA - h * e)) / (2 * h) for e in np.eye(5)])
    assert np.all(np.abs(grad) > 1e-4)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
