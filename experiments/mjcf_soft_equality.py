"""MuJoCo's soft equality constraints against constrax's exact ones, on one MJCF model.

    python experiments/mjcf_soft_equality.py [--quick]

The model: a four-bar-like loop closed by a `connect`, a free box glued to a link by a
`weld`, and two hinges coupled by a polynomial `joint` equality; contacts disabled, gravity
on, released from rest at `qpos0` (where every equality holds). MuJoCo (RK4, 1 ms, default
`solref`/`solimp`) keeps the equalities with a stiff spring-damper, so they are violated
while forces act; constrax imposes them as exact `cx.Holonomic` rows. Reported: the largest
violation along each trajectory (MuJoCo's own `efc_pos` of the equality rows for MuJoCo,
the rows' residuals for constrax; per equality for MuJoCo: the weld's orientation rows are
MuJoCo's vec(conj(q2) q1 relpose), i.e. sin(angle/2) about the error axis) and the largest
difference of the two trajectories.
"""

import argparse
import json

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import constrax as cx

jax.config.update("jax_enable_x64", True)

LOOP_XML = """
<mujoco model="loops">
  <option timestep="0.001" integrator="RK4"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="ha" type="hinge" axis="0 1 0" damping="0.05"/>
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
    <body name="c" pos="0 1 1" euler="30 0 0">
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
    <joint name="couple" joint1="hc2" joint2="hc1" polycoef="0 0.5 0.2 0 0"/>
  </equality>
</mujoco>
"""


def run(quick: bool = False) -> dict:
    import mujoco

    t1 = 0.5 if quick else 2.0
    m = mujoco.MjModel.from_xml_string(LOOP_XML)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    data = mujoco.MjData(m)
    mujoco.mj_forward(m, data)
    steps = int(round(t1 / m.opt.timestep))
    every = 10
    qpos, viol = [data.qpos.copy()], [0.0]
    per_row = np.zeros(10)  # connect (3), weld position (3), weld orientation (3), joint (1)
    for k in range(1, steps + 1):
        mujoco.mj_step(m, data)
        if k % every == 0:
            mujoco.mj_forward(m, data)
            rows = data.efc_type == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY)
            qpos.append(data.qpos.copy())
            viol.append(float(np.max(np.abs(data.efc_pos[rows]))))
            per_row = np.maximum(per_row, np.abs(data.efc_pos[rows]))
    qpos = np.array(qpos)
    ts = m.opt.timestep * every * np.arange(len(qpos))

    imported = cx.rigid.from_mjcf(m)
    q0, qd0 = imported.initial_state()
    traj = cx.simulate(
        imported.system,
        q0,
        qd0,
        imported.params,
        t1=float(ts[-1]),
        saveat=diffrax.SaveAt(ts=jnp.asarray(ts)),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )
    ours = np.array(traj.q)
    for s, e in imported.tree.quaternion_slices():
        ours[:, s:e] /= np.linalg.norm(ours[:, s:e], axis=1, keepdims=True)
        # q and -q are the same rotation: compare with MuJoCo's sign.
        flip = np.sum(ours[:, s:e] * qpos[:, s:e], axis=1) < 0
        ours[flip, s:e] *= -1
    res = traj.constraint_residual()
    return dict(
        t1=float(t1),
        mujoco_max_equality_violation=float(max(viol)),
        mujoco_max_connect_violation_m=float(per_row[0:3].max()),
        mujoco_max_weld_position_violation_m=float(per_row[3:6].max()),
        mujoco_max_weld_orientation_violation=float(per_row[6:9].max()),
        mujoco_max_joint_coupling_violation_rad=float(per_row[9]),
        constrax_max_equality_violation=float(np.max(np.abs(res.position))),
        max_qpos_difference=float(np.max(np.abs(ours - qpos))),
        mujoco_solref=[float(x) for x in m.eq_solref[0]],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run(quick=args.quick), indent=2))
