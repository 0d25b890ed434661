"""A differential-drive robot loaded from MJCF whose wheels roll exactly (constrax), against
MuJoCo's frictional soft-contact simulation of the same file.

    python experiments/mjcf_wheeled_robot.py [--out DIR] [--quick]

The robot: a chassis on a free joint, two motor-driven wheels (thin cylinder geoms, 2 mm
half-width, on hinge axles) and a frictionless caster ball (`condim="1"` with
`priority="1"`, so that its contact with the floor is frictionless: MuJoCo otherwise takes
the larger `condim` of the pair). constrax imports the file with
`cx.rigid.from_mjcf(..., ignore=("contacts",))` and replaces MuJoCo's contacts by exact
constraints built from the same geoms: `cx.rigid.rolling_contact` for each wheel (contact
height + no slip) and `cx.rigid.plane_contact` for the caster. Both simulations start from
the same state with the same constant motor torques.

Thin tyres because MuJoCo's cylinder touches the floor at both edges of its tread: a wide
tyre scrubs when the robot turns (with 20 mm half-width MuJoCo's robot hardly turns at all),
whereas `cx.rigid.Disk` rolls on the middle circle.

Slip and penetration are measured the same way for both trajectories, with MuJoCo's own
kinematics (`mj_forward` and `mj_objectVelocity` on the state): the tangential velocity of
each wheel's lowest rim point, and the height of that point above the floor.
"""

import argparse
import json
import os
import time

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import constrax as cx

jax.config.update("jax_enable_x64", True)

ROBOT_XML = """
<mujoco model="diff_drive">
  <option timestep="0.001"/>
  <worldbody>
    <geom name="floor" type="plane" size="20 20 0.1"/>
    <body name="chassis" pos="0 0 0.1">
      <freejoint name="root"/>
      <geom name="chassis" type="box" size="0.15 0.1 0.03" pos="-0.05 0 0.03" mass="2"
            contype="0" conaffinity="0"/>
      <geom name="caster" type="sphere" size="0.05" pos="-0.17 0 -0.05" mass="0.05"
            condim="1" priority="1"/>
      <body name="left_wheel" pos="0 0.13 0">
        <joint name="left" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom name="left_tyre" type="cylinder" size="0.1 0.002" euler="90 0 0" mass="0.3"/>
      </body>
      <body name="right_wheel" pos="0 -0.13 0">
        <joint name="right" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom name="right_tyre" type="cylinder" size="0.1 0.002" euler="90 0 0" mass="0.3"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="left_motor" joint="left"/>
    <motor name="right_motor" joint="right"/>
  </actuator>
</mujoco>
"""

TORQUES = (0.05, 0.08)  # N m on the left and right wheels
WHEELS = ("left_tyre", "right_tyre")


def constrax_robot():
    """The imported robot with exact rolling of both wheels and the caster on the floor."""
    imported = cx.rigid.from_mjcf(ROBOT_XML, ignore=("contacts",))
    rows = []
    for geom in WHEELS:
        body, shape = imported.wheel(geom)
        rows += cx.rigid.rolling_contact(body, shape)
    caster, ball = imported.wheel("caster")
    rows.append(cx.rigid.plane_contact(caster, ball))
    return imported.with_constraints(rows)


def contact_kinematics(m, qpos, qvel):
    """Per saved state and wheel: slip speed |v_t| of the lowest rim point [m/s] and its
    height above the floor [m], from MuJoCo's kinematics of the state."""
    import mujoco

    data = mujoco.MjData(m)
    n = np.array([0.0, 0.0, 1.0])
    slip = np.zeros((len(qpos), len(WHEELS)))
    height = np.zeros_like(slip)
    for k in range(len(qpos)):
        data.qpos[:], data.qvel[:] = qpos[k], qvel[k]
        mujoco.mj_forward(m, data)
        for w, geom in enumerate(WHEELS):
            g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, geom)
            vel = np.zeros(6)  # (angular, linear) at the geom centre, world axes
            mujoco.mj_objectVelocity(m, data, mujoco.mjtObj.mjOBJ_GEOM, g, vel, 0)
            e = data.geom_xmat[g].reshape(3, 3)[:, 2]  # cylinder axis
            d = n - (n @ e) * e
            delta = -m.geom_size[g, 0] * d / np.linalg.norm(d)
            v = vel[3:] + np.cross(vel[:3], delta)
            slip[k, w] = np.linalg.norm(v[:2])
            height[k, w] = data.geom_xpos[g][2] + delta[2]
    return slip, height


def run(outdir: str = "experiments/figures", quick: bool = False) -> dict:
    import mujoco

    t1 = 1.0 if quick else 3.0
    ts = np.linspace(0.0, t1, 101 if quick else 301)

    # MuJoCo: frictional soft contacts, its default solver settings, Euler at 1 ms.
    m = mujoco.MjModel.from_xml_string(ROBOT_XML)
    data = mujoco.MjData(m)
    data.ctrl[:] = TORQUES
    mujoco.mj_forward(m, data)
    mj_qpos, mj_qvel = [data.qpos.copy()], [data.qvel.copy()]
    steps = np.round(ts / m.opt.timestep).astype(int)
    for k in range(1, len(ts)):
        while data.time < ts[k] - 0.5 * m.opt.timestep:
            mujoco.mj_step(m, data)
        mj_qpos.append(data.qpos.copy())
        mj_qvel.append(data.qvel.copy())
    mj_qpos, mj_qvel = np.array(mj_qpos), np.array(mj_qvel)
    del steps

    # constrax: exact rolling, from the same initial state (MuJoCo's qpos0, at rest).
    robot = constrax_robot()
    q0, qd0 = robot.initial_state()
    p = dict(robot.params, ctrl=jnp.asarray(TORQUES))
    start = time.perf_counter()
    traj = cx.simulate(
        robot.system,
        q0,
        qd0,
        p,
        t1=float(t1),
        saveat=diffrax.SaveAt(ts=jnp.asarray(ts)),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
        constraint_solver=cx.UdwadiaKalaba(),  # the two lateral no-slip rows are redundant
    )
    wall = time.perf_counter() - start
    cx_qpos, cx_qvel = (np.asarray(x) for x in robot.to_mujoco_state(traj.q, traj.qd))
    res = traj.constraint_residual()
    residual = float(max(np.max(np.abs(res.position)), np.max(np.abs(res.velocity))))

    cx_slip, cx_height = contact_kinematics(m, cx_qpos, cx_qvel)
    mj_slip, mj_height = contact_kinematics(m, mj_qpos, mj_qvel)
    path_gap = np.linalg.norm(cx_qpos[:, :2] - mj_qpos[:, :2], axis=1)
    result = dict(
        t1=float(t1),
        torques=list(TORQUES),
        constrax_max_slip=float(cx_slip.max()),
        constrax_max_penetration=float(max(0.0, -cx_height.min())),
        constrax_max_height_error=float(np.abs(cx_height).max()),
        constrax_max_constraint_residual=residual,
        mujoco_max_slip=float(mj_slip.max()),
        mujoco_mean_slip=float(mj_slip[len(ts) // 10 :].mean()),
        mujoco_max_penetration=float(max(0.0, -mj_height.min())),
        final_path_gap=float(path_gap[-1]),
        final_distance_travelled=float(np.linalg.norm(cx_qpos[-1, :2] - cx_qpos[0, :2])),
        constrax_wall_s=wall,
    )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].plot(cx_qpos[:, 0], cx_qpos[:, 1], label="constrax (exact rolling)")
    ax[0].plot(mj_qpos[:, 0], mj_qpos[:, 1], "--", label="MuJoCo (frictional contact)")
    ax[0].set(xlabel="x [m]", ylabel="y [m]", title="chassis path", aspect="equal")
    ax[0].legend(fontsize=8)
    floor = 1e-17
    for w, geom in enumerate(WHEELS):
        ax[1].semilogy(ts, np.maximum(mj_slip[:, w], floor), label=f"MuJoCo {geom}")
        ax[1].semilogy(ts, np.maximum(cx_slip[:, w], floor), ":", label=f"constrax {geom}")
    ax[1].set(xlabel="t [s]", ylabel="slip speed [m/s]", title="contact-point slip")
    ax[1].legend(fontsize=7)
    for w, geom in enumerate(WHEELS):
        ax[2].plot(ts, 1e3 * mj_height[:, w], label=f"MuJoCo {geom}")
        ax[2].plot(ts, 1e3 * cx_height[:, w], ":", label=f"constrax {geom}")
    ax[2].set(xlabel="t [s]", ylabel="lowest rim point height [mm]", title="penetration")
    ax[2].legend(fontsize=7)
    fig.suptitle(
        f"MJCF differential-drive robot, torques {TORQUES} N m: max slip constrax "
        f"{result['constrax_max_slip']:.1e} m/s vs MuJoCo {result['mujoco_max_slip']:.1e} m/s"
    )
    fig.tight_layout()
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "mjcf_wheeled_robot.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    result["figures"] = [path]
    with open(os.path.join(outdir, "mjcf_wheeled_robot.json"), "w") as f:
        json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/figures")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run(args.out, quick=args.quick), indent=2))
