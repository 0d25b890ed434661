"""Planar model zoo (`constrax.models`): closed forms, invariants, consistency, errors.

References are independent of the engine: closed-form solutions from the literature
(Bloch, *Nonholonomic Mechanics and Control*, §1.4 rolling disk, §1.6 knife edge on an
inclined plane, §1.7 Chaplygin sleigh), conservation laws, a second, unconstrained code
path (pendulum chain in joint angles), a sympy derivation of the snake cart's kinetic
energy from its bodies, and central finite differences.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

import constrax as cx
from constrax import models

TIGHT = diffrax.PIDController(rtol=1e-12, atol=1e-12)


@eqx.filter_jit
def _rollout(system, q0, qd0, p, ts):
    traj = cx.simulate(
        system,
        q0,
        qd0,
        p,
        t0=ts[0],
        t1=ts[-1],
        stepsize_controller=TIGHT,
        saveat=diffrax.SaveAt(ts=ts),
        max_steps=100_000,
    )
    return traj.q, traj.qd, traj.energy()


# ----------------------------------------------------------------------------------------
# Closed forms and invariants.


def test_vertical_rolling_disk_spins_and_turns_at_constant_rates_on_the_closed_form_circle():
    # Bloch §1.4: theta_dot = omega and phi_dot = Omega are constant; the contact point
    # moves on the circle of radius R |Omega / omega| centred at
    # (x0 - rho sin th0, y0 + rho cos th0), rho = R Omega / omega.
    model = models.vertical_rolling_disk()
    q0, qd0, R = model.q0, model.qd0, model.params["R"]
    omega, Omega = qd0[2], qd0[3]
    ts = jnp.linspace(0.0, 3 * 2 * jnp.pi / omega, 301)  # three full turns
    q, qd, _ = _rollout(model.system, q0, qd0, model.params, ts)
    rho = R * Omega / omega
    xc = q0[0] - rho * jnp.sin(q0[2])
    yc = q0[1] + rho * jnp.cos(q0[2])
    theta = q0[2] + omega * ts
    np.testing.assert_allclose(qd[:, 2], omega, rtol=0, atol=1e-8)
    np.testing.assert_allclose(qd[:, 3], Omega, rtol=0, atol=1e-8)
    np.testing.assert_allclose(q[:, 2], theta, rtol=0, atol=1e-8)
    np.testing.assert_allclose(q[:, 0], xc + rho * jnp.sin(theta), rtol=0, atol=1e-8)
    np.testing.assert_allclose(q[:, 1], yc - rho * jnp.cos(theta), rtol=0, atol=1e-8)
    radius = jnp.hypot(q[:, 0] - xc, q[:, 1] - yc)
    np.testing.assert_allclose(radius, jnp.abs(rho), rtol=0, atol=1e-8)


def test_chaplygin_sleigh_conserves_energy_and_tends_to_straight_line_motion():
    # Bloch §1.7 / Neimark–Fufaev: with v the forward speed of the blade and w = theta_dot,
    # v' = a w^2, (I + m a^2) w' = -m a v w. Energy E = m v^2/2 + (I + m a^2) w^2/2 is
    # conserved, so v' = k (v_inf^2 - v^2) with k = m a / (I + m a^2),
    # v_inf = sqrt(2E/m): v = v_inf tanh(k v_inf t + c), w = w0 cosh(c) / cosh(k v_inf t + c),
    # c = artanh(v0 / v_inf). The sleigh tends to straight-line motion along its axis.
    model = models.chaplygin_sleigh()
    p = model.params
    m, I, a = p["m"], p["I"], p["a"]
    ts = jnp.linspace(0.0, 25.0, 251)
    q, qd, E = _rollout(model.system, model.q0, model.qd0, p, ts)
    th = q[:, 2]
    v = qd[:, 0] * jnp.cos(th) + qd[:, 1] * jnp.sin(th)
    w = qd[:, 2]
    E0 = 0.5 * m * (model.qd0[:2] @ model.qd0[:2]) + 0.5 * (I + m * a**2) * model.qd0[2] ** 2
    np.testing.assert_allclose(E, E0, rtol=1e-9, atol=0)
    v_inf = jnp.sqrt(2 * E0 / m)
    k = m * a / (I + m * a**2)
    c = jnp.arctanh(v[0] / v_inf)
    np.testing.assert_allclose(v, v_inf * jnp.tanh(k * v_inf * ts + c), rtol=0, atol=1e-8)
    np.testing.assert_allclose(w, w[0] * jnp.cosh(c) / jnp.cosh(k * v_inf * ts + c), atol=1e-8)
    # Asymptotically: no turning, speed sqrt(2E/m), centre-of-mass velocity along the axis.
    assert abs(w[-1]) < 1e-8
    assert abs(v[-1] - v_inf) < 1e-8
    com_vel = qd[-1, :2] + a * w[-1] * jnp.array([-jnp.sin(th[-1]), jnp.cos(th[-1])])
    axis = jnp.array([jnp.cos(th[-1]), jnp.sin(th[-1])])
    assert abs(com_vel @ axis - v_inf) < 1e-8
    assert abs(jnp.cross(axis, com_vel)) < 1e-8


def test_knife_edge_on_an_inclined_plane_follows_the_closed_form_cycloid():
    # Bloch §1.6: from rest at theta0 = 0 with theta_dot = w, the knife edge on a plane
    # inclined so that gravity pulls with g_incline along +x moves on
    # x = g/(2 w^2) sin^2(w t), y = g/(2 w^2) (w t - sin(2 w t)/2).
    g = 9.81 * np.sin(0.3)
    model = models.knife_edge(g_incline=g)
    w = 1.3
    q0 = jnp.zeros(3)
    qd0 = jnp.array([0.0, 0.0, w])
    ts = jnp.linspace(0.0, 6.0, 121)
    q, _, E = _rollout(model.system, q0, qd0, model.params, ts)
    scale = g / (2 * w**2)
    np.testing.assert_allclose(q[:, 0], scale * jnp.sin(w * ts) ** 2, rtol=0, atol=1e-8)
    np.testing.assert_allclose(
        q[:, 1], scale * (w * ts - 0.5 * jnp.sin(2 * w * ts)), rtol=0, atol=1e-8
    )
    np.testing.assert_allclose(q[:, 2], w * ts, rtol=0, atol=1e-8)
    np.testing.assert_allclose(E, E[0], rtol=1e-9)


def test_bead_on_rotating_hoop_conserves_the_jacobi_integral_and_stays_on_the_hoop():
    # A rheonomic constraint: energy is not conserved, but the Jacobi integral
    # E - w * m (x y_dot - y x_dot) (energy in the co-rotating frame) is.
    model = models.bead_on_rotating_hoop()
    p = model.params
    ts = jnp.linspace(0.0, 3.0, 61)
    q, qd, E = _rollout(model.system, model.q0, model.qd0, p, ts)
    Lz = p["m"] * (q[:, 0] * qd[:, 1] - q[:, 1] * qd[:, 0])
    jacobi = E - p["w"] * Lz
    np.testing.assert_allclose(jacobi, jacobi[0], rtol=1e-9)
    assert float(jnp.ptp(E)) > 1e-2  # energy itself is exchanged with the motor
    np.testing.assert_allclose(jnp.linalg.norm(q, axis=1), p["R"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(
        -jnp.sin(p["w"] * ts) * q[:, 0] + jnp.cos(p["w"] * ts) * q[:, 1], 0.0, atol=1e-8
    )


def test_nonholonomic_particle_yx_follows_the_closed_form_with_constant_y_dot():
    # Bloch §1.5: L = |q_dot|^2 / 2, z_dot = k y x_dot. Then y_dot is constant,
    # x_dot sqrt(1 + k^2 y^2) = C is conserved, and integrating
    # x = x0 + C (asinh(k y) - asinh(k y0)) / (k y_dot),
    # z = z0 + C (sqrt(1 + k^2 y^2) - sqrt(1 + k^2 y0^2)) / (k y_dot).
    k = 1.7
    model = models.nonholonomic_particle("yx", k=k)
    q0, qd0 = model.q0, model.qd0
    ts = jnp.linspace(0.0, 4.0, 81)
    q, qd, E = _rollout(model.system, q0, qd0, model.params, ts)
    y = q0[1] + qd0[1] * ts
    C = qd0[0] * jnp.sqrt(1 + k**2 * q0[1] ** 2)
    x = q0[0] + C * (jnp.arcsinh(k * y) - jnp.arcsinh(k * q0[1])) / (k * qd0[1])
    z = q0[2] + C * (jnp.sqrt(1 + k**2 * y**2) - jnp.sqrt(1 + k**2 * q0[1] ** 2)) / (k * qd0[1])
    np.testing.assert_allclose(qd[:, 1], qd0[1], rtol=0, atol=1e-8)
    np.testing.assert_allclose(qd[:, 0] * jnp.sqrt(1 + k**2 * q[:, 1] ** 2), C, rtol=1e-8)
    np.testing.assert_allclose(q, jnp.stack([x, y, z], axis=1), rtol=0, atol=1e-8)
    np.testing.assert_allclose(E, E[0], rtol=1e-9)


def test_heisenberg_particle_moves_on_circles_under_the_vakonomic_prescription():
    # Bloch §1.8 (sub-Riemannian geodesics): for Lambda = L - mu (z_dot + k (y x_dot -
    # x y_dot) / 2), the z equation gives mu_dot = 0 and then x_ddot = mu k y_dot,
    # y_ddot = -mu k x_dot: uniform motion on a circle of radius |v| / |mu k| centred at
    # r0 + (y_dot0, -x_dot0) / (mu k).
    k, mu0 = 0.8, 1.5
    model = models.nonholonomic_particle("heisenberg", k=k)
    ts = jnp.linspace(0.0, 4.0, 81)

    @eqx.filter_jit
    def rollout(system, q0, qd0, p):
        traj = cx.simulate(
            system,
            q0,
            qd0,
            p,
            t1=ts[-1],
            stepsize_controller=TIGHT,
            saveat=diffrax.SaveAt(ts=ts),
            prescription=cx.Vakonomic(),
            mu0=jnp.array([mu0]),
        )
        return traj.q, traj.mu

    q, mu = rollout(model.system, model.q0, model.qd0, model.params)
    q0, qd0 = model.q0, model.qd0
    centre = q0[:2] + jnp.array([qd0[1], -qd0[0]]) / (mu0 * k)
    radius = jnp.linalg.norm(qd0[:2]) / (mu0 * k)
    np.testing.assert_allclose(mu[:, 0], mu0, rtol=0, atol=1e-10)
    np.testing.assert_allclose(jnp.linalg.norm(q[:, :2] - centre, axis=1), radius, atol=1e-8)
    # the angle about the centre turns uniformly (clockwise) at the rate mu k
    rel = q[:, :2] - centre
    angle = jnp.unwrap(jnp.arctan2(rel[:, 1], rel[:, 0]))
    np.testing.assert_allclose(angle - angle[0], -mu0 * k * ts, rtol=0, atol=1e-8)


def test_pendulum_chain_maximal_and_minimal_coordinates_give_the_same_bob_motion():
    masses, lengths = jnp.array([1.0, 0.7]), jnp.array([0.8, 1.1])
    maximal = models.pendulum_chain(2, "maximal", masses=masses, lengths=lengths)
    minimal = models.pendulum_chain(2, "minimal", masses=masses, lengths=lengths)
    ts = jnp.linspace(0.0, 3.0, 61)
    qa, _, Ea = _rollout(maximal.system, maximal.q0, maximal.qd0, maximal.params, ts)
    th, _, Eb = _rollout(minimal.system, minimal.q0, minimal.qd0, minimal.params, ts)
    # Bob positions from the joint angles (angles from the downward vertical), written
    # out independently of the model's own forward kinematics.
    x1, y1 = lengths[0] * jnp.sin(th[:, 0]), -lengths[0] * jnp.cos(th[:, 0])
    x2, y2 = x1 + lengths[1] * jnp.sin(th[:, 1]), y1 - lengths[1] * jnp.cos(th[:, 1])
    bobs = jnp.stack([x1, y1, x2, y2], axis=1)
    np.testing.assert_allclose(qa, bobs, rtol=0, atol=1e-8)
    np.testing.assert_allclose(Ea, Eb, rtol=1e-9)


# ----------------------------------------------------------------------------------------
# Snake cart (Briggs 2016, §1.2).


def test_snake_cart_constraint_rank_drops_to_one_exactly_at_phi_plus_minus_half_pi():
    model = models.snake_cart()

    @jax.jit
    def rank(theta, phi):
        q = jnp.stack([0.3, -0.2, theta, phi])
        return cx.constraint_rank(model.system, 0.0, q, jnp.zeros(4), model.params).rank

    ranks = jax.vmap(rank)
    thetas = jnp.linspace(-jnp.pi, jnp.pi, 7)
    singular = jnp.array([jnp.pi / 2, -jnp.pi / 2])
    TH, PH = jnp.meshgrid(thetas, singular)
    np.testing.assert_array_equal(ranks(TH.ravel(), PH.ravel()), 1)
    regular = jnp.linspace(-jnp.pi, jnp.pi, 41)
    regular = regular[jnp.abs(jnp.cos(regular)) > 1e-3]
    TH, PH = jnp.meshgrid(thetas, regular)
    np.testing.assert_array_equal(ranks(TH.ravel(), PH.ravel()), 2)


def test_kinematic_car_constraint_rank_is_two_at_every_steering_angle():
    model = models.kinematic_car()

    @jax.jit
    @jax.vmap
    def rank(theta, psi):
        q = jnp.stack([0.3, -0.2, theta, psi])
        return cx.constraint_rank(model.system, 0.0, q, jnp.zeros(4), model.params).rank

    TH, PS = jnp.meshgrid(jnp.linspace(-jnp.pi, jnp.pi, 7), jnp.linspace(-jnp.pi, jnp.pi, 25))
    np.testing.assert_array_equal(rank(TH.ravel(), PS.ravel()), 2)
    np.testing.assert_array_equal(rank(jnp.zeros(2), jnp.array([jnp.pi / 2, -jnp.pi / 2])), 2)


def test_snake_cart_body_kinetic_energy_is_conserved_through_the_singular_steering_angle():
    # The steering torque acts on phi alone and the phi row carries no reaction
    # (2 J_w phi_ddot = tau), so its work goes into J_w phi_dot^2; ideal reactions do no
    # work, so E - J_w phi_dot^2 (the kinetic energy of x, y, theta) is constant, also
    # while phi sweeps through the rank drops at pi/2 and 3 pi/2 (Briggs 2016, §1.2).
    model = models.snake_cart()
    ts = jnp.linspace(0.0, 3.0, 61)
    q, qd, E = _rollout(model.system, model.q0, model.qd0, model.params, ts)
    assert float(q[0, 3]) < np.pi / 2 and float(q[-1, 3]) > 3 * np.pi / 2
    body = E - model.params["J_w"] * qd[:, 3] ** 2
    np.testing.assert_allclose(body, body[0], rtol=1e-9, atol=0)
    res = jax.vmap(lambda q, qd: cx.constraint_residual(model.system, 0.0, q, qd, model.params))
    assert float(jnp.max(jnp.abs(res(q, qd).velocity))) < 1e-8


def test_snake_cart_kinetic_energy_matches_a_sympy_derivation_from_its_bodies():
    # Body (m_b, J_b) at the centre; wheel assemblies (m_w, J_w) at +-l/2 on the body
    # axis with absolute headings theta +- phi.
    t = sp.symbols("t")
    x, y, th, ph = (sp.Function(s)(t) for s in ("x", "y", "theta", "phi"))
    m_b, m_w, J_b, J_w, l = sp.symbols("m_b m_w J_b J_w l", positive=True)
    T = sp.Rational(1, 2) * m_b * (x.diff(t) ** 2 + y.diff(t) ** 2)
    T += sp.Rational(1, 2) * J_b * th.diff(t) ** 2
    for sign in (1, -1):
        wx = x + sign * l / 2 * sp.cos(th)
        wy = y + sign * l / 2 * sp.sin(th)
        T += sp.Rational(1, 2) * m_w * (wx.diff(t) ** 2 + wy.diff(t) ** 2)
        T += sp.Rational(1, 2) * J_w * (th + sign * ph).diff(t) ** 2
    qd = [s.diff(t) for s in (x, y, th, ph)]
    W_sym = sp.hessian(sp.expand(T), qd)
    values = dict(m_b=1.3, m_w=0.4, J_b=0.6, J_w=0.07, l=1.7)
    model = models.snake_cart(**values)
    rng = np.random.default_rng(0)
    q, v = rng.normal(size=4), rng.normal(size=4)
    subs = {m_b: 1.3, m_w: 0.4, J_b: 0.6, J_w: 0.07, l: 1.7, th: q[2], ph: q[3]}
    W_ref = np.array(W_sym.subs(subs).evalf(), dtype=float)
    W = cx.mass_matrix(model.system, 0.0, jnp.asarray(q), jnp.asarray(v), model.params)
    np.testing.assert_allclose(W, W_ref, rtol=1e-13, atol=1e-14)


# ----------------------------------------------------------------------------------------
# Every model: consistent initial state, parameter errors, gradients.

FACTORIES = {
    "snake_cart": lambda **kw: models.snake_cart(**kw),
    "vertical_rolling_disk": lambda **kw: models.vertical_rolling_disk(**kw),
    "chaplygin_sleigh": lambda **kw: models.chaplygin_sleigh(**kw),
    "knife_edge": lambda **kw: models.knife_edge(**kw),
    "kinematic_car": lambda **kw: models.kinematic_car(**kw),
    "particle_yx": lambda **kw: models.nonholonomic_particle("yx", **kw),
    "particle_heisenberg": lambda **kw: models.nonholonomic_particle("heisenberg", **kw),
    "pendulum_chain_maximal": lambda **kw: models.pendulum_chain(3, "maximal", **kw),
    "pendulum_chain_minimal": lambda **kw: models.pendulum_chain(3, "minimal", **kw),
    "bead_on_rotating_hoop": lambda **kw: models.bead_on_rotating_hoop(**kw),
}
# One parameter per model that its Lagrangian, constraints or force reads (and an
# override value, used to check that initial states follow the parameters). Not rod
# lengths or hoop radii in Cartesian models: without stabilisation the index-reduced
# dynamics only see dg/dq, in which those constants do not appear. Not uniform mass
# scalings, nor the car's wheelbase/inertias from its steady turn (a relative
# equilibrium for every value): their derivatives vanish.
GRAD_PARAM = {
    "snake_cart": ("l", 1.6),
    "vertical_rolling_disk": ("R", 0.3),
    "chaplygin_sleigh": ("a", 0.2),
    "knife_edge": ("g_incline", 2.0),
    "kinematic_car": ("F_drive", 0.7),
    "particle_yx": ("k", 1.7),
    "particle_heisenberg": ("k", 0.6),
    "pendulum_chain_maximal": ("g", 1.62),
    "pendulum_chain_minimal": ("lengths", jnp.array([0.5, 1.0, 1.5])),
    "bead_on_rotating_hoop": ("w", 2.5),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_every_model_initial_state_satisfies_its_constraints(name):
    key, value = GRAD_PARAM[name]
    for model in (FACTORIES[name](), FACTORIES[name](**{key: value})):
        assert isinstance(model, models.Model)
        n = len(model.coordinates)
        assert model.q0.shape == model.qd0.shape == (n,)
        assert model.q0.dtype == model.qd0.dtype == jnp.float64
        assert all(v.dtype == jnp.float64 for v in model.params.values())
        res = cx.constraint_residual(model.system, 0.0, model.q0, model.qd0, model.params)
        assert float(res.max()) <= 1e-12


@pytest.mark.parametrize("name", FACTORIES)
def test_every_model_rejects_an_unknown_parameter_and_lists_the_valid_ones(name):
    valid = list(FACTORIES[name]().params)
    listed = ", ".join(repr(k) for k in valid)
    with pytest.raises(
        ValueError, match=f"unknown parameter 'bogus'; valid parameters are {listed}"
    ):
        FACTORIES[name](bogus=1.0)


def test_models_reject_bad_shapes_variants_and_sizes():
    with pytest.raises(ValueError, match=r"parameter 'masses' must have shape \(3,\), got \(2,\)"):
        models.pendulum_chain(3, masses=jnp.ones(2))
    with pytest.raises(ValueError, match=r"parameter 'm' must have shape \(\), got \(2,\)"):
        models.chaplygin_sleigh(m=jnp.ones(2))
    with pytest.raises(ValueError, match="`n` must be a positive int, got 0"):
        models.pendulum_chain(0)
    with pytest.raises(ValueError, match="unknown coordinates 'polar'; valid choices are"):
        models.pendulum_chain(2, "polar")
    with pytest.raises(ValueError, match="unknown variant 'xy'; valid variants are"):
        models.nonholonomic_particle("xy")
    model = models.knife_edge()
    with pytest.raises(ValueError, match=r"`q0` must have shape \(3,\) to match coordinates"):
        models.Model(model.system, model.params, jnp.zeros(2), model.qd0, model.coordinates)


def test_kinematic_car_force_override_injects_controls():
    def controls(t, q, qd, p):
        F = p["F_drive"]
        return jnp.stack([F * jnp.cos(q[2]), F * jnp.sin(q[2]), 0.0 * F, 2.0 + 0.0 * F])

    default = models.kinematic_car(F_drive=0.5)
    custom = models.kinematic_car(force=controls, F_drive=0.5)
    assert custom.system.force is controls
    q, qd = jnp.array([0.1, 0.2, 0.3, 0.1]), jnp.zeros(4)
    Q = default.system.force(0.0, q, qd, default.params)
    np.testing.assert_allclose(Q, [0.5 * np.cos(0.3), 0.5 * np.sin(0.3), 0.0, 0.0], atol=1e-15)
    out = cx.accelerations(custom.system, 0.0, custom.q0, custom.qd0, custom.params)
    np.testing.assert_allclose(out.force, [0.5, 0.0, 0.0, 2.0], atol=1e-15)


@pytest.mark.parametrize("name", FACTORIES)
def test_every_model_built_twice_has_an_equal_system(name):
    # Module-level functions: rebuilding a model (or overriding its parameters) gives an
    # equal System, so jitted code is not recompiled.
    key, value = GRAD_PARAM[name]
    assert FACTORIES[name]().system == FACTORIES[name](**{key: value}).system


def test_models_built_twice_with_other_parameters_share_one_compilation():
    traces = []

    @eqx.filter_jit
    def qdd(system, q, qd, p):
        traces.append(None)
        return cx.accelerations(system, 0.0, q, qd, p).qdd

    for length in (1.0, 1.5):
        model = models.snake_cart(l=length)
        qdd(model.system, model.q0, model.qd0, model.params)
    assert len(traces) == 1


@eqx.filter_jit
def _short_rollout_jvp(system, q0, qd0, params, prescription, mu0, key, value):
    """Forward-mode derivative of a short fixed-step rollout w.r.t. `params[key]`."""

    def final_state(v):
        p = {**params, key: v}
        traj = cx.simulate(
            system,
            q0,
            qd0,
            p,
            t1=0.1,
            dt0=0.01,
            solver=diffrax.Euler(),
            stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=16,
            adjoint=diffrax.ForwardMode(),
            constraint_solver=cx.KKT(),
            throw=False,
            prescription=prescription,
            mu0=mu0,
            initial_tolerance=1e-3,  # the finite-difference points perturb q0's consistency by O(h)
        )
        return jnp.concatenate([traj.q[-1], traj.qd[-1]]), traj.result

    (y, result), (dy, _) = jax.jvp(final_state, (value,), (jnp.ones_like(value),))
    return y, dy, result == diffrax.RESULTS.successful


@pytest.mark.parametrize("name", FACTORIES)
def test_every_model_short_rollout_has_finite_parameter_gradient_matching_finite_differences(
    name,
):
    # Fixed-step Euler: the discrete map is smooth in the parameter, so its forward-mode
    # derivative equals the central difference up to O(h^2).
    model = FACTORIES[name]()
    key, _ = GRAD_PARAM[name]
    value = model.params[key]
    # Under d'Alembert the Heisenberg particle moves on straight lines whatever `k` (the
    # z row forces lambda = 0), so differentiate its vakonomic motion (mu0 != 0: circles).
    if name == "particle_heisenberg":
        prescription, mu0 = cx.Vakonomic(), jnp.ones(1)
    else:
        prescription, mu0 = cx.DAlembert(), None
    args = (model.system, model.q0, model.qd0, model.params, prescription, mu0, key)
    y, dy, ok = _short_rollout_jvp(*args, value)
    assert bool(ok)
    assert bool(jnp.all(jnp.isfinite(dy)))
    assert float(jnp.max(jnp.abs(dy))) > 1e-4  # a real dependence, not rounding noise
    h = 1e-5
    yp, _, _ = _short_rollout_jvp(*args, value + h)
    ym, _, _ = _short_rollout_jvp(*args, value - h)
    fd = (yp - ym) / (2 * h)
    np.testing.assert_allclose(dy, fd, rtol=1e-6, atol=1e-8)
