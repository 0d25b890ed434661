r"""The terms of an imported MJCF model, read from MuJoCo's compiled `MjModel`: its kinematic
tree, its parameters (MuJoCo's field names and shapes), its Lagrangian, its generalized
force (damping and actuators) and the unit-norm rows of its quaternions; `from_mjcf`
composes them. The equations are those of `_mjcf` and `docs/interop/mjcf.md`.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..._constraints import AbstractConstraint, UnitQuaternion
from ._armature import actuator_reflected, dof_armature
from ._kinematic_tree import KinematicTree, _mm
from ._mjcf_checks import _BALL, _FREE, _HINGE, _SLIDE, fixed_tendon_wraps


def _f64(x) -> np.ndarray:
    return np.array(x, dtype=np.float64)


def _disabled(m, bit) -> bool:
    """Whether MuJoCo's model disables `bit` (`m.opt.disableflags`)."""
    return bool(m.opt.disableflags & int(bit))


def _rotation_np(quat) -> np.ndarray:
    """The rotation matrix of a model constant's quaternion by MuJoCo's `mju_quat2Mat`, in
    float64 whatever JAX's x64 setting (a float32 process imports the same geometry)."""
    import mujoco

    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, np.asarray(quat, dtype=np.float64))
    return out.reshape(3, 3)


def _poly(m, field: str, count: int) -> np.ndarray:
    """A `(count, 2)` polynomial coefficient field of MuJoCo 4 (zeros on older MuJoCo)."""
    return np.array(getattr(m, field, np.zeros((count, 2))), dtype=np.float64).reshape(count, 2)


def _field(m, name: str, shape) -> np.ndarray:
    """A field of the model as float64, zeros where this MuJoCo has none."""
    return np.array(getattr(m, name, np.zeros(shape)), dtype=np.float64)


def _transmissions(m, mujoco) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Each actuator's transmission (`check_supported`: a hinge or slide joint, or a fixed
    tendon of such joints) as constant coefficients: the actuator's length is
    $g\,C_q\,$`qpos`, its velocity $g\,C_v\,$`qvel` and its generalized force
    $C_v^\top(g\,f)$ (MuJoCo's `actuator_moment` is $g\,C_v$; a fixed tendon's length is
    $\sum_k c_k q_k$). Returns `(C_q (nu, nq), C_v (nu, nv), dof (nu,))`, `dof` the dof of
    a joint transmission and $-1$ for a tendon's."""
    C_q, C_v = np.zeros((m.nu, m.nq)), np.zeros((m.nu, m.nv))
    dof = np.full(m.nu, -1, dtype=int)
    for i in range(m.nu):
        target = int(m.actuator_trnid[i, 0])
        if int(m.actuator_trntype[i]) == int(mujoco.mjtTrn.mjTRN_JOINT):
            wraps = [(target, 1.0)]
            dof[i] = int(m.jnt_dofadr[target])
        else:
            wraps = fixed_tendon_wraps(m, mujoco, target)
        for j, c in wraps:
            C_q[i, int(m.jnt_qposadr[j])] += c
            C_v[i, int(m.jnt_dofadr[j])] += c
    return C_q, C_v, dof


def model_tree(m, act_dof) -> KinematicTree:
    """The kinematic tree of `m` (MuJoCo's forward kinematics rebuilt in JAX), with
    `act_dof` the dof each actuator drives (`_transmissions`)."""
    f64 = _f64
    body_joints = []
    for b in range(m.nbody):
        start, num = int(m.body_jntadr[b]), int(m.body_jntnum[b])
        body_joints.append(
            tuple((int(m.jnt_type[j]), j, int(m.jnt_qposadr[j])) for j in range(start, start + num))
        )
    joints = tuple(
        (int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])) for j in range(m.njnt)
    )
    return KinematicTree(
        body_pos=jnp.asarray(f64(m.body_pos)),
        body_rot=jnp.asarray(np.stack([_rotation_np(x) for x in m.body_quat])),
        body_ipos=jnp.asarray(f64(m.body_ipos)),
        body_irot=jnp.asarray(np.stack([_rotation_np(x) for x in m.body_iquat])),
        jnt_pos=jnp.asarray(f64(m.jnt_pos).reshape(-1, 3)),
        jnt_axis=jnp.asarray(f64(m.jnt_axis).reshape(-1, 3)),
        qpos0=jnp.asarray(f64(m.qpos0)),
        parent=tuple(int(x) for x in m.body_parentid),
        body_joints=tuple(body_joints),
        joints=joints,
        nq=int(m.nq),
        nv=int(m.nv),
        actuator_dofs=tuple(int(v) for v in act_dof),
    )


def model_params(m, mujoco) -> dict:
    """The parameters `p` of the imported system: MuJoCo's fields (see `from_mjcf`), with
    disabled damping, springs and gravity zeroed."""
    f64 = _f64
    D = mujoco.mjtDisableBit
    off = lambda bit: _disabled(m, bit)
    damper = 0.0 if off(D.mjDSBL_DAMPER) else 1.0
    params = dict(
        body_mass=f64(m.body_mass),
        body_inertia=f64(m.body_inertia),
        dof_damping=f64(m.dof_damping) * damper,
        dof_dampingpoly=_poly(m, "dof_dampingpoly", m.nv) * damper,
        dof_armature=f64(m.dof_armature),
        jnt_stiffness=f64(m.jnt_stiffness) * (0.0 if off(D.mjDSBL_SPRING) else 1.0),
        jnt_stiffnesspoly=_poly(m, "jnt_stiffnesspoly", m.njnt)
        * (0.0 if off(D.mjDSBL_SPRING) else 1.0),
        qpos_spring=f64(m.qpos_spring),
        actuator_gear=f64(m.actuator_gear).reshape(-1, 6),
        actuator_gainprm=f64(m.actuator_gainprm).reshape(-1, 10),
        actuator_biasprm=f64(m.actuator_biasprm).reshape(-1, 10),
        actuator_ctrlrange=f64(m.actuator_ctrlrange).reshape(-1, 2),
        actuator_forcerange=f64(m.actuator_forcerange).reshape(-1, 2),
        # MuJoCo 4's damping and armature that an actuator adds to the joint it drives,
        # times gear^2 (zeros on older MuJoCo); its damping, like the joints', is off with
        # mjDSBL_DAMPER.
        actuator_damping=f64(getattr(m, "actuator_damping", np.zeros(m.nu))).reshape(-1) * damper,
        actuator_dampingpoly=_poly(m, "actuator_dampingpoly", m.nu) * damper,
        actuator_armature=f64(getattr(m, "actuator_armature", np.zeros(m.nu))).reshape(-1),
        ctrl=np.zeros(m.nu),
        # Each dof's joint-level `actuatorfrcrange` (used where `jnt_actfrclimited`).
        dof_actfrcrange=_field(m, "jnt_actfrcrange", (m.njnt, 2)).reshape(-1, 2)[m.dof_jntid],
        gravity=f64(m.opt.gravity) * (0.0 if off(D.mjDSBL_GRAVITY) else 1.0),
    )
    return {k: jnp.asarray(v) for k, v in params.items()}


def model_lagrangian(m, tree: KinematicTree, act_dof) -> Callable:
    r"""$L = T - V$ of `m`: the bodies' translational and rotational kinetic energy, the
    armature's $\tfrac12 a_k v_k^2$, gravity and the hinge/slide springs (`_mjcf`)."""
    hinge_slide = [j for j in range(m.njnt) if m.jnt_type[j] in (_SLIDE, _HINGE)]
    # Every hinge/slide joint's spring reads `p["jnt_stiffness"]` (zero or not in the file), so
    # that the Lagrangian and the tree dynamics (`TreeDynamics`) are the same model for every
    # parameter value, and a stiffness set through `p` acts.
    spring_j = np.array(hinge_slide, dtype=int)
    spring_a = np.array([int(m.jnt_qposadr[j]) for j in spring_j], dtype=int)

    def lagrangian(t, q, qd, p):
        (com, R), (comd, Rd) = jax.jvp(tree.inertial_frames, (q,), (qd,))
        A = _mm(jnp.swapaxes(R, -1, -2), Rd)  # R^T Rdot = hat(Omega)
        Om = 0.5 * jnp.stack(
            [A[:, 2, 1] - A[:, 1, 2], A[:, 0, 2] - A[:, 2, 0], A[:, 1, 0] - A[:, 0, 1]], -1
        )
        mass, inertia = p["body_mass"][1:], p["body_inertia"][1:]
        T = 0.5 * jnp.sum(mass * jnp.sum(comd[1:] ** 2, -1))
        T = T + 0.5 * jnp.sum(inertia * Om[1:] ** 2)
        v = tree.qvel(q, qd)
        T = T + 0.5 * jnp.sum(dof_armature(p, act_dof, tree.nv, q.dtype) * v**2)
        V = -jnp.sum(mass * (com[1:] @ p["gravity"]))
        if spring_j.size:
            dq = q[spring_a] - p["qpos_spring"][spring_a]
            V = V + 0.5 * jnp.sum(p["jnt_stiffness"][spring_j] * dq**2)
            k = p["jnt_stiffnesspoly"][spring_j]  # MuJoCo 4's -(k1 dq^2 + k2 dq^3)
            V = V + jnp.sum(k[:, 0] * dq**3 / 3.0 + k[:, 1] * dq**4 / 4.0)
        return T - V

    return lagrangian


def model_force(m, mujoco, tree: KinematicTree, transmissions, control) -> Callable:
    r"""The generalized force $Q = J^\top(-(d_0 + d_1|v| + d_2v^2)\odot v + \tau_\text{act})$
    of `m`'s damping and actuators, `transmissions` = `_transmissions(m, mujoco)`."""
    act_q, act_v, act_dof = transmissions
    D = mujoco.mjtDisableBit
    off = lambda bit: _disabled(m, bit)
    ctrl_limited = np.array(
        [bool(m.actuator_ctrllimited[i]) and not off(D.mjDSBL_CLAMPCTRL) for i in range(m.nu)]
    )
    force_limited = np.array([bool(m.actuator_forcelimited[i]) for i in range(m.nu)])
    gain_affine = np.array(
        [int(m.actuator_gaintype[i]) == int(mujoco.mjtGain.mjGAIN_AFFINE) for i in range(m.nu)]
    )
    bias_affine = np.array(
        [int(m.actuator_biastype[i]) == int(mujoco.mjtBias.mjBIAS_AFFINE) for i in range(m.nu)]
    )
    # `<option actuatorgroupdisable>`: MuJoCo switches off the actuators of the groups 0-30
    # whose bit is set in `opt.disableactuator` (their force is zero).
    group = np.array([int(m.actuator_group[i]) for i in range(m.nu)], dtype=int)
    disabled_groups = int(getattr(m.opt, "disableactuator", 0))
    act_on = np.array(
        [not (0 <= g <= 30 and (disabled_groups >> g) & 1) for g in group], dtype=bool
    )
    actuated = m.nu > 0 and not off(D.mjDSBL_ACTUATION) and bool(act_on.any())
    # `actuatorfrcrange` of a hinge or slide joint (`check_supported`), on its dof.
    frc_limited = np.zeros(m.nv, dtype=bool)
    for j in np.flatnonzero(_field(m, "jnt_actfrclimited", m.njnt)):
        frc_limited[int(m.jnt_dofadr[j])] = True

    def force(t, q, qd, p):
        v = tree.qvel(q, qd)
        # MuJoCo's damping -(d0 + d1|v| + d2 v^2) v (the polynomial terms are MuJoCo 4's),
        # the joint's own coefficients plus those its actuators reflect (g^2 d, MuJoCo 4;
        # they act whether or not actuation is enabled, as in MuJoCo).
        d = p["dof_damping"] + actuator_reflected(p, "actuator_damping", act_dof, tree.nv, q.dtype)
        dp = p["dof_dampingpoly"] + actuator_reflected(
            p, "actuator_dampingpoly", act_dof, tree.nv, q.dtype
        )
        f = -(d + dp[:, 0] * jnp.abs(v) + dp[:, 1] * v**2) * v
        if actuated:
            u = p["ctrl"] if control is None else jnp.asarray(control(t, q, qd, p), q.dtype)
            lo, hi = p["actuator_ctrlrange"][:, 0], p["actuator_ctrlrange"][:, 1]
            u = jnp.where(ctrl_limited, jnp.clip(u, lo, hi), u)
            gear = p["actuator_gear"][:, 0]
            # The transmission's constant coefficients in the state's dtype (NumPy's float64
            # would promote a float32 state's force).
            length = gear * (jnp.asarray(act_q, q.dtype) @ q)
            speed = gear * (jnp.asarray(act_v, q.dtype) @ v)
            gp, bp = p["actuator_gainprm"], p["actuator_biasprm"]
            gain = gp[:, 0] + jnp.where(gain_affine, gp[:, 1] * length + gp[:, 2] * speed, 0.0)
            bias = jnp.where(bias_affine, bp[:, 0] + bp[:, 1] * length + bp[:, 2] * speed, 0.0)
            tau = gain * u + bias
            flo, fhi = p["actuator_forcerange"][:, 0], p["actuator_forcerange"][:, 1]
            tau = jnp.where(force_limited, jnp.clip(tau, flo, fhi), tau)
            # MuJoCo's qfrc_actuator = moment^T force (moment = gear x the transmission's
            # coefficients), clamped where a joint has an actuatorfrcrange.
            qfrc = jnp.asarray(act_v, q.dtype).T @ jnp.where(act_on, gear * tau, 0.0)
            if frc_limited.any():
                qlo, qhi = p["dof_actfrcrange"][:, 0], p["dof_actfrcrange"][:, 1]
                qfrc = jnp.where(frc_limited, jnp.clip(qfrc, qlo, qhi), qfrc)
            f = f + qfrc
        # Q = J^T f with qvel = J(q) qd (linear in qd): one reverse pass.
        _, vjp = jax.vjp(lambda x: tree.qvel(q, x), qd)
        return vjp(f.astype(qd.dtype))[0]

    return force


def norm_rows(m, mujoco) -> list[AbstractConstraint]:
    r"""The unit-norm rows $x\cdot x - 1 = 0$ of the quaternion of every ball and free joint,
    one `UnitQuaternion` each, named `"<joint>.orientation"`."""
    O = mujoco.mjtObj
    constraints: list[AbstractConstraint] = []
    for j in range(m.njnt):
        typ, a = int(m.jnt_type[j]), int(m.jnt_qposadr[j])
        if typ in (_FREE, _BALL):
            s = a + 3 if typ == _FREE else a
            jn = mujoco.mj_id2name(m, O.mjOBJ_JOINT, j) or f"joint{j}"
            constraints.append(UnitQuaternion(s, name=f"{jn}.orientation"))
    return constraints
