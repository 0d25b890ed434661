"""`cx.rigid.from_mjcf` against MuJoCo itself (issue 14, "From MJCF").

Reference: MuJoCo's own C engine on the same compiled `MjModel`, contacts and limits
disabled (`mjDSBL_CONTACT | mjDSBL_LIMIT`): `mj_fullM` for the mass matrix and `data.qacc`
after `mj_forward` for the accelerations, at random states and controls; `mj_step` with
`mjINT_RK4` for rollouts; `data.xpos`/`data.xmat` and `mj_objectVelocity` for the
kinematics; `data.efc_pos` for the equality constraint rows.

State map used throughout (documented in docs/interop/mjcf.md): `q` is `qpos` with unit
quaternions; `qvel = J(q) qd` (hinge/slide: qd; ball: 2 vec(conj(x) * xd); free: (linear
velocity of the origin in the world, 2 vec(conj(x) * xd))). MuJoCo's mass matrix is
compared with G^T W G, G = d qd / d qvel, and its qacc with J qdd + Jdot qd.

Models that no one here wrote are loaded from the installed `gymnasium` package (its
MuJoCo assets); the test skips without it. Errors are relative to the largest entry of the
MuJoCo reference.
"""

import os
import pathlib
import sys
import warnings

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from benchmarks._cases import RK4  # noqa: E402

mujoco = pytest.importorskip("mujoco")

D = mujoco.mjtDisableBit
NO_CONTACT_LIMIT = int(D.mjDSBL_CONTACT) | int(D.mjDSBL_LIMIT)


def _asset(name: str) -> str:
    gymnasium = pytest.importorskip("gymnasium")
    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", name)
    if not os.path.exists(path):
        pytest.skip(f"gymnasium does not ship {name}")
    return path


def _gym_model(name: str):
    m = mujoco.MjModel.from_xml_path(_asset(f"{name}.xml"))
    m.opt.disableflags |= NO_CONTACT_LIMIT
    return m


# A hand-written model for ball joints (no shipped model has one), a free root, armature
# on a ball joint, springs with springref and ref, and all actuator kinds converted.
BALL_XML = """
<mujoco model="ball_chain">
  <option gravity="0.3 -0.2 -9.81"/>
  <worldbody>
    <body name="base" pos="0 0 1" quat="0.9 0.1 0.2 0.3">
      <freejoint name="root"/>
      <geom type="box" size=".2 .1 .05" mass="2"/>
      <body name="arm" pos="0.2 0 0">
        <joint name="shoulder" type="ball" pos="0.05 0 0" damping="0.3" armature="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
        <body name="forearm" pos="0.4 0 0" euler="0 30 0">
          <joint name="elbow" type="hinge" axis="0 1 1" stiffness="4" springref="20"
                 damping="0.1" ref="10" armature="0.02"/>
          <joint name="slide" type="slide" axis="1 0 0" stiffness="2" ref="0.1"/>
          <geom type="ellipsoid" size="0.1 0.05 0.03" pos="0.1 0 0" euler="10 20 30"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m" joint="elbow" gear="2" ctrlrange="-1 1" ctrllimited="true"/>
    <position name="pos" joint="slide" kp="30" kv="3"/>
    <general name="g" joint="elbow" gaintype="affine" gainprm="1 0.5 0.2" biastype="affine"
             biasprm="0.1 -1 -0.2" forcerange="-3 3" forcelimited="true"/>
  </actuator>
</mujoco>"""

# Closed loops and glue: connect, weld and joint equality constraints.
EQUALITY_XML = """
<mujoco model="loops">
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="ha" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02"/>
      <body name="a2" pos="0.5 0 0">
        <joint name="ha2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02"/>
      </body>
    </body>
    <body name="b" pos="1 0 1">
      <joint name="hb" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/>
    </body>
    <body name="box" pos="0.3 0.2 1.2">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05"/>
    </body>
    <body name="c" pos="0 1 1">
      <joint name="hc1" type="hinge" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/>
      <body name="c2" pos="0 0 -0.3">
        <joint name="hc2" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/>
      </body>
    </body>
  </worldbody>
  <equality>
    <connect name="loop" body1="a2" body2="b" anchor="0.5 0 0"/>
    <weld name="glue" body1="box" body2="a"/>
    <joint name="couple" joint1="hc2" joint2="hc1" polycoef="0.1 0.5 0.2 0 0"/>
  </equality>
</mujoco>"""


# MuJoCo 4's polynomial damping -(d0 + d1|v| + d2 v^2) v and stiffness
# -(k0 d + k1 d^2 + k2 d^3), and actuators in groups (`actuatorgroupdisable` switches some off;
# groups outside 0-30 are never disabled).
POLY_XML = """
<mujoco model="poly">
  <OPTION
  <worldbody>
    <body name="b" pos="0 0 1">
      <joint name="j" type="hinge" axis="0 1 0" damping="0.1 0.8 0.3" stiffness="1 3 2"
             springref="10"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 -0.3" size="0.05" contype="0" conaffinity="0"/>
      <body name="c" pos="0.4 0 -0.3">
        <joint name="k" type="slide" axis="1 0 0.3" damping="0 0.5" stiffness="0.5 0 4"/>
        <geom type="sphere" size="0.1" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="a" joint="j" group="2"/>
    <motor name="b" joint="k" gear="2"/>
    <motor name="c" joint="j" group="31"/>
  </actuator>
</mujoco>"""


def _poly_model(option: str = ""):
    if not hasattr(mujoco.MjModel, "dof_dampingpoly"):
        pytest.skip("polynomial damping and stiffness are MuJoCo 4's")
    return mujoco.MjModel.from_xml_string(POLY_XML.replace("<OPTION", option))


def _full_mass_matrix(m, data):
    M = np.zeros((m.nv, m.nv))
    try:
        mujoco.mj_fullM(m, data, M)  # MuJoCo >= 3.4: (model, data, dst)
    except TypeError:
        mujoco.mj_fullM(m, M, data.qM)  # older: (model, dst, qM)
    return M


def _ball_model():
    m = mujoco.MjModel.from_xml_string(BALL_XML)
    m.opt.disableflags |= int(D.mjDSBL_CONTACT)
    return m


def _random_state(m, imported, rng):
    """A random qpos (unit quaternions, perturbed hinges/slides), qvel and ctrl (partly
    outside ctrlrange, so clamping is exercised)."""
    qpos = np.array(m.qpos0) + 0.7 * rng.normal(size=m.nq)
    for s, e in imported.tree.quaternion_slices():
        x = rng.normal(size=4)
        qpos[s:e] = x / np.linalg.norm(x)
    qvel = rng.normal(size=m.nv)
    ctrl = rng.uniform(-1.5, 1.5, size=m.nu)
    return qpos, qvel, ctrl


def _compare_forward(m, n_states: int, seed: int = 0):
    """Max relative errors of the mass matrix and of qacc over `n_states` random states."""
    imported = cx.rigid.from_mjcf(m)
    data = mujoco.MjData(m)
    rng = np.random.default_rng(seed)

    @jax.jit
    def ours(q, qd, p):
        qdd = cx.accelerations(imported.system, 0.0, q, qd, p).qdd
        return imported.mujoco_mass_matrix(q, p), imported.mujoco_acceleration(q, qd, qdd)

    err_M = err_a = 0.0
    for _ in range(n_states):
        qpos, qvel, ctrl = _random_state(m, imported, rng)
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(m, data)
        M_ref = _full_mass_matrix(m, data)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        M, qacc = ours(q, qd, dict(imported.params, ctrl=jnp.asarray(ctrl)))
        err_M = max(err_M, np.max(np.abs(M - M_ref)) / np.max(np.abs(M_ref)))
        err_a = max(err_a, np.max(np.abs(qacc - data.qacc)) / np.max(np.abs(data.qacc)))
    return err_M, err_a


FAST_MODELS = ["inverted_pendulum"]
SLOW_MODELS = [
    "inverted_double_pendulum",
    "reacher",
    "hopper",
    "half_cheetah",
    "walker2d",
    "ant",
    "humanoid",
]


@pytest.mark.parametrize(
    "name", FAST_MODELS + [pytest.param(n, marks=pytest.mark.slow) for n in SLOW_MODELS]
)
def test_mass_matrix_and_qacc_match_mujoco(name):
    err_M, err_a = _compare_forward(_gym_model(name), n_states=20)
    print(f"{name}: max rel err M {err_M:.2e}, qacc {err_a:.2e}")
    assert err_M <= 1e-9
    assert err_a <= 1e-9


@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_float32_accelerations_keep_their_digits_far_from_the_world_origin(offset):
    """float32 `cx.accelerations` of the humanoid, imported and run with x64 off, against
    MuJoCo's float64 `qacc`, at its own position and with its root carried 100 m along x.

    The tree's spatial quantities are taken about the root body's origin: about the world
    origin the inertias' $m|c|^2$ terms cancel and float32 lost three digits at 10 m (worst
    1.5e-2 there, 2.6e-4 at the model's own position, measured before the change). MJX's
    float32 `forward` was measured at 8e-6 and 3.4e-5 worst on the same states
    (`benchmarks/float32_accuracy.py`); the bound leaves room over constrax's measured
    2e-5 / 3.7e-5 (8 states) for other draws."""
    m = _gym_model("humanoid")
    imported = cx.rigid.from_mjcf(m)
    rng = np.random.default_rng(0)
    qpos, qvel = np.zeros((8, m.nq)), np.zeros((8, m.nv))
    ctrl = rng.uniform(-1, 1, size=(8, m.nu))
    data, ref = mujoco.MjData(m), []
    for k in range(8):
        qpos[k], qvel[k], _ = _random_state(m, imported, rng)
        qpos[k, 0] += offset
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[k], qvel[k], ctrl[k]
        mujoco.mj_forward(m, data)
        ref.append(data.qacc.copy())
    q, qd = imported.from_mujoco_state(qpos, qvel)
    with jax.enable_x64(False):
        imported32 = cx.rigid.from_mjcf(m)
        p = {k: jnp.asarray(v, jnp.float32) for k, v in imported32.params.items()}

        def acc(q, qd, u):
            return cx.accelerations(imported32.system, 0.0, q, qd, dict(p, ctrl=u)).qdd

        f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
        qdd = jax.jit(jax.vmap(acc))(f32(q), f32(qd), f32(ctrl))
        assert qdd.dtype == jnp.float32
        qdd = np.asarray(qdd, np.float64)
    qacc = jax.vmap(imported.mujoco_acceleration)(jnp.asarray(q), jnp.asarray(qd), qdd)
    ref = np.array(ref)
    err = np.max(np.abs(np.asarray(qacc) - ref), 1) / np.max(np.abs(ref), 1)
    print(f"offset {offset} m: median {np.median(err):.1e}, worst {np.max(err):.1e}")
    assert np.max(err) <= 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hopper", "walker2d", "ant", "humanoid"])
def test_imported_models_roll_out_in_float32_with_the_defaults_as_in_float64(name):
    """A batch of 16 imported gymnasium models, 100 fixed steps of the model's time step
    with the defaults, `diffrax.Euler` and `cx.SemiImplicitEuler`, imported and run with
    x64 off: no check raises, every state is finite, and the final states agree with the
    float64 run (relative to the largest coordinate of each; measured 3.6e-7 to 5.4e-7,
    2026-11-29)."""
    import diffrax

    m = _gym_model(name)
    velocities = 0.3 * np.random.default_rng(5).normal(size=(16, m.nq))

    def rollouts(dtype):
        imported = cx.rigid.from_mjcf(m)
        q0, _ = imported.initial_state()
        qd = jnp.asarray(velocities, dtype)
        p = {k: jnp.asarray(v, dtype) for k, v in imported.params.items()}
        dt = float(m.opt.timestep)
        out = []
        for solver in (diffrax.Euler(), cx.SemiImplicitEuler()):

            def run(v, solver=solver):
                q, v = cx.consistent_initial_state(imported.system, 0.0, q0.astype(dtype), v, p)
                tr = cx.simulate(
                    imported.system, q, v, p, t1=100 * dt, dt0=dt, solver=solver,
                    stepsize_controller=diffrax.ConstantStepSize(), max_steps=101,
                )  # fmt: skip
                return jnp.concatenate([tr.q[-1], tr.qd[-1]])

            out.append(np.asarray(jax.jit(jax.vmap(run))(qd), np.float64))
        return np.stack(out)

    with jax.enable_x64(False):
        out32 = rollouts(jnp.float32)
    out64 = rollouts(jnp.float64)
    assert np.all(np.isfinite(out32))
    err = np.max(np.abs(out32 - out64), -1) / np.maximum(1.0, np.max(np.abs(out64), -1))
    print(f"{name}: float32 final states off by {err.max():.1e} (Euler, SIE)")
    assert err.max() <= 1e-5


def test_ball_joints_actuators_springs_armature_match_mujoco():
    err_M, err_a = _compare_forward(_ball_model(), n_states=20, seed=1)
    assert err_M <= 1e-9
    assert err_a <= 1e-9


@pytest.mark.parametrize(
    "option", ["", '<option actuatorgroupdisable="2"/>', '<option actuatorgroupdisable="0 2"/>']
)
def test_polynomial_damping_stiffness_and_actuator_groups_match_mujoco(option):
    """MuJoCo 4's `damping="d0 d1 d2"` and `stiffness="k0 k1 k2"` and the actuator groups
    that `<option actuatorgroupdisable>` switches off: MuJoCo's mj_fullM and qacc (before,
    the higher coefficients and the disabled groups were dropped: qacc off by 26-67 %)."""
    err_M, err_a = _compare_forward(_poly_model(option), n_states=10, seed=2)
    assert err_M <= 1e-9
    assert err_a <= 1e-9


def test_polynomial_coefficients_are_differentiable_parameters():
    """d qdd / d(jnt_stiffnesspoly, dof_dampingpoly) by jax.grad equals central differences."""
    imported = cx.rigid.from_mjcf(_poly_model())
    q, qd = jnp.array([0.4, -0.3]), jnp.array([1.2, -0.7])

    def qdd(k, d):
        p = dict(imported.params, jnt_stiffnesspoly=k, dof_dampingpoly=d)
        return cx.accelerations(imported.system, 0.0, q, qd, p).qdd @ jnp.array([1.0, 0.3])

    k, d = imported.params["jnt_stiffnesspoly"], imported.params["dof_dampingpoly"]
    gk, gd = jax.jit(jax.grad(qdd, argnums=(0, 1)))(k, d)
    h = 1e-6
    for g, x, which in ((gk, k, 0), (gd, d, 1)):
        for idx in np.ndindex(*x.shape):
            e = jnp.zeros_like(x).at[idx].set(h)
            args = [k, d]
            args[which] = x + e
            hi = qdd(*args)
            args[which] = x - e
            fd = (hi - qdd(*args)) / (2 * h)
            assert abs(float(g[idx]) - float(fd)) <= 1e-7 * max(1.0, abs(float(fd)))
    assert np.abs(np.asarray(gk)).max() > 0 and np.abs(np.asarray(gd)).max() > 0


def test_kinematics_and_state_map_match_mujoco():
    """Body frames equal data.xpos/xmat; body velocities from (q, qd) equal MuJoCo's
    mj_objectVelocity at qvel = J qd; the state map round-trips."""
    m = _ball_model()
    imported = cx.rigid.from_mjcf(m)
    data = mujoco.MjData(m)
    rng = np.random.default_rng(2)
    frames = jax.jit(lambda q, qd: jax.jvp(imported.tree.frames, (q,), (qd,)))
    for _ in range(5):
        qpos, qvel, _ = _random_state(m, imported, rng)
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, data)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        (xpos, xmat), (xpos_d, xmat_d) = frames(q, qd)
        np.testing.assert_allclose(xpos, data.xpos, atol=1e-12)
        np.testing.assert_allclose(xmat.reshape(-1, 9), data.xmat, atol=1e-12)
        for b in range(1, m.nbody):
            ref = np.zeros(6)  # (angular, linear) of the body frame's origin, world axes
            mujoco.mj_objectVelocity(m, data, mujoco.mjtObj.mjOBJ_XBODY, b, ref, 0)
            W = xmat_d[b] @ xmat[b].T
            omega = np.array([W[2, 1], W[0, 2], W[1, 0]])
            np.testing.assert_allclose(omega, ref[:3], atol=1e-12)
            np.testing.assert_allclose(xpos_d[b], ref[3:], atol=1e-12)
        qpos2, qvel2 = imported.to_mujoco_state(q, qd)
        np.testing.assert_allclose(qpos2, qpos, atol=1e-14)
        np.testing.assert_allclose(qvel2, qvel, atol=1e-13)
        q3, qd3 = imported.from_mujoco_state(qpos2, qvel2)
        np.testing.assert_allclose(q3, q, atol=1e-14)
        np.testing.assert_allclose(qd3, qd, atol=1e-13)
    # A non-unit MuJoCo quaternion is normalised (MuJoCo normalises it in its kinematics).
    q, _ = imported.from_mujoco_state(3.0 * np.asarray(m.qpos0), np.zeros(m.nv))
    s, e = imported.tree.quaternion_slices()[0]
    np.testing.assert_allclose(np.linalg.norm(q[s:e]), 1.0, atol=1e-15)
    assert imported.coordinates[:7] == ("root.x", "root.y", "root.z") + tuple(
        f"root.q{c}" for c in "wxyz"
    )
    assert imported.dofs[3:6] == ("root.wx", "root.wy", "root.wz")


def test_equality_rows_equal_mujocos_constraint_positions():
    """Connect, weld and joint rows equal MuJoCo's efc_pos of the same equalities (weld
    orientation rows up to the sign of MuJoCo's quaternion conj(q2) q1 relpose)."""
    m = mujoco.MjModel.from_xml_string(EQUALITY_XML)
    m.opt.disableflags |= int(D.mjDSBL_CONTACT)
    imported = cx.rigid.from_mjcf(m)
    names = [c.name for c in imported.system.constraints]
    assert names[0].endswith(".orientation")  # the box's free-joint quaternion
    assert names[1:] == ["loop.connect", "glue.weld", "couple.joint"]
    eq_rows = jax.jit(
        lambda q: jnp.concatenate(
            [c.position_residual(0.0, q, imported.params) for c in imported.system.constraints[1:]]
        )
    )
    data = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    box = imported.body_names.index("box")
    for _ in range(5):
        data.qpos[:] = np.array(m.qpos0) + 0.3 * rng.normal(size=m.nq)
        mujoco.mj_forward(m, data)
        rows = data.efc_type == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY)
        ref = np.array(data.efc_pos[rows])
        q, _ = imported.from_mujoco_state(data.qpos, data.qvel)
        ours = np.array(eq_rows(q))
        # MuJoCo's weld quaternion conj(q2) * q1 * relpose: the sign of its scalar part.
        quat, tmp, neg = np.zeros(4), np.zeros(4), np.zeros(4)
        mujoco.mju_mulQuat(tmp, data.xquat[box], m.eq_data[1, 6:10])
        mujoco.mju_negQuat(neg, data.xquat[imported.body_names.index("a")])
        mujoco.mju_mulQuat(quat, neg, tmp)
        ours[6:9] *= np.sign(quat[0])
        np.testing.assert_allclose(ours, ref, atol=1e-12)


def _rollout_error(m, steps: int, seed: int = 4):
    """Max |difference| of qpos (unit quaternions) and qvel after RK4 rollouts of the same
    step in constrax (diffrax) and MuJoCo (mj_step, mjINT_RK4), relative to max |qvel|."""
    m.opt.integrator = int(mujoco.mjtIntegrator.mjINT_RK4)
    imported = cx.rigid.from_mjcf(m)
    data = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    data.qpos[:] = np.array(m.qpos0) + 0.3 * rng.normal(size=m.nq)
    data.qvel[:] = rng.normal(size=m.nv)
    data.ctrl[:] = rng.uniform(-1.0, 1.0, size=m.nu)
    mujoco.mj_forward(m, data)
    q0, qd0 = imported.from_mujoco_state(data.qpos, data.qvel)
    p = dict(imported.params, ctrl=jnp.asarray(data.ctrl))
    dt = m.opt.timestep
    ts = dt * np.arange(1, steps + 1)
    traj = cx.simulate(
        imported.system,
        q0,
        qd0,
        p,
        t1=float(ts[-1]),
        dt0=dt,
        solver=RK4(),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(ts=jnp.asarray(ts)),
    )
    qpos, qvel = [], []
    for _ in range(steps):
        mujoco.mj_step(m, data)
        qpos.append(data.qpos.copy())
        qvel.append(data.qvel.copy())
    qpos, qvel = np.array(qpos), np.array(qvel)
    our_qpos, our_qvel = (np.array(x) for x in imported.to_mujoco_state(traj.q, traj.qd))
    for s, e in imported.tree.quaternion_slices():
        our_qpos[:, s:e] /= np.linalg.norm(our_qpos[:, s:e], axis=1, keepdims=True)
    scale = np.max(np.abs(qvel))
    return np.max(np.abs(our_qpos - qpos)) / scale, np.max(np.abs(our_qvel - qvel)) / scale


def test_rollout_matches_mujoco_rk4_hinges():
    """Hinge/slide coordinates: MuJoCo's RK4 is the classical RK4 on (qpos, qvel), so the
    two rollouts agree to rounding."""
    err_q, err_v = _rollout_error(_gym_model("inverted_pendulum"), steps=100)
    assert err_q < 1e-11 and err_v < 1e-11


@pytest.mark.slow
def test_rollout_matches_mujoco_rk4_quaternions():
    """Ball and free joints: MuJoCo integrates quaternions on the sphere (mj_integratePos),
    constrax integrates their coordinates with the norm row; both are fourth order, so the
    rollouts agree to the difference of the two fourth-order schemes (measured 1.3e-11 in
    qpos and 8.4e-11 in qvel, relative to max |qvel|, at dt = 2 ms over 100 steps)."""
    err_q, err_v = _rollout_error(_ball_model(), steps=100)
    print(f"rollout differences (relative to max |qvel|): qpos {err_q:.2e}, qvel {err_v:.2e}")
    assert err_q < 1e-8 and err_v < 1e-8


def test_parameters_are_differentiable():
    """The derivative of the accelerations along a direction in (damping, masses) equals
    a central finite difference."""
    m = _gym_model("inverted_pendulum")
    imported = cx.rigid.from_mjcf(m)
    q, qd = imported.from_mujoco_state(np.array([0.1, 0.4]), np.array([0.3, -1.0]))

    @jax.jit
    def qacc(theta):
        p = dict(imported.params, dof_damping=theta[0], body_mass=theta[1])
        return cx.accelerations(imported.system, 0.0, q, qd, p).qdd

    theta = (imported.params["dof_damping"], imported.params["body_mass"])
    rng = np.random.default_rng(5)
    v = tuple(jnp.asarray(rng.normal(size=x.shape)) for x in theta)
    dqacc = jax.jit(lambda th, v: jax.jvp(qacc, (th,), (v,))[1])(theta, v)
    h = 1e-6
    shift = lambda s: tuple(x + s * y for x, y in zip(theta, v, strict=True))
    fd = (qacc(shift(h)) - qacc(shift(-h))) / (2 * h)
    np.testing.assert_allclose(dqacc, fd, rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------------------------------------
# Wheels.

WHEEL_XML = """
<mujoco model="wheel">
  <worldbody>
    <body name="cart" pos="0 0 0.2">
      <freejoint name="root"/>
      <geom name="chassis" type="box" size="0.2 0.1 0.05" contype="0" conaffinity="0"/>
      <body name="wheel" pos="0.1 0 0">
        <joint name="axle" type="hinge" axis="0 1 0"/>
        <geom name="tyre" type="cylinder" size="0.1 0.02" euler="90 0 0" contype="0"
              conaffinity="0"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_wheel_frame_and_shape():
    imported = cx.rigid.from_mjcf(WHEEL_XML)
    body, shape = imported.wheel("tyre")
    assert isinstance(body, cx.rigid.TreeBody) and isinstance(shape, cx.rigid.Disk)
    # Both kinds of body share the builders' interface; a TreeBody has no block of q.
    assert isinstance(body, cx.rigid.AbstractRigidBody)
    assert isinstance(cx.rigid.RigidBody(1.0, jnp.ones(3)), cx.rigid.AbstractRigidBody)
    assert not isinstance(body, cx.rigid.RigidBody)
    for method in ("split", "coordinate_names", "kinetic_energy"):
        assert not hasattr(body, method)
    assert shape.radius == pytest.approx(0.1)
    q, qd = imported.initial_state()
    np.testing.assert_allclose(body.position(q), [0.1, 0.0, 0.2], atol=1e-15)
    # The disk's axis (geom z) is the axle, world y.
    np.testing.assert_allclose(body.rotate(q, shape.axis), [0.0, -1.0, 0.0], atol=1e-15)
    # A spinning axle: the wheel's angular velocity is the axle rate about world y.
    qd = qd.at[imported.coordinates.index("axle")].set(2.0)
    np.testing.assert_allclose(body.angular_velocity(q, qd), [0.0, 2.0, 0.0], atol=1e-14)
    contact = cx.rigid.plane_contact(body, shape)
    np.testing.assert_allclose(contact.g(0.0, q, imported.params), [0.1], atol=1e-15)
    with pytest.raises(KeyError, match="no geom named 'tire'"):
        imported.wheel("tire")
    with pytest.raises(cx.rigid.MJCFError, match="geom 'chassis' is a box"):
        imported.wheel("chassis")


def test_twist_rows_refuse_a_tree_body_naming_it():
    """`twist_rows` maps twists into the body's own block of q, which a TreeBody lacks: a
    TypeError names the body and says what to use instead."""
    imported = cx.rigid.from_mjcf(WHEEL_XML)
    body, shape = imported.wheel("tyre")
    q, _ = imported.initial_state()
    with pytest.raises(
        TypeError,
        match=r"twist_rows: body 'tyre' is a TreeBody.*needs a cx\.rigid\.RigidBody.*"
        r"primary_constraint_analysis",
    ):
        cx.rigid.twist_rows(body, cx.rigid.rolling_contact(body, shape), 0.0, q)


# A branched tree: a free root carrying an arm (ball, then a hinge with `ref` at an offset
# anchor) and a leg (a slide and a hinge on one body) that ends in a wheel.
BRANCHED_XML = """
<mujoco model="branched">
  <option><flag contact="disable"/></option>
  <worldbody>
    <body name="base" pos="0.1 -0.2 0.5" quat="0.9 0.1 -0.2 0.3">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <body name="arm" pos="0.2 0.1 0" euler="10 0 20">
        <joint name="shoulder" type="ball" pos="0.05 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="hand" pos="0.3 0 0" euler="0 -30 0">
          <joint name="wrist" type="hinge" axis="0 1 1" pos="0.02 0 0" ref="0.3"/>
          <geom type="sphere" size="0.05"/>
        </body>
      </body>
      <body name="leg" pos="-0.1 -0.15 -0.05" euler="0 15 0">
        <joint name="extend" type="slide" axis="0.2 0 -1" ref="0.05"/>
        <joint name="axle" type="hinge" axis="0 1 0" pos="0 0 -0.02"/>
        <geom name="tyre" type="cylinder" size="0.08 0.01" pos="0 0.02 -0.1" euler="90 0 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_body_frames_match_mujoco_kinematics_on_a_branched_tree():
    """Each body's frame placed along its own chain of ancestors (`body_frame`, what
    `TreeBody` and the connect/weld rows read), all frames at once (`frames`) and the
    level-by-level frames of the tree dynamics equal MuJoCo's data.xpos/xmat after
    mj_kinematics, one state at a time under jit and a batch under vmap."""
    from constrax.rigid._tree._tree_dynamics import TreeDynamics

    m = mujoco.MjModel.from_xml_string(BRANCHED_XML)
    imported = cx.rigid.from_mjcf(m)
    tree = imported.tree
    assert [int(t) for t in m.jnt_type] == [0, 1, 3, 2, 3]  # free, ball, hinge, slide, hinge
    assert tuple(tree.parent) == (0, 0, 1, 2, 1)  # the base branches into arm and leg

    def all_three(q):
        chains = [tree.body_frame(q, b) for b in range(m.nbody)]
        xpos_c, xmat_c = jnp.stack([c[0] for c in chains]), jnp.stack([c[1] for c in chains])
        return (xpos_c, xmat_c), tree.frames(q), TreeDynamics(tree).frames(q)

    data = mujoco.MjData(m)
    rng = np.random.default_rng(5)
    qs, refs = [], []
    for _ in range(4):
        qpos, _, _ = _random_state(m, imported, rng)
        data.qpos[:] = qpos
        mujoco.mj_kinematics(m, data)
        qs.append(imported.from_mujoco_state(qpos, np.zeros(m.nv))[0])
        refs.append((np.array(data.xpos), np.array(data.xmat).reshape(-1, 3, 3)))
    one = jax.jit(all_three)
    batch = jax.jit(jax.vmap(all_three))(jnp.stack(qs))
    for k, (q, (xpos, xmat)) in enumerate(zip(qs, refs, strict=True)):
        for i, (pos, mat) in enumerate(one(q)):
            np.testing.assert_allclose(pos, xpos, atol=1e-13, err_msg=f"path {i}")
            np.testing.assert_allclose(mat, xmat, atol=1e-13, err_msg=f"path {i}")
            np.testing.assert_allclose(batch[i][0][k], xpos, atol=1e-13)
            np.testing.assert_allclose(batch[i][1][k], xmat, atol=1e-13)
    with pytest.raises(ValueError, match=r"`body` must be a body id in \[0, 5\), got 5"):
        tree.body_frame(qs[0], 5)


def test_rolling_contact_rows_on_a_branch_have_central_difference_gradients():
    """The rolling rows of a wheel at the end of a branch (free root, slide, hinge), read
    through the wheel's chain of ancestors: their derivatives in q and qd, and the
    derivative in q of their rate along qd (the engine's bias term), equal central
    differences (under jit); under vmap the rows of a batch are each state's."""
    m = mujoco.MjModel.from_xml_string(BRANCHED_XML)
    imported = cx.rigid.from_mjcf(m)
    body, shape = imported.wheel("tyre")
    (con,) = cx.rigid.rolling_contact(body, shape)
    p = imported.params
    rows = lambda q, qd: con.velocity(0.0, q, qd, p)
    rate = lambda q, qd: jax.jvp(lambda x: rows(x, qd), (q,), (qd,))[1]
    rng = np.random.default_rng(7)
    qpos, qvel, _ = _random_state(m, imported, rng)
    q, qd = imported.from_mujoco_state(qpos, qvel)
    h = 1e-6

    @jax.jit
    def derivatives_and_differences(q, qd):
        """d/dq and d/dqd of the rows and of their rate, and their central differences
        along every coordinate."""
        out = []
        for f in (rows, rate):
            for arg in (0, 1):
                shift = lambda e, f=f, arg=arg: f(q + e, qd) if arg == 0 else f(q, qd + e)
                steps = h * jnp.eye(q.size)
                fd = (jax.vmap(shift)(steps) - jax.vmap(shift)(-steps)).T / (2 * h)
                out.append((jax.jacfwd(f, arg)(q, qd), fd))
        return out

    results = derivatives_and_differences(q, qd)
    for J, fd in results:
        assert np.abs(J).max() > 1e-3
        np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)
    # The chain reaches the wheel through the free root, the slide and the axle.
    J = np.asarray(results[1][0])  # d rows / d qd
    moved = [imported.coordinates[i] for i in np.flatnonzero(np.abs(J).max(0) > 0)]
    assert {"root.x", "extend", "axle"} <= set(moved) and "wrist" not in moved
    # Under vmap, a batch of states gives the rows of each state.
    qs = jnp.stack([q, q.at[0].add(0.3).at[-1].add(0.5)])
    batched = jax.jit(lambda qs: (jax.vmap(rows, (0, None))(qs, qd), [rows(x, qd) for x in qs]))
    together, apart = batched(qs)
    np.testing.assert_allclose(together, jnp.stack(apart), rtol=1e-14, atol=1e-15)


def test_tree_body_point_velocities_match_mujoco_point_jacobians_on_a_branched_tree():
    """A material point of a TreeBody (the wheel at the end of the leg, the hand at the end
    of the arm) moves at `offset_velocity`, and the body turns at `angular_velocity`:
    MuJoCo's point Jacobians (`mj_jac`) times qvel, at random states; under jit and vmap
    too, and `offset_velocity` (one derivative of the frame) equals the generic
    `velocity + angular_velocity x delta` of `AbstractRigidBody` to round-off."""
    m = mujoco.MjModel.from_xml_string(BRANCHED_XML)
    imported = cx.rigid.from_mjcf(m)
    data = mujoco.MjData(m)
    rng = np.random.default_rng(11)
    bodies = [imported.wheel("tyre")[0], imported.body("hand")]
    generic = cx.rigid.AbstractRigidBody.offset_velocity

    def velocities(q, qd, delta):
        return [
            (body.offset_velocity(q, qd, delta), body.angular_velocity(q, qd)) for body in bodies
        ]

    one = jax.jit(velocities)
    states, refs = [], []
    for _ in range(3):
        qpos, qvel, _ = _random_state(m, imported, rng)
        delta = rng.normal(size=3) * 0.1
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_kinematics(m, data)
        mujoco.mj_comPos(m, data)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        expected = []
        for body in bodies:
            point = np.asarray(body.position(q)) + delta
            jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jac(m, data, jacp, jacr, point, body.body_id)
            expected.append((jacp @ qvel, jacr @ qvel))
            np.testing.assert_allclose(
                body.offset_velocity(q, qd, delta), generic(body, q, qd, delta), atol=1e-14
            )
        states.append((q, qd, jnp.asarray(delta)))
        refs.append(expected)
        for (v, w), (v_ref, w_ref) in zip(one(q, qd, delta), expected, strict=True):
            assert np.abs(v_ref).max() > 1e-2 and np.abs(w_ref).max() > 1e-2
            np.testing.assert_allclose(v, v_ref, atol=1e-13)
            np.testing.assert_allclose(w, w_ref, atol=1e-13)
    batch = jax.jit(jax.vmap(velocities))(*(jnp.stack(x) for x in zip(*states, strict=True)))
    for k, expected in enumerate(refs):
        for (v, w), (v_ref, w_ref) in zip(batch, expected, strict=True):
            np.testing.assert_allclose(v[k], v_ref, atol=1e-13)
            np.testing.assert_allclose(w[k], w_ref, atol=1e-13)


# ----------------------------------------------------------------------------------------
# Bad input: every unsupported element raises, naming the element.


def _xml(body: str = "", extra: str = "", option: str = "") -> str:
    return f"""<mujoco>{option}<worldbody>
      <body name="b" pos="0 0 1">
        <joint name="j" type="hinge" axis="0 1 0" {body}/>
        <geom name="g" type="sphere" size="0.1" contype="0" conaffinity="0"/>
        <body name="c" pos="0 0 -0.5">
          <joint name="k" type="hinge" axis="0 1 0"/>
          <geom name="h" type="sphere" size="0.1" contype="0" conaffinity="0"/>
        </body>
      </body></worldbody>{extra}</mujoco>"""


@pytest.mark.parametrize(
    "xml, match",
    [
        (_xml('range="-1 1" limited="true"'), "joint 'j': joint limits"),
        (_xml('frictionloss="0.1"'), "joint 'j': frictionloss"),
        (
            _xml(
                extra='<tendon><fixed name="t" stiffness="1"><joint joint="j" coef="1"/>'
                "</fixed></tendon>"
            ),
            "tendon 't': tendon stiffness",
        ),
        (
            _xml(extra='<actuator><general name="a" joint="j" dyntype="filter"/></actuator>'),
            "actuator 'a': actuator dynamics",
        ),
        (
            _xml(extra='<actuator><general name="u" joint="j" gaintype="user"/></actuator>'),
            "actuator 'u': gaintype",
        ),
        (_xml(option='<option density="1.2"/>'), "fluid forces"),
        (
            _xml(
                extra='<tendon><fixed name="t" actuatorfrcrange="-1 1"><joint joint="j" '
                'coef="1"/></fixed></tendon><actuator><motor name="a" tendon="t"/></actuator>'
            ),
            "tendon 't': tendon actuatorfrcrange",
        ),
        (
            _xml(
                extra='<tendon><spatial name="s"><site site="top"/><site site="low"/></spatial>'
                '</tendon><actuator><motor name="a" tendon="s"/></actuator>'
            )
            .replace('<geom name="g"', '<site name="top"/><geom name="g"')
            .replace('<geom name="h"', '<site name="low" pos="0.1 0 0"/><geom name="h"'),
            "actuator 'a': only joint transmissions on hinge and slide joints and fixed tendons",
        ),
        (
            _xml(
                extra='<tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>'
                '<equality><tendon name="e" tendon1="t"/></equality>'
            ),
            "equality 'e': only connect, weld and joint",
        ),
    ],
)
def test_unsupported_elements_raise_naming_them(xml, match):
    with pytest.raises(cx.rigid.MJCFError, match=match):
        cx.rigid.from_mjcf(xml)


def test_equality_builders_dispatch_on_mujocos_kinds():
    """One builder per converted mjtEq kind; a kind without one raises the feature check's
    words (were the check bypassed)."""
    from constrax.rigid._tree._mjcf_equalities import (
        EQUALITY_BUILDERS,
        connect,
        equality_constraints,
        joint,
        weld,
    )

    E = mujoco.mjtEq
    assert EQUALITY_BUILDERS == {
        int(E.mjEQ_CONNECT): connect,
        int(E.mjEQ_WELD): weld,
        int(E.mjEQ_JOINT): joint,
    }
    m = mujoco.MjModel.from_xml_string(
        _xml(
            extra='<tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>'
            '<equality><tendon name="e" tendon1="t"/></equality>'
        )
    )
    with pytest.raises(cx.rigid.MJCFError, match="equality 'e': only connect, weld and joint"):
        equality_constraints(m, mujoco, tree=None)  # it raises before reading the tree


def test_contacts_and_limits_need_an_explicit_choice():
    xml = _xml('range="-1 1" limited="true"').replace('contype="0" conaffinity="0"', "", 1)
    with pytest.raises(cx.rigid.MJCFError, match="geom 'g': collisions"):
        cx.rigid.from_mjcf(xml, ignore=("limits",))
    imported = cx.rigid.from_mjcf(xml, ignore=("contacts", "limits"))
    assert imported.coordinates == ("j", "k")
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.disableflags |= NO_CONTACT_LIMIT  # the model's own flags say the same
    assert cx.rigid.from_mjcf(m).coordinates == ("j", "k")
    with pytest.raises(ValueError, match="`ignore` may contain"):
        cx.rigid.from_mjcf(xml, ignore=("tendons",))
    with pytest.raises(TypeError, match="`source` must be"):
        cx.rigid.from_mjcf(3.0)


def test_inert_tendon_is_accepted_and_its_dropped_limit_named():
    """A tendon that exerts no force (no stiffness, damping, friction, actuator) is
    accepted; its limit, dropped with the joint limits by `ignore`, couples the joints it
    spans (a narrow range is an equality: the Shadow hand's coupled finger joints), so the
    import warns naming it, its range and its joints. MuJoCo's own flags disabling limits
    make the same model as MuJoCo's: no warning."""
    xml = _xml(
        extra='<tendon><fixed name="t" limited="true" range="-0.01 0.01">'
        '<joint joint="j" coef="1"/><joint joint="k" coef="-1"/></fixed></tendon>'
    )
    with pytest.raises(cx.rigid.MJCFError, match="tendon 't': tendon limits"):
        cx.rigid.from_mjcf(xml)
    with pytest.warns(
        cx.rigid.MJCFWarning,
        match=r"drops the limits of tendon 't' \(range \[-0.01, 0.01\]\) coupling joint 'j', "
        "joint 'k'",
    ):
        imported = cx.rigid.from_mjcf(xml, ignore="limits")
    assert imported.coordinates == ("j", "k")
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.disableflags |= int(D.mjDSBL_LIMIT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cx.rigid.from_mjcf(m).coordinates == ("j", "k")


def test_every_unsupported_element_is_reported_in_one_error():
    xml = _xml(
        'range="-1 1" limited="true" frictionloss="0.1"',
        extra='<tendon><fixed name="t" stiffness="1"><joint joint="k" coef="1"/></fixed>'
        '</tendon><actuator><general name="a" joint="j" dyntype="filter"/>'
        '<general name="u" joint="k" gaintype="user"/></actuator>',
        option='<option density="1.2"/>',
    )
    with pytest.raises(cx.rigid.MJCFError, match="5 elements of the model") as info:
        cx.rigid.from_mjcf(xml, ignore=("limits",))
    problems = info.value.problems
    assert len(problems) == 5
    for name in (
        "fluid forces",
        "joint 'j': frictionloss",
        "tendon 't'",
        "actuator 'a'",
        "actuator 'u'",
    ):
        assert sum(name in line for line in problems) == 1, name
        assert name in str(info.value)
    with pytest.raises(cx.rigid.MJCFError) as info:
        cx.rigid.from_mjcf(xml)
    assert len(info.value.problems) == 6  # the joint limits as well


def test_frictionloss_disabled_by_the_model_is_accepted_on_tendons_too():
    xml = _xml(
        extra='<tendon><fixed name="t" frictionloss="0.2"><joint joint="k" coef="1"/></fixed>'
        "</tendon>"
    )
    with pytest.raises(cx.rigid.MJCFError, match="tendon 't': tendon frictionloss"):
        cx.rigid.from_mjcf(xml)
    for flag in (D.mjDSBL_FRICTIONLOSS, D.mjDSBL_CONSTRAINT):
        m = mujoco.MjModel.from_xml_string(xml)
        m.opt.disableflags |= int(flag)
        assert cx.rigid.from_mjcf(m).coordinates == ("j", "k")


def test_consistent_initial_state_projects_a_model_with_redundant_equalities():
    """The loops model's connect and weld fix some freedoms twice (11 holonomic rows of
    rank 9): the projection must move q onto the rows, not stop at q (the first
    Gauss-Newton step was NaN and q came back unchanged, issue 21)."""
    m = mujoco.MjModel.from_xml_string(EQUALITY_XML)
    m.opt.disableflags |= int(D.mjDSBL_CONTACT)
    imported = cx.rigid.from_mjcf(m)
    system, p = imported.system, imported.params
    rows = lambda q: jnp.concatenate(
        [c.position_residual(0.0, q, p) for c in system.constraints if c.has_position_rows]
    )
    q0, _ = imported.initial_state()
    rng = np.random.default_rng(0)
    q1, qd1 = q0 + 0.05 * rng.normal(size=q0.shape), jnp.asarray(rng.normal(size=q0.shape))
    J = jax.jacfwd(rows)(q1)
    assert J.shape[0] > np.linalg.matrix_rank(np.asarray(J))  # redundant rows indeed
    assert np.abs(rows(q1)).max() > 1e-2
    q, qd = cx.consistent_initial_state(system, 0.0, q1, qd1, p)
    assert np.abs(rows(q)).max() <= 1e-10
    # The velocity rows to the documented tolerance (1e-8 relative): the loop a-a2-b is
    # near its stretched-out singular configuration here (a singular value of A of 1e-9,
    # below the rank-robust solver's cut-off), not to rounding.
    velocity_rows = cx.constraint_residual(system, 0.0, q, qd, p).velocity
    assert np.abs(velocity_rows).max() <= 1e-8 * max(1.0, float(np.abs(qd).max()))


# ----------------------------------------------------------------------------------------
# Worked examples (experiments/): exact rolling and exact equalities against MuJoCo's soft
# contacts and soft equalities.


def _experiment(name):
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_wheeled_robot_rolls_exactly_where_mujoco_slips(tmp_path):
    out = _experiment("mjcf_wheeled_robot").run(str(tmp_path), quick=True)
    print(
        f"slip: constrax {out['constrax_max_slip']:.2e} m/s, MuJoCo max "
        f"{out['mujoco_max_slip']:.2e} m/s (mean {out['mujoco_mean_slip']:.2e} m/s); "
        f"MuJoCo penetration {out['mujoco_max_penetration']:.2e} m"
    )
    assert all(os.path.exists(p) for p in out["figures"])
    assert out["constrax_max_slip"] < 1e-8  # rtol = atol = 1e-10 integration
    assert out["constrax_max_height_error"] < 1e-8
    assert out["mujoco_max_slip"] > 100 * out["constrax_max_slip"]
    assert out["final_distance_travelled"] > 0.05  # the robot does move


@pytest.mark.slow
def test_soft_equalities_violate_where_exact_ones_hold():
    out = _experiment("mjcf_soft_equality").run(quick=True)
    print(out)
    assert out["constrax_max_equality_violation"] < 1e-8
    assert out["mujoco_max_equality_violation"] > 100 * out["constrax_max_equality_violation"]
