r"""`from_mjcf`: a `cx.System` from an MJCF model parsed and compiled by MuJoCo.

MuJoCo (the optional `mujoco` package) parses the file and compiles the `MjModel`;
constrax reads the compiled arrays and never re-implements the format. The kinematic tree
is rebuilt in JAX exactly as MuJoCo's forward kinematics (`KinematicTree`, in
`_kinematic_tree`); `MJCFSystem.body` and `MJCFSystem.wheel` hand frames of it to the
constraint builders as `TreeBody` (`_tree_body`).

The Lagrangian is
$L = \sum_b \tfrac12 m_b|\dot c_b|^2 + \tfrac12\Omega_b^\top I_b\Omega_b
+ \tfrac12\sum_k a_k v_k^2 - \sum_b(-m_b\,g\cdot c_b) - \sum_j\tfrac12 k_j(q_j - q^s_j)^2$
with $c_b$ the centre of mass, $\Omega_b$ the angular velocity in the principal frame,
$v = J(q)\dot q$ MuJoCo's `qvel` and $a$ the armature (plus MuJoCo 4's polynomial spring
terms $\tfrac13 k_1\Delta^3 + \tfrac14 k_2\Delta^4$); joint damping and actuators are a
generalized force $Q = J^\top(-(d_0 + d_1|v| + d_2v^2)\odot v + \tau_\text{act})$. An
actuator $i$ of gear $g_i$ on a joint adds $g_i^2$ times its own armature and damping
coefficients (MuJoCo 4's actuator `armature`, `damping`) to the joint's $a$ and $d$;
equality constraints are `cx.Holonomic` rows (`_mjcf_equalities`). See
`docs/interop/mjcf.md`.
"""

from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._constraints import AbstractConstraint, Holonomic
from ..._system import System
from ..._terms import mass_matrix
from .._contact._contacts import Disk, Sphere, body_constraints
from .._kinematics._so3 import quaternion_to_rotation
from ._kinematic_tree import KinematicTree, _mm
from ._mjcf_checks import (
    _BALL,
    _FREE,
    _HINGE,
    _SLIDE,
    IGNORABLE,
    MJCFError,
    check_supported,
    fixed_tendon_wraps,
)
from ._mjcf_equalities import equality_constraints
from ._tree_body import TreeBody
from ._tree_dynamics import TreeDynamics, actuator_reflected, dof_armature

# ----------------------------------------------------------------------------------------
# Small helpers.


def _rotation_np(quat) -> np.ndarray:
    return np.asarray(quaternion_to_rotation(jnp.asarray(quat, dtype=jnp.float64)))


def _poly(m, field: str, count: int) -> np.ndarray:
    """A `(count, 2)` polynomial coefficient field of MuJoCo 4 (zeros on older MuJoCo)."""
    return np.array(getattr(m, field, np.zeros((count, 2))), dtype=np.float64).reshape(count, 2)


# ----------------------------------------------------------------------------------------
# The imported system.


class MJCFSystem(eqx.Module):
    r"""A system imported from MJCF by `from_mjcf`.

    **Fields:**

    - `system`: the `cx.System` (Lagrangian, unit-norm rows of the ball/free quaternions and
      the equality constraints as `cx.Holonomic`, damping and actuators as the force). Add
      constraints with `with_constraints`.
    - `params`: the parameter pytree `p` (see `from_mjcf`); differentiable.
    - `tree`: the `KinematicTree`.
    - `coordinates`: names of the entries of `q` (`"<joint>"` for hinge/slide,
      `"<joint>.x"`, ..., `"<joint>.qw"`, ... for free/ball joints; an unnamed joint is
      `"joint<id>"`).
    - `dofs`: names of the entries of MuJoCo's `qvel`.
    - `body_names`, `joint_names`, `geom_names`, `actuator_names`: MuJoCo's names, by id
      (`""` where unnamed).

    **State map** (`from_mujoco_state`, `to_mujoco_state`): $q$ is MuJoCo's `qpos` with its
    quaternions normalised (MuJoCo's quaternions are scalar first, like constrax's);
    `qvel` $= J(q)\dot q$ with, per joint: hinge/slide $\dot q$; ball
    $\Omega = 2\operatorname{vec}(\bar x\otimes\dot x)$ (child angular velocity in the
    child's frame); free $(\dot p, \Omega)$ (origin velocity in the world frame, angular
    velocity in the body frame). Conversely $\dot x = \tfrac12 x\otimes(0, \Omega)$.
    MuJoCo's accelerations are `qacc` $= J\ddot q + \dot J\dot q$ (`mujoco_acceleration`)
    and its mass matrix $G^\top W G$, $G = \partial\dot q/\partial\,$`qvel`
    (`mujoco_mass_matrix`).

    **Example:**

    ```python
    import mujoco
    m = mujoco.MjModel.from_xml_string(
        "<mujoco><option><flag contact='disable'/></option><worldbody><body>"
        "<joint type='hinge' axis='0 1 0'/><geom type='capsule' size='0.05' "
        "fromto='0 0 0 0 0 -1' mass='1'/></body></worldbody></mujoco>"
    )
    data = mujoco.MjData(m)
    imported = cx.rigid.from_mjcf(m)  # m: a mujoco.MjModel
    q, qd = imported.from_mujoco_state(data.qpos, data.qvel)
    p = dict(imported.params, ctrl=jnp.asarray(data.ctrl))
    qdd = cx.accelerations(imported.system, 0.0, q, qd, p).qdd
    imported.mujoco_acceleration(q, qd, qdd)  # MuJoCo's data.qacc after mj_forward
    ```
    """

    system: System
    params: dict
    tree: KinematicTree
    coordinates: tuple[str, ...] = eqx.field(static=True)
    dofs: tuple[str, ...] = eqx.field(static=True)
    body_names: tuple[str, ...] = eqx.field(static=True)
    joint_names: tuple[str, ...] = eqx.field(static=True)
    geom_names: tuple[str, ...] = eqx.field(static=True)
    actuator_names: tuple[str, ...] = eqx.field(static=True)
    _bodies: tuple = eqx.field(static=True)  # (mass, inertia diag, ipos, irot) per body
    _geoms: tuple = eqx.field(static=True)  # (body, type, size, pos, rot) per geom

    # -- state map ------------------------------------------------------------------------

    def from_mujoco_state(
        self, qpos: Float[ArrayLike, " nq"], qvel: Float[ArrayLike, " nv"]
    ) -> tuple[Float[Array, " nq"], Float[Array, " nq"]]:
        r"""`(q, qd)` from MuJoCo's `(qpos, qvel)`: quaternions normalised,
        $\dot x = \tfrac12 x\otimes(0, \Omega)$ for ball and free joints.

        **Example:** `q, qd = imported.from_mujoco_state(data.qpos, data.qvel)`.
        """
        qpos = jnp.asarray(qpos, dtype=jnp.result_type(float))
        qvel = jnp.asarray(qvel, dtype=qpos.dtype)
        if qpos.shape[-1:] != (self.tree.nq,) or qvel.shape[-1:] != (self.tree.nv,):
            raise ValueError(
                f"`qpos` must have shape (..., {self.tree.nq}) and `qvel` (..., {self.tree.nv}), "
                f"got {qpos.shape} and {qvel.shape}"
            )
        return jnp.vectorize(self._from_mujoco, signature="(n),(k)->(n),(n)")(qpos, qvel)

    def _from_mujoco(self, qpos, qvel):
        q = qpos
        for s, e in self.tree.quaternion_slices():
            x = q[s:e]
            q = q.at[s:e].set(x / jnp.sqrt(x @ x))
        return q, self.tree.qd_from_qvel(q, qvel)

    def to_mujoco_state(
        self, q: Float[ArrayLike, " nq"], qd: Float[ArrayLike, " nq"]
    ) -> tuple[Float[Array, " nq"], Float[Array, " nv"]]:
        r"""MuJoCo's `(qpos, qvel)` from `(q, qd)`: `qpos = q`, `qvel` $= J(q)\dot q$.

        **Example:** `data.qpos[:], data.qvel[:] = imported.to_mujoco_state(q, qd)`.
        """
        q = jnp.asarray(q, dtype=jnp.result_type(float))
        qd = jnp.asarray(qd, dtype=q.dtype)
        if q.shape[-1:] != (self.tree.nq,) or qd.shape != q.shape:
            raise ValueError(
                f"`q` and `qd` must both have shape (..., {self.tree.nq}), got {q.shape} and "
                f"{qd.shape}"
            )
        qvel = jnp.vectorize(self.tree.qvel, signature="(n),(n)->(k)")(q, qd)
        return q, qvel

    def mujoco_acceleration(self, q, qd, qdd) -> Float[Array, " nv"]:
        r"""MuJoCo's `qacc` $= \tfrac{d}{dt}\big(J(q)\dot q\big) = J\ddot q + \dot J\dot q$ from
        `(q, qd, qdd)` (one `jax.jvp`)."""
        return jax.jvp(self.tree.qvel, (q, qd), (qd, qdd))[1]

    def mujoco_mass_matrix(self, q, p=None) -> Float[Array, "nv nv"]:
        r"""The mass matrix in MuJoCo's velocity coordinates, $G^\top W G$ with
        $W = \partial^2L/\partial\dot q^2$ and $G = \partial\dot q/\partial\,$`qvel` (compare
        with `mujoco.mj_fullM`)."""
        p = self.params if p is None else p
        q = jnp.asarray(q)
        W = mass_matrix(self.system, 0.0, q, jnp.zeros_like(q), p)
        G = jax.jacfwd(lambda v: self.tree.qd_from_qvel(q, v))(jnp.zeros(self.tree.nv, q.dtype))
        return G.T @ W @ G

    def initial_state(self) -> tuple[Float[Array, " nq"], Float[Array, " nq"]]:
        """MuJoCo's reference configuration `qpos0` at rest, as `(q, qd)`."""
        return self.from_mujoco_state(self.tree.qpos0, jnp.zeros(self.tree.nv))

    # -- bodies and wheels ----------------------------------------------------------------

    def _id(self, kind: str, name: str | int) -> int:
        """MuJoCo's id of the element `name`, or `name` itself where it is an id (an
        unnamed element has only its id)."""
        names = getattr(self, f"{kind}_names")
        if isinstance(name, int | np.integer) and not isinstance(name, bool):
            if not 0 <= name < len(names):
                raise IndexError(f"no {kind} #{name}: the MJCF model has {len(names)} {kind}s")
            return int(name)
        if name not in names:
            raise KeyError(
                f"no {kind} named {name!r} in the MJCF model; {kind}s: "
                f"{', '.join(repr(n) for n in names if n)}"
            )
        return names.index(name)

    def body(self, name: str) -> TreeBody:
        """The body `name` (its centre of mass and principal frame) as a `TreeBody`.

        **Example:** `chassis = imported.body("chassis")`.
        """
        b = self._id("body", name)
        mass, inertia, ipos, irot = self._bodies[b]
        return TreeBody(self.tree, b, ipos, irot, mass, inertia, name)

    def wheel(self, geom: str | int, *, name: str | None = None) -> tuple[TreeBody, Sphere | Disk]:
        r"""A wheel for the `cx.rigid` contact builders from a `sphere` or `cylinder` geom,
        given by its name or, for an unnamed geom, MuJoCo's geom id (e.g.
        `m.body_geomadr[body_id]`, the first geom of a body):
        `(body, shape)` with the body frame at the geom's centre and the shape a
        `cx.rigid.Sphere(radius)` or a `cx.rigid.Disk(radius, axis=e_z)` (MuJoCo's cylinder
        axis is the geom's $z$). A cylinder rolls on its middle circle, as a thin disk: exact
        while it stands upright on the plane.

        **Example:**

        ```python
        body, shape = imported.wheel("left_wheel")
        system = imported.with_constraints(cx.rigid.rolling_contact(body, shape)).system
        ```
        """
        g = self._id("geom", geom)
        b, typ, size, pos, rot = self._geoms[g]
        mass, inertia, _, _ = self._bodies[b]
        if typ == "sphere":
            shape = Sphere(float(size[0]))
        elif typ == "cylinder":
            shape = Disk(float(size[0]), axis=(0.0, 0.0, 1.0))
        else:
            raise MJCFError(
                f"geom {geom!r} is a {typ}; a wheel must be a sphere or a cylinder geom"
            )
        name = name or self.geom_names[g] or f"geom{g}"
        return TreeBody(self.tree, b, pos, rot, mass, inertia, name), shape

    def with_constraints(self, *constraints) -> "MJCFSystem":
        """A copy whose system has `constraints` (constraints or lists of them) appended.

        **Example:** `imported.with_constraints(cx.rigid.rolling_contact(body, shape))`.
        """
        extra = body_constraints(*constraints)
        system = System(
            self.system.lagrangian,
            (*self.system.constraints, *extra),
            self.system.force,
            dynamics=self.system.dynamics,
        )
        return eqx.tree_at(lambda s: s.system, self, system)


# ----------------------------------------------------------------------------------------
# Import.


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


def _load(source, mujoco):
    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, Path) or (isinstance(source, str) and "<" not in source):
        return mujoco.MjModel.from_xml_path(str(source))
    if isinstance(source, str):
        return mujoco.MjModel.from_xml_string(source)
    raise TypeError(
        "from_mjcf: `source` must be a path to an MJCF file, an MJCF XML string or a "
        f"mujoco.MjModel, got {type(source).__name__}"
    )


def from_mjcf(
    source,
    *,
    ignore: tuple[str, ...] = (),
    control: Callable | None = None,
) -> MJCFSystem:
    r"""Import an MJCF model (parsed and compiled by MuJoCo) as a constrax system.

    Converted: bodies (mass, centre of mass, principal inertia), hinge, slide, ball and free
    joints as generalized coordinates of the kinematic tree (ball and free joints as unit
    quaternions, scalar first, with their norm rows as `cx.Holonomic`), gravity, armature
    (added to the kinetic energy as $\tfrac12 a_k v_k^2$, i.e. to MuJoCo's mass matrix
    diagonal; an actuator's `armature` (MuJoCo 4) adds $g^2$ times it to the joint it drives
    with gear $g$), hinge/slide springs (`stiffness`, `springref`; MuJoCo 4's polynomial
    `stiffness="k0 k1 k2"`, spring force $-(k_0\Delta + k_1\Delta^2 + k_2\Delta^3)$), joint
    damping ($-(d_0 + d_1|v| + d_2v^2)v$ with MuJoCo 4's polynomial `damping`; an actuator's
    `damping` adds $g^2$ times its coefficients, also when actuation is off) and actuators
    (`motor`/`general`/`position`/`velocity` without dynamics, joint transmission on
    hinge/slide joints or a fixed tendon of them, fixed or affine gain and bias,
    `ctrlrange`/`forcerange` clamping, a hinge/slide joint's `actuatorfrcrange` clamping,
    none from the groups `<option actuatorgroupdisable>` switches off) as a generalized
    force, and active `connect`, `weld` and `joint` equality constraints as
    exact `cx.Holonomic` rows (MuJoCo's are soft: see `docs/interop/mjcf.md`).

    Anything else that acts on the dynamics raises one `MJCFError` naming every such element
    (`MJCFError.problems`, one line each): tendons with stiffness, damping, friction or
    force ranges, flexes/composites, fluid forces, mocap bodies, gravity compensation,
    actuator dynamics, other transmissions (with their actuators' damping and armature), a
    tendon transmission's damping and armature, and equality types.
    Joint and tendon limits, collisions and friction loss are inequality or contact
    phenomena that a constrained Lagrangian system does not represent: they raise too unless
    MuJoCo's own model disables them (`m.opt.disableflags`: `mjDSBL_LIMIT`,
    `mjDSBL_CONTACT`, `mjDSBL_FRICTIONLOSS`, or `mjDSBL_CONSTRAINT` for all) or `ignore`
    names them. Tendons that exert no force once limits are ignored are accepted (they do
    nothing); a tendon limit that `ignore` drops warns (`MJCFWarning`, naming the tendon and
    the joints it couples). Disabled gravity, springs,
    damping or actuation (`mjDSBL_GRAVITY`, `..._SPRING`, `..._DAMPER`, `..._ACTUATION`) are
    honoured.

    **Arguments:**

    - `source`: a path to an MJCF file, an MJCF XML string or a `mujoco.MjModel`.
    - `ignore`: any of `"contacts"`, `"limits"`, `"frictionloss"` to drop those elements.
    - `control`: optional `control(t, q, qd, p) -> (nu,)`, the actuator inputs (MuJoCo's
      `ctrl`); by default the constant `p["ctrl"]`.

    **Returns:** an `MJCFSystem`; its `params` are arrays with MuJoCo's field names and
    shapes: `body_mass` `(nbody,)`, `body_inertia` `(nbody, 3)`, `dof_damping`,
    `dof_armature` `(nv,)`, `dof_dampingpoly` `(nv, 2)`, `jnt_stiffness` `(njnt,)`,
    `jnt_stiffnesspoly` `(njnt, 2)` (zeros before MuJoCo 4), `qpos_spring` `(nq,)`,
    `actuator_gear` `(nu, 6)`, `actuator_gainprm`, `actuator_biasprm` `(nu, 10)`,
    `actuator_ctrlrange`, `actuator_forcerange` `(nu, 2)`, `actuator_damping`,
    `actuator_armature` `(nu,)`, `actuator_dampingpoly` `(nu, 2)` (zeros before MuJoCo 4),
    `ctrl` `(nu,)`, `gravity` `(3,)`, `dof_actfrcrange` `(nv, 2)` (each dof's joint-level
    `actuatorfrcrange`) (row 0 of the body arrays is the world). Geometry is fixed at import.

    **Example:**

    ```python
    import mujoco
    m = mujoco.MjModel.from_xml_string(
        "<mujoco><option><flag contact='disable'/></option><worldbody><body>"
        "<joint type='hinge' axis='0 1 0'/><geom type='capsule' size='0.05' "
        "fromto='0 0 0 0 0 -1' mass='1'/></body></worldbody></mujoco>"
    )
    data = mujoco.MjData(m)
    imported = cx.rigid.from_mjcf(m)  # or a path to an MJCF file, or an XML string
    q, qd = imported.from_mujoco_state(data.qpos, data.qvel)
    out = cx.accelerations(imported.system, 0.0, q, qd, imported.params)
    qacc = imported.mujoco_acceleration(q, qd, out.qdd)  # == data.qacc after mj_forward
    ```
    """
    try:
        import mujoco
    except ImportError as err:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "cx.rigid.from_mjcf needs MuJoCo's Python package: pip install 'constrax[mjcf]'"
        ) from err
    if isinstance(ignore, str):
        ignore = (ignore,)
    for item in ignore:
        if item not in IGNORABLE:
            raise ValueError(f"from_mjcf: `ignore` may contain {IGNORABLE}, got {item!r}")
    if control is not None and not callable(control):
        raise TypeError(
            f"from_mjcf: `control` must be callable control(t, q, qd, p), got {control!r}"
        )
    m = _load(source, mujoco)
    check_supported(m, mujoco, tuple(ignore))

    O = mujoco.mjtObj
    f64 = lambda x: np.array(x, dtype=np.float64)
    body_joints = []
    for b in range(m.nbody):
        start, num = int(m.body_jntadr[b]), int(m.body_jntnum[b])
        body_joints.append(
            tuple((int(m.jnt_type[j]), j, int(m.jnt_qposadr[j])) for j in range(start, start + num))
        )
    joints = tuple(
        (int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])) for j in range(m.njnt)
    )
    act_q, act_v, act_dof = _transmissions(m, mujoco)
    tree = KinematicTree(
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

    D = mujoco.mjtDisableBit
    off = lambda bit: bool(m.opt.disableflags & int(bit))
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
    params = {k: jnp.asarray(v) for k, v in params.items()}

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
            length, speed = gear * (act_q @ q), gear * (act_v @ v)
            gp, bp = p["actuator_gainprm"], p["actuator_biasprm"]
            gain = gp[:, 0] + jnp.where(gain_affine, gp[:, 1] * length + gp[:, 2] * speed, 0.0)
            bias = jnp.where(bias_affine, bp[:, 0] + bp[:, 1] * length + bp[:, 2] * speed, 0.0)
            tau = gain * u + bias
            flo, fhi = p["actuator_forcerange"][:, 0], p["actuator_forcerange"][:, 1]
            tau = jnp.where(force_limited, jnp.clip(tau, flo, fhi), tau)
            # MuJoCo's qfrc_actuator = moment^T force (moment = gear x the transmission's
            # coefficients), clamped where a joint has an actuatorfrcrange.
            qfrc = act_v.T @ jnp.where(act_on, gear * tau, 0.0)
            if frc_limited.any():
                qlo, qhi = p["dof_actfrcrange"][:, 0], p["dof_actfrcrange"][:, 1]
                qfrc = jnp.where(frc_limited, jnp.clip(qfrc, qlo, qhi), qfrc)
            f = f + qfrc
        # Q = J^T f with qvel = J(q) qd (linear in qd): one reverse pass.
        _, vjp = jax.vjp(lambda x: tree.qvel(q, x), qd)
        return vjp(f)[0]

    constraints: list[AbstractConstraint] = []
    for j in range(m.njnt):
        typ, a = int(m.jnt_type[j]), int(m.jnt_qposadr[j])
        if typ in (_FREE, _BALL):
            s = a + 3 if typ == _FREE else a
            jn = mujoco.mj_id2name(m, O.mjOBJ_JOINT, j) or f"joint{j}"

            def norm(t, q, p, s=s):
                x = q[s : s + 4]
                return jnp.atleast_1d(x @ x - 1.0)

            constraints.append(Holonomic(norm, name=f"{jn}.orientation"))
    constraints += equality_constraints(m, mujoco, tree)
    # The Euler–Lagrange terms of `lagrangian` by the tree recursions (composite rigid body,
    # recursive Newton–Euler): the same model, traced and evaluated at a cost that grows like
    # the tree, not like nested autodiff of its unrolled kinematics.
    system = System(lagrangian, constraints, force=force, dynamics=TreeDynamics(tree))

    coords, dofs = [], []
    for j in range(m.njnt):
        jn = mujoco.mj_id2name(m, O.mjOBJ_JOINT, j) or f"joint{j}"
        typ = int(m.jnt_type[j])
        if typ == _FREE:
            coords += [f"{jn}.{c}" for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]
            dofs += [f"{jn}.{c}" for c in ("vx", "vy", "vz", "wx", "wy", "wz")]
        elif typ == _BALL:
            coords += [f"{jn}.{c}" for c in ("qw", "qx", "qy", "qz")]
            dofs += [f"{jn}.{c}" for c in ("wx", "wy", "wz")]
        else:
            coords.append(jn)
            dofs.append(jn)
    names = {
        f"{kind}_names": tuple(mujoco.mj_id2name(m, obj, i) or "" for i in range(count))
        for kind, obj, count in (
            ("body", O.mjOBJ_BODY, m.nbody),
            ("joint", O.mjOBJ_JOINT, m.njnt),
            ("geom", O.mjOBJ_GEOM, m.ngeom),
            ("actuator", O.mjOBJ_ACTUATOR, m.nu),
        )
    }
    bodies = tuple(
        (
            float(m.body_mass[b]),
            tuple(float(x) for x in m.body_inertia[b]),
            tuple(float(x) for x in m.body_ipos[b]),
            tuple(map(tuple, _rotation_np(m.body_iquat[b]).tolist())),
        )
        for b in range(m.nbody)
    )
    geom_types = {
        int(v): k[len("mjGEOM_") :].lower() for k, v in mujoco.mjtGeom.__members__.items()
    }
    geoms = tuple(
        (
            int(m.geom_bodyid[g]),
            geom_types.get(int(m.geom_type[g]), "unknown"),
            tuple(float(x) for x in m.geom_size[g]),
            tuple(float(x) for x in m.geom_pos[g]),
            tuple(map(tuple, _rotation_np(m.geom_quat[g]).tolist())),
        )
        for g in range(m.ngeom)
    )
    return MJCFSystem(
        system=system,
        params=params,
        tree=tree,
        coordinates=tuple(coords),
        dofs=tuple(dofs),
        **names,
        _bodies=bodies,
        _geoms=geoms,
    )
