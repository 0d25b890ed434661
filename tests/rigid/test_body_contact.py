r"""Frictional contact between two moving bodies: a `FrictionalContact` against a plane
carried by a body (`cx.rigid.Plane(..., body=carrier)`), on the disk on a moving link of
Loparo & Vakalis 2002, §7.10 (`cx.models.disk_on_link`).

References, none derived from the code under test:

* Newton–Euler for the two planar bodies, written out below by hand: the contact force
  $F = Nn + Tt$ acts on the disk at the contact point $x_c = c - an$ and $-F$ on the link
  at the same point, the rail's vertical force $R$ on the link; the contact's acceleration
  rows are the second time derivative of the gap $n\cdot(c - p) - a$ and the first of the
  slip $t\cdot(v_\text{disk}(x_c) - v_\text{link}(x_c))$, differentiated by hand. Rolling:
  the slip's rate is zero; sliding: $T = -\mu_k N\operatorname{sign}(s)$.
* `cx.models.disk_and_link`, an existing model of the same system in the rolling mode
  with hand-written rows.
* Energy: rolling does no work; kinetic friction dissipates $\mu_k N|s|$ (the rail and the
  normal force do no work).
* Central finite differences for the derivative of the switching time.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
import constrax.rigid as rg
from constrax.rigid._contact._mode_dynamics import _Model

MODEL = cx.models.disk_on_link()
CONTACT = cx.models.disk_on_link_contact()
P = MODEL.params
_DYNAMICS = _Model(MODEL.system, (CONTACT,), None)


def _frame(th):
    t = np.array([np.cos(th), np.sin(th)])
    n = np.array([-np.sin(th), np.cos(th)])
    return t, n


def _cross(u, v):
    return u[0] * v[1] - u[1] * v[0]


def _random_states(seed, k, rolling):
    """`k` states on the rail and on the link (gap and its rate zero), rolling (no slip)
    or sliding (a random spin), as `(q, qd)` of shape `(k, 6)`."""
    rng = np.random.default_rng(seed)
    a = float(P["a"])
    qs, qds = [], []
    for _ in range(k):
        th2, w2 = rng.uniform(-0.3, 0.3), rng.uniform(-1.5, 1.5)
        p = np.array([rng.uniform(-0.5, 0.5), 0.0])
        pd = np.array([rng.uniform(-1.0, 1.0), 0.0])
        tau, taud = rng.uniform(-0.5, 0.5), rng.uniform(-1.0, 1.0)
        t, n = _frame(th2)
        c = p + tau * t + a * n
        # d/dt (tau t + a n), with t' = w2 n, n' = -w2 t: keeps the gap at zero.
        cd = pd + taud * t + tau * w2 * n - a * w2 * t
        v_link = pd + w2 * tau * n  # the link's material velocity at x_c = p + tau t
        # v_disk(x_c) = cd + w e_z x (-a n) = cd + a w t; rolling: t.(v_disk - v_link) = 0
        w = (t @ v_link - t @ cd) / a if rolling else rng.uniform(-10.0, 10.0)
        qs.append(np.r_[p, th2, c, rng.uniform(-3, 3)])
        qds.append(np.r_[pd, w2, cd, w])
    return jnp.asarray(np.array(qs)), jnp.asarray(np.array(qds))


def _newton_euler(q, qd, rolling, mu_k=None):
    """`(qdd, N, T, R)` of the disk on the link by Newton–Euler (module docstring)."""
    q, qd = np.asarray(q), np.asarray(qd)
    m_d, J_d, m_l, J_l = (float(P[k]) for k in ("m_d", "J_d", "m_l", "J_l"))
    k_l, g, a = float(P["k_l"]), float(P["g"]), float(P["a"])
    p, th2, c = q[0:2], q[2], q[3:5]
    pd, w2, cd, w = qd[0:2], qd[2], qd[3:5], qd[5]
    t, n = _frame(th2)
    d, dd = c - p, cd - pd
    xc_p = d - a * n  # x_c - p
    slip = t @ dd + a * w - w2 * (a - n @ d)

    def residual(u):
        pdd, a2, cdd, al, N, T, R = u[0:2], u[2], u[3:5], u[5], u[6], u[7], u[8]
        F = N * n + T * t
        ey = np.array([0.0, 1.0])
        rows = [
            m_d * cdd - F + m_d * g * ey,  # disk: m c'' = F - m g e_y
            [J_d * al - _cross(-a * n, F)],  # disk: J alpha = ((x_c - c) x F)_z
            m_l * pdd + F - R * ey + m_l * g * ey,  # link: m p'' = -F + R e_y - m g e_y
            [J_l * a2 - _cross(xc_p, -F) + k_l * th2],  # link: J alpha2 = ((x_c - p) x -F)_z
            [pdd[1]],  # rail
            # gap'' = n.d'' - (t.d) alpha2 - w2^2 n.d - 2 w2 t.d' = 0
            [n @ (cdd - pdd) - (t @ d) * a2 - w2**2 * (n @ d) - 2 * w2 * (t @ dd)],
        ]
        if rolling:  # slip' = t.d'' + a alpha + alpha2 (n.d - a) + 2 w2 n.d' - w2^2 t.d = 0
            rows.append(
                [t @ (cdd - pdd) + a * al + a2 * (n @ d - a) + 2 * w2 * (n @ dd) - w2**2 * (t @ d)]
            )
        else:
            rows.append([T + mu_k * N * np.sign(slip)])
        return np.concatenate([np.atleast_1d(np.asarray(r, float)) for r in rows])

    r0 = residual(np.zeros(9))
    M = np.stack([residual(e) - r0 for e in np.eye(9)], axis=1)
    u = np.linalg.solve(M, -r0)
    return np.r_[u[0:2], u[2], u[3:5], u[5]], u[6], u[7], u[8]


@pytest.fixture(scope="module")
def evaluate():
    """The library's dynamics of each mode at a batch of states, one program per mode."""

    def one(combo):
        def f(q, qd, anchor):
            ev = _DYNAMICS.evaluate(jnp.array(combo), 0.0, q, qd, P, anchor[None])
            return ev.qdd, ev.normal[0], ev.tangential[0], ev.slip[0]

        return jax.jit(jax.vmap(f))

    return {"rolling": one((0,)), "sliding": one((1,))}


def test_rolling_mode_matches_newton_euler_and_disk_and_link(evaluate):
    q, qd = _random_states(0, 8, rolling=True)
    qdd, N, Ft, slip = evaluate["rolling"](q, qd, jnp.zeros((8, 3)))
    np.testing.assert_allclose(np.asarray(slip), 0.0, atol=1e-12)
    ref = cx.models.disk_and_link()
    acc = jax.vmap(lambda q, qd: cx.accelerations(ref.system, 0.0, q, qd, ref.params))(q, qd)
    for i in range(8):
        qdd_ne, N_ne, T_ne, R_ne = _newton_euler(q[i], qd[i], rolling=True)
        t, _ = _frame(float(q[i, 2]))
        scale = 1.0 + np.max(np.abs(qdd_ne))
        np.testing.assert_allclose(np.asarray(qdd[i]), qdd_ne, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(float(N[i]), N_ne, rtol=1e-10)
        np.testing.assert_allclose(np.asarray(Ft[i]), np.r_[T_ne * t, 0.0], atol=1e-10 * N_ne)
        # disk_and_link: multipliers (rail, normal, tangential) are the forces R, N, T.
        np.testing.assert_allclose(np.asarray(acc.qdd[i]), qdd_ne, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(
            np.asarray(acc.multipliers[i]), [R_ne, N_ne, T_ne], rtol=0, atol=1e-10 * N_ne
        )


def test_sliding_mode_matches_newton_euler_with_kinetic_friction(evaluate):
    q, qd = _random_states(1, 8, rolling=False)
    # The slip direction at the state (the anchor a sliding segment starts with).
    s = jax.vmap(lambda q, qd: CONTACT.slip_velocity(0.0, q, qd, P))(q, qd)
    anchors = s / jnp.linalg.norm(s, axis=1, keepdims=True)
    qdd, N, Ft, slip = evaluate["sliding"](q, qd, anchors)
    np.testing.assert_allclose(np.asarray(Ft), 0.0)  # no tangential row while sliding
    mu_k = float(P["mu_k"])
    for i in range(8):
        qdd_ne, N_ne, T_ne, _ = _newton_euler(q[i], qd[i], rolling=False, mu_k=mu_k)
        assert N_ne > 0 and abs(T_ne) > 0
        scale = 1.0 + np.max(np.abs(qdd_ne))
        np.testing.assert_allclose(np.asarray(qdd[i]), qdd_ne, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(float(N[i]), N_ne, rtol=1e-10)
        # The slip along the link, spatial: t times the hand-written scalar slip.
        t, n = _frame(float(q[i, 2]))
        d, dd = np.asarray(q[i, 3:5] - q[i, 0:2]), np.asarray(qd[i, 3:5] - qd[i, 0:2])
        a, w2 = float(P["a"]), float(qd[i, 2])
        s_ne = t @ dd + a * float(qd[i, 5]) - w2 * (a - n @ d)
        np.testing.assert_allclose(np.asarray(slip[i]), np.r_[s_ne * t, 0.0], atol=1e-12)


def test_kinetic_friction_acts_equal_and_opposite_on_both_bodies():
    q, qd = _random_states(2, 1, rolling=False)
    q, qd = q[0], qd[0]
    anchor = jnp.array([1.0, 0.0, 0.0])
    Q = np.asarray(CONTACT.kinetic_friction_force(0.0, q, qd, P, anchor, normal_force=2.0))
    th2, a = float(q[2]), float(P["a"])
    t, n = _frame(th2)
    s_hat = np.asarray(CONTACT.slip_direction(0.0, q, qd, P, anchor))[:2]
    F = -float(P["mu_k"]) * 2.0 * s_hat
    xc = np.asarray(q[3:5]) - a * n
    # Generalized force of F at x_c on the disk (z1, z2, theta) and -F on the link.
    Q_disk = np.r_[F, _cross(xc - np.asarray(q[3:5]), F)]
    Q_link = np.r_[-F, _cross(xc - np.asarray(q[0:2]), -F)]
    np.testing.assert_allclose(Q, np.r_[Q_link, Q_disk], atol=1e-13)


# ----------------------------------------------------------------------------------------
# Across the switch from sliding to rolling.

T1 = 0.3
TS = jnp.linspace(0.0, T1, 121)
# Fixed steps (Tsit5, 150 of them): the derivative and the differences are then of one
# discrete map (adaptive steps can be recomputed differently by the reverse pass at XLA's
# optimisation level 0, tests/conftest.py).
DT = 2e-3


def _run(p, ts=TS):
    return rg.simulate_contacts(
        MODEL.system,
        [CONTACT],
        MODEL.q0,
        MODEL.qd0,
        p,
        modes=["sliding"],
        t1=T1,
        ts=ts,
        max_switches=2,
        dt0=DT,
        stepsize_controller=diffrax.ConstantStepSize(),
    )


@pytest.fixture(scope="module")
def run():
    return _run(P)


@pytest.mark.slow
def test_energy_across_the_switch(run, evaluate):
    """Sliding then rolling: the energy never increases, stays constant while rolling, and
    the energy lost while sliding is the friction work $\\int\\mu_kN|s|\\,dt$
    (trapezoids on the 121 save times: to 2e-4)."""
    out = run
    assert int(out.status) == 0 and int(out.num_switches) == 1
    t_star = float(out.switch_times[0])
    assert 0.1 < t_star < 0.25 and out.switch_modes[0].tolist() == [0]
    E = np.asarray(out.energy())
    ts = np.asarray(out.ts)
    # The integration's tolerances are 1e-8 (simulate_contacts' default).
    assert np.all(np.diff(E) <= 1e-7 * E[0])  # never increases
    rolling = ts > t_star
    assert np.ptp(E[rolling]) <= 1e-7 * E[0]  # constant while rolling
    # Friction work while sliding: mu_k N |s| at the save times before t*, trapezoids, and
    # a triangle from the last one to t* (where |s| reaches zero linearly).
    sliding = ts < t_star
    q, qd = out.q[sliding], out.qd[sliding]
    s = jax.vmap(lambda q, qd: CONTACT.slip_velocity(0.0, q, qd, P))(q, qd)
    anchors = s / jnp.linalg.norm(s, axis=1, keepdims=True)
    _, N, _, _ = evaluate["sliding"](q, qd, anchors)
    power = float(P["mu_k"]) * np.asarray(N) * np.linalg.norm(np.asarray(s), axis=1)
    tk = ts[sliding]
    work = np.trapezoid(power, tk) + 0.5 * power[-1] * (t_star - tk[-1])
    lost = E[0] - E[rolling][0]
    assert lost > 0.05 * E[0]  # a real loss (8 % of it)
    np.testing.assert_allclose(lost, work, rtol=2e-4)


@pytest.mark.slow
def test_switch_time_gradient_under_jit_and_vmap(run):
    """d t*/d mu_k by `jax.grad` under `jit` against central differences of the
    forward run; the forward run under `jit(vmap)` equals the eager one."""

    def t_switch(mu_k, ts):
        return _run({**P, "mu_k": mu_k}, ts).switch_times[0]

    mu = P["mu_k"]
    h = 1e-3
    batch = jax.jit(jax.vmap(t_switch, in_axes=(0, None)))(jnp.stack([mu, mu + h, mu - h]), TS)
    np.testing.assert_allclose(float(batch[0]), float(run.switch_times[0]), rtol=1e-12)
    grad = jax.jit(jax.grad(t_switch))(mu, TS)
    fd = (float(batch[1]) - float(batch[2])) / (2 * h)
    assert float(grad) < 0  # more friction stops the slip sooner
    # Measured (fixed steps, 2026-11-28): the forward map t*(mu_k) is piecewise smooth near
    # mu_k = 0.2, with a jump of 4e-6 between 0.2 and 0.20001 and branch slopes -0.7556
    # (below) and -0.7487 (above); the root finder's tolerance (1e-10 or 1e-13) does not
    # change it, the sliding flow itself is smooth in mu_k (its slip at t = 0.15), and a
    # plain diffrax.Event on the same flow, without simulate_contacts, gives the same jump:
    # it is the event's location on the step's dense output. The derivative agrees with
    # the slope of the branch it sits on to 1e-4; the central difference (h = 1e-3)
    # straddles the jump: -0.7457, hence 2 %.
    np.testing.assert_allclose(float(grad), fd, rtol=2e-2)


# ----------------------------------------------------------------------------------------
# Bad inputs.


def test_two_contacts_on_the_same_pair_of_bodies_are_refused():
    twin = rg.FrictionalContact(
        CONTACT.body,
        CONTACT.shape,
        CONTACT.plane,
        static_friction=0.4,
        kinetic_friction=0.2,
        name="twin",
    )
    with pytest.raises(ValueError, match=r"contacts 'disk' and 'twin' are between the same"):
        rg.simulate_contacts(
            MODEL.system, [CONTACT, twin], MODEL.q0, MODEL.qd0, P, modes=["sliding"] * 2, t1=0.1
        )
    # The other way round: the link on a plane carried by the disk.
    flipped = rg.FrictionalContact(
        CONTACT.plane.body,
        CONTACT.shape,
        rg.Plane(body=CONTACT.body),
        static_friction=0.4,
        kinetic_friction=0.2,
        name="flipped",
    )
    with pytest.raises(ValueError, match=r"contacts 'disk' and 'flipped'"):
        rg.simulate_contacts(
            MODEL.system,
            [CONTACT, flipped],
            MODEL.q0,
            MODEL.qd0,
            P,
            modes=["sliding"] * 2,
            t1=0.1,
        )


def test_a_plane_carried_by_the_contacts_own_body_is_refused():
    disk = CONTACT.body
    with pytest.raises(ValueError, match=r"FrictionalContact 'spin'.*contact's own body 'disk'"):
        rg.FrictionalContact(
            disk,
            CONTACT.shape,
            rg.Plane(body=disk),
            static_friction=0.4,
            kinetic_friction=0.2,
            name="spin",
        )


def test_a_carried_plane_with_a_velocity_field_or_no_body_is_refused():
    with pytest.raises(ValueError, match="either `velocity`"):
        rg.Plane(body=CONTACT.body, velocity=lambda t, x, p: jnp.zeros(3))
    with pytest.raises(TypeError, match="`body` \\(the carrier\\)"):
        rg.Plane(body="link")


# ----------------------------------------------------------------------------------------
# In 3-D: a ball on a slab that slides on a frictionless floor.
#
# Closed forms (Newton–Euler, ball of mass m, radius a, inertia 2/5 m a^2; slab of mass M
# pushed at its centre by P e_x; f the friction on the ball along e_x, -f on the slab):
# rolling from rest, b - a dw_y/dt = A with m b = f, I dw_y/dt = -a f, M A = P - f gives
# f = (P / M) / (7 / (2 m) + 1 / M); sliding forward at v0 relative to the slab without
# spin, f = -mu_k m g, b = f / m, A = -f / M, dw_y/dt = -a f / I. The normal force is m g.

M_BALL, M_SLAB, A_BALL, PUSH = 2.0, 5.0, 0.1, 3.0
BALL = rg.RigidBody(M_BALL, jnp.full(3, 0.4 * M_BALL * A_BALL**2), offset=0, name="ball")
SLAB = rg.RigidBody(M_SLAB, jnp.array([1.0, 1.0, 2.0]), offset=7, name="slab")


def _slab_system():
    def L(t, q, qd, p):
        V = float(P["g"]) * (M_BALL * BALL.position(q)[2] + M_SLAB * SLAB.position(q)[2])
        return BALL.kinetic_energy(q, qd) + SLAB.kinetic_energy(q, qd) - V

    def push(t, q, qd, p):
        return rg.body_force(SLAB, q, force=jnp.array([PUSH, 0.0, 0.0]))

    rows = [
        BALL.orientation_constraint(),
        SLAB.orientation_constraint(),
        cx.Holonomic(lambda t, q, p: SLAB.position(q)[2:3], name="floor"),
        *[rg.angular_velocity_constraint(SLAB, e) for e in np.eye(3)],  # the slab does not turn
    ]
    contact = rg.FrictionalContact(
        BALL,
        rg.Sphere(A_BALL),
        rg.Plane(body=SLAB),
        static_friction=0.5,
        kinetic_friction=0.3,
    )
    return cx.System(L, rows, push), contact


def test_ball_on_a_sliding_slab_in_3d_against_closed_forms():
    system, contact = _slab_system()
    dynamics = _Model(system, (contact,), None)
    q_ball, _ = BALL.state(jnp.array([0.3, -0.2, A_BALL]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
    q_slab, _ = SLAB.state(jnp.zeros(3), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
    q = jnp.concatenate([q_ball, q_slab])
    g, I = float(P["g"]), 0.4 * M_BALL * A_BALL**2
    anchor = jnp.array([[1.0, 0.0, 0.0]])
    # Rolling from rest.
    ev = dynamics.evaluate(jnp.array([0]), 0.0, q, jnp.zeros(14), P, anchor)
    f = (PUSH / M_SLAB) / (7 / (2 * M_BALL) + 1 / M_SLAB)
    w_dot = BALL.angular_velocity(q, ev.qdd)
    np.testing.assert_allclose(float(ev.normal[0]), M_BALL * g, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ev.tangential[0]), [f, 0, 0], atol=1e-12)
    np.testing.assert_allclose(float(ev.qdd[0]), f / M_BALL, rtol=1e-10)
    np.testing.assert_allclose(float(ev.qdd[7]), (PUSH - f) / M_SLAB, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(w_dot), [0, -A_BALL * f / I, 0], atol=1e-10)
    # Sliding forward at v0 relative to the slab, no spin: the push acts on the slab too.
    v0 = 1.5
    qd = jnp.zeros(14).at[0].set(v0)
    ev = dynamics.evaluate(jnp.array([1]), 0.0, q, qd, P, anchor)
    f = -0.3 * M_BALL * g
    np.testing.assert_allclose(float(ev.normal[0]), M_BALL * g, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ev.slip[0]), [v0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(float(ev.qdd[0]), f / M_BALL, rtol=1e-10)
    np.testing.assert_allclose(float(ev.qdd[7]), (PUSH - f) / M_SLAB, rtol=1e-10)
    w_dot = BALL.angular_velocity(q, ev.qdd)
    np.testing.assert_allclose(np.asarray(w_dot), [0, -A_BALL * f / I, 0], atol=1e-10)


@pytest.mark.slow
def test_disk_dropped_on_the_moving_link_bounces_to_rest_and_never_gains_energy():
    """The disk 5 cm above the moving link, e = 0.5: it lands on the link, bounces off it
    (each time leaving with a positive normal velocity relative to the link), the bounces
    die out below `restitution_threshold`, and it closes on the link; energy is constant
    in flight, never gained at an impact (Newton's law with a Coulomb-bounded impulse on
    two moving bodies, the impulse equal and opposite on both)."""
    import equinox as eqx

    contact = eqx.tree_at(lambda c: c.restitution, CONTACT, jnp.asarray(0.5))
    q0 = MODEL.q0.at[4].add(0.05)  # the disk's centre 5 cm higher
    out = rg.simulate_contacts(
        MODEL.system,
        [contact],
        q0,
        MODEL.qd0,
        P,
        modes=["separated"],
        t1=0.5,
        ts=jnp.linspace(0.0, 0.5, 11),
        max_switches=12,
    )
    k = int(out.num_switches)
    modes = np.asarray(out.switch_modes[:k, 0]).tolist()
    assert k >= 3 and modes[:-1] == [2] * (k - 1) and modes[-1] in (0, 1)
    # The normal velocity of the disk's contact point relative to the link after each
    # impact: positive after a bounce, zero where the contact closes.
    u_n = np.asarray(
        [
            contact.contact_velocity(out.switch_times[i], out.switch_q[i], out.switch_qd[i], P)[0]
            for i in range(k)
        ]
    )
    assert np.all(u_n[:-1] > 1e-3) and abs(u_n[-1]) <= 1e-9
    E = np.asarray(out.energy())
    assert np.all(np.diff(E) <= 1e-9 * E[0])
    assert E[-1] < E[0]
