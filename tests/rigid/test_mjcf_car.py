"""MuJoCo's own car (`tests/rigid/assets/mujoco_car.xml`, copied unmodified from the MuJoCo
repository's `model/car/car.xml`, Apache-2.0): a model nobody here wrote, imported as it is.

A free chassis on two wheel hinges, driven through two fixed tendons (`forward`: both wheels
with coefficient 1/2, `turn`: -1/2 and 1/2) by two motors with `ctrlrange="-1 1"`; every
joint has `actuatorfrcrange="-0.5 0.5"`, which MuJoCo applies to the actuators' total
generalized force on the joint (`qfrc_actuator`), and damping 0.03. A frictionless
(`condim="1"`) sphere is the front caster.

References nobody here derived:

- MuJoCo's C engine on the same `MjModel` (contacts disabled): `qfrc_actuator`,
  `mj_fullM` and `qacc` after `mj_forward`, at states and controls that drive both clamps;
- rolling without slip (`cx.rigid.rolling_contact` on the two wheels, a frictionless
  `plane_contact` for the caster, the car's geometry read from the file): the kinematics of
  a differential drive, yaw rate $= r(\\omega_R - \\omega_L)/b$ with the wheel radius
  $r = 0.03$ and the track $b = 0.12$ written in the file, and the energy balance of ideal
  constraints, $E(t) - E(0) = \\int_0^t Q\\cdot\\dot q\\,ds$ (the reactions do no work).
"""

from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

mujoco = pytest.importorskip("mujoco")

from test_mjcf import _full_mass_matrix  # noqa: E402  (tests/rigid is on sys.path under pytest)

CAR = str(Path(__file__).parent / "assets" / "mujoco_car.xml")
RADIUS, TRACK = 0.03, 0.12  # the wheels' cylinder size and their y = +-0.06 in car.xml


def _car():
    m = mujoco.MjModel.from_xml_path(CAR)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    return m


def _states(m, n, seed=0):
    """Random states and controls, the controls up to twice the ctrlrange."""
    rng = np.random.default_rng(seed)
    qpos = m.qpos0 + 0.3 * rng.normal(size=(n, m.nq))
    qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
    return qpos, rng.normal(size=(n, m.nv)), rng.uniform(-2.0, 2.0, size=(n, m.nu))


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - b)) / max(np.max(np.abs(b)), 1e-300))


def test_car_tendon_drive_and_joint_force_ranges_match_mujoco():
    m = _car()
    car = cx.rigid.from_mjcf(m)
    qpos, qvel, ctrl = _states(m, 8)
    data = mujoco.MjData(m)
    ref_qacc, ref_actuator, ref_M = [], [], []
    for k in range(len(qpos)):
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[k], qvel[k], ctrl[k]
        mujoco.mj_forward(m, data)
        ref_qacc.append(data.qacc.copy())
        ref_actuator.append(data.qfrc_actuator.copy())
        ref_M.append(_full_mass_matrix(m, data))
    ref_actuator = np.array(ref_actuator)
    # Both clamps act in the sample: a wheel's actuator force at the joint's range, and a
    # control beyond the ctrlrange.
    assert np.any(np.isclose(np.abs(ref_actuator[:, 6:]), 0.5))
    assert np.any(np.abs(ctrl) > 1.0)

    q, qd = car.from_mujoco_state(qpos, qvel)

    @jax.jit
    @jax.vmap
    def ours(q, qd, u):
        p = dict(car.params, ctrl=u)
        qdd = cx.accelerations(car.system, 0.0, q, qd, p).qdd
        v = car.tree.qvel(q, qd)
        # The actuators' generalized force in MuJoCo's dofs: the force without them
        # (zero controls, no actuation) subtracted, mapped by G^T (qvel = J qd, J G = 1).
        passive = dict(p, actuator_gainprm=0.0 * p["actuator_gainprm"])
        Q = car.system.force(0.0, q, qd, p) - car.system.force(0.0, q, qd, passive)
        G = jax.jacfwd(lambda w: car.from_mujoco_state(car.to_mujoco_state(q, qd)[0], w)[1])(v)
        return car.mujoco_acceleration(q, qd, qdd), G.T @ Q, car.mujoco_mass_matrix(q, p)

    qacc, actuator, M = ours(q, qd, jnp.asarray(ctrl))
    assert _rel(actuator, ref_actuator) <= 1e-12
    assert _rel(M, np.array(ref_M)) <= 1e-12
    assert _rel(qacc, np.array(ref_qacc)) <= 1e-10


def test_car_acceleration_gradient_in_the_controls_equals_central_differences():
    """jax.jacfwd of MuJoCo's qacc in `ctrl`, inside the ranges (both tendons reach both
    wheels) and where the joint range clamps (that wheel's column vanishes)."""
    m = _car()
    car = cx.rigid.from_mjcf(m)
    qpos, qvel, _ = _states(m, 1, seed=3)
    q, qd = car.from_mujoco_state(qpos[0], qvel[0])

    def qacc(u):
        p = dict(car.params, ctrl=u)
        return car.mujoco_acceleration(q, qd, cx.accelerations(car.system, 0.0, q, qd, p).qdd)

    jac = jax.jit(jax.jacfwd(qacc))
    for u in (jnp.array([0.3, -0.2]), jnp.array([0.9, 0.8])):  # left 0.05/0.85: clamped
        J = np.asarray(jac(u))
        h = 1e-6
        fd = np.stack([(qacc(u + h * e) - qacc(u - h * e)) / (2 * h) for e in jnp.eye(2)], axis=1)
        # central differences carry ~eps |qacc| / h of round-off
        np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())
    assert np.abs(J[6:]).max() > 0  # the unclamped wheel still responds


def _rolling_car():
    m = _car()
    imported = cx.rigid.from_mjcf(m)
    body_id = lambda name: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
    # The wheels' cylinder geoms are unnamed: MuJoCo's geom ids, the first geom of each body.
    left = imported.wheel(int(m.body_geomadr[body_id("left wheel")]), name="left")
    right = imported.wheel(int(m.body_geomadr[body_id("right wheel")]), name="right")
    car = imported.with_constraints(
        cx.rigid.rolling_contact(*left),
        cx.rigid.rolling_contact(*right),
        cx.rigid.plane_contact(*imported.wheel("front wheel")),  # condim 1: frictionless
    )
    return car, left[0], right[0]


@pytest.mark.slow
def test_car_rolls_without_slip_as_a_differential_drive_and_its_actuators_supply_the_energy():
    car, left, right = _rolling_car()
    # forward 1, turn 0.6: the left wheel's torque 0.2, the right's 0.8 clamped to 0.5.
    p = dict(car.params, ctrl=jnp.array([1.0, 0.6]))
    q0, qd0 = cx.consistent_initial_state(car.system, 0.0, *car.initial_state(), p)
    ts = jnp.linspace(0.0, 2.0, 8001)
    traj = cx.simulate(
        car.system,
        q0,
        qd0,
        p,
        t1=2.0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-11),
        constraint_solver=cx.UdwadiaKalaba(),  # the two lateral no-slip rows are redundant
    )
    qs, qds = traj.q, traj.qd
    res = jax.vmap(lambda q, qd: cx.constraint_residual(car.system, 0.0, q, qd, p))(qs, qds)
    assert float(jnp.max(jnp.abs(res.position))) <= 1e-9  # on the ground, quaternion unit
    assert float(jnp.max(jnp.abs(res.velocity))) <= 1e-9  # no slip, no lift-off

    i_left, i_right = car.coordinates.index("left"), car.coordinates.index("right")
    chassis = car.body("car")
    yaw_rate = jax.vmap(lambda q, qd: chassis.angular_velocity(q, qd)[2])(qs, qds)
    expected = RADIUS * (qds[:, i_right] - qds[:, i_left]) / TRACK
    assert float(jnp.max(jnp.abs(yaw_rate))) > 0.5  # it does turn
    np.testing.assert_allclose(yaw_rate, expected, atol=1e-9)

    # The work of the forces (actuators and damping) by Simpson's rule on the saved grid,
    # against the energy at every second point. The quadrature's own error, from the
    # wheels' spin-up in the first milliseconds, is 4e-8 of the energy gained on this grid
    # (6e-7 on a grid half as fine: Simpson's h^4).
    energy = jax.vmap(lambda q, qd: cx.energy(car.system, 0.0, q, qd, p))(qs, qds)
    power = np.asarray(jax.vmap(lambda q, qd: car.system.force(0.0, q, qd, p) @ qd)(qs, qds))
    h = float(ts[1] - ts[0])
    work = np.concatenate(
        [[0.0], np.cumsum(h / 3 * (power[:-2:2] + 4 * power[1::2] + power[2::2]))]
    )
    gained = np.asarray(energy[::2] - energy[0])
    gap = np.abs(gained - work).max()
    print(f"energy gained {gained[-1]:.6e}, work {work[-1]:.6e}, largest gap {gap:.1e}")
    np.testing.assert_allclose(gained, work, atol=1e-7 * np.abs(gained).max())
