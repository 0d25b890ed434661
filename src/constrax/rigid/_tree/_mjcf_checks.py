r"""The feature check of `from_mjcf`: every element of a compiled `MjModel` that the import
cannot represent, one small function per element kind, all reported at once in one
`MJCFError`; and `MJCFWarning` for the couplings that `ignore` drops.

Each check returns the problems it found (one line each, naming the element as the file
names it); `check_supported` runs them all and raises once with the whole list, so that a
model with five unsupported elements costs one round of edits, not five.
"""

import warnings

import numpy as np

_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_JOINT_NAMES = {_FREE: "free", _BALL: "ball", _SLIDE: "slide", _HINGE: "hinge"}
IGNORABLE = ("contacts", "limits", "frictionloss")
_HINT = "; pass ignore=({!r},) to drop them (documented in docs/interop/mjcf.md)"
# The one wording of an equality kind that `_mjcf_equalities.EQUALITY_BUILDERS` lacks.
UNSUPPORTED_EQUALITY = "only connect, weld and joint equality constraints are converted"


class MJCFError(ValueError):
    """An MJCF feature that `from_mjcf` does not convert. The message names every such
    element of the model (one line each); `problems` holds the lines."""

    def __init__(self, message: str, problems: tuple[str, ...] = ()):
        super().__init__(message)
        self.problems = tuple(problems) or (message,)


class MJCFWarning(UserWarning):
    """An element of an MJCF model that `from_mjcf` drops because `ignore` asked it to,
    while it couples joints (a limited tendon: with a narrow range it acts as an equality
    between the joints it spans). The imported system then moves those joints
    independently, unlike MuJoCo."""


class _Model:
    """The compiled model with the import's choices: what is disabled, what is ignored,
    and each element's name as the file writes it."""

    def __init__(self, m, mujoco, ignore: tuple[str, ...]):
        self.m, self.mujoco, self.ignore = m, mujoco, ignore
        self.D = mujoco.mjtDisableBit
        self.O = mujoco.mjtObj

    def disabled(self, *bits) -> bool:
        return any(bool(self.m.opt.disableflags & int(b)) for b in bits)

    def dropped(self, phenomenon: str, bit) -> bool:
        """Whether limits, friction loss or contacts are off: disabled by the model itself
        (its own bit, or all constraints) or ignored at import."""
        return phenomenon in self.ignore or self.disabled(bit, self.D.mjDSBL_CONSTRAINT)

    def name(self, objtype, i: int, kind: str) -> str:
        name = self.mujoco.mj_id2name(self.m, objtype, int(i))
        return f"{kind} {name!r}" if name else f"{kind} #{i} (unnamed)"

    def joint(self, j: int) -> str:
        return self.name(self.O.mjOBJ_JOINT, j, "joint")

    def field(self, name: str, shape) -> np.ndarray:
        """A field of the model, zeros where this MuJoCo has none (older releases)."""
        return np.asarray(getattr(self.m, name, np.zeros(shape)))


def _options(M: _Model) -> list[str]:
    m = M.m
    out = []
    if m.opt.density > 0 or m.opt.viscosity > 0 or np.any(m.opt.wind != 0):
        out.append(
            "<option density/viscosity/wind>: fluid forces are not converted "
            f"(density={m.opt.density}, viscosity={m.opt.viscosity})"
        )
    return out


def _flexes_and_plugins(M: _Model) -> list[str]:
    out = []
    if M.m.nflex:
        out.append(
            f"{M.name(M.O.mjOBJ_FLEX, 0, 'flex')}: flexes (deformable and composite elements) "
            "are not converted"
        )
    if M.m.nplugin:
        out.append("plugins (<plugin>) are not converted")
    return out


def _bodies(M: _Model) -> list[str]:
    m, out = M.m, []
    for b in range(1, m.nbody):
        body = M.name(M.O.mjOBJ_BODY, b, "body")
        if m.body_mocapid[b] >= 0:
            out.append(f"{body}: mocap bodies are not converted")
        if m.body_gravcomp[b] != 0:
            out.append(f"{body}: gravcomp is not converted")
    return out


def _joints(M: _Model) -> list[str]:
    m, out = M.m, []
    springs_on = not M.disabled(M.D.mjDSBL_SPRING)
    poly = M.field("jnt_stiffnesspoly", (m.njnt, 2))
    for j in range(m.njnt):
        typ = int(m.jnt_type[j])
        if typ in (_FREE, _BALL) and springs_on and (m.jnt_stiffness[j] != 0 or np.any(poly[j])):
            out.append(
                f"{M.joint(j)}: stiffness of a {_JOINT_NAMES[typ]} joint is not converted "
                "(hinge and slide springs are)"
            )
        if typ == _FREE and m.body_parentid[m.jnt_bodyid[j]] != 0:
            out.append(f"{M.joint(j)}: a free joint must belong to a child of the world")
        if m.jnt_limited[j] and not M.dropped("limits", M.D.mjDSBL_LIMIT):
            out.append(
                f"{M.joint(j)}: joint limits (range) are inequality constraints, not "
                "converted" + _HINT.format("limits")
            )
        if M.field("jnt_actfrclimited", m.njnt)[j] and typ not in (_SLIDE, _HINGE):
            out.append(
                f"{M.joint(j)}: actuatorfrcrange of a {_JOINT_NAMES[typ]} joint is not "
                "converted (hinge and slide joints' are)"
            )
    return out


def _dofs(M: _Model) -> list[str]:
    m, out = M.m, []
    for v in range(m.nv):
        if m.dof_frictionloss[v] > 0 and not M.dropped("frictionloss", M.D.mjDSBL_FRICTIONLOSS):
            out.append(
                f"{M.joint(m.dof_jntid[v])}: frictionloss (dry friction) is not converted"
                + _HINT.format("frictionloss")
            )
    return out


def _tendons(M: _Model) -> list[str]:
    m, out = M.m, []
    damping_poly = M.field("tendon_dampingpoly", (m.ntendon, 2))
    stiffness_poly = M.field("tendon_stiffnesspoly", (m.ntendon, 2))
    armature = M.field("tendon_armature", m.ntendon)
    for t in range(m.ntendon):
        tendon = M.name(M.O.mjOBJ_TENDON, t, "tendon")
        if (
            m.tendon_stiffness[t] != 0
            or m.tendon_damping[t] != 0
            or np.any(damping_poly[t])
            or np.any(stiffness_poly[t])
        ):
            out.append(f"{tendon}: tendon stiffness/damping are not converted")
        if m.tendon_frictionloss[t] > 0 and not M.dropped("frictionloss", M.D.mjDSBL_FRICTIONLOSS):
            out.append(
                f"{tendon}: tendon frictionloss is not converted" + _HINT.format("frictionloss")
            )
        if m.tendon_limited[t] and not M.dropped("limits", M.D.mjDSBL_LIMIT):
            out.append(f"{tendon}: tendon limits are not converted" + _HINT.format("limits"))
        if armature[t] != 0:
            out.append(f"{tendon}: tendon armature is not converted")
        if M.field("tendon_actfrclimited", m.ntendon)[t]:
            out.append(f"{tendon}: tendon actuatorfrcrange is not converted")
    return out


def _contacts(M: _Model) -> list[str]:
    m, out = M.m, []
    if M.dropped("contacts", M.D.mjDSBL_CONTACT):
        return out
    if m.npair:
        out.append(
            f"{M.name(M.O.mjOBJ_PAIR, 0, 'contact pair')}: contacts are not converted"
            + _HINT.format("contacts")
        )
    for g in range(m.ngeom):
        if m.geom_contype[g] or m.geom_conaffinity[g]:
            out.append(
                f"{M.name(M.O.mjOBJ_GEOM, g, 'geom')}: collisions (contype/conaffinity) are "
                "not converted; add contacts as constrax constraints (MJCFSystem.wheel)"
                + _HINT.format("contacts")
            )
    return out


def _actuators(M: _Model) -> list[str]:
    m, mujoco, out = M.m, M.mujoco, []
    reflected = (
        (M.field("actuator_damping", m.nu) != 0)
        | np.any(M.field("actuator_dampingpoly", (m.nu, 2)) != 0, axis=-1)
        | (M.field("actuator_armature", m.nu) != 0)
    )
    fixed_affine = (int(mujoco.mjtGain.mjGAIN_FIXED), int(mujoco.mjtGain.mjGAIN_AFFINE))
    none_affine = (int(mujoco.mjtBias.mjBIAS_NONE), int(mujoco.mjtBias.mjBIAS_AFFINE))
    for i in range(m.nu):
        actuator = M.name(M.O.mjOBJ_ACTUATOR, i, "actuator")
        if int(m.actuator_dyntype[i]) != int(mujoco.mjtDyn.mjDYN_NONE):
            out.append(
                f"{actuator}: actuator dynamics (dyntype) are not converted; motor and general "
                "actuators without dynamics are"
            )
        if int(m.actuator_gaintype[i]) not in fixed_affine:
            out.append(f"{actuator}: gaintype is not converted (fixed and affine are)")
        if int(m.actuator_biastype[i]) not in none_affine:
            out.append(f"{actuator}: biastype is not converted (none and affine are)")
        trntype, target = int(m.actuator_trntype[i]), int(m.actuator_trnid[i, 0])
        if trntype == int(mujoco.mjtTrn.mjTRN_TENDON) and fixed_tendon_wraps(m, mujoco, target):
            if reflected[i]:
                out.append(
                    f"{actuator}: the damping and armature of a tendon transmission are not "
                    "converted (a joint transmission's are)"
                )
        elif trntype != int(mujoco.mjtTrn.mjTRN_JOINT) or m.jnt_type[target] not in (
            _SLIDE,
            _HINGE,
        ):
            out.append(
                f"{actuator}: only joint transmissions on hinge and slide joints and fixed "
                "tendons of such joints are converted"
                + (" (with the damping and armature they reflect)" if reflected[i] else "")
            )
    return out


def fixed_tendon_wraps(m, mujoco, t: int) -> list[tuple[int, float]]:
    r"""`(joint, coefficient)` of each wrap of tendon `t` where it is a fixed tendon of
    hinge and slide joints (its length $\sum_k c_k q_k$ is linear in `qpos`); `[]` otherwise
    (a spatial tendon, or a fixed one through a ball or free joint)."""
    start, num = int(m.tendon_adr[t]), int(m.tendon_num[t])
    joint_wrap = int(mujoco.mjtWrap.mjWRAP_JOINT)
    wraps = [(int(m.wrap_objid[w]), float(m.wrap_prm[w])) for w in range(start, start + num)]
    kinds = [int(m.wrap_type[w]) for w in range(start, start + num)]
    if not wraps or any(k != joint_wrap for k in kinds):
        return []
    if any(m.jnt_type[j] not in (_SLIDE, _HINGE) for j, _ in wraps):
        return []
    return wraps


def _equalities(M: _Model) -> list[str]:
    m, out = M.m, []
    if M.disabled(M.D.mjDSBL_EQUALITY, M.D.mjDSBL_CONSTRAINT):
        return out
    E = M.mujoco.mjtEq
    for e in range(m.neq):
        if not m.eq_active0[e]:
            continue
        equality = M.name(M.O.mjOBJ_EQUALITY, e, "equality")
        typ = int(m.eq_type[e])
        if typ not in (int(E.mjEQ_CONNECT), int(E.mjEQ_WELD), int(E.mjEQ_JOINT)):
            out.append(f"{equality}: {UNSUPPORTED_EQUALITY}")
        elif typ == int(E.mjEQ_WELD) and int(m.eq_objtype[e]) != int(M.O.mjOBJ_BODY):
            out.append(f"{equality}: a weld between sites is not converted (body1/body2 is)")
        elif typ == int(E.mjEQ_JOINT) and any(
            j >= 0 and m.jnt_type[j] not in (_SLIDE, _HINGE)
            for j in (m.eq_obj1id[e], m.eq_obj2id[e])
        ):
            out.append(f"{equality}: a joint equality couples hinge or slide joints only")
    return out


_CHECKS = (
    _options,
    _flexes_and_plugins,
    _bodies,
    _joints,
    _dofs,
    _tendons,
    _contacts,
    _actuators,
    _equalities,
)


def check_supported(m, mujoco, ignore: tuple[str, ...]) -> None:
    """Raise one `MJCFError` listing every element that the import cannot represent; warn
    (`MJCFWarning`) about the tendon couplings that `ignore` drops."""
    M = _Model(m, mujoco, ignore)
    problems = [line for check in _CHECKS for line in check(M)]
    if len(problems) == 1:
        raise MJCFError(problems[0], tuple(problems))
    if problems:
        raise MJCFError(
            f"from_mjcf: {len(problems)} elements of the model are not converted:\n"
            + "\n".join(f"  - {line}" for line in problems),
            tuple(problems),
        )
    _warn_dropped_couplings(M)


def _tendon_joints(M: _Model, t: int) -> list[str]:
    """The joints a fixed tendon spans (a spatial tendon: its sites, not listed)."""
    m = M.m
    start, num = int(m.tendon_adr[t]), int(m.tendon_num[t])
    joint_wrap = int(M.mujoco.mjtWrap.mjWRAP_JOINT)
    return [
        M.joint(int(m.wrap_objid[w]))
        for w in range(start, start + num)
        if int(m.wrap_type[w]) == joint_wrap
    ]


def _warn_dropped_couplings(M: _Model) -> None:
    m = M.m
    if "limits" not in M.ignore or M.disabled(M.D.mjDSBL_LIMIT, M.D.mjDSBL_CONSTRAINT):
        return
    dropped = []
    for t in range(m.ntendon):
        if not m.tendon_limited[t]:
            continue
        lo, hi = (float(x) for x in m.tendon_range[t])
        joints = _tendon_joints(M, t)
        spans = f" coupling {', '.join(joints)}" if joints else ""
        dropped.append(f"{M.name(M.O.mjOBJ_TENDON, t, 'tendon')} (range [{lo:g}, {hi:g}]){spans}")
    if dropped:
        warnings.warn(
            "from_mjcf: ignore=('limits',) drops the limits of "
            + "; ".join(dropped)
            + ". A limited tendon couples the joints it spans (with a narrow range, as an "
            "equality would: e.g. coupled finger joints); the imported system moves them "
            "independently, unlike MuJoCo. Where the coupling matters, write it as a "
            "cx.Holonomic row (MJCFSystem.with_constraints).",
            MJCFWarning,
            stacklevel=4,
        )
