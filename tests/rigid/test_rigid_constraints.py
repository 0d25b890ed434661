"""constrax.rigid constraint builders, degeneracy analysis (Briggs 2016, Theorems 4.4-4.6) and
friction as generalized forces (Loparo & Vakalis 2002, §7.9).

References: Briggs's (2016) maps written out by hand with closed-form velocities, counting
arguments of the theorems, the principle of virtual power, and energy balance."""

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import constrax as cx
import constrax.rigid as rg
from constrax.models._rigid_models import ball_on_turntable, tilted_rolling_disk

RNG = np.random.default_rng(1)
R1 = jsl.expm(rg.hat(jnp.array([0.3, -0.4, 0.7])))
R2 = jsl.expm(rg.hat(jnp.array([-0.5, 0.2, 0.1])))
W1, W2 = jnp.array([0.4, -1.0, 0.7]), jnp.array([-0.3, 0.5, 1.2])
V1, V2 = jnp.array([0.1, 0.2, -0.3]), jnp.array([-0.4, 0.0, 0.6])
EZ = jnp.array([0.0, 0.0, 1.0])


@functools.cache
def _two_bodies():
    b1 = rg.RigidBody(1.0, jnp.array([1.0, 2.0, 2.5]), rg.Quaternion(), offset=0, name="b1")
    b2 = rg.RigidBody(2.0, jnp.array([1.0, 1.0, 1.5]), rg.RotationMatrix(), offset=7, name="b2")
    q1, qd1 = b1.state(jnp.array([0.0, 0.5, 1.0]), R1, V1, W1)
    q2, qd2 = b2.state(jnp.array([1.0, -0.5, 0.2]), R2, V2, W2)
    return b1, b2, jnp.concatenate([q1, q2]), jnp.concatenate([qd1, qd2])


def _residual(con, q, qd, p=None, t=0.0):
    return con.velocity_residual(jnp.asarray(t, q.dtype), q, qd, p)


def test_interconnection_velocity_is_seed_003_map_iota():
    b1, b2, q, qd = _two_bodies()
    X1, X2 = jnp.array([0.1, 0.2, 0.3]), jnp.array([-0.2, 0.0, 0.4])
    con = rg.interconnection(b1, X1, b2, X2)
    r1, r2 = jnp.array([0.0, 0.5, 1.0]), jnp.array([1.0, -0.5, 0.2])
    np.testing.assert_allclose(
        con.position_residual(0.0, q, None), r1 + R1 @ X1 - r2 - R2 @ X2, atol=1e-13
    )
    # eq. (3.1.2): v1 - v2 + A1 (X1 - X1,0) - A2 (X2 - X2,0), with A = hat(w) R
    iota = V1 - V2 + rg.hat(W1) @ R1 @ X1 - rg.hat(W2) @ R2 @ X2
    np.testing.assert_allclose(_residual(con, q, qd), iota, atol=1e-12)
    ground = rg.interconnection(b1, X1, None, jnp.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(
        ground.position_residual(0.0, q, None),
        r1 + R1 @ X1 - jnp.array([1.0, 2.0, 3.0]),
        atol=1e-13,
    )


def test_primary_angular_constraint_is_g_of_omega_and_mu():
    b1, b2, q, qd = _two_bodies()
    mu = jnp.array([0.3, -0.2, 0.9])
    np.testing.assert_allclose(
        _residual(rg.angular_velocity_constraint(b2, mu), q, qd), [mu @ W2], atol=1e-12
    )
    body_axis = rg.angular_velocity_constraint(b1, mu, frame="body")
    np.testing.assert_allclose(_residual(body_axis, q, qd), [(R1 @ mu) @ W1], atol=1e-12)
    moving = rg.angular_velocity_constraint(b1, lambda t, q, p: q[:3] + p * EZ)
    np.testing.assert_allclose(
        moving.velocity_residual(0.0, q, qd, 2.0), [(q[:3] + 2.0 * EZ) @ W1], atol=1e-12
    )


def test_primary_translational_constraint_is_g_of_point_velocity_and_u():
    b1, b2, q, qd = _two_bodies()
    X, u = jnp.array([0.2, -0.1, 0.3]), jnp.array([0.6, 0.0, 0.8])
    v_point = V2 + jnp.cross(W2, R2 @ X)
    con = rg.translational_velocity_constraint(b2, X, u)
    np.testing.assert_allclose(_residual(con, q, qd), [u @ v_point], atol=1e-12)
    # body-frame direction, spatial offset, moving support
    con = rg.translational_velocity_constraint(
        b2, R2 @ X, X, point_frame="spatial", direction_frame="body"
    )
    np.testing.assert_allclose(_residual(con, q, qd), [(R2 @ X) @ v_point], atol=1e-12)
    vs = lambda t, x, p: p * jnp.cross(EZ, x)  # noqa: E731
    con = rg.translational_velocity_constraint(b2, X, u, support_velocity=vs)
    x = jnp.array([1.0, -0.5, 0.2]) + R2 @ X
    np.testing.assert_allclose(
        con.velocity_residual(0.5, q, qd, 3.0), [u @ (v_point - 3.0 * jnp.cross(EZ, x))], atol=1e-12
    )


def test_knife_edge_is_the_chaplygin_sleigh_constraint():
    body = rg.RigidBody(1.0, jnp.array([0.5, 0.5, 1.0]), rg.Quaternion())
    th, thd, a = 0.7, 0.4, 0.3
    Rz = jsl.expm(rg.hat(th * EZ))
    q, qd = body.state(jnp.array([1.0, 2.0, 0.0]), Rz, jnp.array([0.3, -0.2, 0.0]), thd * EZ)
    X = jnp.array([-a, 0.0, 0.0])  # blade a behind the centre of mass
    con = rg.knife_edge(body, X, jnp.array([0.0, 1.0, 0.0]))
    # contact point P = c - a (cos th, sin th):
    # xdot_P = xdot_c + a sin th thd, ydot_P = ydot_c - a cos th thd
    xP, yP = 0.3 + a * np.sin(th) * thd, -0.2 - a * np.cos(th) * thd
    np.testing.assert_allclose(
        _residual(con, q, qd), [-np.sin(th) * xP + np.cos(th) * yP], atol=1e-12
    )


def test_rolling_disk_contact_is_the_lowest_rim_point():
    body = rg.RigidBody(1.0, jnp.array([1.0, 1.0, 2.0]), rg.Quaternion())
    a, tilt = 0.4, 1.1
    R = jsl.expm(
        rg.hat(tilt * jnp.array([1.0, 0.0, 0.0]))
    )  # axis e3 tilted by `tilt` from vertical
    w = jnp.array([0.3, -0.8, 1.5])
    q, qd = body.state(jnp.array([0.2, 0.1, 0.5]), R, jnp.array([0.1, 0.2, 0.3]), w)
    # lowest rim point: minimise the height of r + a R (cos s, sin s, 0) over s
    s = jnp.linspace(0.0, 2 * jnp.pi, 200001)
    rim = a * (R @ jnp.stack([jnp.cos(s), jnp.sin(s), 0 * s]))
    delta = rim[:, jnp.argmin(rim[2])]
    np.testing.assert_allclose(
        rg.contact_offset(body, rg.Disk(a), rg.Plane(), q, None), delta, atol=1e-9
    )
    # the support height used by the contact row is the normal part of that offset
    np.testing.assert_allclose(rg.Disk(a).normal_offset(body, q, EZ, None), delta[2], atol=1e-9)
    height, slip = rg.plane_contact(body, rg.Disk(a)), rg.no_slip(body, rg.Disk(a))
    np.testing.assert_allclose(
        height.position_residual(0.0, q, None), [0.5 - a * np.sin(tilt)], atol=1e-13
    )
    v_contact = jnp.array([0.1, 0.2, 0.3]) + jnp.cross(w, delta)
    np.testing.assert_allclose(_residual(slip, q, qd), v_contact[:2], atol=1e-8)
    np.testing.assert_allclose(_residual(height, q, qd), [v_contact[2]], atol=1e-8)
    # a sphere on a turntable: the contact point moves with the table
    table = rg.rotating_plane(2.0)
    slip = rg.no_slip(body, rg.Sphere(a), table)
    vt = 2.0 * jnp.cross(EZ, jnp.array([0.2, 0.1, 0.5 - a]))
    vc = jnp.array([0.1, 0.2, 0.3]) + jnp.cross(w, -a * EZ)
    np.testing.assert_allclose(_residual(slip, q, qd), (vc - vt)[:2], atol=1e-12)


@pytest.mark.parametrize("which", ["disk", "ball on turntable"])
def test_rolling_contact_is_plane_contact_and_no_slip_as_one_constraint(which):
    # The merged constraint (normal row integrable, position=height) against the two
    # builders it replaces, row by row and in the dynamics, under jit, vmap and grad.
    if which == "disk":
        model = tilted_rolling_disk()
        body = rg.RigidBody(1.0, jnp.array([0.0025, 0.0025, 0.005]), name="disk")
        shape, plane = rg.Disk(lambda p: p["radius"]), rg.Plane()
    else:
        model = ball_on_turntable()
        body = rg.RigidBody(1.0, jnp.full(3, 0.4), name="ball")
        shape = rg.Sphere(lambda p: p["radius"])
        plane = rg.rotating_plane(lambda t, p: p["Omega"])
    (rolling,) = rg.rolling_contact(body, shape, plane)
    assert rolling.name == f"{body.name}.rolling"
    orientation = body.orientation_constraint()
    L = lambda t, q, qd, p: body.kinetic_energy(q, qd) - 9.81 * body.position(q)[2]
    merged = cx.System(L, [orientation, rolling])
    split = cx.System(
        L, [orientation, rg.plane_contact(body, shape, plane), rg.no_slip(body, shape, plane)]
    )
    p = model.params
    # A state off the manifold and off the velocity rows, so that every term is non-trivial.
    q = model.q0 + 0.01 * jnp.arange(1.0, 8.0)
    qd = model.qd0 + 0.1 * jnp.sin(jnp.arange(7.0))
    for fn in (cx.constraint_jacobian, cx.constraint_residual):
        a, b = fn(merged, 0.3, q, qd, p), fn(split, 0.3, q, qd, p)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-13)
    assert cx.constraint_residual(merged, 0.3, q, qd, p).position.shape == (2,)

    def accel(system, q, qd, p):
        out = cx.accelerations(system, 0.3, q, qd, p, stabilisation=cx.Baumgarte(3.0, 5.0))
        return out.qdd, out.multipliers

    # Baumgarte reads the position level: g on the integrable row, c on the others.
    for x, y in zip(accel(merged, q, qd, p), accel(split, q, qd, p), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-11)
    qb = q + 0.01 * jnp.arange(3.0)[:, None]
    vm = lambda s: jax.jit(jax.vmap(lambda q: accel(s, q, qd, p)[0]))(qb)
    np.testing.assert_allclose(vm(merged), vm(split), rtol=1e-11, atol=1e-11)
    grad = lambda s: jax.jit(jax.grad(lambda q: jnp.sum(jnp.sin(accel(s, q, qd, p)[0]))))(q)
    np.testing.assert_allclose(grad(merged), grad(split), rtol=1e-10, atol=1e-10)
    # A trajectory: the height row is held at the position level by the default Projection.
    trajs = [cx.simulate(s, model.q0, model.qd0, p, t1=0.5) for s in (merged, split)]
    np.testing.assert_allclose(trajs[0].q, trajs[1].q, rtol=1e-9, atol=1e-10)


def test_contact_builders_reject_bad_points_frames_and_shapes():
    body = rg.RigidBody(1.0, jnp.ones(3))
    u = jnp.array([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"`point` must be a 3-vector of shape \(3,\)"):
        rg.translational_velocity_constraint(body, jnp.zeros(2), u)
    with pytest.raises(ValueError, match=r"`point1` must be a 3-vector"):
        rg.interconnection(body, jnp.zeros((1, 3)))
    with pytest.raises(ValueError, match="`point_frame` must be 'body'"):
        rg.translational_velocity_constraint(body, jnp.zeros(3), u, point_frame="world")
    with pytest.raises(ValueError, match="`frame` must be 'body'"):
        rg.angular_velocity_constraint(body, u, frame="inertial")
    bad = rg.translational_velocity_constraint(
        body, lambda t, q, p: q[:2], u, point_frame="spatial"
    )
    system = cx.System(lambda t, q, qd, p: body.kinetic_energy(q, qd), [bad])
    with pytest.raises(ValueError, match=r"`point\(t, q, p\)` must return a 3-vector"):
        cx.constraint_jacobian(system, 0.0, jnp.array([0, 0, 0, 1.0, 0, 0, 0]), jnp.zeros(7))
    with pytest.raises(ValueError, match="`normal` must be a unit vector"):
        rg.Plane(normal=jnp.array([0.0, 0.0, 2.0]))
    with pytest.raises(
        TypeError, match="`shape` must be one of cx.rigid.Sphere, cx.rigid.Disk, cx.rigid.Ellipsoid"
    ):
        rg.plane_contact(body, 0.1)
    with pytest.raises(TypeError, match="`body` must be a cx.rigid.RigidBody"):
        rg.angular_velocity_constraint("body", u)


def test_a_body_missing_a_method_of_the_interface_cannot_be_instantiated():
    """`AbstractRigidBody`'s methods are abstract: a subclass that leaves one out (here
    `orientation_constraint`) raises at instantiation; one that has them all is accepted
    by the builders."""

    class Fixed(rg.AbstractRigidBody):
        name: str = "fixed"

        def position(self, q):
            return jnp.zeros(3, jnp.asarray(q).dtype)

        def rotation(self, q):
            return jnp.eye(3, dtype=jnp.asarray(q).dtype)

        def rotate(self, q, X):
            return jnp.asarray(X, jnp.asarray(q).dtype)

        def point(self, q, X):
            return jnp.asarray(X, jnp.asarray(q).dtype)

        def velocity(self, q, qd):
            return jnp.zeros(3, jnp.asarray(q).dtype)

        def angular_velocity(self, q, qd):
            return jnp.zeros(3, jnp.asarray(q).dtype)

        def body_angular_velocity(self, q, qd):
            return jnp.zeros(3, jnp.asarray(q).dtype)

    with pytest.raises(TypeError, match="orientation_constraint"):
        Fixed()

    class Complete(Fixed):
        def orientation_constraint(self):
            return None

    body = Complete()
    row = rg.interconnection(body, jnp.array([1.0, 0.0, 0.0]), None, jnp.zeros(3))
    np.testing.assert_allclose(row.g(0.0, jnp.zeros(1), None), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(body.offset_velocity(jnp.zeros(1), jnp.zeros(1), jnp.ones(3)), 0)


# ----------------------------------------------------------------------------------------
# Degeneracy (Briggs 2016, Theorems 4.4-4.6).

E1, E2, E3 = np.eye(3)
DEGENERACY_CASES = {
    # name: (axes, directions, offsets, expected dimension, degenerate)
    "one angular (dim 5)": ([E3], None, None, 5, False),
    "three independent angular axes (dim 3)": ([E1, E2, E3], None, None, 3, False),
    "two parallel angular axes": ([E3, 2 * E3], None, None, 5, True),
    "four angular, three independent (n > 3)": ([E1, E2, E3, E1 + E2], None, None, 3, False),
    "three coplanar angular axes": ([E1, E2, E1 + E2], None, None, 4, True),
    "one translational (dim 5)": (None, [E1], [E2], 5, False),
    "two collinear translational": (None, [E1, E1], [np.zeros(3), 2 * E1], 5, True),
    "two parallel, not collinear": (None, [E1, E1], [np.zeros(3), E2], 4, False),
    "3-2-1 fixture (dim 0)": (
        None,
        [E3, E3, E3, E2, E2, E1],
        [np.zeros(3), E1, E2, np.zeros(3), E1, np.zeros(3)],
        0,
        False,
    ),
    "angular + translational through the axis": ([E3], [E3], [E1], 4, False),
    "angular axis u x (D1 - D2) with two parallel translational": (
        [np.cross(E1, E2 - E3)],
        [E1, E1],
        [E2, E3],
        4,
        True,
    ),
}


@pytest.mark.parametrize("case", list(DEGENERACY_CASES), ids=list(DEGENERACY_CASES))
def test_primary_constraint_degeneracy_reproduces_theorems_4_4_to_4_6(case):
    axes, dirs, offs, dim, degenerate = DEGENERACY_CASES[case]
    a = rg.primary_constraint_analysis(axes, dirs, offs)
    assert int(a.dimension) == dim
    assert bool(a.degenerate) == degenerate
    # the allowable twists (w, v) of the reference point satisfy Briggs's (2016) maps:
    # rho = g(w, mu_j) = 0 and the constrained point x_j = x - D_j moves with
    # v + w x (x_j - x) = v - w x D_j, orthogonal to u_j.
    basis = np.asarray(a.allowable[:dim])
    for w, v in zip(basis[:, :3], basis[:, 3:], strict=True):
        for mu in axes or []:
            assert abs(np.dot(w, mu)) < 1e-12
        for u, D in zip(dirs or [], offs or [], strict=True):
            assert abs(np.dot(v - np.cross(w, D), u)) < 1e-12
    # and nothing else is allowed: dim is the full kernel of the maps (brute-force count)
    rows = [np.concatenate([mu, np.zeros(3)]) for mu in axes or []]
    rows += [
        np.concatenate([-np.cross(D, u), u]) for u, D in zip(dirs or [], offs or [], strict=True)
    ]
    assert 6 - np.linalg.matrix_rank(np.stack(rows), tol=1e-10) == dim


def test_twist_rows_of_engine_constraints_are_the_theorem_rows():
    body = rg.RigidBody(1.0, jnp.array([1.0, 2.0, 2.5]), rg.Quaternion())
    q, _ = body.state(jnp.array([0.3, 0.2, 0.1]), R1, jnp.zeros(3), jnp.zeros(3))
    Xs = [jnp.array([0.5, 0.0, 0.0]), jnp.array([-0.5, 0.0, 0.0])]
    u = R1 @ jnp.array([1.0, 0.0, 0.0])  # along the line through both points: collinear
    cons = [rg.translational_velocity_constraint(body, X, u) for X in Xs]
    mu = jnp.array([0.0, 0.0, 1.0])
    cons.append(rg.angular_velocity_constraint(body, mu))
    rows = rg.twist_rows(body, cons, 0.0, q)
    expected = jnp.concatenate(
        [
            rg.translational_rows(jnp.stack([u, u]), jnp.stack([-R1 @ X for X in Xs])),
            rg.angular_rows(mu),
        ]
    )
    np.testing.assert_allclose(rows, expected, atol=1e-12)
    a = rg.twist_analysis(rows, num_angular=1, num_translational=2)
    assert int(a.dimension) == 4 and bool(a.degenerate)  # expected 3: collinear pair
    # the engine sees the same rank drop
    system = cx.System(
        lambda t, q, qd, p: body.kinetic_energy(q, qd), [body.orientation_constraint(), *cons]
    )
    assert int(cx.constraint_rank(system, 0.0, q, jnp.zeros(7)).rank) == 3


def test_degeneracy_analysis_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"`axes` must have shape \(k, 3\)"):
        rg.primary_constraint_analysis(axes=jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="need both `directions` and `offsets`"):
        rg.primary_constraint_analysis(directions=jnp.eye(3))
    with pytest.raises(ValueError, match="one offset per direction"):
        rg.primary_constraint_analysis(directions=jnp.eye(3), offsets=jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="must equal the number of rows"):
        rg.twist_analysis(jnp.zeros((2, 6)), 1, 2)


# ----------------------------------------------------------------------------------------
# Reactions and friction.


def test_body_force_obeys_the_principle_of_virtual_power():
    b1, b2, q, qd = _two_bodies()
    F, tau, D = (
        jnp.array([1.0, -2.0, 0.5]),
        jnp.array([0.3, 0.1, -0.7]),
        jnp.array([0.1, 0.2, -0.3]),
    )
    Q = rg.body_force(b2, q, force=F, offset=D, torque=tau)
    np.testing.assert_allclose(qd @ Q, F @ (V2 + jnp.cross(W2, D)) + tau @ W2, rtol=1e-12)
    assert np.all(Q[:7] == 0)


@pytest.fixture(scope="module")
def rolling_disk_with_friction():
    model = tilted_rolling_disk(c_roll=0.02, c_spin=0.05)
    acc = jax.jit(
        lambda q, qd, p: cx.accelerations(model.system, 0.0, q, qd, p, constraint_solver=cx.KKT())
    )
    return model, acc


def test_friction_is_reported_as_force_apart_from_the_reactions(rolling_disk_with_friction):
    model, acc = rolling_disk_with_friction
    q, qd, p = model.q0, model.qd0, model.params
    out = acc(q, qd, p)
    body = rg.RigidBody(1.0, jnp.ones(3), name="disk")
    w = body.angular_velocity(q, qd)
    wn = w @ EZ
    # friction power: -c_roll |w_t|^2 - c_spin w_n^2 (closed form of the two torques)
    expected = -0.02 * (w @ w - wn**2) - 0.05 * wn**2
    np.testing.assert_allclose(qd @ out.force, expected, rtol=1e-12)
    # ideal (d'Alembert) reactions of the scleronomic rolling contact do no work
    assert abs(float(out.reaction_power)) < 1e-12 * float(jnp.max(jnp.abs(out.reactions)))
    # and the energy balance dE/dt = Q . qd holds with the friction force only
    E = lambda q, qd: cx.energy(model.system, 0.0, q, qd, p)  # noqa: E731
    _, Edot = jax.jit(lambda a, b: jax.jvp(E, (q, qd), (a, b)))(qd, out.qdd)
    np.testing.assert_allclose(Edot, expected, rtol=1e-9)
    # d'Alembert: R = A^T lambda exactly, with the friction reported apart in `force`
    np.testing.assert_allclose(out.reactions, out.reactions_multiplier, atol=1e-14)
    assert float(jnp.max(jnp.abs(out.force))) > 1e-3


def test_reactions_of_a_moving_turntable_do_work_but_fixed_contacts_do_not():
    model = ball_on_turntable()
    acc = jax.jit(
        lambda q, qd, p: cx.accelerations(model.system, 0.0, q, qd, p, constraint_solver=cx.KKT())
    )
    # centre velocity along x at r0 = (0.3, 0): the friction force m nu e_z x v0 is parallel
    # to the table velocity Omega e_z x r0 at the contact, so its power is m nu |v0| Omega |r0|
    moving = ball_on_turntable(v0=np.array([0.2, 0.0]))
    out = acc(moving.q0, moving.qd0, moving.params)
    m, k, Om = 1.0, 0.4, 7.0
    nu = k * Om / (1 + k)
    np.testing.assert_allclose(out.reaction_power, m * nu * 0.2 * Om * 0.3, rtol=1e-10)
    still = ball_on_turntable(Omega=np.float64(0.0))
    out = acc(still.q0, still.qd0, still.params)
    assert abs(float(out.reaction_power)) < 1e-13


def test_sliding_friction_opposes_the_slip_velocity():
    body = rg.RigidBody(1.0, 0.4 * jnp.ones(3))
    a, mu, N, eps = 0.1, 0.3, 9.81, 1e-3
    Q = rg.sliding_friction(
        body, rg.Sphere(a), rg.Plane(), coefficient=mu, normal_force=N, epsilon=eps
    )
    w = jnp.array([1.0, -2.0, 0.5])
    q, qd = body.state(jnp.array([0.0, 0.0, a]), R1, jnp.array([0.3, 0.1, 0.0]), w)
    s = jnp.array([0.3, 0.1, 0.0]) + jnp.cross(w, -a * EZ)
    s = s.at[2].set(0.0)
    power = qd @ Q(0.0, q, qd, None)
    np.testing.assert_allclose(power, -mu * N * (s @ s) / jnp.sqrt(s @ s + eps**2), rtol=1e-12)
    total = rg.combine_forces(Q, None, Q)
    np.testing.assert_allclose(total(0.0, q, qd, None), 2 * Q(0.0, q, qd, None), rtol=1e-14)


def test_pivoted_body_swings_like_a_compound_pendulum():
    """A body hung from a ground point by `interconnection`: at rest at tilt th,
    alpha = -m g d sin th / (I_xx + m d^2) and the pivot force is m (a_c - g)."""
    m, d, th, g = 2.0, 0.5, 0.6, 9.81
    I = jnp.array([0.3, 0.4, 0.5])
    body = rg.RigidBody(m, I, rg.Quaternion())
    X = jnp.array([0.0, 0.0, d])  # pivot: a body point d above the centre of mass
    system = cx.System(
        lambda t, q, qd, p: body.kinetic_energy(q, qd) - body.potential_energy(q, (0, 0, -g)),
        [body.orientation_constraint(), rg.interconnection(body, X)],
    )
    R = jsl.expm(rg.hat(th * jnp.array([1.0, 0.0, 0.0])))
    q, qd = body.state(-R @ X, R, jnp.zeros(3), jnp.zeros(3))
    out = jax.jit(lambda q, qd: cx.accelerations(system, 0.0, q, qd, constraint_solver=cx.KKT()))(
        q, qd
    )
    alpha = body.angular_velocity(q, out.qdd)  # at rest, omega_dot = (d omega / d qd) qdd
    expected = -m * g * d * np.sin(th) / (I[0] + m * d**2)
    np.testing.assert_allclose(alpha, [expected, 0.0, 0.0], atol=1e-12)
    a_c = jnp.cross(alpha, -R @ X)
    np.testing.assert_allclose(out.qdd[:3], a_c, atol=1e-12)
    np.testing.assert_allclose(out.reactions[:3], m * (a_c - jnp.array([0.0, 0.0, -g])), atol=1e-11)


@pytest.mark.parametrize("normal", [(0.0, 0.0, 1.0), (0.3, -0.2, 0.932737905308882)])
@pytest.mark.parametrize("axis", [(0.0, 0.0, 1.0), (0.6, 0.0, 0.8)])
def test_disk_contact_velocity_form_is_the_time_derivative_of_its_height(normal, axis):
    # plane_contact hands the engine n.(rdot + omega x Delta) for the disk's height row;
    # the reference is the same row differentiated from g alone (A = dg/dq, bias =
    # qd^T Hess(g) qd by autodiff), at random states with quaternions off the unit sphere,
    # for a tilted plane and an off-centre axis.
    from constrax._terms import constraint_terms

    body = rg.RigidBody(1.0, jnp.array([1.0, 1.0, 2.0]), rg.Quaternion())
    plane = rg.Plane(normal=normal, height=0.1)
    contact = rg.plane_contact(body, rg.Disk(0.4, axis=axis), plane)
    assert contact.velocity is not None and contact.holonomic
    from_g = cx.Holonomic(contact.g)

    def rows(con, t, q, qd):
        return constraint_terms(cx.System(lambda t, q, qd, p: 0.0, [con]), t, q, qd, None)

    @jax.vmap
    def both(q, qd):
        t = jnp.zeros(())
        return rows(contact, t, q, qd), rows(from_g, t, q, qd)

    rng = np.random.default_rng(7)
    q = jnp.asarray(rng.normal(size=(16, 7)))
    q = q.at[:, 3:].multiply(jnp.asarray(rng.uniform(0.7, 1.3, size=(16, 1))))
    fast, ref = both(q, jnp.asarray(rng.normal(size=(16, 7))))
    for a, r in zip(fast, ref, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(r), rtol=1e-11, atol=1e-12)


def test_disk_contact_has_finite_gradients_when_the_disk_lies_flat():
    body = rg.RigidBody(1.0, jnp.array([1.0, 1.0, 2.0]), rg.Quaternion())
    q = jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])  # R = I: axis vertical, disk flat

    def height(q):
        return rg.contact_offset(body, rg.Disk(0.3), rg.Plane(), q, None)

    assert np.all(np.isfinite(height(q))) and np.all(np.isfinite(jax.jacfwd(height)(q)))


def test_smoothed_coulomb_rolling_and_spin_friction_dissipate_at_the_closed_form_rate():
    body = rg.RigidBody(1.0, 0.4 * jnp.ones(3))
    w = jnp.array([1.0, -2.0, 0.5])
    q, qd = body.state(jnp.array([0.0, 0.0, 0.1]), R1, jnp.array([0.3, 0.1, 0.0]), w)
    tr, ts, eps = 0.2, 0.05, 1e-2
    roll = rg.coulomb_rolling_friction(body, lambda p: p, epsilon=eps)
    spin = rg.coulomb_spin_friction(body, ts, epsilon=eps)
    wt2, wn = w[0] ** 2 + w[1] ** 2, w[2]
    np.testing.assert_allclose(
        qd @ roll(0.0, q, qd, tr), -tr * wt2 / np.sqrt(wt2 + eps**2), rtol=1e-12
    )
    np.testing.assert_allclose(
        qd @ spin(0.0, q, qd, None), -ts * wn**2 / np.sqrt(wn**2 + eps**2), rtol=1e-12
    )


def test_friction_forces_are_the_generalized_forces_of_their_closed_form_loads():
    # Each builder's Q(t, q, qd, p), against `body_force` (virtual power, tested above) of
    # the torque or force written out here, at a state off the unit quaternion and with a
    # moving plane for the sliding friction.
    body = rg.RigidBody(1.0, jnp.array([0.3, 0.4, 0.5]))
    w = jnp.array([1.0, -2.0, 0.5])
    q, qd = body.state(jnp.array([0.1, -0.2, 0.1]), R1, jnp.array([0.3, 0.1, -0.2]), w)
    q = q.at[3:].multiply(1.2)
    w = body.angular_velocity(q, qd)
    n, eps = EZ, 1e-2
    wn, wt = (w @ n) * n, w - (w @ n) * n
    torques = {
        rg.viscous_spin_friction(body, 0.3): -0.3 * wn,
        rg.viscous_rolling_friction(body, 0.2): -0.2 * wt,
        rg.coulomb_spin_friction(body, 0.3, epsilon=eps): -0.3
        * wn
        / jnp.sqrt((w @ n) ** 2 + eps**2),
        rg.coulomb_rolling_friction(body, 0.2, epsilon=eps): -0.2 * wt / jnp.sqrt(wt @ wt + eps**2),
    }
    for Q, tau in torques.items():
        np.testing.assert_allclose(
            Q(0.0, q, qd, None), rg.body_force(body, q, torque=tau), rtol=1e-12, atol=1e-14
        )
    plane = rg.rotating_plane(1.5)
    shape = rg.Disk(0.2)
    Q = rg.sliding_friction(body, shape, plane, coefficient=0.3, normal_force=9.81, epsilon=eps)
    delta = rg.contact_offset(body, shape, plane, q, None)
    x = body.position(q) + delta
    s = body.velocity(q, qd) + jnp.cross(w, delta) - 1.5 * jnp.cross(EZ, x)
    s = s - (s @ n) * n
    F = -0.3 * 9.81 * s / jnp.sqrt(s @ s + eps**2)
    np.testing.assert_allclose(
        Q(0.0, q, qd, None), rg.body_force(body, q, force=F, offset=delta), rtol=1e-12, atol=1e-14
    )
