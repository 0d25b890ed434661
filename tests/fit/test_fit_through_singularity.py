r"""Identification from data that crosses a singular configuration.

The snake cart (`cx.models.snake_cart`, Briggs 2016, §1.2) steered from $\phi_0 = 1.2$
with $\tau = 0.3\sin t$ crosses $\phi = \pi/2 + k\pi$ four times in 3 s (the state of
`tests/test_snake_cart_singularity.py`), where its two wheel rows coincide and $A$ loses
rank. The wheel inertia $J_w$ is identifiable in absolute terms ($2J_w\ddot\phi = \tau$)
and also shapes the $(x, y, \theta)$ motion through the mass ratio. Noise-free data from
an independent tighter solve (rtol = atol = $10^{-12}$); the fit uses
`IdentificationProblem`'s defaults (Projection stabilisation, adaptive steps), whose
gradients through the crossings are right (docs/concepts/gradients.md).
"""

import diffrax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import constrax as cx
import constrax.fit as fit

PARAMS = {
    k: jnp.asarray(v)
    for k, v in dict(m_b=1.0, m_w=0.2, J_b=0.1, J_w=0.05, l=1.0, tau_amp=0.3, tau_freq=1.0).items()
}
SYSTEM = cx.models.snake_cart().system
TS = jnp.linspace(0.1, 3.0, 30)


def _initial_state(phi=1.2, s=0.6, th=0.3, phd=0.5):
    xb, thd = s * np.cos(phi), 2 * s * np.sin(phi)  # l = 1
    return jnp.array([0.2, -0.1, th, phi]), jnp.array([xb * np.cos(th), xb * np.sin(th), thd, phd])


@pytest.mark.slow
def test_wheel_inertia_is_recovered_from_data_through_four_singular_crossings():
    q0, qd0 = _initial_state()
    traj = cx.simulate(
        SYSTEM,
        q0,
        qd0,
        PARAMS,
        t1=TS[-1],
        saveat=diffrax.SaveAt(ts=TS),
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12, dtmax=0.1),
        max_steps=100_000,
    )
    phi = np.asarray(traj.q[:, 3])
    assert int(np.sum(np.sign(np.cos(phi[1:])) != np.sign(np.cos(phi[:-1])))) >= 3
    problem = fit.IdentificationProblem(
        SYSTEM,
        fit.Observations(TS, traj.q, sigma=1e-3),
        q0,
        qd0,
        PARAMS,
        free=lambda p: p["J_w"],
        transforms=fit.Positive(),
    )
    res = fit.solve(problem, {**PARAMS, "J_w": jnp.asarray(0.04)})
    assert res.result == optx.RESULTS.successful
    assert abs(float(res.params["J_w"]) / 0.05 - 1.0) <= 1e-6, res.params["J_w"]
