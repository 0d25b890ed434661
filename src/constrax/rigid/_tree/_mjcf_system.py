"""`MJCFSystem`: a system imported by `from_mjcf`, with the map between MuJoCo's state and
constrax's, and the bodies and wheels of the tree for the constraint builders. See
`docs/interop/mjcf.md`."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._system import System
from ..._terms import mass_matrix
from .._contact._contacts import body_constraints
from .._contact._shapes import Disk, Sphere
from ._kinematic_tree import KinematicTree
from ._mjcf_checks import MJCFError
from ._tree_body import TreeBody


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
