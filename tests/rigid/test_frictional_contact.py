"""Contacts that roll or slide as Coulomb friction decides (`cx.rigid.FrictionalContact`,
`cx.rigid.simulate_contacts`).

References, none derived from the code under test: the closed-form motion of a homogeneous
ball on a horizontal plane (Coriolis 1835, *Théorie mathématique des effets du jeu de
billard*; Routh 1905, *The Elementary Part of a Treatise on the Dynamics of a System of Rigid
Bodies*: a ball launched without spin skids with constant deceleration mu_k g while its spin
grows, and rolls from t* = 2 v0 / (7 mu_k g) on at 5 v0 / 7, having lost m v0^2 / 7), the
friction a rolling ball needs under a force at its centre (f = 2F/7, from Newton-Euler),
and central finite differences.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
import constrax.rigid as rg

G = 9.81
TIGHT = diffrax.PIDController(rtol=1e-11, atol=1e-11, dtmax=0.1)
RUNTIME = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)

# One ball, pushed at its centre by F = (k t, 0, kz t): k = kz = 0 for a free ball. Built once
# at module level, so that every test below reuses one compiled program.
BALL = rg.RigidBody(1.0, jnp.full(3, 0.004), name="ball")


TRACES = []


def _ball_lagrangian(body, p, m, a):
    def L(t, q, qd, p):
        TRACES.append(1)
        b = body.with_parameters(p[m], 0.4 * p[m] * p[a] ** 2 * jnp.ones(3))
        return b.kinetic_energy(q, qd) - p[m] * G * b.position(q)[2]

    return L


def _push(t, q, qd, p):
    return rg.body_force(BALL, q, force=jnp.stack([p["k"] * t, jnp.zeros_like(t), p["kz"] * t]))


SYSTEM = cx.System(_ball_lagrangian(BALL, None, "m", "a"), [BALL.orientation_constraint()], _push)
CONTACT = rg.FrictionalContact(
    BALL,
    rg.Sphere(lambda p: p["a"]),
    static_friction=lambda p: p["mu_s"],
    kinetic_friction=lambda p: p["mu_k"],
)


def _params(**kw):
    p = dict(m=2.0, a=0.1, mu_s=0.4, mu_k=0.2, k=0.0, kz=0.0)
    p.update(kw)
    return {k: jnp.asarray(v, jnp.float64) for k, v in p.items()}


def _state(p, v0, spin=0.0):
    q0, qd0 = BALL.state(
        jnp.array([0.0, 0.0, float(p["a"])]),
        jnp.eye(3),
        jnp.array([v0, 0.0, 0.0]),
        jnp.array([0.0, spin, 0.0]),
    )
    return q0, qd0


def _run(p, q0, qd0, mode, t1=1.0, t0=0.0, **kw):
    return rg.simulate_contacts(
        SYSTEM,
        [CONTACT],
        q0,
        qd0,
        p,
        modes=[mode],
        t0=t0,
        t1=t1,
        ts=jnp.linspace(t0, t1, 21),
        stepsize_controller=TIGHT,
        max_switches=1,
        **kw,
    )


# ----------------------------------------------------------------------------------------
# The skidding ball.


@pytest.fixture(scope="module")
def skid():
    p = _params()
    v0 = 3.0
    q0, qd0 = _state(p, v0)
    return p, v0, _run(p, q0, qd0, "sliding")


def test_skidding_ball_rolls_from_closed_form_time(skid):
    p, v0, out = skid
    mu, m, a = float(p["mu_k"]), float(p["m"]), float(p["a"])
    t_star = 2 * v0 / (7 * mu * G)
    assert int(out.status) == 0
    assert int(out.num_switches) == 1
    assert int(out.switch_contacts[0]) == 0
    assert out.switch_modes[0].tolist() == [0]  # rolling after the switch
    assert abs(float(out.switch_times[0]) - t_star) <= 1e-8 * t_star
    # Final state: v = 5 v0 / 7, rolling (omega_y = v / a), still on the plane.
    v_end = np.asarray(out.qd_final[:3])
    np.testing.assert_allclose(v_end, [5 * v0 / 7, 0.0, 0.0], rtol=0, atol=1e-8 * v0)
    omega = BALL.angular_velocity(out.q_final, out.qd_final)
    np.testing.assert_allclose(np.asarray(omega), [0.0, 5 * v0 / (7 * a), 0.0], atol=1e-7)
    # Position at t1 = 1: x = v0 t*/7 + 5 v0 t1/7 (skidding, then rolling).
    assert abs(float(out.q_final[0]) - (v0 * t_star / 7 + 5 * v0 / 7)) <= 1e-8
    # Energy lost to friction: m v0^2 / 7, all of it during the skid.
    E = np.asarray(out.energy())
    assert abs((E[0] - E[-1]) - m * v0**2 / 7) <= 1e-8 * m * v0**2
    # Modes at the save times: sliding before t*, rolling after.
    expected = np.where(np.asarray(out.ts) < t_star, 1, 0)
    assert np.asarray(out.modes[:, 0]).tolist() == expected.tolist()
    # The slip speed v - a omega = v0 - 7 mu g t / 2 while skidding, zero while rolling.
    slip = np.asarray(out.slip_speed()[:, 0])
    ts = np.asarray(out.ts)
    np.testing.assert_allclose(slip, np.maximum(v0 - 3.5 * mu * G * ts, 0.0), atol=1e-8)


def test_skidding_ball_reuses_its_program(skid):
    """A new launch speed and friction reuse the compiled program (identity-keyed contacts)."""
    p = _params(mu_k=0.3)
    q0, qd0 = _state(p, 2.0)
    before = len(TRACES)
    out = _run(p, q0, qd0, "sliding")
    assert len(TRACES) == before  # the Lagrangian was not traced again
    assert abs(float(out.switch_times[0]) - 2 * 2.0 / (7 * 0.3 * G)) <= 1e-8


# ----------------------------------------------------------------------------------------
# The pushed ball: rolling until the friction it needs reaches mu_s N.


def test_pushed_ball_slides_when_friction_reaches_static_limit():
    # Rolling under F = k t at the centre: m a_x = F - f, I a_x / a^2 = f, I = 2 m a^2 / 5,
    # so f = 2F/7 and the ball slides from 2 k t / 7 = mu_s m g on.
    p = _params(k=20.0, mu_s=0.3, mu_k=0.2)
    m, k, mu_s, mu_k = (float(p[x]) for x in ("m", "k", "mu_s", "mu_k"))
    v0 = 0.5
    q0, qd0 = _state(p, v0, spin=v0 / float(p["a"]))
    t1 = 2.0
    out = _run(p, q0, qd0, "rolling", t1=t1)
    t_s = 7 * mu_s * m * G / (2 * k)
    assert int(out.status) == 0 and int(out.num_switches) == 1
    assert out.switch_modes[0].tolist() == [1]  # sliding after the switch
    assert abs(float(out.switch_times[0]) - t_s) <= 1e-8 * t_s
    # Rolling: a_x = 5 F / (7 m); then sliding: m a_x = k t - mu_k m g.
    v_s = v0 + 5 * k * t_s**2 / (14 * m)
    v1 = v_s + k * (t1**2 - t_s**2) / (2 * m) - mu_k * G * (t1 - t_s)
    assert abs(float(out.qd_final[0]) - v1) <= 1e-8 * v1
    # The slip grows from zero after the switch: forward, as the push outruns the spin.
    slip = np.asarray(out.slip_speed()[:, 0])
    assert np.all(slip[np.asarray(out.ts) < t_s] < 1e-9)
    assert slip[-1] > 0.1


def test_rolling_margin_of_pushed_ball_falls_at_two_sevenths_of_push_rate():
    """While the pushed ball rolls, the event function is its friction margin
    mu_s m g - 2 k t / 7 (f = 2F/7), falling at 2k/7; its derivative along the flow, what the
    event's Newton root find divides by, is that rate under `jit` (simulate_contacts' default
    stabilisation). With `jnp.min` as the event's minimum, XLA at optimisation level 0 (the
    suite's flags) gave -inf at this state, and the run missed its switch."""
    from constrax.rigid._contact._mode_dynamics import _Model
    from constrax.rigid._contact._switching import DEFAULT_STABILISATION

    p = _params(k=20.0, mu_s=0.3, mu_k=0.2)
    v0 = 0.5
    q0, qd0 = _state(p, v0, spin=v0 / float(p["a"]))
    out = _run(p, q0, qd0, "rolling", t1=2.0, throw=False)  # slides from t_s = 1.03
    model = _Model(SYSTEM, (CONTACT,), DEFAULT_STABILISATION)
    modes, anchors = jnp.array([0]), jnp.zeros((1, 3))
    t, q, qd = out.ts[10], out.q[10], out.qd[10]  # t = 1, still rolling
    assert float(t) == 1.0 and int(out.modes[10, 0]) == 0

    flow = jax.jit(lambda t, q, qd: model.evaluate(modes, t, q, qd, p, anchors))(t, q, qd)

    @jax.jit
    def value_and_rate(t, q, qd, q_dot, qdd):
        event = lambda t, q, qd: model.event_value(modes, t, q, qd, p, anchors)  # noqa: E731
        return jax.jvp(event, (t, q, qd), (jnp.ones_like(t), q_dot, qdd))

    value, rate = value_and_rate(t, q, qd, flow.q_dot, flow.qdd)
    k, m, mu_s = (float(p[x]) for x in ("k", "m", "mu_s"))
    assert float(value) == pytest.approx(mu_s * m * G - 2 * k * float(t) / 7, rel=1e-9)
    assert float(rate) == pytest.approx(-2 * k / 7, rel=1e-9)


def test_skid_then_roll_then_slide_exceeds_budget():
    """Skid -> roll -> slide is two switches; a budget of one refuses the second, naming the
    contact (a Zeno sequence is caught the same way)."""
    p = _params(k=20.0)
    q0, qd0 = _state(p, 1.0)
    with pytest.raises(RuntimeError, match=r"max_switches=1 .*'ball'"):
        _run(p, q0, qd0, "sliding", t1=2.0)
    out = _run(p, q0, qd0, "sliding", t1=2.0, throw=False)
    assert int(out.status) == 2
    # Skidding under the push, the slip v0 + k t^2 / (2m) - 7 mu_k g t / 2 vanishes at the
    # smaller root; rolling then holds until 2 k t / 7 = mu_s m g.
    b, c = 3.5 * 0.2 * G, 20.0 / (2 * 2.0)
    t_roll = (b - np.sqrt(b * b - 4 * c * 1.0)) / (2 * c)
    assert float(out.switch_times[0]) == pytest.approx(t_roll, rel=1e-8)
    assert float(out.failed_time) == pytest.approx(7 * 0.4 * 2.0 * G / (2 * 20.0), rel=1e-8)


# ----------------------------------------------------------------------------------------
# Two balls in one system: their contacts switch independently.

BALL1 = rg.RigidBody(1.0, jnp.full(3, 0.004), name="left")
BALL2 = rg.RigidBody(1.0, jnp.full(3, 0.004), offset=BALL1.size, name="right")


def _two_lagrangian(t, q, qd, p):
    return _ball_lagrangian(BALL1, p, "m", "a")(t, q, qd, p) + _ball_lagrangian(BALL2, p, "m", "a")(
        t, q, qd, p
    )


TWO = cx.System(_two_lagrangian, [BALL1.orientation_constraint(), BALL2.orientation_constraint()])
TWO_CONTACTS = [
    rg.FrictionalContact(
        b, rg.Sphere(lambda p: p["a"]), static_friction=0.5, kinetic_friction=lambda p, i=i: p[i]
    )
    for b, i in ((BALL1, "mu1"), (BALL2, "mu2"))
]


@pytest.mark.slow
def test_two_balls_switch_at_their_own_times():
    p = {k: jnp.asarray(v) for k, v in dict(m=1.0, a=0.1, mu1=0.2, mu2=0.35).items()}
    v1, v2 = 3.0, 1.0
    s1 = BALL1.state(jnp.array([0, 0, 0.1]), jnp.eye(3), jnp.array([v1, 0, 0]), jnp.zeros(3))
    # The right ball skids backwards-spinning along y.
    s2 = BALL2.state(jnp.array([1, 0, 0.1]), jnp.eye(3), jnp.array([0, v2, 0]), jnp.zeros(3))
    q0, qd0 = jnp.concatenate([s1[0], s2[0]]), jnp.concatenate([s1[1], s2[1]])
    out = rg.simulate_contacts(
        TWO,
        TWO_CONTACTS,
        q0,
        qd0,
        p,
        modes=["sliding", "sliding"],
        t1=1.0,
        ts=jnp.linspace(0.0, 1.0, 11),
        stepsize_controller=TIGHT,
        max_switches=2,
    )
    t1_star, t2_star = 2 * v1 / (7 * 0.2 * G), 2 * v2 / (7 * 0.35 * G)
    assert t2_star < t1_star
    assert int(out.num_switches) == 2
    assert out.switch_contacts.tolist() == [1, 0]
    np.testing.assert_allclose(np.asarray(out.switch_times), [t2_star, t1_star], rtol=1e-8)
    assert out.switch_modes.tolist() == [[1, 0], [0, 0]]
    np.testing.assert_allclose(np.asarray(out.qd_final[:3]), [5 * v1 / 7, 0, 0], atol=1e-8)
    np.testing.assert_allclose(np.asarray(out.qd_final[7:10]), [0, 5 * v2 / 7, 0], atol=1e-8)
    assert out.contact_names == ("left", "right")


# ----------------------------------------------------------------------------------------
# A two-wheeled cart: its wheels stop slipping one at a time.


@pytest.mark.slow
def test_two_wheeled_cart_wheels_stop_slipping_one_at_a_time():
    """Two upright solid wheels (mass m, radius a, I = m a^2 / 2 about the axle) on one axle
    of length d, carrying a chassis of mass M at its midpoint (the Lagrangian's
    `M |(v1 + v2)/2|^2 / 2` and `M g (z1 + z2)/2`: each wheel takes half its weight, so
    N = (m + M/2) g). Launched along x without spin, on kinetic friction mu1 < mu2, both
    wheels skid: the cart (total mass mt = 2m + M) decelerates at (mu1 + mu2) N / mt and
    wheel i spins up at a mu_i N / I, so slip i falls at (mu1 + mu2) N / mt + 2 mu_i N / m
    and wheel 2 rolls first, at t_a. Then its friction f2 = mu1 N m / (m + 2 mt) (Newton-Euler
    with v = a omega2) slows the cart at 2 mu1 N / (m + 2 mt), slip 1 falls at that plus
    2 mu1 N / m, and wheel 1 rolls at t_b; after that nothing changes the speed."""
    m, a, M, d, v0 = 1.0, 0.2, 2.0, 0.5, 2.0
    mu1, mu2, mu_s = 0.2, 0.35, 0.5
    inertia = m * a**2 * jnp.array([0.25, 0.25, 0.5])
    w1 = rg.RigidBody(m, inertia, name="wheel1")
    w2 = rg.RigidBody(m, inertia, offset=w1.size, name="wheel2")

    def L(t, q, qd, p):
        v_axle = 0.5 * (qd[0:3] + qd[w1.size : w1.size + 3])
        z_axle = 0.5 * (q[2] + q[w1.size + 2])
        wheels = w1.kinetic_energy(q, qd) + w2.kinetic_energy(q, qd)
        return wheels + 0.5 * M * v_axle @ v_axle - G * (m * q[2] + m * q[w1.size + 2] + M * z_axle)

    def axle(t, q, p):  # the wheel centres keep their places on the axle (along y)
        r1, r2 = q[0:3], q[w1.size : w1.size + 3]
        return jnp.stack([r2[0] - r1[0], r2[1] - r1[1] - d])

    system = cx.System(
        L,
        [cx.Holonomic(axle, name="axle"), w1.orientation_constraint(), w2.orientation_constraint()],
    )
    contacts = [
        rg.FrictionalContact(w, rg.Disk(a), static_friction=mu_s, kinetic_friction=mu)
        for w, mu in ((w1, mu1), (w2, mu2))
    ]
    upright = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # axis along y
    s1 = w1.state(jnp.array([0.0, 0.0, a]), upright, jnp.array([v0, 0, 0]), jnp.zeros(3))
    s2 = w2.state(jnp.array([0.0, d, a]), upright, jnp.array([v0, 0, 0]), jnp.zeros(3))
    q0, qd0 = jnp.concatenate([s1[0], s2[0]]), jnp.concatenate([s1[1], s2[1]])
    out = rg.simulate_contacts(
        system,
        contacts,
        q0,
        qd0,
        modes=["sliding", "sliding"],
        t1=0.5,
        ts=jnp.linspace(0.0, 0.5, 6),
        stepsize_controller=TIGHT,
        max_switches=2,
    )
    N, mt = (m + M / 2) * G, 2 * m + M
    decel_1 = (mu1 + mu2) * N / mt
    t_a = v0 / (decel_1 + 2 * mu2 * N / m)
    slip1_a = v0 - (decel_1 + 2 * mu1 * N / m) * t_a
    decel_2 = 2 * mu1 * N / (m + 2 * mt)
    t_b = t_a + slip1_a / (decel_2 + 2 * mu1 * N / m)
    v_final = v0 - decel_1 * t_a - decel_2 * (t_b - t_a)
    assert mu1 * N * m / (m + 2 * mt) < mu_s * N  # wheel 2 stays in its cone
    assert int(out.num_switches) == 2
    assert out.switch_contacts.tolist() == [1, 0]
    assert out.switch_modes.tolist() == [[1, 0], [0, 0]]
    np.testing.assert_allclose(np.asarray(out.switch_times), [t_a, t_b], rtol=1e-8)
    for o in (0, w1.size):
        np.testing.assert_allclose(np.asarray(out.qd_final[o : o + 3]), [v_final, 0, 0], atol=1e-8)
    # Kinetic energy lost: rolling at v_final, each wheel spins at v_final / a.
    E = np.asarray(out.energy())
    lost = 0.5 * mt * v0**2 - 0.5 * (mt + m) * v_final**2
    assert abs((E[0] - E[-1]) - lost) <= 1e-8 * mt * v0**2


# ----------------------------------------------------------------------------------------
# Gradients through the switching time.


@pytest.mark.slow
def test_gradients_through_switch_match_closed_forms_and_differences(skid):
    p0, v0, _ = skid

    def outputs(p, v0):
        q0, qd0 = _state(p0, 0.0)
        qd0 = qd0.at[0].set(v0)
        out = _run(p, q0, qd0, "sliding")
        E = out.energy()
        return jnp.stack([out.switch_times[0], out.q_final[0], E[0] - E[-1]])

    J_p, J_v = jax.jacrev(outputs, argnums=(0, 1))(p0, jnp.asarray(v0))
    mu, m, t1 = float(p0["mu_k"]), float(p0["m"]), 1.0
    # t* = 2 v0 / (7 mu g); x(t1) = 2 v0^2 / (49 mu g) + 5 v0 t1 / 7; E_lost = m v0^2 / 7.
    np.testing.assert_allclose(float(J_p["mu_k"][0]), -2 * v0 / (7 * mu**2 * G), rtol=1e-8)
    np.testing.assert_allclose(float(J_p["mu_k"][1]), -2 * v0**2 / (49 * mu**2 * G), rtol=1e-7)
    assert abs(float(J_p["mu_k"][2])) < 1e-7
    np.testing.assert_allclose(float(J_p["m"][2]), v0**2 / 7, rtol=1e-7)
    assert abs(float(J_p["mu_s"][0])) < 1e-12  # the static coefficient plays no part
    np.testing.assert_allclose(float(J_v[0]), 2 / (7 * mu * G), rtol=1e-7)
    np.testing.assert_allclose(float(J_v[1]), 4 * v0 / (49 * mu * G) + 5 * t1 / 7, rtol=1e-7)
    np.testing.assert_allclose(float(J_v[2]), 2 * m * v0 / 7, rtol=1e-7)
    # Central differences of the forward run.
    h = 1e-5
    up = outputs({**p0, "mu_k": p0["mu_k"] + h}, jnp.asarray(v0))
    down = outputs({**p0, "mu_k": p0["mu_k"] - h}, jnp.asarray(v0))
    np.testing.assert_allclose(np.asarray(J_p["mu_k"]), (up - down) / (2 * h), atol=1e-6)


@pytest.mark.slow
def test_pushed_switch_and_lift_off_time_gradients_under_jit():
    """t_s = 7 mu_s m g / (2 k): its derivatives in mu_s and k; and the lift-off time
    t_l = m g / kz of a ball pushed up by kz t: its derivatives in kz and m, through the
    switch to free flight. One compiled program, by jax.grad under jit."""

    @jax.jit
    def t_switch(p, q0, qd0):
        return _run(p, q0, qd0, "rolling", t1=2.0).switch_times[0]

    p0 = _params(k=20.0, mu_s=0.3, mu_k=0.2)
    g = jax.grad(t_switch)(p0, *_state(p0, 0.5, spin=5.0))
    m, k, mu_s = 2.0, 20.0, 0.3
    np.testing.assert_allclose(float(g["mu_s"]), 7 * m * G / (2 * k), rtol=1e-7)
    np.testing.assert_allclose(float(g["k"]), -7 * mu_s * m * G / (2 * k**2), rtol=1e-7)
    assert abs(float(g["mu_k"])) < 1e-10

    p1 = _params(kz=40.0)
    g = jax.grad(t_switch)(p1, *_state(p1, 1.0, spin=10.0))  # rolling at 1 m/s, a = 0.1
    np.testing.assert_allclose(float(g["kz"]), -m * G / 40.0**2, rtol=1e-7)
    np.testing.assert_allclose(float(g["m"]), G / 40.0, rtol=1e-7)
    assert abs(float(g["mu_s"])) < 1e-10


@pytest.mark.slow
def test_switch_times_under_vmap():
    p = _params()
    q0, qd0 = _state(p, 3.0)
    mus = jnp.array([0.15, 0.2, 0.3])
    t = jax.vmap(lambda mu: _run({**p, "mu_k": mu}, q0, qd0, "sliding").switch_times[0])(mus)
    np.testing.assert_allclose(np.asarray(t), 2 * 3.0 / (7 * np.asarray(mus) * G), rtol=1e-8)


@pytest.mark.slow
def test_skidding_disk_rolls_from_closed_form_time():
    """An upright solid disk (I = m a^2 / 2 about its axis) launched without spin: the slip
    falls at 3 mu_k g, so it rolls from t* = v0 / (3 mu_k g) on at 2 v0 / 3, having lost
    m v0^2 / 6 (the `Disk` contact: its lowest point moves with the orientation)."""
    m, a, mu, v0 = 1.5, 0.2, 0.25, 2.0
    disk = rg.RigidBody(m, m * a**2 * jnp.array([0.25, 0.25, 0.5]), name="disk")
    system = cx.System(
        lambda t, q, qd, p: disk.kinetic_energy(q, qd) - m * G * q[2],
        [disk.orientation_constraint()],
    )
    contact = rg.FrictionalContact(disk, rg.Disk(a), static_friction=0.4, kinetic_friction=mu)
    upright = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # axis along y
    q0, qd0 = disk.state(jnp.array([0, 0, a]), upright, jnp.array([v0, 0, 0]), jnp.zeros(3))
    out = rg.simulate_contacts(
        system,
        [contact],
        q0,
        qd0,
        modes=["sliding"],
        t1=1.0,
        ts=jnp.linspace(0.0, 1.0, 5),
        stepsize_controller=TIGHT,
    )
    t_star = v0 / (3 * mu * G)
    assert int(out.num_switches) == 1
    assert abs(float(out.switch_times[0]) - t_star) <= 1e-8 * t_star
    np.testing.assert_allclose(np.asarray(out.qd_final[:3]), [2 * v0 / 3, 0, 0], atol=1e-8)
    E = np.asarray(out.energy())
    assert abs((E[0] - E[-1]) - m * v0**2 / 6) <= 1e-8 * m * v0**2


# ----------------------------------------------------------------------------------------
# Lift-off and bad input.


def test_lifted_ball_flies_free_on_the_closed_form_cubic():
    # A ball rolling at 1 m/s, pushed up by kz t: N = m g - kz t reaches zero at
    # t_l = m g / kz (the friction cone vanishes with it: no tangential load, so it lifts off
    # rather than slides). The contact separates and the centre rises as
    # z = a + kz (t - t_l)^3 / (6 m); x moves on at 1 m/s (nothing acts along x).
    p = _params(kz=40.0)
    m, a = float(p["m"]), float(p["a"])
    q0, qd0 = _state(p, 1.0, spin=1.0 / a)
    t_lift = m * G / 40.0
    out = _run(p, q0, qd0, "rolling")
    assert int(out.status) == 0 and int(out.num_switches) == 1
    assert out.switch_modes[0].tolist() == [2]  # separated
    assert abs(float(out.switch_times[0]) - t_lift) <= 1e-8
    ts = np.asarray(out.ts)
    after = ts > t_lift
    z = np.asarray(out.q[:, 2])
    np.testing.assert_allclose(z[after], a + 40.0 * (ts[after] - t_lift) ** 3 / (6 * m), atol=1e-8)
    np.testing.assert_allclose(np.asarray(out.q[:, 0]), ts, atol=1e-8)
    assert np.all(np.asarray(out.modes[:, 0]) == np.where(after, 2, 0))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(static_friction=-0.1, kinetic_friction=0.0), r"'ball'.*`static_friction`.*>= 0"),
        (dict(static_friction=0.3, kinetic_friction=-1.0), r"'ball'.*`kinetic_friction`.*>= 0"),
        (dict(static_friction=0.3, kinetic_friction=np.nan), r"`kinetic_friction`.*finite"),
        (dict(static_friction=np.inf, kinetic_friction=0.1), r"`static_friction`.*finite"),
        (
            dict(static_friction=0.1, kinetic_friction=0.2),
            r"'ball'.*mu_s = 0.1 must be >= `kinetic_friction` mu_k = 0.2",
        ),
        (dict(static_friction=[0.1, 0.2], kinetic_friction=0.1), r"must be a scalar"),
    ],
)
def test_bad_coefficients_name_contact_and_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rg.FrictionalContact(BALL, rg.Sphere(0.1), **kwargs)


@pytest.mark.parametrize(
    "override, match",
    [
        (dict(mu_k=np.nan), r"contact 'ball' needs a finite `kinetic_friction`.*nan"),
        (dict(mu_s=-0.5), r"contact 'ball' needs a finite `static_friction` mu_s >= 0"),
        (dict(mu_s=0.1, mu_k=0.2), r"'ball' needs `static_friction` mu_s >= `kinetic_friction`"),
    ],
)
def test_bad_coefficients_from_parameters(override, match):
    p = _params(**override)
    q0, qd0 = _state(p, 3.0)
    with pytest.raises(ValueError, match=match):
        _run(p, q0, qd0, "sliding")


def test_inconsistent_initial_modes_are_refused():
    p = _params()
    q0, qd0 = _state(p, 3.0)  # skidding
    with pytest.raises(ValueError, match=r"'ball' is declared 'rolling' but its contact point"):
        _run(p, q0, qd0, "rolling")
    q0, qd0 = _state(p, 3.0, spin=30.0)  # rolling
    with pytest.raises(ValueError, match=r"'ball' is declared 'sliding' but its slip velocity"):
        _run(p, q0, qd0, "sliding")
    # Rolling from t0 = 3 s under F = k t needs 2 k t0 / 7 > mu_s m g: outside the cone.
    p = _params(k=10.0)
    with pytest.raises(ValueError, match=r"'ball' is declared 'rolling' but rolling needs"):
        _run(p, q0, qd0, "rolling", t0=3.0, t1=4.0)


def test_contact_without_normal_row_and_bad_modes_are_refused():
    with pytest.raises(TypeError, match=r"contacts\[0\]` must be a cx.rigid.FrictionalContact"):
        rg.simulate_contacts(
            SYSTEM,
            [rg.no_slip(BALL, rg.Sphere(0.1))],
            jnp.zeros(7),
            jnp.zeros(7),
            t1=1.0,
            modes=["rolling"],
        )
    p = _params()
    q0, qd0 = _state(p, 3.0)
    with pytest.raises(ValueError, match=r"'rolling', 'sliding' or 'separated', got 'slipping'"):
        _run(p, q0, qd0, "slipping")
    with pytest.raises(ValueError, match=r"one mode per contact"):
        rg.simulate_contacts(SYSTEM, [CONTACT], q0, qd0, p, modes=[], t1=1.0)
    with pytest.raises(ValueError, match=r"`max_switches` must be a non-negative int"):
        rg.simulate_contacts(
            SYSTEM, [CONTACT], q0, qd0, p, modes=["sliding"], t1=1.0, max_switches=-1
        )
    with pytest.raises(ValueError, match=r"beta=10.0"):
        rg.simulate_contacts(
            SYSTEM, [CONTACT], q0, qd0, p, modes=["sliding"], t1=1.0, stabilisation=cx.Projection()
        )


@pytest.mark.slow
def test_errors_under_jit_name_the_contact():
    p = _params(k=20.0)
    q0, qd0 = _state(p, 1.0)
    run = jax.jit(lambda p: _run(p, q0, qd0, "sliding", t1=2.0).q_final)
    with pytest.raises(RUNTIME, match=r"max_switches=1 mode switches, the last at contact 'ball'"):
        jax.block_until_ready(run(p))


def _off_manifold_state(p):
    """A state whose unit quaternion is 1 % too long: the system's own
    `orientation_constraint` row fails at t0; the contact's sliding mode is consistent."""
    q0, qd0 = _state(p, 3.0)
    return q0.at[3:].multiply(1.01), qd0


def test_initial_state_off_the_systems_own_constraints_is_refused_naming_the_row():
    p = _params()
    q0, qd0 = _off_manifold_state(p)
    g = cx.constraint_residual(SYSTEM, 0.0, q0, qd0, p).position
    assert float(jnp.max(jnp.abs(g))) > 1e-3  # the reference: the residual itself
    with pytest.raises(
        RUNTIME,
        match=r"cx.rigid.simulate_contacts: the initial state violates constraint row "
        r"ball\.orientation.* by more than initial_tolerance=1e-08\. Project it with "
        r"cx.consistent_initial_state\(\.\.\.\), or raise initial_tolerance",
    ):
        _run(p, q0, qd0, "sliding")


@pytest.mark.slow
def test_initial_state_off_the_systems_own_constraints_is_refused_under_jit():
    p = _params()
    q0, qd0 = _off_manifold_state(p)
    run = jax.jit(lambda q0: _run(p, q0, qd0, "sliding").q_final)
    with pytest.raises(RUNTIME, match=r"simulate_contacts: the initial state violates constraint"):
        jax.block_until_ready(run(q0))


# ----------------------------------------------------------------------------------------
# The solver of the mode dynamics.


def test_contacts_that_cannot_lose_rank_are_solved_by_kkt_with_the_same_dynamics(monkeypatch):
    """Each contact between a `RigidBody` and a fixed surface, on bodies of their own, and
    the system's own rows unit quaternions: the rows of every mode are independent, and the
    mode dynamics use `cx.KKT` (no rank-robust branch in the program). They equal
    `cx.AutoSolver`'s in every mode (accelerations, normal and tangential reactions), and
    so does their gradient. A second contact on the same body, a plane carried by a body,
    or a row of the system's own that is not a unit quaternion keeps `cx.AutoSolver`."""
    from constrax.rigid._contact import _mode_dynamics as md
    from constrax.rigid._contact._frictional_contact import ROLLING, SEPARATED, SLIDING
    from constrax.rigid._contact._switching import DEFAULT_STABILISATION as stab

    p = _params(k=3.0, kz=1.0)
    q0, qd0 = _state(p, 0.7, spin=2.0)
    model = md._Model(SYSTEM, (CONTACT,), stab)
    assert model.solver() == cx.KKT(throw=False)
    assert md._Model(TWO, tuple(TWO_CONTACTS), stab).solver() == cx.KKT(throw=False)
    anchors = jnp.array([[1.0, 0.0, 0.0]])

    def evaluate(q, mode):
        ev = model._evaluate(jnp.array([mode]), 0.3, q, qd0, p, anchors)
        return jnp.concatenate([ev.qdd, ev.normal, ev.tangential.ravel()])

    def both():
        values = [evaluate(q0, m) for m in (ROLLING, SLIDING, SEPARATED)]
        grad = jax.jit(jax.jacrev(lambda q: jnp.sum(evaluate(q, SLIDING) ** 2)))(q0)
        return values, grad

    kkt, grad_kkt = both()
    monkeypatch.setattr(md, "_keep_rank", lambda contacts, own: False)
    assert model.solver() == cx.AutoSolver()
    auto, grad_auto = both()
    for a, b in zip(kkt, auto, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert float(jnp.max(jnp.abs(kkt[0][-3:]))) > 0.1  # rolling needs a friction force
    assert float(kkt[1][7]) > 0.0  # sliding: a normal reaction
    np.testing.assert_allclose(grad_kkt, grad_auto, rtol=1e-10, atol=1e-10)
    monkeypatch.undo()

    friction = dict(static_friction=0.5, kinetic_friction=0.3)
    nub = rg.FrictionalContact(BALL, rg.Sphere(0.05), name="nub", **friction)
    carried = rg.FrictionalContact(
        BALL2, rg.Sphere(0.1), rg.Plane(body=BALL1), name="on_left", **friction
    )
    x = cx.Holonomic(lambda t, q, p: q[:1], name="x")
    held = cx.System(SYSTEM.lagrangian, [BALL.orientation_constraint(), x])
    for m in (
        md._Model(SYSTEM, (CONTACT, nub), stab),
        md._Model(TWO, (TWO_CONTACTS[0], carried), stab),
        md._Model(held, (CONTACT,), stab),
    ):
        assert m.solver() == cx.AutoSolver()


def test_a_quaternion_bodys_orientation_row_is_a_unit_quaternion():
    """`RigidBody.orientation_constraint()` of a quaternion body: `cx.UnitQuaternion` on
    the body's quaternion (after its three positions), named after the body; a rotation
    matrix keeps a `cx.Holonomic` of its orthonormality."""
    row = BALL2.orientation_constraint()
    assert isinstance(row, cx.UnitQuaternion)
    assert row.start == BALL2.offset + 3 and row.name == "right.orientation"
    matrix = rg.RigidBody(1.0, jnp.ones(3), orientation=rg.RotationMatrix(), name="m")
    assert isinstance(matrix.orientation_constraint(), cx.Holonomic)
