r"""`from_mjcf`: a `cx.System` from an MJCF model parsed and compiled by MuJoCo.

MuJoCo (the optional `mujoco` package) parses the file and compiles the `MjModel`;
constrax reads the compiled arrays and never re-implements the format. The kinematic tree
is rebuilt in JAX exactly as MuJoCo's forward kinematics (`KinematicTree`, in
`_kinematic_tree`); `MJCFSystem.body` and `MJCFSystem.wheel` (`_mjcf_system`) hand frames
of it to the constraint builders as `TreeBody` (`_tree_body`). `from_mjcf` is a sequence of
named steps: check the arguments, load and check the model (`_mjcf_checks`), read its tree,
parameters, Lagrangian, force and constraint rows (`_mjcf_terms`, `_mjcf_equalities`), and
name its coordinates and elements.

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

from ..._system import System
from ._mjcf_checks import IGNORABLE, check_supported
from ._mjcf_equalities import equality_constraints
from ._mjcf_system import MJCFSystem
from ._mjcf_terms import (
    _BALL,
    _FREE,
    _rotation_np,
    _transmissions,
    model_force,
    model_lagrangian,
    model_params,
    model_tree,
    norm_rows,
)
from ._tree_dynamics import TreeDynamics


def _import_mujoco():
    try:
        import mujoco
    except ImportError as err:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "cx.rigid.from_mjcf needs MuJoCo's Python package: pip install 'constrax[mjcf]'"
        ) from err
    return mujoco


def _check_arguments(ignore, control) -> tuple[str, ...]:
    """`ignore` as a tuple of names from `IGNORABLE`, and `control` callable or `None`."""
    if isinstance(ignore, str):
        ignore = (ignore,)
    for item in ignore:
        if item not in IGNORABLE:
            raise ValueError(f"from_mjcf: `ignore` may contain {IGNORABLE}, got {item!r}")
    if control is not None and not callable(control):
        raise TypeError(
            f"from_mjcf: `control` must be callable control(t, q, qd, p), got {control!r}"
        )
    return tuple(ignore)


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


def _coordinate_names(m, mujoco) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of the entries of `q` and of MuJoCo's `qvel` (`MJCFSystem.coordinates`,
    `MJCFSystem.dofs`)."""
    O = mujoco.mjtObj
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
    return tuple(coords), tuple(dofs)


def _element_names(m, mujoco) -> dict[str, tuple[str, ...]]:
    """MuJoCo's names of the bodies, joints, geoms and actuators, by id."""
    O = mujoco.mjtObj
    return {
        f"{kind}_names": tuple(mujoco.mj_id2name(m, obj, i) or "" for i in range(count))
        for kind, obj, count in (
            ("body", O.mjOBJ_BODY, m.nbody),
            ("joint", O.mjOBJ_JOINT, m.njnt),
            ("geom", O.mjOBJ_GEOM, m.ngeom),
            ("actuator", O.mjOBJ_ACTUATOR, m.nu),
        )
    }


def _bodies_and_geoms(m, mujoco) -> tuple[tuple, tuple]:
    """Per body `(mass, inertia diag, ipos, irot)` and per geom `(body, type, size, pos,
    rot)`, the constants `MJCFSystem.body` and `MJCFSystem.wheel` read."""
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
    return bodies, geoms


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
    mujoco = _import_mujoco()
    ignore = _check_arguments(ignore, control)
    m = _load(source, mujoco)
    check_supported(m, mujoco, ignore)
    act_q, act_v, act_dof = _transmissions(m, mujoco)
    tree = model_tree(m, act_dof)
    params = model_params(m, mujoco)
    lagrangian = model_lagrangian(m, tree, act_dof)
    force = model_force(m, mujoco, tree, (act_q, act_v, act_dof), control)
    constraints = norm_rows(m, mujoco) + equality_constraints(m, mujoco, tree)
    # The Euler–Lagrange terms of `lagrangian` by the tree recursions (composite rigid body,
    # recursive Newton–Euler): the same model, traced and evaluated at a cost that grows like
    # the tree, not like nested autodiff of its unrolled kinematics.
    system = System(lagrangian, constraints, force=force, dynamics=TreeDynamics(tree))
    coords, dofs = _coordinate_names(m, mujoco)
    bodies, geoms = _bodies_and_geoms(m, mujoco)
    return MJCFSystem(
        system=system,
        params=params,
        tree=tree,
        coordinates=coords,
        dofs=dofs,
        **_element_names(m, mujoco),
        _bodies=bodies,
        _geoms=geoms,
    )
