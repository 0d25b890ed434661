r"""The equality constraints of an imported MJCF model as exact `cx.Holonomic` rows: one
small builder per MuJoCo equality kind (`mjtEq`), dispatched by `EQUALITY_BUILDERS`. See
`docs/interop/mjcf.md` ("Soft (MuJoCo) versus exact (constrax) equality constraints").

With $(x_b, R_b)$ body $b$'s frame (`KinematicTree.body_frame`, placed along the chain of
its ancestors):

- **connect** (`"<name>.connect"`, 3 rows): $x_1 + R_1a_1 - x_2 - R_2a_2 = 0$, the anchor
  $a_1$ of body 1 (`eq_data[0:3]`) on the point $a_2$ of body 2 (`eq_data[3:6]`), or two
  sites' positions in their bodies;
- **weld** (`"<name>.weld"`, 6 rows): the connect rows at body 1's point `relpose[0:3]`
  (`eq_data[3:6]`) and body 2's anchor (`eq_data[0:3]`), then MuJoCo's orientation error
  $\operatorname{vec}(\bar x_2\otimes x_1\otimes x_\text{rel})$ (up to the sign of the
  quaternion), computed from $E = R_2^\top R_1R_\text{rel}$ as
  $(E - E^\top)^\vee/(2\sqrt{1 + \operatorname{tr}E})$, zero iff $E = I$ for angles below
  $\pi$;
- **joint** (`"<name>.joint"`, 1 row): $q_1 - q_{1,0} = c_0 + c_1d + c_2d^2 + c_3d^3 +
  c_4d^4$ with $d = q_2 - q_{2,0}$ (`eq_data[0:5]` the coefficients, $q_0$ MuJoCo's
  `qpos0`), or $q_1 - q_{1,0} = c_0$ without a second joint.

MuJoCo imposes these softly; these rows hold exactly. Inactive equalities
(`eq_active0` false) are left out, and none when the model disables equalities
(`mjDSBL_EQUALITY` or `mjDSBL_CONSTRAINT`). `check_supported` (`_mjcf_checks`) has
refused every other kind, site-based welds and joint equalities on ball or free joints
before the builders run.
"""

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from ..._constraints import AbstractConstraint, Holonomic
from .._kinematics._so3 import quaternion_to_rotation
from ._kinematic_tree import KinematicTree
from ._mjcf_checks import UNSUPPORTED_EQUALITY, MJCFError

# MuJoCo's `mjtEq` values of the converted kinds (`mujoco.mjtEq.mjEQ_CONNECT`, ...).
_CONNECT, _WELD, _JOINT = 0, 1, 2


def _data(m, e: int) -> np.ndarray:
    return np.array(m.eq_data[e], dtype=np.float64)


def _anchors(m, mujoco, e: int, *, weld: bool):
    """`(b1, a1, b2, a2)`: the two bodies of a connect or weld and the anchor in each
    body's frame (two sites' positions, or the anchors in `eq_data`)."""
    if int(m.eq_objtype[e]) == int(mujoco.mjtObj.mjOBJ_SITE):  # connect between two sites
        s1, s2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        b1, b2 = int(m.site_bodyid[s1]), int(m.site_bodyid[s2])
        a1, a2 = np.array(m.site_pos[s1]), np.array(m.site_pos[s2])
    else:
        data = _data(m, e)
        b1, b2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        if weld:  # MuJoCo: body1's point is relpose[0:3], body2's is the anchor.
            a1, a2 = data[3:6], data[0:3]
        else:
            a1, a2 = data[0:3], data[3:6]
    return b1, jnp.asarray(a1), b2, jnp.asarray(a2)


def connect(m, mujoco, tree: KinematicTree, e: int, label: str) -> Holonomic:
    r"""$x_1 + R_1a_1 - x_2 - R_2a_2$: the two anchors coincide (3 rows)."""
    b1, a1, b2, a2 = _anchors(m, mujoco, e, weld=False)

    def g(t, q, p):
        (x1, R1), (x2, R2) = tree.body_frame(q, b1), tree.body_frame(q, b2)
        return x1 + R1 @ a1 - x2 - R2 @ a2

    return Holonomic(g, name=f"{label}.connect")


def weld(m, mujoco, tree: KinematicTree, e: int, label: str) -> Holonomic:
    r"""The connect rows and MuJoCo's orientation error
    $\operatorname{vec}(\bar x_2\otimes x_1\otimes x_\text{rel})$ (6 rows)."""
    b1, a1, b2, a2 = _anchors(m, mujoco, e, weld=True)
    rel = jnp.asarray(_data(m, e)[6:10])

    def g(t, q, p):
        (x1, R1), (x2, R2) = tree.body_frame(q, b1), tree.body_frame(q, b2)
        dpos = x1 + R1 @ a1 - x2 - R2 @ a2
        # MuJoCo's orientation error vec(conj(q2) * q1 * relpose) (up to the sign of the
        # quaternion), from the rotation E = R2^T R1 Rrel:
        # vec = (E - E^T)^vee / (2 sqrt(1 + tr E)), zero iff E = I (|angle| < pi).
        E = R2.T @ R1 @ quaternion_to_rotation(rel.astype(q.dtype))
        skew = jnp.stack([E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]])
        vec = 0.5 * skew / jnp.sqrt(1.0 + jnp.trace(E))
        return jnp.concatenate([dpos, vec])

    return Holonomic(g, name=f"{label}.weld")


def joint(m, mujoco, tree: KinematicTree, e: int, label: str) -> Holonomic:
    r"""$q_1 - q_{1,0} - \sum_k c_k(q_2 - q_{2,0})^k$, the quartic coupling of two hinge or
    slide joints (1 row; $q_1 - q_{1,0} - c_0$ without a second joint)."""
    j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
    a1 = int(m.jnt_qposadr[j1])
    a2 = int(m.jnt_qposadr[j2]) if j2 >= 0 else -1
    ref1 = float(m.qpos0[a1])
    ref2 = float(m.qpos0[a2]) if j2 >= 0 else 0.0
    coef = jnp.asarray(_data(m, e)[0:5])

    def g(t, q, p):
        if a2 < 0:
            return jnp.atleast_1d(q[a1] - ref1 - coef[0])
        d = q[a2] - ref2
        poly = coef[0] + d * (coef[1] + d * (coef[2] + d * (coef[3] + d * coef[4])))
        return jnp.atleast_1d(q[a1] - ref1 - poly)

    return Holonomic(g, name=f"{label}.joint")


EqualityBuilder = Callable[..., AbstractConstraint]
"""`builder(m, mujoco, tree, e, label)`: the rows of equality `e`, named `"<label>.<kind>"`."""

EQUALITY_BUILDERS: dict[int, EqualityBuilder] = {
    _CONNECT: connect,
    _WELD: weld,
    _JOINT: joint,
}
"""The builder of each converted `mjtEq` kind; `check_supported` refuses the others."""


def equality_constraints(m, mujoco, tree: KinematicTree) -> list[AbstractConstraint]:
    """The rows of every active equality of `m`, in MuJoCo's order (none when the model
    disables equalities or all constraints)."""
    D = mujoco.mjtDisableBit
    if m.opt.disableflags & (int(D.mjDSBL_EQUALITY) | int(D.mjDSBL_CONSTRAINT)):
        return []
    out = []
    for e in range(m.neq):
        if not m.eq_active0[e]:
            continue
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_EQUALITY, e)
        build = EQUALITY_BUILDERS.get(int(m.eq_type[e]))
        if build is None:  # `check_supported` raises first; the same words if it did not
            equality = f"equality {name!r}" if name else f"equality #{e} (unnamed)"
            raise MJCFError(f"{equality}: {UNSUPPORTED_EQUALITY}")
        out.append(build(m, mujoco, tree, e, name or f"equality{e}"))
    return out
