r"""`TreeBody`: a frame fixed in one body of an imported kinematic tree, seen by the
`cx.rigid` constraint builders as an `AbstractRigidBody`. See `docs/interop/mjcf.md`
("Rolling wheels: exact rolling on an imported robot").

With $(x_b, R_b)$ the frame of body $b$ (`KinematicTree.body_frame`, placed along the
chain of its ancestors) and $(p_f, R_f)$ the frame's fixed placement in the body (a geom's
centre and axes, or the body's centre of mass and principal axes), the frame's origin and
orientation are

$$x = x_b + R_b\,p_f, \qquad R = R_b R_f,$$

and their rates follow by one `jax.jvp` along $\dot q$: $\dot x$, the spatial angular
velocity $\omega = (\dot RR^\top)^\vee$ and the body one $\Omega = R^\top\omega$. The frame
has no coordinates of its own: its pose is a function of the whole tree's $q$, not a
block of it.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._kinematics._body import AbstractRigidBody, check_point
from ._kinematic_tree import KinematicTree


def _moving_offset(R, xd, Rd, delta):
    r"""$\dot x + \dot RR^\top\Delta$: the velocity of the material point at $R^\top\Delta$
    in a frame $(x, R)$ moving at $(\dot x, \dot R)$; $= \dot x + \omega\times\Delta$ on
    $SO(3)$, without building $\omega$. One `jax.jvp` of the frame gives $\dot x$ and
    $\dot R$ where the generic `AbstractRigidBody.offset_velocity` traces the forward
    kinematics and its derivative twice (for $\dot x$ and for $\omega$)."""
    # Elementwise, not `@`: XLA:CPU runs each small `dot` as its own kernel.
    X = jnp.sum(R * delta[:, None], axis=0)
    return xd + jnp.sum(Rd * X[None, :], axis=1)


class TreeBody(AbstractRigidBody):
    r"""A frame fixed in one body of an imported kinematic tree, presented to the
    `cx.rigid` constraint builders (`rolling_contact`, `no_slip`, `plane_contact`,
    `interconnection`, friction forces...) as a `cx.rigid.AbstractRigidBody`.

    `position(q)` is the frame's origin (for a wheel: the centre of its geom), `rotation(q)`
    its orientation, both by forward kinematics of the tree; velocities follow by one
    `jax.jvp`. The frame has no coordinates of its own (no `split`, `coordinate_names` or
    `kinetic_energy`, unlike a `RigidBody`): the imported Lagrangian already holds the
    body's inertia. `mass` and `inertia` (the principal moments) are those of the MuJoCo
    body, for reference only.

    Get one from `MJCFSystem.body(name)` or `MJCFSystem.wheel(geom_name)`.
    """

    mass: Float[Array, ""]
    inertia: Float[Array, " 3"]
    name: str = eqx.field(static=True)
    tree: KinematicTree
    body_id: int = eqx.field(static=True)
    frame_pos: Float[Array, " 3"]
    frame_rot: Float[Array, "3 3"]

    def __init__(self, tree, body_id, frame_pos, frame_rot, mass, inertia, name):
        self.mass = jnp.asarray(mass, dtype=jnp.result_type(float))
        self.inertia = jnp.asarray(inertia, dtype=jnp.result_type(float))
        self.name = name
        self.tree = tree
        self.body_id = int(body_id)
        self.frame_pos = jnp.asarray(frame_pos, dtype=jnp.result_type(float))
        self.frame_rot = jnp.asarray(frame_rot, dtype=jnp.result_type(float))

    def _pose(self, q):
        q = jnp.asarray(q)
        pos, R = self.tree.body_frame(q, self.body_id)
        return pos + R @ self.frame_pos.astype(q.dtype), R @ self.frame_rot.astype(q.dtype)

    def position(self, q):
        return self._pose(q)[0]

    def rotation(self, q):
        return self._pose(q)[1]

    def rotate(self, q, X):
        return self.rotation(q) @ jnp.asarray(X, dtype=jnp.asarray(q).dtype)

    def point(self, q, X):
        pos, R = self._pose(q)
        return pos + R @ jnp.asarray(X, dtype=pos.dtype)

    def _rates(self, q, qd):
        return jax.jvp(self._pose, (jnp.asarray(q),), (jnp.asarray(qd),))

    def velocity(self, q, qd):
        return self._rates(q, qd)[1][0]

    def angular_velocity(self, q, qd):
        (_, R), (_, Rd) = self._rates(q, qd)
        W = Rd @ R.T
        return 0.5 * jnp.stack([W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]])

    def offset_velocity(self, q, qd, delta):
        r"""$\dot r + \omega\times\Delta$ from one `jax.jvp` of the frame
        (`offset_and_velocity`, `_moving_offset`)."""
        return self.offset_and_velocity(q, qd, lambda rotate: delta)[1]

    def placement(self, q):
        """The frame's origin and rotation from one pass of the forward kinematics."""
        x, R = self._pose(jnp.asarray(q))
        return x, lambda X: R @ jnp.asarray(X, R.dtype)

    def offset_and_velocity(self, q, qd, offset):
        """The offset placed by the frame's rotation and its material velocity, from one
        `jax.jvp` of the frame (`offset_velocity` and `rotate` would trace the forward
        kinematics once each)."""
        (_, R), (xd, Rd) = self._rates(q, qd)
        delta = check_point(offset(lambda X: R @ jnp.asarray(X, R.dtype)), "delta", R.dtype)
        return delta, _moving_offset(R, xd, Rd, delta)

    def body_angular_velocity(self, q, qd):
        return self.rotation(q).T @ self.angular_velocity(q, qd)

    def orientation_constraint(self):
        """`None`: the imported system already holds the unit-norm rows of the tree's
        quaternions."""
        return None
