r"""`KinematicTree`: the kinematic tree of an imported MJCF model, MuJoCo's forward
kinematics (`mj_kinematics`) in JAX, and the map between constrax's $\dot q$ and MuJoCo's
`qvel`. See `docs/interop/mjcf.md`.

Every body $b$ is placed at `body_pos`/`body_quat` in its parent's frame, then its joints
act in order: hinge, a rotation about `jnt_axis` through `jnt_pos` by $q - q_0$; slide, a
translation along `jnt_axis` by $q - q_0$; ball, the rotation of the joint's quaternion
about `jnt_pos`; free, the body frame set to the joint's position and quaternion. A body's
world frame is the composition along the chain of its ancestors,
$X_b = X_{b_1}\circ\dots\circ X_{b_k}$ (`frames` for every body, `body_frame` for one).

MuJoCo's velocities are $v = J(q)\dot q$ (`qvel`): hinge and slide rates as they are; for
a unit quaternion $x$ (ball joint, or the free joint's orientation)
$\Omega = 2\operatorname{vec}(\bar x\otimes\dot x)/|x|^2$, the child's angular velocity in
its own frame, and conversely $\dot x = \tfrac12 x\otimes(0, \Omega)$ (`qd_from_qvel`).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._kinematics._orientation import Quaternion
from .._kinematics._so3 import quaternion_multiply, quaternion_to_rotation
from ._mjcf_checks import _BALL, _FREE, _SLIDE

_QUATERNION = Quaternion()


# ----------------------------------------------------------------------------------------
# Small rotation and quaternion helpers.


def _unit_quaternion_body_rate(x, xd):
    r"""$\Omega = 2\operatorname{vec}(\bar x\otimes\dot x)/|x|^2$ (MuJoCo's ball/free `qvel`)."""
    return _QUATERNION.body_angular_velocity(x, xd)


def _quaternion_rate(x, omega):
    r"""$\dot x = \tfrac12 x\otimes(0, \Omega)$ for a unit quaternion $x$."""
    return 0.5 * quaternion_multiply(x, jnp.concatenate([jnp.zeros(1, x.dtype), omega]))


def _mm(A, B):
    """`A @ B` for (batches of) 3x3 matrices."""
    return jnp.einsum("...ij,...jk->...ik", A, B)


def _mv(A, x):
    """`A @ x` for (batches of) 3x3 matrices and 3-vectors."""
    return jnp.einsum("...ij,...j->...i", A, x)


def _axis_angle_matrix(axis, angle):
    """Rotation by `angle` about the unit vector `axis` (Rodrigues)."""
    K = jnp.array(
        [[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]],
        dtype=axis.dtype,
    )
    return jnp.eye(3, dtype=axis.dtype) + jnp.sin(angle) * K + (1.0 - jnp.cos(angle)) * _mm(K, K)


# ----------------------------------------------------------------------------------------
# The kinematic tree.


class KinematicTree(eqx.Module):
    r"""The kinematic tree of an MJCF model: MuJoCo's forward kinematics in JAX.

    Geometry (body placements, joint anchors and axes, reference positions `qpos0`,
    centre-of-mass offsets and principal frames) is fixed at import; the structure (parents,
    joint types and addresses, and `actuator_dofs`: the degree of freedom each actuator's
    joint transmission drives) is static.

    **Example:** `xpos, xmat = tree.frames(q)`: every body frame's origin `(nbody, 3)` and
    rotation `(nbody, 3, 3)` in the world, as MuJoCo's `data.xpos`, `data.xmat`;
    `tree.body_frame(q, b)`: body `b`'s alone, `(xpos[b], xmat[b])`.
    """

    body_pos: Float[Array, "nbody 3"]
    body_rot: Float[Array, "nbody 3 3"]
    body_ipos: Float[Array, "nbody 3"]
    body_irot: Float[Array, "nbody 3 3"]
    jnt_pos: Float[Array, "njnt 3"]
    jnt_axis: Float[Array, "njnt 3"]
    qpos0: Float[Array, " nq"]
    parent: tuple[int, ...] = eqx.field(static=True)
    body_joints: tuple[tuple[tuple[int, int, int], ...], ...] = eqx.field(static=True)
    joints: tuple[tuple[int, int, int], ...] = eqx.field(static=True)  # (type, qadr, vadr)
    nq: int = eqx.field(static=True)
    nv: int = eqx.field(static=True)
    # The dof (index in `qvel`) that each actuator's joint transmission drives: where its
    # reflected armature and damping act (MuJoCo 4's `actuator_armature`, `actuator_damping`).
    actuator_dofs: tuple[int, ...] = eqx.field(static=True, default=())

    def _place(self, q, b: int, pos, R):
        """Body `b`'s frame from its parent's `(pos, R)`: the fixed placement, then the body's
        joints in order (one step of MuJoCo's `mj_kinematics`)."""
        dtype = q.dtype
        pos = pos + _mv(R, self.body_pos[b].astype(dtype))
        R = _mm(R, self.body_rot[b].astype(dtype))
        for typ, j, a in self.body_joints[b]:
            if typ == _FREE:
                pos = q[a : a + 3]
                R = quaternion_to_rotation(q[a + 3 : a + 7])
            elif typ == _SLIDE:
                axis = self.jnt_axis[j].astype(dtype)
                pos = pos + _mv(R, axis) * (q[a] - self.qpos0[a])
            else:
                anchor = self.jnt_pos[j].astype(dtype)
                world_anchor = pos + _mv(R, anchor)
                if typ == _BALL:
                    R = _mm(R, quaternion_to_rotation(q[a : a + 4]))
                else:
                    angle = q[a] - self.qpos0[a]
                    R = _mm(R, _axis_angle_matrix(self.jnt_axis[j].astype(dtype), angle))
                pos = world_anchor - _mv(R, anchor)
        return pos, R

    def frames(self, q: Float[Array, " nq"]) -> tuple[Float[Array, "nbody 3"], Array]:
        """Body frames `(xpos, xmat)` at the coordinates `q` (MuJoCo's `mj_kinematics`)."""
        dtype = q.dtype
        xpos = [jnp.zeros(3, dtype)]
        xmat = [jnp.eye(3, dtype=dtype)]
        for b in range(1, len(self.parent)):
            pos, R = self._place(q, b, xpos[self.parent[b]], xmat[self.parent[b]])
            xpos.append(pos)
            xmat.append(R)
        return jnp.stack(xpos), jnp.stack(xmat)

    def body_frame(
        self, q: Float[Array, " nq"], body: int
    ) -> tuple[Float[Array, " 3"], Float[Array, "3 3"]]:
        r"""The frame `(xpos[body], xmat[body])` of one body, placed along the chain of its
        ancestors only: $X_b = X_{b_1}\circ X_{b_2}\circ\dots\circ X_{b_k}$ for the path
        $b_1, \dots, b_k = b$ from the world, $X_{b_i}$ each body's placement in its parent
        followed by its joints. The same arithmetic as `frames`, traced for the bodies on
        that chain only, so that a constraint row on one body (a `TreeBody`, an equality
        row) costs what the body's depth costs, not what the whole tree does.

        **Example:** `pos, R = tree.body_frame(q, 2)`.
        """
        chain, b = [], int(body)
        if not 0 <= b < len(self.parent):
            raise ValueError(f"`body` must be a body id in [0, {len(self.parent)}), got {body}")
        while b != 0:
            chain.append(b)
            b = self.parent[b]
        pos, R = jnp.zeros(3, q.dtype), jnp.eye(3, dtype=q.dtype)
        for b in reversed(chain):
            pos, R = self._place(q, b, pos, R)
        return pos, R

    def inertial_frames(self, q):
        """Centres of mass `(nbody, 3)` and principal frames `(nbody, 3, 3)` in the world."""
        xpos, xmat = self.frames(q)
        com = xpos + _mv(xmat, self.body_ipos.astype(q.dtype))
        return com, _mm(xmat, self.body_irot.astype(q.dtype))

    def qvel(self, q: Float[Array, " nq"], qd: Float[Array, " nq"]) -> Float[Array, " nv"]:
        r"""MuJoCo's `qvel` from $(q, \dot q)$: hinge/slide rates as they are; a ball
        joint's $\Omega = 2\operatorname{vec}(\bar x\otimes\dot x)/|x|^2$ (the child's angular
        velocity relative to its parent, in the child's frame); a free joint's
        $(\dot p, \Omega)$ (origin velocity in the world, angular velocity in the body
        frame). Linear in `qd`."""
        parts = []
        for typ, a, _ in self.joints:
            if typ == _FREE:
                parts += [
                    qd[a : a + 3],
                    _unit_quaternion_body_rate(q[a + 3 : a + 7], qd[a + 3 : a + 7]),
                ]
            elif typ == _BALL:
                parts.append(_unit_quaternion_body_rate(q[a : a + 4], qd[a : a + 4]))
            else:
                parts.append(qd[a : a + 1])
        if not parts:
            return jnp.zeros(0, q.dtype)
        return jnp.concatenate(parts)

    def qd_from_qvel(self, q, qvel):
        r"""The inverse map on unit quaternions: $\dot x = \tfrac12 x\otimes(0, \Omega)$."""
        out = jnp.zeros(self.nq, dtype=q.dtype)
        for typ, a, v in self.joints:
            if typ == _FREE:
                out = out.at[a : a + 3].set(qvel[v : v + 3])
                rate = _quaternion_rate(q[a + 3 : a + 7], qvel[v + 3 : v + 6])
                out = out.at[a + 3 : a + 7].set(rate)
            elif typ == _BALL:
                out = out.at[a : a + 4].set(_quaternion_rate(q[a : a + 4], qvel[v : v + 3]))
            else:
                out = out.at[a].set(qvel[v])
        return out

    def quaternion_slices(self) -> tuple[tuple[int, int], ...]:
        """`(start, stop)` of every quaternion block in `q` (ball and free joints)."""
        out = []
        for typ, a, _ in self.joints:
            if typ == _FREE:
                out.append((a + 3, a + 7))
            elif typ == _BALL:
                out.append((a, a + 4))
        return tuple(out)
