"""Rigid-body models in 3-D: the "must show" physics of issue 4.

References: an independent integration of Euler's equations (scipy DOP853), conservation
laws, the closed-form orbit of a ball on a turntable, the steady-precession relation of
the rolling disk from the literature, and Newton-Euler balances of each body of the disk
and link with accelerations from finite differences of the trajectory."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
import sympy.physics.mechanics as me
from scipy.integrate import solve_ivp

import constrax as cx
import constrax.rigid as rg
from constrax.models._rigid_models import (
    ball_on_turntable,
    disk_and_link,
    disk_and_link_contact_force,
    free_rigid_body,
    rolling_disk_spin_rate,
    tilted_rolling_disk,
    turntable_orbit,
)

TIGHT = diffrax.PIDController(rtol=1e-11, atol=1e-11)
EZ = jnp.array([0.0, 0.0, 1.0])


def _f64(**kw):
    """Overrides as strongly typed float64 arrays (no weak types: no recompilation)."""
    return {k: np.asarray(v, dtype=np.float64) for k, v in kw.items()}


# ----------------------------------------------------------------------------------------
# Free rigid body.


def _free_body_check(orientation, stabilisation):
    model = free_rigid_body(orientation=orientation)
    ts = jnp.linspace(0.0, 5.0, 26)
    p = model.params

    @jax.jit
    def rollout(q0, qd0, p):
        traj = cx.simulate(
            model.system,
            q0,
            qd0,
            p,
            t1=5.0,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=TIGHT,
            stabilisation=stabilisation,
            constraint_solver=cx.KKT(),
        )
        body = rg.RigidBody(p["mass"], p["inertia"], orientation)
        Om = jax.vmap(body.body_angular_velocity)(traj.q, traj.qd)
        pi = jax.vmap(body.angular_momentum)(traj.q, traj.qd)
        orth = rg.orthonormality_residual(jax.vmap(body.rotation)(traj.q))
        res = traj.constraint_residual().position
        return traj.q, Om, traj.energy(), pi, orth, res

    q, Om, E, pi, orth, res = rollout(model.q0, model.qd0, p)
    I = np.asarray(p["inertia"])
    ref = solve_ivp(
        lambda t, w: np.cross(I * w, w) / I,
        (0.0, 5.0),
        np.asarray(p["omega0"]),
        t_eval=np.asarray(ts),
        method="DOP853",
        rtol=1e-13,
        atol=1e-13,
    )
    assert np.max(np.abs(np.asarray(Om) - ref.y.T)) < 1e-9
    assert np.max(np.abs(E - E[0])) < 1e-9
    norm = jnp.linalg.norm(pi, axis=1)
    assert np.max(np.abs(norm - norm[0])) < 1e-9
    assert np.max(np.abs(pi - pi[0])) < 1e-9  # the whole spatial vector is conserved
    assert float(jnp.max(orth)) < 1e-9
    assert float(jnp.max(jnp.abs(res))) < 1e-9
    np.testing.assert_allclose(q[-1, :3], 5.0 * p["v0"], atol=1e-9)  # free flight of the centre


def test_free_rigid_body_follows_eulers_equations_and_conserves_energy_and_momentum():
    """Rotation-matrix coordinates (the gyroscopic affine body) with projection."""
    _free_body_check(rg.RotationMatrix(), cx.Projection(10.0, 10.0))


@pytest.mark.slow
def test_free_rigid_body_in_quaternions_follows_eulers_equations():
    _free_body_check(rg.Quaternion(), cx.Projection(10.0, 10.0))


# ----------------------------------------------------------------------------------------
# Ball on a turntable.


@pytest.fixture(scope="module")
def turntable_rollout():
    system = ball_on_turntable().system
    return jax.jit(
        lambda q0, qd0, p, ts: (
            cx.simulate(
                system,
                q0,
                qd0,
                p,
                t1=ts[-1],
                saveat=diffrax.SaveAt(ts=ts),
                stepsize_controller=TIGHT,
                constraint_solver=cx.KKT(),
            ).q
        )
    )


@pytest.mark.parametrize(
    "k", [0.4, 2.0 / 3.0, 0.25], ids=["homogeneous 2/7", "hollow 2/5", "k=1/4"]
)
def test_ball_on_turntable_circles_at_k_over_1_plus_k_times_omega(turntable_rollout, k):
    model = ball_on_turntable(**_f64(k=k, Omega=5.0, v0=[0.15, 0.1], r0=[0.2, -0.1], spin0=2.0))
    c, radius, nu = turntable_orbit(model.params)
    np.testing.assert_allclose(nu, k / (1 + k) * 5.0, rtol=1e-15)
    ts = jnp.linspace(0.0, 3.0 * 2 * jnp.pi / nu, 61)  # three orbits
    q = turntable_rollout(model.q0, model.qd0, model.params, ts)
    d0 = model.params["r0"] - c
    np.testing.assert_allclose(jnp.linalg.norm(d0), radius, rtol=1e-14)
    ang = nu * ts
    predicted = c + jnp.stack(
        [jnp.cos(ang) * d0[0] - jnp.sin(ang) * d0[1], jnp.sin(ang) * d0[0] + jnp.cos(ang) * d0[1]],
        1,
    )
    assert float(jnp.max(jnp.abs(q[:, :2] - predicted))) < 1e-7
    assert float(jnp.max(jnp.abs(q[:, 2] - model.params["radius"]))) < 1e-9


# ----------------------------------------------------------------------------------------
# Tilted rolling disk.


@pytest.fixture(scope="module")
def disk_rollout():
    model = tilted_rolling_disk()
    ts = jnp.linspace(0.0, 2.0, 21)

    @jax.jit
    def rollout(q0, qd0, p):
        traj = cx.simulate(
            model.system,
            q0,
            qd0,
            p,
            t1=2.0,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=TIGHT,
            constraint_solver=cx.KKT(),
        )
        return traj.q, traj.qd, jax.vmap(_precession_variables)(traj.q, traj.qd), traj.energy()

    return rollout


def _precession_variables(q, qd):
    """Tilt of the symmetry axis from the vertical, precession rate, spin omega_3, tilt rate
    (from omega = Omega e_z + phidot e_3 + thetadot a_1)."""
    body = rg.RigidBody(1.0, jnp.ones(3))
    e3 = body.rotation(q)[:, 2]
    w = body.angular_velocity(q, qd)
    c = e3[2]
    s2 = 1.0 - c**2
    Om = (w[2] - c * (w @ e3)) / s2
    a1 = jnp.cross(EZ, e3) / jnp.sqrt(s2)
    return jnp.arccos(c), Om, w @ e3, w @ a1


def test_tilted_rolling_disk_stays_in_steady_precession(disk_rollout):
    model = tilted_rolling_disk()
    p = model.params
    q, qd, (th, Om, w3, thd), E = disk_rollout(model.q0, model.qd0, p)
    # initial state on the literature relation Omega s [(I3 + m a^2) w3 - I1 Omega c] + m g a c = 0
    s, c = np.sin(p["tilt"]), np.cos(p["tilt"])
    rel = Om[0] * s * ((p["I3"] + p["mass"] * p["radius"] ** 2) * w3[0] - p["I1"] * Om[0] * c)
    rel = rel + p["mass"] * p["g"] * p["radius"] * c
    assert abs(float(rel)) < 1e-12
    np.testing.assert_allclose(th[0], p["tilt"], atol=1e-14)
    np.testing.assert_allclose(Om[0], p["precession"], atol=1e-12)
    # ... and stays there: tilt, precession rate and spin constant, no nutation
    assert float(jnp.ptp(th)) < 1e-8
    assert float(jnp.ptp(Om)) < 1e-8
    assert float(jnp.ptp(w3)) < 1e-8
    assert float(jnp.max(jnp.abs(thd))) < 1e-8
    # the centre runs on a horizontal circle of radius a |omega_3| / Omega about the vertical
    np.testing.assert_allclose(q[:, 2], p["radius"] * np.sin(p["tilt"]), atol=1e-9)
    speed = jnp.linalg.norm(qd[:, :3], axis=1)
    np.testing.assert_allclose(speed, p["radius"] * jnp.abs(w3[0]), rtol=1e-8)
    assert float(jnp.ptp(E)) < 1e-8


def test_tilted_rolling_disk_off_the_relation_nutates(disk_rollout):
    """Control: 5 % more spin than the relation allows is not a steady motion."""
    model = tilted_rolling_disk()
    _, _, (th, *_), _ = disk_rollout(model.q0, 1.05 * model.qd0, model.params)
    assert float(jnp.ptp(th)) > 1e-3


def test_rolling_disk_spin_rate_reproduces_the_spinning_coin_limit():
    """A coin spinning in place (centre at rest: omega_3 = 0) has Omega^2 = m g a / (I1 sin th),
    i.e. Omega^2 = 4 g / (a sin th) for a uniform disk (Moffatt 2000)."""
    p = tilted_rolling_disk().params
    th = 0.3
    Om = np.sqrt(4 * p["g"] / (p["radius"] * np.sin(th)))
    np.testing.assert_allclose(rolling_disk_spin_rate(th, Om, p), -Om * np.cos(th), rtol=1e-12)


def _sympy_rolling_disk():
    """Kane's equations of the rolling disk (yaw q1, lean q2, spin q3; generalized speeds the
    angular velocity in the lean frame), derived by `sympy.physics.mechanics` from the
    geometry: the material contact point is at rest and the centre is `r` above it along the
    lean frame's z axis. Returns the spatial angular acceleration and the state maps."""
    q1, q2, q3 = me.dynamicsymbols("q1 q2 q3")
    u1, u2, u3 = me.dynamicsymbols("u1 u2 u3")
    r, m, g, I1, I3 = sp.symbols("r m g I1 I3", positive=True)
    N = me.ReferenceFrame("N")
    Y = N.orientnew("Y", "Axis", [q1, N.z])
    L = Y.orientnew("L", "Axis", [q2, Y.x])
    R = L.orientnew("R", "Axis", [q3, L.y])  # disk axis R.y
    w_qd = R.ang_vel_in(N)
    R.set_ang_vel(N, u1 * L.x + u2 * L.y + u3 * L.z)
    C = me.Point("C")
    C.set_vel(N, 0)
    G = C.locatenew("G", r * L.z)
    G.v2pt_theory(C, N, R)
    disk = me.RigidBody("disk", G, R, m, (me.inertia(L, I1, I3, I1), G))
    kd = [me.dot(R.ang_vel_in(N) - w_qd, uv) for uv in L]
    KM = me.KanesMethod(N, q_ind=[q1, q2, q3], u_ind=[u1, u2, u3], kd_eqs=kd)
    KM.kanes_equations([disk], [(G, -m * g * N.z)])
    qs, us, ps, ud = [q1, q2, q3], [u1, u2, u3], [r, m, g, I1, I3], sp.symbols("ud1:4")
    acc = (
        R.ang_acc_in(N)
        .subs(KM.kindiffdict())
        .subs(dict(zip([u.diff() for u in us], ud, strict=True)))
    )
    MM = sp.lambdify((qs, us, ps), KM.mass_matrix, "numpy")
    F = sp.lambdify((qs, us, ps), KM.forcing, "numpy")
    A = sp.lambdify((qs, us, ps, ud), acc.to_matrix(N), "numpy")
    # body frame of the constrax disk (symmetry axis e3): (R.z, R.x, R.y); lean-frame z
    frames = sp.Matrix.hstack(*[v.to_matrix(N) for v in (R.z, R.x, R.y, L.z)])
    axes = sp.lambdify((qs,), frames, "numpy")
    omega = sp.lambdify((qs, us), R.ang_vel_in(N).to_matrix(N), "numpy")

    def angular_acceleration(q, u, p):
        udot = np.linalg.solve(MM(q, u, p), F(q, u, p)).ravel()
        return np.asarray(A(q, u, p, udot), float).ravel()

    return angular_acceleration, axes, omega


def test_rolling_disk_accelerations_match_kanes_equations_from_sympy():
    oracle, axes, omega = _sympy_rolling_disk()
    model = tilted_rolling_disk()
    p = model.params
    pv = [float(p[k]) for k in ("radius", "mass", "g", "I1", "I3")]
    body = rg.RigidBody(1.0, jnp.ones(3), name="disk")

    @jax.jit
    def omega_dot(q, qd, p):
        out = cx.accelerations(model.system, 0.0, q, qd, p, constraint_solver=cx.KKT())
        return jax.jvp(body.angular_velocity, (q, qd), (qd, out.qdd))[1]

    rng = np.random.default_rng(0)
    for _ in range(3):
        qs = np.array([rng.uniform(-3, 3), rng.uniform(-1.2, 1.2), rng.uniform(-3, 3)])
        us = 3.0 * rng.normal(size=3)
        frames = np.asarray(axes(qs), float)
        w = np.asarray(omega(qs, us), float).ravel()
        centre = pv[0] * frames[:, 3]  # contact point at the origin
        q, qd = body.state(centre, frames[:, :3], np.cross(w, centre), w)
        assert float(cx.constraint_residual(model.system, 0.0, q, qd, p).max()) < 1e-12
        expected = oracle(qs, us, pv)
        np.testing.assert_allclose(omega_dot(q, qd, p), expected, rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------------------------
# Disk and link.


def test_disk_and_link_contact_force_satisfies_newton_euler_for_each_body():
    model = disk_and_link()
    p = model.params
    h = 2e-4
    tc = jnp.array([0.2, 0.4, 0.6, 0.8])
    ts = jnp.concatenate([jnp.zeros(1), jnp.stack([tc - h, tc, tc + h], 1).ravel()])

    @jax.jit
    def rollout(q0, qd0, p):
        traj = cx.simulate(
            model.system,
            q0,
            qd0,
            p,
            t1=ts[-1],
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=TIGHT,
            constraint_solver=cx.KKT(),
        )
        out = traj.accelerations()
        F = disk_and_link_contact_force(traj.q, out.multipliers)  # along the trajectory
        return traj.q, traj.qd, F, out.reaction_power, traj.energy()

    q, qd, F, power, E = (np.asarray(x) for x in rollout(model.q0, model.qd0, p))
    assert np.all(np.abs(q[:, 3] - q[:, 0]) < 1.0)  # contact stays on the link (half length 1)
    mid = slice(2, None, 3)
    acc = (qd[3::3] - qd[1::3]) / (2 * h)  # central differences of the saved velocities
    q, F = q[mid], F[mid]
    n = np.stack([-np.sin(q[:, 2]), np.cos(q[:, 2])], 1)
    xc = q[:, 3:5] - p["a"] * n

    def cross2(a, b):
        return a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]

    tol = 2e-6 * np.max(np.abs(F))
    g = np.array([0.0, -p["g"]])
    # disk: m_d c'' = F + m_d g; J_d theta'' = (x_c - c) x F
    np.testing.assert_allclose(p["m_d"] * acc[:, 3:5], F + p["m_d"] * g, atol=tol)
    np.testing.assert_allclose(p["J_d"] * acc[:, 5], cross2(xc - q[:, 3:5], F), atol=tol)
    # link: m_l y1'' = -F_x (rail frictionless); J_l theta2'' = (x_c - p) x (-F) - k_l theta2
    np.testing.assert_allclose(p["m_l"] * acc[:, 0], -F[:, 0], atol=tol)
    np.testing.assert_allclose(
        p["J_l"] * acc[:, 2], cross2(xc - q[:, 0:2], -F) - p["k_l"] * q[:, 2], atol=tol
    )
    # the normal force pushes the disk off the link, and the reactions do no work
    assert np.all(np.sum(F * n, 1) > 0)
    assert np.max(np.abs(power)) < 1e-9
    assert np.ptp(E) < 1e-9
    P = p["m_l"] * qd[:, 0] + p["m_d"] * qd[:, 3]  # no horizontal external force
    assert np.ptp(P) < 1e-12


def test_rigid_models_start_on_their_constraints():
    for model in (free_rigid_body(), tilted_rolling_disk(), ball_on_turntable(), disk_and_link()):
        res = cx.constraint_residual(model.system, 0.0, model.q0, model.qd0, model.params)
        assert float(res.max()) < 1e-12
        assert len(model.coordinates) == model.q0.shape[0]


def test_rigid_models_reject_bad_parameters():
    with pytest.raises(ValueError, match="unknown parameter 'radius'"):
        free_rigid_body(radius=1.0)
    with pytest.raises(ValueError, match="`mass` must be positive"):
        free_rigid_body(mass=-1.0)
    with pytest.raises(TypeError, match="`orientation` must be"):
        tilted_rolling_disk(orientation="euler")
    with pytest.raises(ValueError, match=r"`multipliers` \(\.\.\., 3\)"):
        disk_and_link_contact_force(jnp.zeros(6), jnp.zeros(2))
