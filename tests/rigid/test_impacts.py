"""Contacts that open and close (`cx.rigid.simulate_contacts`, the separated mode):
lift-off, free flight, touchdown and the impact there.

References, none derived from the code under test: the free fall of a ball (bounce times
and apex heights of a ball dropped with Newton's restitution coefficient e form a
geometric sequence; the bounces accumulate at T0 + 2 e v0 / (g (1 - e))), and Routh's
impact of a spinning ball on a rough floor (Routh 1905, *The Elementary Part of a Treatise
on the Dynamics of a System of Rigid Bodies*, §180-184: the contact point's tangential
velocity u = v_x - a w_y stops if (2/7)|u| <= mu_s (1 + e) v_n, leaving v_x = (5 v_x +
2 a w_y)/7; otherwise the friction impulse mu_k (1 + e) m v_n slows it), the skidding
ball's closed form (Coriolis 1835), and central finite differences.

A separated contact's touchdown is located where its gap is the run's `tolerance`
delta = 1e-8 (not on the rounding of a grazing start), and the impact is taken where the
gap is zero (the flight's Taylor step from there): a free fall is a polynomial the
integrator follows exactly, so bounce times and speeds are checked to EXACT = 1e-12 (at the
located gap delta they carried g delta / v, 2.2e-8 at the slowest bounce here).
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
A = 0.1
DELTA = 1e-8
EXACT = 1e-12
TIGHT = diffrax.PIDController(rtol=1e-11, atol=1e-11, dtmax=0.1)
BALL = rg.RigidBody(1.0, jnp.full(3, 0.4 * A**2), name="ball")
SYSTEM = cx.System(
    lambda t, q, qd, p: BALL.kinetic_energy(q, qd) - G * q[2], [BALL.orientation_constraint()]
)
CONTACT = rg.FrictionalContact(
    BALL,
    rg.Sphere(A),
    static_friction=lambda p: p["mu_s"],
    kinetic_friction=lambda p: p["mu_k"],
    restitution=lambda p: p["e"],
)
TS = jnp.linspace(0.0, 1.0, 41)


def _params(**kw):
    p = dict(mu_s=0.4, mu_k=0.3, e=0.5)
    p.update(kw)
    return {k: jnp.asarray(v, jnp.float64) for k, v in p.items()}


def _state(height, v=(0.0, 0.0, 0.0), spin=(0.0, 0.0, 0.0)):
    r = jnp.array([0.0, 0.0, A + height])
    return BALL.state(r, jnp.eye(3), jnp.asarray(v), jnp.asarray(spin))


def _run(p, q0, qd0, mode="separated", t1=1.0, throw=True, contact=CONTACT, ts_values=None, **kw):
    # One compiled program for every run of this module (same shapes and options; the save
    # times are data).
    return rg.simulate_contacts(
        SYSTEM,
        [contact],
        q0,
        qd0,
        p,
        modes=[mode],
        t1=t1,
        ts=TS * t1 if ts_values is None else ts_values,
        stepsize_controller=TIGHT,
        max_switches=12,
        throw=throw,
        **kw,
    )


# ----------------------------------------------------------------------------------------
# A ball dropped on the floor.

H0 = 1.0
V0 = np.sqrt(2 * G * H0)
T0 = np.sqrt(2 * H0 / G)


@pytest.fixture(scope="module")
def dropped():
    p = _params()
    return p, _run(p, *_state(H0), t1=2.0)


def test_dropped_ball_bounces_at_geometric_times_and_heights(dropped):
    p, out = dropped
    e = float(p["e"])
    # Bounce k approaches at V0 e^k; bounces go on while V0 e^k > 1e-2 (the default
    # restitution_threshold): k = 0..8 bounce, k = 9 lands plastically.
    speeds = V0 * e ** np.arange(10)
    assert speeds[8] > 1e-2 > speeds[9]
    assert int(out.status) == 0 and int(out.num_switches) == 10
    times = T0 + np.concatenate([[0.0], np.cumsum(2 * speeds[1:] / G)])
    np.testing.assert_allclose(np.asarray(out.switch_times[:10]), times, rtol=0, atol=EXACT)
    # Leaving speeds e V0 e^k, so apex heights H0 e^(2(k+1)) above the floor.
    vz = np.asarray(out.switch_qd[:9, 2])
    np.testing.assert_allclose(vz, e * speeds[:9], rtol=0, atol=EXACT)
    apex = vz**2 / (2 * G)
    np.testing.assert_allclose(apex, H0 * e ** (2 * np.arange(1, 10)), rtol=1e-5)
    modes = np.asarray(out.switch_modes[:10, 0])
    assert modes.tolist() == [2] * 9 + [0]  # separated after each bounce, then rolling


def test_states_saved_next_to_a_touchdown_are_the_flight_before_it_and_the_bounce_after():
    """Save times 1e-12 s and 5e-9 s either side of the first impact (the event is located
    where the gap is delta, the impact taken at zero gap, a few ns apart, on either side of
    which the located time may fall): before it the free fall, after it the bounce."""
    p = _params()
    dts = np.array([-5e-9, -1e-12, 1e-12, 5e-9])
    ts = np.asarray(TS * 2.0).copy()
    ts[10:14] = T0 + dts
    out = _run(p, *_state(H0), t1=2.0, ts_values=jnp.asarray(np.sort(ts)))
    i = np.searchsorted(np.sort(ts), T0 + dts[0])
    z, vz = np.asarray(out.q[i : i + 4, 2]) - A, np.asarray(out.qd[i : i + 4, 2])
    fall = -G * (T0 + dts[:2])
    np.testing.assert_allclose(vz[:2], fall, rtol=0, atol=EXACT)
    np.testing.assert_allclose(z[:2], H0 - 0.5 * G * (T0 + dts[:2]) ** 2, rtol=0, atol=EXACT)
    e = float(p["e"])
    np.testing.assert_allclose(vz[2:], e * V0 - G * dts[2:], rtol=0, atol=EXACT)
    np.testing.assert_allclose(z[2:], e * V0 * dts[2:] - 0.5 * G * dts[2:] ** 2, rtol=0, atol=EXACT)
    assert np.all(z >= -EXACT)  # never below the floor


def test_bouncing_ends_before_the_zeno_time_by_the_documented_bound(dropped):
    p, out = dropped
    e = float(p["e"])
    t_zeno = T0 + 2 * e * V0 / (G * (1 - e))  # where infinitely many bounces accumulate
    t_rest = float(out.switch_times[9])
    assert t_rest < t_zeno
    assert t_zeno - t_rest <= 2 * 1e-2 / (G * (1 - e))  # the threshold's bound (docs)
    # At rest on the floor from then on.
    assert abs(float(out.q_final[2]) - A) <= 1e-7
    assert float(jnp.max(jnp.abs(out.qd_final))) <= 1e-7
    assert int(out.modes[-1, 0]) == 0


def test_impacts_never_gain_energy(dropped):
    _, out = dropped
    E = np.asarray(out.energy())
    assert np.all(np.diff(E) <= 1e-9)
    # In flight energy is conserved: between the first two bounces.
    ts = np.asarray(out.ts)
    t = np.asarray(out.switch_times)
    flight = (ts > t[0] + 1e-6) & (ts < t[1] - 1e-6)
    assert flight.sum() >= 2
    assert np.ptp(E[flight]) <= 1e-9


@pytest.mark.slow
def test_gradient_of_a_bounce_time_matches_closed_form_and_differences():
    def second_bounce(e, h0):
        return _run(_params(e=e), *_state(h0), t1=2.0).switch_times[1]

    e, h0 = 0.5, H0
    # T2 = T1 + 2 e sqrt(2 g h0) / g, T1 = sqrt(2 h0 / g): through the first touchdown,
    # the impact and the second touchdown.
    dT_de, dT_dh = jax.grad(second_bounce, argnums=(0, 1))(jnp.asarray(e), jnp.asarray(h0))
    assert abs(float(dT_de) - 2 * V0 / G) <= 1e-7
    assert abs(float(dT_dh) - (1 / np.sqrt(2 * G * h0) + 2 * e / V0)) <= 1e-7
    step = 1e-5
    fd = (second_bounce(e + step, h0) - second_bounce(e - step, h0)) / (2 * step)
    assert abs(float(dT_de) - float(fd)) <= 1e-6


@pytest.mark.slow
def test_bounces_under_jit_and_vmap_match_single_runs():
    def second_bounce(e):
        return _run(_params(e=e), *_state(H0), t1=2.0).switch_times[1]

    es = jnp.array([0.3, 0.5])  # runs of 7 and 10 switches in one batch
    batched = jax.jit(jax.vmap(second_bounce))(es)
    expected = T0 + 2 * np.asarray(es) * V0 / G
    np.testing.assert_allclose(np.asarray(batched), expected, atol=1e-8)


# ----------------------------------------------------------------------------------------
# Routh's oblique impact of a spinning ball.


def _touchdown(vx, wy, vz0=-1.0, h=0.05):
    """The ball's velocity and spin at its first touchdown, free flight from height h."""
    vz = -np.sqrt(vz0**2 + 2 * G * h)
    return vx, wy, vz


@pytest.mark.parametrize("vx, wy", [(0.3, 0.0), (3.0, -10.0)], ids=["sticking", "sliding"])
def test_oblique_impact_of_a_spinning_ball_matches_routh(vx, wy):
    p = _params(e=0.5)
    e, mu_s, mu_k = (float(p[k]) for k in ("e", "mu_s", "mu_k"))
    q0, qd0 = _state(0.05, v=(vx, 0.0, -1.0), spin=(0.0, wy, 0.0))
    out = _run(p, q0, qd0, t1=0.1)
    _, _, vz = _touchdown(vx, wy)
    v = -vz
    u = vx - A * wy  # tangential velocity of the contact point
    sticking = (2 / 7) * abs(u) <= mu_s * (1 + e) * v
    assert sticking == (vx == 0.3)
    if sticking:
        vx_after, wy_after = (5 * vx + 2 * A * wy) / 7, (5 * vx + 2 * A * wy) / (7 * A)
    else:
        impulse = mu_k * (1 + e) * v * np.sign(u)
        vx_after, wy_after = vx - impulse, wy + 2.5 * impulse / A
    qd_after = out.switch_qd[0]
    w_after = BALL.angular_velocity(out.switch_q[0], qd_after)
    assert abs(float(out.switch_times[0]) - (v - 1.0) / G) <= EXACT  # z = 0.05 - t - g t^2/2
    np.testing.assert_allclose(float(qd_after[2]), e * v, atol=EXACT)
    np.testing.assert_allclose(float(qd_after[0]), vx_after, atol=EXACT)
    np.testing.assert_allclose(float(w_after[1]), wy_after, atol=EXACT / A)
    np.testing.assert_allclose(float(out.switch_q[0, 2]), A, atol=EXACT)  # at zero gap
    assert int(out.switch_modes[0, 0]) == 2  # it bounces
    E = np.asarray(out.energy())
    assert np.all(np.diff(E) <= 1e-9)


def test_plastic_landing_skids_then_rolls_at_the_closed_form_time():
    # e = 0: the ball lands and stays; a sliding impact leaves the slip
    # u+ = u - 7/2 mu_k v (Routh), which kinetic friction stops after 2 u+ / (7 mu_k g).
    p = _params(e=0.0)
    vx, mu_k = 3.0, float(p["mu_k"])
    q0, qd0 = _state(0.05, v=(vx, 0.0, -1.0))
    out = _run(p, q0, qd0, t1=1.0)
    _, _, vz = _touchdown(vx, 0.0)
    v = -vz
    t_land = (-1.0 + v) / G  # from z = 0.05 - t - g t^2 / 2 = 0
    u_after = vx - 3.5 * mu_k * v
    assert int(out.status) == 0
    assert np.asarray(out.switch_modes[:2, 0]).tolist() == [1, 0]  # slides, then rolls
    assert abs(float(out.switch_times[0]) - t_land) <= EXACT
    t_roll = t_land + 2 * u_after / (7 * mu_k * G)
    assert abs(float(out.switch_times[1]) - t_roll) <= 1e-7
    assert abs(float(out.switch_qd[0, 2])) <= 1e-9  # plastic: no normal velocity left


# ----------------------------------------------------------------------------------------
# Bad input.


def test_restitution_outside_unit_interval_is_refused_naming_the_contact():
    for e in (-0.1, 1.5, np.nan):
        with pytest.raises(ValueError, match=r"'ball'.*`restitution` must be in \[0, 1\]"):
            rg.FrictionalContact(
                BALL, rg.Sphere(A), static_friction=0.3, kinetic_friction=0.2, restitution=e
            )
    q0, qd0 = _state(H0)
    with pytest.raises(ValueError, match=r"contact 'ball' needs a `restitution` e in \[0, 1\]"):
        _run(_params(e=1.2), q0, qd0)


def test_inconsistent_separated_or_touching_starts_name_the_contact():
    p = _params()
    q0, qd0 = _state(-0.01)  # inside the floor
    with pytest.raises(ValueError, match=r"'ball' is declared 'separated' but .* below"):
        _run(p, q0, qd0)
    q0, qd0 = _state(0.0, v=(0.0, 0.0, -1.0))  # on it, moving into it
    with pytest.raises(ValueError, match=r"'ball' is declared 'separated' but .* moving into"):
        _run(p, q0, qd0)
    q0, qd0 = _state(0.2)  # above it, declared in contact
    with pytest.raises(ValueError, match=r"'ball'.*not on the plane"):
        _run(p, q0, qd0, mode="rolling")


def test_zeno_budget_message_names_the_threshold():
    # e = 0.9 with a tiny threshold: more bounces than max_switches = 12.
    contact = eqx.tree_at(lambda c: c.restitution_threshold, CONTACT, jnp.asarray(1e-6))
    with pytest.raises(RuntimeError, match=r"max_switches=12.*restitution_threshold"):
        _run(_params(e=0.9), *_state(0.05), t1=2.0, contact=contact)


# ----------------------------------------------------------------------------------------
# Two balls that touch down at one instant: their impacts are one event.

LEFT = rg.RigidBody(1.0, jnp.full(3, 0.4 * A**2), name="left")
RIGHT = rg.RigidBody(2.0, jnp.full(3, 0.8 * A**2), offset=LEFT.size, name="right")
PAIR = cx.System(
    lambda t, q, qd, p: (
        LEFT.kinetic_energy(q, qd)
        + RIGHT.kinetic_energy(q, qd)
        - G * (LEFT.mass * q[2] + RIGHT.mass * q[LEFT.size + 2])
    ),
    [LEFT.orientation_constraint(), RIGHT.orientation_constraint()],
)
PAIR_CONTACTS = [
    rg.FrictionalContact(
        b,
        rg.Sphere(A),
        static_friction=0.4,
        kinetic_friction=0.3,
        restitution=lambda p: p["e"],
    )
    for b in (LEFT, RIGHT)
]


@pytest.mark.slow
@pytest.mark.parametrize("offset", [0.0, 0.2 * DELTA])
def test_two_balls_dropped_together_both_bounce_with_impulses_one_plus_e_m_v(offset):
    """An exact tie (and one within the run's tolerance) used to lose the second touchdown:
    after the first impact no event fired and the other ball fell through the floor."""
    p = _params(e=0.5)
    s1 = LEFT.state(jnp.array([0.0, 0.0, A + H0]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
    s2 = RIGHT.state(jnp.array([1.0, 0.0, A + H0 + offset]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
    q0, qd0 = jnp.concatenate([s1[0], s2[0]]), jnp.concatenate([s1[1], s2[1]])
    out = rg.simulate_contacts(
        PAIR,
        PAIR_CONTACTS,
        q0,
        qd0,
        p,
        modes=["separated", "separated"],
        t1=1.2,
        ts=jnp.linspace(0.0, 1.2, 7),
        stepsize_controller=TIGHT,
        max_switches=6,
    )
    e = 0.5
    # Both bounce at T0, leave at e V0 and land again together after 2 e V0 / g, then
    # after 2 e^2 V0 / g: exactly for the tie; the ball 0.2 delta higher is taken in the
    # first's impact with its gap of 0.2 delta still open (its times move by ~delta / V0).
    tol = EXACT if offset == 0 else DELTA
    times = T0 + np.array([0.0, 2 * e * V0 / G, 2 * (e + e**2) * V0 / G])
    assert int(out.status) == 0 and int(out.num_switches) == 3
    np.testing.assert_allclose(np.asarray(out.switch_times[:3]), times, rtol=0, atol=tol)
    assert np.asarray(out.switched[:3]).tolist() == [[True, True]] * 3
    assert np.asarray(out.switch_modes[:3]).tolist() == [[2, 2]] * 3
    # Newton's law at each ball: it leaves at e times its approach speed, the impulse
    # (1 + e) m v along the normal, no tangential part (no slip).
    vz = np.asarray(out.switch_qd[0])[[2, LEFT.size + 2]]
    np.testing.assert_allclose(vz, [e * V0, e * V0], rtol=tol)
    impulses = np.asarray(out.impulses[0])
    np.testing.assert_allclose(impulses[:, 0], (1 + e) * np.array([1.0, 2.0]) * V0, rtol=tol)
    np.testing.assert_allclose(impulses[:, 1:], 0.0, atol=1e-9)
    # Neither falls through the floor: both end above it, at the same height.
    heights = np.asarray(out.q[:, [2, LEFT.size + 2]])
    assert np.all(heights >= A - 1e-7)
    np.testing.assert_allclose(heights[:, 0], heights[:, 1], atol=1e-7)


def test_new_save_times_and_switch_budgets_within_the_capacity_reuse_the_compiled_run(
    monkeypatch,
):
    """The save times are padded to a capacity (16, 32, ...) and the switch budget is data:
    5 then 9 save times, a budget of 12 then 10, trace the contact program once, and the
    results are the requested ones (closed-form bounce times); 17 save times trace it
    again. A budget of 3 stops the bouncing ball at its third impact (status 2)."""
    from constrax.rigid._contact import _contact_run

    traces = []
    real = _contact_run._run

    def counting(*args, **kwargs):
        traces.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_contact_run, "_run", counting)
    _contact_run._jitted.cache_clear()
    p, (q0, qd0) = _params(), _state(H0)
    e = float(p["e"])

    def run(k, budget):
        return rg.simulate_contacts(SYSTEM, [CONTACT], q0, qd0, p, modes=["separated"], t1=2.0,
                                    ts=jnp.linspace(0.0, 2.0, k), stepsize_controller=TIGHT,
                                    max_switches=budget, throw=False)  # fmt: skip

    try:
        first, second = run(5, 12), run(9, 10)
        assert len(traces) == 1
        assert second.ts.shape == (9,) and second.q.shape[0] == 9
        assert second.switch_times.shape == (10,) and second.impulses.shape[0] == 10
        speeds = V0 * e ** np.arange(10)
        times = T0 + np.concatenate([[0.0], np.cumsum(2 * speeds[1:] / G)])
        np.testing.assert_allclose(np.asarray(second.switch_times), times, rtol=0, atol=EXACT)
        np.testing.assert_allclose(np.asarray(first.switch_times[:10]), times, rtol=0, atol=EXACT)
        assert int(second.status) == 0  # ten switches within a budget of 10: the last lands
        short = run(9, 3)
        assert len(traces) == 1 and int(short.status) == 2 and int(short.num_switches) == 3
        np.testing.assert_allclose(np.asarray(short.switch_times), times[:3], rtol=0, atol=EXACT)
        run(17, 12)
        assert len(traces) == 2
    finally:
        _contact_run._jitted.cache_clear()
