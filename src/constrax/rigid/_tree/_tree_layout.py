"""The static layout of a kinematic tree for `TreeDynamics`: index arrays and ancestor
masks computed once with numpy, hashable by the tree's structure (a `jax.jit` cache key)."""

import numpy as np

from ._mjcf_checks import _BALL, _FREE, _HINGE, _SLIDE


class _Constants:
    """A static, identity-hashed holder of constants (a `jax.jit` cache key by identity, as
    a closure is)."""

    def __init__(self, value):
        self.value = value


class _Layout:
    """Index arrays and masks of a kinematic tree (hashable by its structure)."""

    def __init__(self, parent, body_joints, joints, nq, nv, actuator_dofs=()):
        self.key = (tuple(parent), tuple(body_joints), tuple(joints), nq, nv)
        self.key += (tuple(actuator_dofs),)
        self.actuator_dofs = np.asarray(actuator_dofs, np.int64).reshape(-1)
        nbody, njnt = len(parent), len(joints)
        self.nbody, self.njnt, self.nq, self.nv = nbody, njnt, nq, nv
        parent = np.asarray(parent, dtype=np.int64)
        self.parent = parent
        jnt_body = np.zeros(njnt, np.int64)
        jnt_slot = np.zeros(njnt, np.int64)  # 1-based: the body's pose after k joints
        for b, bj in enumerate(body_joints):
            for k, (typ, j, _) in enumerate(bj):
                jnt_body[j], jnt_slot[j] = b, k + 1
                if typ == _FREE and k != 0:
                    raise ValueError(
                        f"body {b}: a free joint must be the first joint of its body "
                        "(it sets the body's pose)"
                    )
        jtype = np.array([t for t, _, _ in joints], np.int64)
        qadr = np.array([a for _, a, _ in joints], np.int64)
        vadr = np.array([v for _, _, v in joints], np.int64)

        # Joint transforms are stacked by type: [hinge, slide, ball, free, identity].
        self.hinge = np.flatnonzero(jtype == _HINGE)
        self.slide = np.flatnonzero(jtype == _SLIDE)
        self.ball = np.flatnonzero(jtype == _BALL)
        self.free = np.flatnonzero(jtype == _FREE)
        order = np.concatenate([self.hinge, self.slide, self.ball, self.free]).astype(np.int64)
        self.hinge_q, self.slide_q = qadr[self.hinge], qadr[self.slide]
        self.ball_q, self.free_q = qadr[self.ball], qadr[self.free]
        slot_of = np.empty(njnt, np.int64)
        slot_of[order] = np.arange(njnt)
        identity = njnt
        self.K = max([len(bj) for bj in body_joints] + [1])
        self.body_slots = np.full((nbody, self.K), identity, np.int64)
        for b, bj in enumerate(body_joints):
            for k, (_, j, _) in enumerate(bj):
                self.body_slots[b, k] = slot_of[j]
        # A free joint's body is placed by the joint alone (its parent is the world).
        self.placed_by_free = np.zeros(nbody, bool)
        self.placed_by_free[jnt_body[self.free]] = True
        self.placed_by_free[0] = True  # the world: identity

        # Depth levels: level l (1..D) holds the bodies at depth l, padded to the widest
        # level W with the index `nbody` (an identity pose); `level_parent` is the slot of
        # each body's parent in the level above (slot 0 for level 1: the world).
        depth = np.zeros(nbody, np.int64)
        for b in range(1, nbody):
            depth[b] = depth[parent[b]] + 1
        D = int(depth.max()) if nbody > 1 else 0
        levels = [np.flatnonzero(depth == d) for d in range(1, D + 1)]
        W = max([lv.size for lv in levels] + [1])
        self.level_bodies = np.full((D, W), nbody, np.int64)
        self.level_parent = np.zeros((D, W), np.int64)
        slot = np.zeros(nbody, np.int64)
        for d, lv in enumerate(levels):
            slot[lv] = np.arange(lv.size)
            self.level_bodies[d, : lv.size] = lv
            if d > 0:
                self.level_parent[d, : lv.size] = slot[parent[lv]]
        # Row of each body in [world, level 1 slots, level 2 slots, ...].
        self.body_row = np.where(depth > 0, 1 + (depth - 1) * W + slot, 0)
        # The root of each body's tree: its ancestor that hangs from the world (the world: 0).
        self.body_root = np.arange(nbody)
        for b in range(1, nbody):
            if parent[b] != 0:
                self.body_root[b] = self.body_root[parent[b]]

        # Degrees of freedom: joint, body, kind. A free joint's three translations are a
        # pseudo-joint that precedes its rotation.
        dof_jnt = np.zeros(nv, np.int64)
        dof_rot = np.zeros(nv, bool)
        dof_world = np.zeros(nv, bool)  # axis fixed in the world (free translations)
        dof_unit = np.full(nv, -1, np.int64)  # axis e_k of the joint frame (ball/free), else -1
        dof_rank = np.zeros(nv, np.int64)  # order of the (pseudo-)joint within its body
        for j in range(njnt):
            v0, typ, s = vadr[j], jtype[j], 2 * jnt_slot[j]
            if typ == _HINGE or typ == _SLIDE:
                dof_jnt[v0], dof_rot[v0], dof_rank[v0] = j, typ == _HINGE, s
            elif typ == _BALL:
                dof_jnt[v0 : v0 + 3], dof_rot[v0 : v0 + 3] = j, True
                dof_unit[v0 : v0 + 3], dof_rank[v0 : v0 + 3] = np.arange(3), s
            else:
                dof_jnt[v0 : v0 + 6] = j
                dof_rot[v0 + 3 : v0 + 6] = True
                dof_world[v0 : v0 + 3] = True
                dof_unit[v0 : v0 + 6] = np.tile(np.arange(3), 2)
                dof_rank[v0 : v0 + 3], dof_rank[v0 + 3 : v0 + 6] = s - 1, s
        dof_body = jnt_body[dof_jnt]
        self.dof_jnt, self.dof_body = dof_jnt, dof_body
        self.dof_rot, self.dof_world, self.dof_unit = dof_rot, dof_world, dof_unit
        self.dof_is_free = jtype[dof_jnt] == _FREE if nv else np.zeros(0, bool)
        self.jnt_body, self.jnt_slot = jnt_body, jnt_slot

        # Ancestry: is_anc[a, b] = body a is an ancestor of body b or b itself.
        is_anc = np.eye(nbody, dtype=bool)
        for b in range(1, nbody):
            is_anc[:, b] |= is_anc[:, parent[b]]
        self.descendants = is_anc.astype(np.float64)  # [b, d]: d in the subtree of b
        # [b, i]: dof i moves body b (its body is an ancestor of b or b itself).
        self.body_dofs = is_anc[dof_body, :].T.astype(np.float64)
        # [i, k]: dof k's body is an ancestor-or-self of dof i's body (mass matrix pattern).
        self.dof_anc = is_anc[dof_body[None, :], dof_body[:, None]]
        # [i, k]: dof k belongs to a (pseudo-)joint strictly before dof i's on its path:
        # the frame carrying i's axes moves with dof k.
        strict_body = is_anc[dof_body[None, :], dof_body[:, None]] & (
            dof_body[None, :] != dof_body[:, None]
        )
        same_body_before = (dof_body[None, :] == dof_body[:, None]) & (
            dof_rank[None, :] < dof_rank[:, None]
        )
        self.dof_before = (strict_body | same_body_before).astype(np.float64)

        # The map v = E(q) qd: identity entries and quaternion blocks.
        scalar_q, scalar_v, quat_q, quat_v = [], [], [], []
        for j in range(njnt):
            typ, a, v0 = jtype[j], qadr[j], vadr[j]
            if typ == _FREE:
                scalar_q += [a, a + 1, a + 2]
                scalar_v += [v0, v0 + 1, v0 + 2]
                quat_q.append(a + 3)
                quat_v.append(v0 + 3)
            elif typ == _BALL:
                quat_q.append(a)
                quat_v.append(v0)
            else:
                scalar_q.append(a)
                scalar_v.append(v0)
        self.scalar_q = np.array(scalar_q, np.int64)
        self.scalar_v = np.array(scalar_v, np.int64)
        self.quat_q = np.array(quat_q, np.int64).reshape(-1)
        self.quat_v = np.array(quat_v, np.int64).reshape(-1)
        self.hinge_slide = np.flatnonzero((jtype == _HINGE) | (jtype == _SLIDE))
        self.hinge_slide_q = qadr[self.hinge_slide]

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _Layout) and self.key == other.key
