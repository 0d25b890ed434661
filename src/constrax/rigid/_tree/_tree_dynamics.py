r"""Tree-structured dynamics of a `KinematicTree`: the composite-rigid-body algorithm for the
mass matrix and the recursive Newton–Euler algorithm for the bias, in spatial-vector algebra
(Featherstone, *Rigid Body Dynamics Algorithms*, 2008, ch. 2, 5 and 6), and their map to
constrax's coordinates $q$ (quaternion *rates* as $\dot q$).

Every quantity is a world-frame spatial vector about the world origin, ordered
(angular, linear): a body's velocity $\mathsf v_b = (\omega_b, \dot o_b)$ with $\dot o_b$
the velocity of the body point at the origin; a degree of freedom's motion subspace
$S_i = (a_i, p_i\times a_i)$ for a rotation about the axis $a_i$ through $p_i$, and
$(0, a_i)$ for a translation. With $v$ MuJoCo's `qvel`:

- **kinematics** level by level: a body's world pose is its parent's composed with its
  local pose (the fixed placement, then its joints in order); one `jax.lax.scan` step per
  depth level, the bodies of a level vectorised, so the traced program does not grow with
  the number of bodies;
- **velocities and accelerations** are sums over ancestors, $\mathsf v_b = \sum_{i \preceq b}
  S_i v_i$, $\mathsf a_b = \mathsf a_0 + \sum_{i\preceq b} (\dot S_i v_i + S_i\dot v_i)$
  with $\dot S_i v_i = \mathsf v^-_i \times S_i v_i$ ($\mathsf v^-_i$ the velocity of the
  frame that carries the joint's axes, Featherstone 2008, §2.11) and
  $\mathsf a_0 = (0, -g)$ (gravity as an upward acceleration of the base, §5.3): one masked
  product with the tree's static ancestor matrix each;
- **recursive Newton–Euler** (§5.3): $\mathsf f_b = I_b\mathsf a_b + \mathsf v_b\times^*
  I_b\mathsf v_b$, joint forces $\tau_i = S_i^\top\sum_{d\succeq b(i)}\mathsf f_d$ (a
  product with the static descendant matrix);
- **composite rigid body** (§6.2): $I^c_b = \sum_{d\succeq b} I_d$,
  $M_{ij} = S_i^\top I^c_{b(i)} S_j$ for $b(j)\preceq b(i)$ (and symmetric), plus the
  armature on the diagonal: the joint's own and what the actuators driving it reflect,
  $g^2 a$ for a rotor of inertia $a$ behind a gear $g$ (MuJoCo 4's actuator `armature`).

In $q$: $v = E(q)\dot q$ with $E$ block diagonal (hinge/slide and the free joint's
position: the identity; a unit quaternion $x$: $\Omega = 2\operatorname{vec}(\bar x\otimes
\dot x)/|x|^2$). The kinetic energy is $T = \tfrac12 v^\top M v$, so
$W = \partial^2L/\partial\dot q^2 = E^\top M E$, and by d'Alembert's principle (each body
point moves with $J^v E\dot q$) the Euler–Lagrange expression is
$E^\top(M\dot v + c)$ with $\dot v = E\ddot q + \dot E\dot q$ and $c$ the Newton–Euler bias
(Coriolis, centrifugal, gravity). Hence

$$f_0 = \partial L/\partial q - (\partial^2 L/\partial\dot q\,\partial q)\dot q
= -E^\top\big(M\dot E\dot q + c\big) - \partial V_\text{spring}/\partial q,$$

with $\dot E\dot q = -2(x\cdot\dot x)\,\Omega/|x|^2$ per quaternion. MuJoCo's armature of a
ball or free joint is isotropic; an anisotropic one (set through the parameters) keeps the
gyroscopic term $\Omega\times A\Omega$ that the Lagrangian $\tfrac12 v^\top A v$ implies.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..._unconstrained import AbstractDynamics
from .._kinematics._so3 import cross, quaternion_to_rotation
from ._armature import dof_armature
from ._spatial import _compose, _cross_force, _cross_motion, _inertia_times, _mm, _mv, _rodrigues
from ._tree_layout import _Constants, _Layout


def _vector(x, name: str, size: int, what: str):
    """`x` as a float array of shape `(size,)`; `ValueError` naming `name` otherwise."""
    x = jnp.asarray(x)
    if x.shape != (size,):
        raise ValueError(f"`{name}` must have shape ({what},) = ({size},), got {x.shape}")
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(float))


# ----------------------------------------------------------------------------------------
# The dynamics.


class TreeDynamics(AbstractDynamics):
    r"""Mass matrix and Euler–Lagrange bias of a `KinematicTree` by the composite-rigid-body
    and recursive Newton–Euler algorithms (Featherstone, *Rigid Body Dynamics Algorithms*,
    2008, ch. 5–6), vectorised over all bodies: the traced program has the same size for a
    4-link chain and a humanoid (the kinematics is a `jax.lax.scan` over depth levels; only
    the largest number of joints on one body is unrolled).

    In MuJoCo's velocities $v$ (`qvel`), with $S_i$ the motion subspace of degree of
    freedom $i$, $b(i)$ its body and $I_b$ the spatial inertia of body $b$: the composite
    rigid-body mass matrix $M_{ij} = S_i^\top I^c_{b(i)} S_j$ for $b(j)\preceq b(i)$,
    $I^c_b = \sum_{d\succeq b} I_d$ (§6.2), plus the armature on the diagonal (the
    joints' own and the actuators' reflected $g_i^2 a_i$, `dof_armature`); the bias
    $c = \tau(q, v, \dot v = 0)$ of recursive Newton–Euler (§5.3), body forces
    $\mathsf f_b = I_b\mathsf a_b + \mathsf v_b\times^* I_b\mathsf v_b$ with gravity as an
    upward acceleration of the base, joint forces $\tau_i = S_i^\top\sum_{d\succeq b(i)}
    \mathsf f_d$. In constrax's coordinates, $v = E(q)\dot q$ (quaternion rates), so
    $W = E^\top M E$ and $f_0 = -E^\top(M\dot E\dot q + c) - \partial V_\text{spring}/\partial
    q$: the terms that autodiff of the imported Lagrangian gives.

    The parameters `p` are those of `from_mjcf` (`body_mass`, `body_inertia`,
    `dof_armature`, `jnt_stiffness`, `qpos_spring`, `gravity`, and where present
    `jnt_stiffnesspoly`, `actuator_armature` with `actuator_gear`); the geometry and the
    dof each actuator drives (`tree.actuator_dofs`) are the tree's.
    As an `AbstractDynamics` it is the `dynamics` of every `from_mjcf` system: the engine
    reads $(W, f_0)$ from it instead of autodiff of the imported Lagrangian (the time `t`
    is ignored: the Lagrangian does not depend on it).

    **Example:**

    ```python
    imported = cx.rigid.from_mjcf(
        "<mujoco><worldbody><body><joint type='hinge' axis='0 1 0'/><geom type='capsule' "
        "size='0.05' fromto='0 0 0 0 0 -1' mass='1' contype='0' conaffinity='0'/>"
        "<body pos='0 0 -1'><joint type='hinge' axis='0 1 0'/><geom type='sphere' "
        "size='0.1' mass='0.5' contype='0' conaffinity='0'/></body></body></worldbody>"
        "</mujoco>"
    )
    q, qd, p = jnp.array([0.3, -0.2]), jnp.array([1.0, 0.5]), imported.params
    dyn = TreeDynamics(imported.tree)          # what imported.system.dynamics holds
    W, f0 = dyn.euler_lagrange_terms(0.0, q, qd, p)  # as autodiff of the Lagrangian
    W_ad, f0_ad = cx.LagrangianDynamics(imported.system.lagrangian).euler_lagrange_terms(
        0.0, q, qd, p
    )
    M = dyn.mass_matrix(q, p)                  # MuJoCo's full qM
    ```
    """

    _geometry: "_Constants" = eqx.field(static=True)
    layout: _Layout = eqx.field(static=True)

    def __init__(self, tree):
        # The geometry as static numpy constants, as the imported Lagrangian closes over it:
        # the parameters `p` are what is differentiated, and a `System` holding this module
        # may sit in a static field (`cx.Trajectory.system`), where arrays do not belong.
        self._geometry = _Constants(jax.tree.map(np.asarray, tree))
        self.layout = _Layout(
            tree.parent,
            tree.body_joints,
            tree.joints,
            tree.nq,
            tree.nv,
            tree.actuator_dofs,
        )

    @property
    def tree(self):
        """The `KinematicTree`, its arrays as numpy constants."""
        return self._geometry.value

    # -- kinematics --------------------------------------------------------------------

    def _joint_transforms(self, q):
        """Local transforms of all joints, stacked [hinge, slide, ball, free, identity]."""
        L, T, dt = self.layout, self.tree, q.dtype
        Rs, ts = [], []
        if L.hinge.size:
            axis = T.jnt_axis[L.hinge].astype(dt)
            anchor = T.jnt_pos[L.hinge].astype(dt)
            R = _rodrigues(axis, q[L.hinge_q] - T.qpos0[L.hinge_q].astype(dt))
            Rs.append(R)
            ts.append(anchor - _mv(R, anchor))
        if L.slide.size:
            d = q[L.slide_q] - T.qpos0[L.slide_q].astype(dt)
            Rs.append(jnp.broadcast_to(jnp.eye(3, dtype=dt), (L.slide.size, 3, 3)))
            ts.append(T.jnt_axis[L.slide].astype(dt) * d[:, None])
        if L.ball.size:
            R = quaternion_to_rotation(q[L.ball_q[:, None] + np.arange(4)])
            anchor = T.jnt_pos[L.ball].astype(dt)
            Rs.append(R)
            ts.append(anchor - _mv(R, anchor))
        if L.free.size:
            Rs.append(quaternion_to_rotation(q[L.free_q[:, None] + 3 + np.arange(4)]))
            ts.append(q[L.free_q[:, None] + np.arange(3)])
        Rs.append(jnp.eye(3, dtype=dt)[None])
        ts.append(jnp.zeros((1, 3), dt))
        return jnp.concatenate(Rs), jnp.concatenate(ts)

    def _poses(self, q):
        """World poses of all bodies `(R, t)` and of the frame after every joint."""
        L, T, dt = self.layout, self.tree, q.dtype
        JR, Jt = self._joint_transforms(q)
        keep = ~L.placed_by_free
        R = jnp.where(keep[:, None, None], T.body_rot.astype(dt), jnp.eye(3, dtype=dt))
        t = jnp.where(keep[:, None], T.body_pos.astype(dt), 0.0)
        prefix = []
        for k in range(L.K):
            R, t = _compose(R, t, JR[L.body_slots[:, k]], Jt[L.body_slots[:, k]])
            prefix.append((R, t))
        R, t = self._world_poses(R, t)
        # Frame after joint j: the parent's world pose composed with the body's local
        # chain up to j.
        PR = jnp.stack([p[0] for p in prefix])  # (K, nbody, 3, 3)
        Pt = jnp.stack([p[1] for p in prefix])
        b, s = L.jnt_body, L.jnt_slot - 1
        pb = L.parent[b]
        JR, Jt = _compose(R[pb], t[pb], PR[s, b], Pt[s, b])
        return R, t, JR, Jt

    def _world_poses(self, R, t):
        r"""World poses from the bodies' local poses, one `lax.scan` step per depth level
        (the bodies of a level vectorised): $X_b = X_{\lambda(b)}\circ X^\text{local}_b$."""
        L = self.layout
        if L.level_bodies.shape[0] == 0:
            return R, t
        dt = R.dtype
        eye = jnp.eye(3, dtype=dt)
        Rl = jnp.concatenate([R, eye[None]])[L.level_bodies]
        tl = jnp.concatenate([t, jnp.zeros((1, 3), dt)])[L.level_bodies]
        W = L.level_bodies.shape[1]
        init = (jnp.broadcast_to(eye, (W, 3, 3)), jnp.zeros((W, 3), dt))

        def level(carry, x):
            xR, xt, parent = x
            pose = _compose(carry[0][parent], carry[1][parent], xR, xt)
            return pose, pose

        _, (Rw, tw) = jax.lax.scan(level, init, (Rl, tl, jnp.asarray(L.level_parent)))
        Rw = jnp.concatenate([eye[None], Rw.reshape(-1, 3, 3)])[L.body_row]
        tw = jnp.concatenate([jnp.zeros((1, 3), dt), tw.reshape(-1, 3)])[L.body_row]
        return Rw, tw

    def frames(self, q: Float[Array, " nq"]) -> tuple[Float[Array, "nbody 3"], Array]:
        """Body frames `(xpos (nbody, 3), xmat (nbody, 3, 3))`, as `KinematicTree.frames`
        (MuJoCo's `mj_kinematics`), level by level."""
        q = _vector(q, "q", self.layout.nq, "nq")
        R, t, _, _ = self._poses(q)
        return t, R

    def motion_subspaces(self, q: Float[Array, " nq"]) -> Float[Array, "nv 6"]:
        r"""$S_i = (a_i, p_i\times a_i)$ (rotation about $a_i$ through $p_i$) or $(0, a_i)$
        (translation along $a_i$) for every degree of freedom, world frame, about the
        origin (MuJoCo's `cdof`, there about the subtree's centre of mass)."""
        q = _vector(q, "q", self.layout.nq, "nq")
        return self._subspaces(q, local=False)[0]

    def _subspaces(self, q, local: bool = True):
        r"""`(S, R, t, r)`: the motion subspaces, the bodies' world orientations and
        positions, and the point `r` (per body) that the positions and every spatial
        quantity are taken about. With `local`, $r_b$ is the origin of the root body of $b$'s
        tree (MuJoCo takes them about that root's subtree centre of mass); otherwise the
        world origin. The mass matrix and the bias do not depend on that point, but float32
        does: about the world origin, a robot 10 m away loses three more digits in the
        cancellations of $I = \bar I + m(|c|^2 1 - cc^\top)$ (measured on the humanoid's
        accelerations: 4e-3 relative error against 7e-6 at the origin). The shift is a
        constant to autodiff (`stop_gradient`), exact since neither depends on it; `t + r`
        is the world position with its derivatives."""
        L, T, dt = self.layout, self.tree, q.dtype
        R, t, JR, Jt = self._poses(q)
        if local:
            r = t[L.body_root]
            r0 = jax.lax.stop_gradient(r)
            t, Jt = t - r0, Jt - r0[L.jnt_body]
        else:
            r = jnp.zeros_like(t)
        if L.nv == 0:
            return jnp.zeros((0, 6), dt), R, t, r
        j = L.dof_jnt
        eye = jnp.eye(3, dtype=dt)
        u = jnp.where(
            (L.dof_unit >= 0)[:, None], eye[np.maximum(L.dof_unit, 0)], T.jnt_axis[j].astype(dt)
        )
        Rj, tj = JR[j], Jt[j]
        a = jnp.where(L.dof_world[:, None], u, _mv(Rj, u))
        anchor = jnp.where(L.dof_is_free[:, None], 0.0, T.jnt_pos[j].astype(dt))
        p = tj + _mv(Rj, anchor)
        S = jnp.where(
            L.dof_rot[:, None],
            jnp.concatenate([a, cross(p, a)], -1),
            jnp.concatenate([jnp.zeros_like(a), a], -1),
        )
        return S, R, t, r

    def _inertias(self, R, t, p, dt):
        """Spatial inertias about the point the positions `t` are taken from (`_subspaces`),
        `(m, h = m c, Ibar)` per body (world: zero)."""
        T = self.tree
        com = t + _mv(R, T.body_ipos.astype(dt))
        Ri = _mm(R, T.body_irot.astype(dt))
        m = jnp.asarray(p["body_mass"], dt).at[0].set(0.0)
        diag = jnp.asarray(p["body_inertia"], dt).at[0].set(0.0)
        Ic = _mm(Ri * diag[:, None, :], jnp.swapaxes(Ri, -1, -2))
        cc = jnp.sum(com * com, -1)
        Ibar = Ic + m[:, None, None] * (
            cc[:, None, None] * jnp.eye(3, dtype=dt) - com[:, :, None] * com[:, None, :]
        )
        return m, m[:, None] * com, Ibar

    # -- dynamics in MuJoCo's velocity coordinates --------------------------------------

    def mass_matrix(self, q: Float[Array, " nq"], p: dict) -> Float[Array, "nv nv"]:
        r"""The joint-space inertia matrix in `qvel` coordinates by the composite-rigid-body
        algorithm, armature on the diagonal (MuJoCo's `mj_fullM`)."""
        q = _vector(q, "q", self.layout.nq, "nq")
        S, R, t, _ = self._subspaces(q)
        return self._crb(S, R, t, p, q.dtype)

    def _crb(self, S, R, t, p, dt):
        L = self.layout
        m, h, Ibar = self._inertias(R, t, p, dt)
        D = jnp.asarray(L.descendants, dt)
        mc, hc = D @ m, D @ h
        Ic = jnp.einsum("bd,dij->bij", D, Ibar)
        b = L.dof_body
        F = _inertia_times(mc[b], hc[b], Ic[b], S)  # (nv, 6): I^c_{b(i)} S_i
        G = F @ S.T  # G[i, k] = S_k . I^c_{b(i)} S_i
        M = jnp.where(L.dof_anc, G, jnp.where(L.dof_anc.T, G.T, 0.0))
        return M + jnp.diag(self._armature(p, dt))

    def _armature(self, p, dt):
        return dof_armature(p, self.layout.actuator_dofs, self.layout.nv, dt)

    def inverse_dynamics(
        self, q: Float[Array, " nq"], v: Float[Array, " nv"], qacc: Float[Array, " nv"], p: dict
    ) -> Float[Array, " nv"]:
        r"""$\tau = M(q)\dot v + c(q, v)$ by recursive Newton–Euler (Featherstone 2008,
        §5.3): Coriolis, centrifugal and gravity forces, armature $a\odot\dot v$ (and the
        gyroscopic $\Omega\times A\Omega$ of an anisotropic ball/free armature). With
        `qacc = 0` this is MuJoCo's `qfrc_bias`."""
        q = _vector(q, "q", self.layout.nq, "nq")
        v = _vector(v, "v", self.layout.nv, "nv").astype(q.dtype)
        qacc = _vector(qacc, "qacc", self.layout.nv, "nv").astype(q.dtype)
        S, R, t, _ = self._subspaces(q)
        return self._rne(S, R, t, v, qacc, p, q.dtype)

    def bias(self, q: Float[Array, " nq"], v: Float[Array, " nv"], p: dict) -> Float[Array, " nv"]:
        r"""$c(q, v)$: `inverse_dynamics` at zero acceleration (MuJoCo's `qfrc_bias`)."""
        return self.inverse_dynamics(q, v, jnp.zeros(self.layout.nv, jnp.asarray(q).dtype), p)

    def _rne(self, S, R, t, v, qacc, p, dt):
        L = self.layout
        if L.nv == 0:
            return jnp.zeros(0, dt)
        Sv = S * v[:, None]
        Bd = jnp.asarray(L.body_dofs, dt)
        vel = Bd @ Sv  # (nbody, 6)
        v_before = jnp.asarray(L.dof_before, dt) @ Sv  # frame carrying each dof's axes
        g = jnp.asarray(p["gravity"], dt)
        a0 = jnp.concatenate([jnp.zeros(3, dt), -g])
        acc = a0 + Bd @ (_cross_motion(v_before, Sv) + S * qacc[:, None])
        m, h, Ibar = self._inertias(R, t, p, dt)
        f = _inertia_times(m, h, Ibar, acc) + _cross_force(vel, _inertia_times(m, h, Ibar, vel))
        F = jnp.asarray(L.descendants, dt) @ f
        arm = self._armature(p, dt)
        tau = jnp.sum(S * F[L.dof_body], -1) + arm * qacc
        if L.quat_v.size:  # Omega x A Omega of the quaternion joints' armature
            idx = L.quat_v[:, None] + np.arange(3)
            Om, A = v[idx], arm[idx]
            tau = tau.at[idx].add(cross(Om, A * Om))
        return tau

    # -- the map to constrax's coordinates ------------------------------------------------

    def qvel_map(self, q: Float[Array, " nq"]) -> Float[Array, "nv nq"]:
        r"""$E(q) = \partial v/\partial\dot q$: the identity on hinge/slide coordinates and
        free-joint positions, $\tfrac{2}{|x|^2}[-x_v \mid x_w I - \hat x_v]$ on a quaternion
        $x = (x_w, x_v)$ (so that $\Omega = 2\operatorname{vec}(\bar x\otimes\dot x)/|x|^2$)."""
        q = _vector(q, "q", self.layout.nq, "nq")
        L, dt = self.layout, q.dtype
        E = np.zeros((L.nv, L.nq))
        E[L.scalar_v, L.scalar_q] = 1.0
        E = jnp.asarray(E, dt)
        if L.quat_q.size:
            x = q[L.quat_q[:, None] + np.arange(4)]
            w, u = x[:, 0], x[:, 1:]
            k = 2.0 / jnp.sum(x * x, -1)
            o = jnp.zeros_like(w)
            hatu = jnp.stack(
                [
                    jnp.stack([o, -u[:, 2], u[:, 1]], -1),
                    jnp.stack([u[:, 2], o, -u[:, 0]], -1),
                    jnp.stack([-u[:, 1], u[:, 0], o], -1),
                ],
                -2,
            )
            block = (
                jnp.concatenate(
                    [-u[:, :, None], w[:, None, None] * jnp.eye(3, dtype=dt) - hatu], -1
                )
                * k[:, None, None]
            )
            rows = L.quat_v[:, None, None] + np.arange(3)[None, :, None]
            cols = L.quat_q[:, None, None] + np.arange(4)[None, None, :]
            E = E.at[rows, cols].set(block)
        return E

    def _qvel_and_rate(self, q, qd, E):
        r"""$v = E\dot q$ and $\dot E\dot q$ (zero but on quaternions:
        $-2(x\cdot\dot x)\Omega/|x|^2$), `E` being `qvel_map(q)`."""
        L = self.layout
        v = E @ qd
        Edq = jnp.zeros_like(v)
        if L.quat_q.size:
            idx = L.quat_q[:, None] + np.arange(4)
            x, xd = q[idx], qd[idx]
            vi = L.quat_v[:, None] + np.arange(3)
            Om = v[vi]
            scale = -2.0 * jnp.sum(x * xd, -1) / jnp.sum(x * x, -1)
            Edq = Edq.at[vi].set(scale[:, None] * Om)
        return v, Edq

    def _state(self, q, qd):
        q = _vector(q, "q", self.layout.nq, "nq")
        return q, _vector(qd, "qd", self.layout.nq, "nq").astype(q.dtype)

    def _spring_terms(self, q, p):
        r"""The spring extensions $\Delta = q_j - q^s_j$ of the hinge and slide joints and
        their coefficients $(k_0, k_1, k_2)$ (MuJoCo 4's polynomial `stiffness`; $k_1 = k_2 = 0$
        where `p` has no `jnt_stiffnesspoly`)."""
        L, dt = self.layout, q.dtype
        a = L.hinge_slide_q
        dq = q[a] - jnp.asarray(p["qpos_spring"], dt)[a]
        k0 = jnp.asarray(p["jnt_stiffness"], dt)[L.hinge_slide]
        poly = p.get("jnt_stiffnesspoly") if isinstance(p, dict) else None
        if poly is None:
            return dq, k0, jnp.zeros_like(k0), jnp.zeros_like(k0)
        poly = jnp.asarray(poly, dt)[L.hinge_slide]
        return dq, k0, poly[:, 0], poly[:, 1]

    def _spring_force(self, q, p):
        r"""$-\partial V_\text{spring}/\partial q = -(k_0\Delta + k_1\Delta^2 + k_2\Delta^3)$ of
        the hinge and slide springs."""
        out = jnp.zeros_like(q)
        if self.layout.hinge_slide.size:
            dq, k0, k1, k2 = self._spring_terms(q, p)
            out = out.at[self.layout.hinge_slide_q].set(-dq * (k0 + dq * (k1 + dq * k2)))
        return out

    def euler_lagrange_terms(
        self, t, q: Float[Array, " nq"], qd: Float[Array, " nq"], p: dict, bias: bool = True
    ) -> tuple[Float[Array, "nq nq"], Float[Array, " nq"] | None]:
        r"""$(W, f_0)$ in constrax's coordinates: $W = E^\top M E$ and
        $f_0 = -E^\top(M\dot E\dot q + c(q, E\dot q)) - \partial V_\text{spring}/\partial q$,
        the values that autodiff of the imported Lagrangian gives
        ($W = \partial^2L/\partial\dot q^2$,
        $f_0 = \partial L/\partial q - (\partial^2L/\partial\dot q\,\partial q)\dot q$);
        `t` is ignored; with `bias=False`, `(W, None)`."""
        W, rhs = self.euler_lagrange_split(t, q, qd, p)
        return W, rhs(qd) if bias else None

    def euler_lagrange_rhs(
        self, t, q: Float[Array, " nq"], qd: Float[Array, " nq"], p: dict
    ) -> Float[Array, " nq"]:
        r"""$f_0$ alone, without the mass matrix: one recursive Newton–Euler pass at the
        acceleration $\dot E\dot q$ gives $M\dot E\dot q + c$ (`t` is ignored)."""
        q, qd = self._state(q, qd)
        return self._rhs(q, self._subspaces(q)[:3], self.qvel_map(q), qd, p)

    def _rhs(self, q, kinematics, E, qd, p):
        qd = _vector(qd, "qd", self.layout.nq, "nq").astype(q.dtype)
        v, Edq = self._qvel_and_rate(q, qd, E)
        tau = self._rne(*kinematics, v, Edq, p, q.dtype)
        if not self._plain:
            tau = E.T @ tau
        return -tau + self._spring_force(q, p)

    def euler_lagrange_split(self, t, q: Float[Array, " nq"], qd: Float[Array, " nq"], p: dict):
        r"""`(W, rhs)`: $W = E^\top M E$ at `q` and `rhs(v)` $= f_0$ at `(q, v)`, sharing the
        kinematics (body poses, motion subspaces) between the two (`t` and `qd` are
        ignored)."""
        q, _ = self._state(q, qd)
        S, R, tt, _ = self._subspaces(q)
        E = self.qvel_map(q)
        M = self._crb(S, R, tt, p, q.dtype)
        W = M if self._plain else E.T @ M @ E
        return W, lambda v: self._rhs(q, (S, R, tt), E, v, p)

    @property
    def _plain(self) -> bool:
        r"""Whether $E$ is the identity ($q$ is `qpos` and $\dot q$ is `qvel`)."""
        L = self.layout
        return L.quat_q.size == 0 and np.array_equal(L.scalar_q, L.scalar_v)

    def energy(self, q: Float[Array, " nq"], qd: Float[Array, " nq"], p: dict):
        r"""`(T, V)`: kinetic energy $\tfrac12 v^\top M v$ (armature included) and potential
        energy $-\sum_b m_b\,g\cdot c_b + \sum_j(\tfrac12 k_{0j}\Delta_j^2
        + \tfrac13 k_{1j}\Delta_j^3 + \tfrac14 k_{2j}\Delta_j^4)$, $\Delta_j = q_j - q^s_j$."""
        q, qd = self._state(q, qd)
        L, T_, dt = self.layout, self.tree, q.dtype
        S, R, t, r = self._subspaces(q)
        M = self._crb(S, R, t, p, dt)
        v = self.qvel_map(q) @ qd
        com = (t + r) + _mv(R, T_.body_ipos.astype(dt))
        m = jnp.asarray(p["body_mass"], dt).at[0].set(0.0)
        V = -jnp.sum(m * (com @ jnp.asarray(p["gravity"], dt)))
        if L.hinge_slide.size:
            dq, k0, k1, k2 = self._spring_terms(q, p)
            V = V + jnp.sum(dq**2 * (k0 / 2.0 + dq * (k1 / 3.0 + dq * k2 / 4.0)))
        return 0.5 * v @ (M @ v), V


def solve_with_norm_rows(
    W: Float[Array, "n n"],
    f: Float[Array, " n"],
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    quaternion_starts,
) -> Float[Array, " n"]:
    r"""$\ddot q$ of $W\ddot q = f + A^\top\lambda$, $A\ddot q = -\dot A\dot q$ with the
    unit-norm rows $x\cdot x - 1 = 0$ of the quaternions starting at `quaternion_starts`
    ($A = 2x^\top$, $\dot A\dot q = 2|\dot x|^2$): the unconstrained motion of a tree whose
    mass matrix is singular along the quaternions' radial directions (one dense solve of the
    saddle-point system; a plain solve without quaternions)."""
    starts = np.asarray(quaternion_starts, np.int64).reshape(-1)
    if starts.size == 0:
        return jnp.linalg.solve(W, f)
    n, k = q.shape[0], starts.size
    idx = starts[:, None] + np.arange(4)
    rows = np.repeat(np.arange(k), 4)
    A = jnp.zeros((k, n), q.dtype).at[rows, idx.reshape(-1)].set(2.0 * q[idx].reshape(-1))
    rhs = jnp.concatenate([f, -2.0 * jnp.sum(qd[idx] ** 2, -1)])
    K = jnp.block([[W, A.T], [A, jnp.zeros((k, k), q.dtype)]])
    return jnp.linalg.solve(K, rhs)[:n]
