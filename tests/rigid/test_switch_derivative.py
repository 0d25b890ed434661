"""The derivatives of a switching time of `cx.rigid.simulate_contacts` are as accurate as the
integration, not limited by the dense output's slope (issue 46, part 4).

A ball rolls from rest on a horizontal plane under a gravity that turns at a constant rate
w about a horizontal axis, g (sin wt, 0, -cos wt): the Lagrangian depends on time. From
Newton-Euler (checked with sympy): rolling, the centre accelerates at 5 g sin(wt) / 7, the
friction it needs is f = 2 m g sin(wt) / 7 and the normal reaction N = m g cos(wt), so the
ball leaves the static friction cone, mu_s N = |f|, at

    t* = atan(7 mu_s / 2) / w,  dt*/dmu_s = 14 / (w (4 + 49 mu_s^2)),  dt*/dw = -t* / w,

the contact closed while cos(wt) > 0 (w t < 1.4 here). The motion is not a polynomial in
t, so the step's dense output, the polynomial diffrax's event root find and its implicit
derivative use, is not exact, and its slope is an order less accurate than its value. At
mu_s = 0.3, w = 1, measured (float64, Tsit5): with the default tolerances (1e-8) t* was
right to 8.8e-10 but dt*/dmu_s and dt*/dw only to 5.3e-7 while diffrax divided by the
polynomial's slope; with rtol = atol = 1e-11, t* to 3.8e-13 and the derivatives to
2.1e-9. With the slope from the vector field (`_event_time`) the derivatives are right to
6.0e-9 and 9.9e-9 (default tolerances) and to 1.8e-11 (1e-11), the accuracy of the state
at the switch, the times unchanged. The checks below: t* to 1e-8 and its derivatives to
3e-8 at the default tolerances, at three points.

Central differences of the run are a second reference, but a weaker one: they
differentiate the located root of the dense output, whose slope is the polynomial's, so at
the default tolerances they agree with the derivative only to the polynomial's accuracy.

One compiled program (`jit` of `vmap` of `value_and_grad`, 400 s to compile on a loaded
2-core CPU, hence `slow`) serves every check.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
import constrax.rigid as rg

G = 9.81
BALL = rg.RigidBody(1.0, jnp.full(3, 0.004), name="ball")


def _lagrangian(t, q, qd, p):
    r = BALL.position(q)
    w = p["w"]
    return BALL.kinetic_energy(q, qd) - G * (jnp.cos(w * t) * r[2] - jnp.sin(w * t) * r[0])


SYSTEM = cx.System(_lagrangian, [BALL.orientation_constraint()])
CONTACT = rg.FrictionalContact(
    BALL, rg.Sphere(0.1), static_friction=lambda p: p["mu_s"], kinetic_friction=0.2
)
Q0, QD0 = BALL.state(jnp.array([0.0, 0.0, 0.1]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))


def _switch_time(mu_s, w):
    out = rg.simulate_contacts(
        SYSTEM, [CONTACT], Q0, QD0, {"mu_s": mu_s, "w": w}, modes=["rolling"], t1=1.1,
        max_switches=1,
    )  # fmt: skip
    return out.switch_times[0]


def _closed_form(mu_s, w):
    t = np.arctan(3.5 * mu_s) / w
    return t, 14 / (w * (4 + 49 * mu_s**2)), -t / w


H = 1e-4
# (mu_s, w): the reference point, its central-difference neighbours, two more points.
POINTS = np.array(
    [[0.3, 1.0], [0.3 + H, 1.0], [0.3 - H, 1.0], [0.3, 1.0 + H], [0.3, 1.0 - H], [0.25, 1.2],
     [0.5, 1.25]]
)  # fmt: skip


@pytest.fixture(scope="module")
def batch():
    """The switching times and their derivatives in (mu_s, w) at `POINTS`, by one `jit`
    of `vmap` of `value_and_grad`."""
    f = jax.jit(jax.vmap(jax.value_and_grad(_switch_time, argnums=(0, 1))))
    t, (d_mu, d_w) = f(jnp.asarray(POINTS[:, 0]), jnp.asarray(POINTS[:, 1]))
    return np.asarray(t), np.asarray(d_mu), np.asarray(d_w)


@pytest.mark.slow
def test_switching_time_and_derivatives_match_closed_form_under_jit_and_vmap(batch):
    t, d_mu, d_w = batch
    for i in (0, 5, 6):
        t_ref, d_mu_ref, d_w_ref = _closed_form(*POINTS[i])
        assert abs(t[i] - t_ref) <= 1e-8 * t_ref
        # Measured 2e-10 to 9e-10 for t*, 6e-9 to 1.3e-8 for the derivatives (5.3e-7 at the
        # first point while diffrax divided by the dense output's slope).
        assert abs(d_mu[i] - d_mu_ref) <= 3e-8 * d_mu_ref
        assert abs(d_w[i] - d_w_ref) <= 3e-8 * abs(d_w_ref)


@pytest.mark.slow
def test_switching_time_derivatives_match_central_differences(batch):
    t, d_mu, d_w = batch
    fd_mu = (t[1] - t[2]) / (2 * H)
    fd_w = (t[3] - t[4]) / (2 * H)
    # The differences see the dense output's slope (module docstring): they differ from
    # the derivatives by 5.1e-7 (mu_s) and 3.6e-7 (w), as the derivatives did from the
    # closed form while diffrax divided by that slope.
    np.testing.assert_allclose(fd_mu, d_mu[0], rtol=2e-6)
    np.testing.assert_allclose(fd_w, d_w[0], rtol=2e-6)
