r"""A ball on a sphere (`cx.rigid.SphericalSurface`): rolling, sliding and leaving it,
against closed forms.

References, none derived from the code under test. A solid ball (radius $a$, mass $m$,
$I = \tfrac25 ma^2$) starts on top of a fixed sphere of radius $R$ with speed $v_0$; its
centre moves on the circle of radius $\rho = R + a$ at the angle $\theta$ from the
vertical. Newton's laws along the normal and the tangent, and about the centre (Routh
1905, *The Elementary Part of a Treatise on the Dynamics of a System of Rigid Bodies*,
§240; the rolling ball on a sphere is a textbook exercise):

* rolling ($|\omega| = v/a$): energy $\tfrac7{10}v^2 = \tfrac7{10}v_0^2 + g\rho(1 -
  \cos\theta)$, normal reaction $N = m(g\cos\theta - v^2/\rho)$, friction
  $f = \tfrac27 mg\sin\theta$; the ball starts to slip where $f = \mu_s N$:
  $2\sin\theta = \mu_s(17\cos\theta - 10 - 7v_0^2/(g\rho))$;
* frictionless sliding: $v^2 = v_0^2 + 2g\rho(1 - \cos\theta)$, and the ball leaves
  the sphere where $N = 0$: $\cos\theta = (2 + v_0^2/(g\rho))/3$ (2/3 from rest).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq

import constrax as cx
import constrax.rigid as rg

G, A, R, M = 9.81, 0.1, 1.0, 1.0
RHO = R + A
SLIDING, SEPARATED = 1, 2  # the mode codes (`ContactTrajectory.modes`)
TS = jnp.linspace(0.0, 3.0, 31)
BALL = rg.RigidBody(M, jnp.full(3, 0.4 * M * A**2), name="ball")
SYSTEM = cx.System(
    lambda t, q, qd, p: BALL.kinetic_energy(q, qd) - M * G * q[2], [BALL.orientation_constraint()]
)
CONTACT = rg.FrictionalContact(
    BALL,
    rg.Sphere(A),
    rg.SphericalSurface(R),
    static_friction=lambda p: p["mu_s"],
    kinetic_friction=lambda p: p["mu_k"],
    name="ball on sphere",
)


def _start(v0, rolling):
    """On top of the sphere, moving along x at v0, rolling (spin v0/a about y) or not."""
    spin = jnp.array([0.0, v0 / A, 0.0]) if rolling else jnp.zeros(3)
    return BALL.state(jnp.array([0.0, 0.0, RHO]), jnp.eye(3), jnp.array([v0, 0.0, 0.0]), spin)


def _run(mu_s, mu_k, v0, mode):
    q0, qd0 = _start(v0, mode == "rolling")
    p = {"mu_s": jnp.asarray(mu_s), "mu_k": jnp.asarray(mu_k)}
    return rg.simulate_contacts(
        SYSTEM, [CONTACT], q0, qd0, p, modes=[mode], t1=3.0, ts=TS, max_switches=3
    )


def _angle_and_speed(out, k):
    """The polar angle of the centre and its speed after switch `k`."""
    x, z = np.asarray(out.switch_q[k][0]), np.asarray(out.switch_q[k][2])
    v = np.asarray(out.switch_qd[k][:3])
    return np.arctan2(x, z), np.linalg.norm(v), np.hypot(x, z)


def _slip_angle(mu_s, v0):
    k = v0**2 / (G * RHO)
    return brentq(lambda th: 2 * np.sin(th) - mu_s * (17 * np.cos(th) - 10 - 7 * k), 0.0, 1.2)


def test_ball_rolling_on_a_sphere_starts_to_slip_where_friction_leaves_the_cone():
    mu_s, v0 = 0.5, 0.5
    out = _run(mu_s, 0.4, v0, "rolling")
    assert int(out.status) == 0
    assert int(out.switch_contacts[0]) == 0
    assert out.switch_modes[0].tolist() == [SLIDING]
    theta, v, dist = _angle_and_speed(out, 0)
    expected = _slip_angle(mu_s, v0)
    assert abs(theta - expected) <= 1e-7
    # Rolling conserves energy: 7/10 v^2 = 7/10 v0^2 + g rho (1 - cos theta).
    assert abs(0.7 * v**2 - (0.7 * v0**2 + G * RHO * (1 - np.cos(theta)))) <= 1e-7
    assert abs(dist - RHO) <= 1e-8  # on the sphere


def test_frictionless_ball_leaves_the_sphere_where_cos_theta_is_two_thirds_plus():
    v0 = 0.5
    out = _run(0.0, 0.0, v0, "sliding")
    assert int(out.status) == 0
    assert out.switch_modes[0].tolist() == [SEPARATED]
    theta, v, dist = _angle_and_speed(out, 0)
    assert abs(np.cos(theta) - (2 + v0**2 / (G * RHO)) / 3) <= 1e-7
    assert abs(v**2 - (v0**2 + 2 * G * RHO * (1 - np.cos(theta)))) <= 1e-7
    assert abs(dist - RHO) <= 1e-8
    # After it the ball flies free of the sphere: its gap only opens.
    flying = np.asarray(out.modes[:, 0]) == SEPARATED
    q = np.asarray(out.q)[flying]
    assert np.all(np.hypot(np.hypot(q[:, 0], q[:, 1]), q[:, 2]) > RHO)


def test_only_a_sphere_touches_a_spherical_surface():
    with pytest.raises(TypeError, match="only a cx.rigid.Sphere touches a sphere.*Disk"):
        rg.FrictionalContact(
            BALL, rg.Disk(A), rg.SphericalSurface(R), static_friction=0.5, kinetic_friction=0.4
        )
    with pytest.raises(ValueError, match="SphericalSurface"):
        rg.SphericalSurface(-1.0)


@pytest.mark.slow
def test_slip_angle_and_its_derivative_match_closed_form_under_jit_vmap_grad():
    r"""$d\theta^*/d\mu_s$ by the implicit function theorem on
    $F = 2\sin\theta - \mu_s(17\cos\theta - 10 - 7k) = 0$: $-F_\mu/F_\theta$."""

    def slip_angle(mu_s, v0):
        q = _run(mu_s, 0.4, v0, "rolling").switch_q[0]
        return jnp.arctan2(q[0], q[2])

    mus, v0s = jnp.array([0.5, 0.7]), jnp.array([0.5, 0.3])
    values, grads = jax.jit(jax.vmap(jax.value_and_grad(slip_angle)))(mus, v0s)
    for mu, v0, value, grad in zip(mus, v0s, values, grads, strict=True):
        mu, v0 = float(mu), float(v0)
        th = _slip_angle(mu, v0)
        k = v0**2 / (G * RHO)
        dth = (17 * np.cos(th) - 10 - 7 * k) / (2 * np.cos(th) + 17 * mu * np.sin(th))
        assert abs(float(value) - th) <= 1e-7
        assert abs(float(grad) - dth) <= 1e-6 * abs(dth)


@pytest.mark.slow
def test_contact_forces_of_a_ball_rolling_on_a_sphere_match_newtons_laws():
    """While rolling, N = m (g cos(theta) - v^2 / rho) and the friction 2/7 m g sin(theta)
    along the tangent (Routh 1905, §240); after the slip, kinetic friction mu_k N against
    the slip."""
    mu_s, mu_k, v0 = 0.5, 0.4, 0.5
    out = _run(mu_s, mu_k, v0, "rolling")
    forces = out.contact_forces()
    modes = np.asarray(out.modes[:, 0])
    q, qd = np.asarray(out.q), np.asarray(out.qd)
    theta = np.arctan2(q[:, 0], q[:, 2])
    v2 = np.sum(qd[:, :3] ** 2, axis=1)
    N, F, s = (np.asarray(x)[:, 0] for x in (forces.normal, forces.friction, forces.slip))
    rolling = modes == 0
    assert rolling.sum() >= 3
    np.testing.assert_allclose(
        N[rolling], M * (G * np.cos(theta) - v2 / RHO)[rolling], rtol=1e-7, atol=1e-9
    )
    # Friction along the tangent of the circle, backwards: it holds the ball from slipping.
    tangent = np.stack([np.cos(theta), np.zeros_like(theta), -np.sin(theta)], axis=1)
    np.testing.assert_allclose(
        -np.sum(F * tangent, axis=1)[rolling],
        (2 / 7 * M * G * np.sin(theta))[rolling],
        rtol=1e-6,
        atol=1e-9,
    )
    assert np.all(np.abs(s[rolling]) <= 1e-8)
    sliding = modes == SLIDING
    assert sliding.sum() >= 1
    slip_hat = s[sliding] / np.linalg.norm(s[sliding], axis=1, keepdims=True)
    np.testing.assert_allclose(F[sliding], -mu_k * N[sliding, None] * slip_hat, rtol=1e-6)
    # Separated (after leaving the sphere): no force. Times the run did not reach: nan.
    flying = modes == SEPARATED
    assert np.all(N[flying] == 0) and np.all(F[flying] == 0)
