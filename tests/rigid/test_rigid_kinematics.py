"""constrax.rigid kinematics: SO(3) maps, orientation coordinates, RigidBody, bad input.

References: closed forms (cross products, Rodrigues vs. `expm`, elementary rotations),
finite differences in time, and Briggs (2016), Definition 2.21 written out
by hand."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import constrax as cx
import constrax.rigid as rg

RNG = np.random.default_rng(0)
W = jnp.asarray(RNG.normal(size=3))
V = jnp.asarray(RNG.normal(size=3))
R0 = jsl.expm(rg.hat(jnp.array([0.3, -0.4, 0.7])))
I_BODY = jnp.array([1.0, 2.0, 2.5])
ORIENTATIONS = [rg.Quaternion(), rg.RotationMatrix(), rg.EulerZXZ()]


def test_hat_is_the_cross_product_and_vee_inverts_it():
    np.testing.assert_allclose(rg.hat(W) @ V, jnp.cross(W, V), atol=1e-15)
    np.testing.assert_allclose(rg.hat(W), -rg.hat(W).T, atol=0)
    np.testing.assert_allclose(rg.vee(rg.hat(W)), W, atol=0)


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e-9, 0.0])
def test_rodrigues_formula_is_the_matrix_exponential(scale):
    w = scale * W
    np.testing.assert_allclose(rg.rotation_from_axis_angle(w), jsl.expm(rg.hat(w)), atol=1e-14)


def test_rodrigues_has_finite_gradient_at_zero_rotation():
    J = jax.jacfwd(rg.rotation_from_axis_angle)(jnp.zeros(3))  # d R / d theta_k = hat(e_k)
    expected = jnp.stack([rg.hat(e) for e in jnp.eye(3)], -1)
    np.testing.assert_allclose(J, expected, atol=1e-15)
    assert np.all(np.isfinite(jax.jacfwd(rg.quaternion_from_axis_angle)(jnp.zeros(3))))


@pytest.mark.parametrize(
    "safe, reference",
    [
        (rg.safe_reciprocal, lambda x: 1.0 / x),
        (rg.safe_rsqrt, lambda x: x**-0.5),
        (rg.safe_sqrt, jnp.sqrt),
    ],
    ids=["reciprocal", "rsqrt", "sqrt"],
)
def test_safe_primitives_match_jnp_to_third_order_and_vanish_at_zero(safe, reference):
    # Their derivative rules are written in terms of the value (products only); the
    # derivatives of every order must still be those of the plain function for x > 0 ...
    for x in (0.37, 1.0, 4.2):
        f, g = safe, reference
        for _ in range(4):  # value, first, second, third derivative
            np.testing.assert_allclose(f(x), g(x), rtol=1e-13)
            f, g = jax.grad(f), jax.grad(g)
        np.testing.assert_allclose(
            jax.vmap(jax.jacrev(safe))(jnp.array([x, 2 * x])),
            jax.vmap(jax.grad(reference))(jnp.array([x, 2 * x])),
            rtol=1e-13,
        )
    # ... and zero, with zero derivatives, at x <= 0 (no inf or NaN).
    for x in (0.0, -1.0):
        assert safe(x) == 0.0
        assert jax.grad(safe)(x) == 0.0 and jax.grad(jax.grad(safe))(x) == 0.0


def test_quaternions_represent_rotations_and_compose_by_hamilton_product():
    a, b = jnp.array([0.2, -0.5, 0.9]), jnp.array([-1.1, 0.3, 0.4])
    qa, qb = rg.quaternion_from_axis_angle(a), rg.quaternion_from_axis_angle(b)
    Ra, Rb = jsl.expm(rg.hat(a)), jsl.expm(rg.hat(b))
    np.testing.assert_allclose(rg.quaternion_to_rotation(qa), Ra, atol=1e-14)
    np.testing.assert_allclose(
        rg.quaternion_to_rotation(rg.quaternion_multiply(qa, qb)), Ra @ Rb, atol=1e-14
    )
    # a scaled quaternion is the same rotation
    np.testing.assert_allclose(rg.quaternion_to_rotation(3.0 * qa), Ra, atol=1e-14)
    # Shepperd round trip, including a rotation by pi (trace -1 branch)
    for R in (Ra, Rb, jnp.diag(jnp.array([1.0, -1.0, -1.0]))):
        np.testing.assert_allclose(
            rg.quaternion_to_rotation(rg.quaternion_from_rotation(R)), R, atol=1e-14
        )


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_rotate_is_the_rotation_matrix_times_the_vector(orientation):
    """`rotate(x, X) = R(x) X` in every chart; the quaternion's closed form also for a
    quaternion off the unit sphere (R is built from q/|q|) and at q = 0 (identity)."""
    x = orientation.from_rotation(R0)
    np.testing.assert_allclose(orientation.rotate(x, V), R0 @ V, atol=1e-14)
    q = 2.5 * rg.quaternion_from_rotation(R0)
    np.testing.assert_allclose(rg.quaternion_rotate(q, V), R0 @ V, atol=1e-14)
    np.testing.assert_allclose(rg.quaternion_rotate(jnp.zeros(4), V), V, atol=0)
    body = rg.RigidBody(1.0, I_BODY, orientation)
    bq = jnp.concatenate([jnp.ones(3), x])
    np.testing.assert_allclose(body.point(bq, V), 1.0 + R0 @ V, atol=1e-14)


def test_with_parameters_checks_concrete_values_and_converts_traced_ones():
    body = rg.RigidBody(1.0, I_BODY)
    heavy = body.with_parameters(2.0, jnp.array([1.0, 1.0, 1.5]))
    assert float(heavy.mass) == 2.0
    np.testing.assert_allclose(heavy.inertia, jnp.diag(jnp.array([1.0, 1.0, 1.5])))
    assert body.with_parameters(inertia=2 * jnp.eye(3)).mass == body.mass
    with pytest.raises(ValueError, match="`mass` must be positive"):
        body.with_parameters(-1.0)
    with pytest.raises(ValueError, match="triangle inequality"):
        body.with_parameters(inertia=jnp.array([1.0, 1.0, 3.0]))
    with pytest.raises(ValueError, match=r"`inertia` must have shape \(3, 3\) or \(3,\)"):
        jax.jit(lambda I: body.with_parameters(inertia=I).inertia)(jnp.ones(2))
    q = jnp.concatenate([jnp.zeros(3), rg.Quaternion().from_rotation(R0)])
    qd = jnp.concatenate([V, rg.Quaternion().velocity_from_angular_velocity(q[3:], W)])

    def T(m, I):  # traced parameters, as inside a Lagrangian; no checks in the graph
        return body.with_parameters(m, I).kinetic_energy(q, qd)

    dm, dI = jax.grad(T, argnums=(0, 1))(2.0, I_BODY)
    np.testing.assert_allclose(dm, 0.5 * V @ V, rtol=1e-13)
    np.testing.assert_allclose(dI, 0.5 * (R0.T @ W) ** 2, rtol=1e-12)
    assert "cholesky" not in str(jax.make_jaxpr(T)(2.0, I_BODY))


def test_euler_zxz_angles_are_three_elementary_rotations():
    psi, th, phi = 0.4, 1.1, -0.7
    ez, ex = jnp.array([0.0, 0.0, 1.0]), jnp.array([1.0, 0.0, 0.0])
    R = jsl.expm(rg.hat(psi * ez)) @ jsl.expm(rg.hat(th * ex)) @ jsl.expm(rg.hat(phi * ez))
    ang = jnp.array([psi, th, phi])
    np.testing.assert_allclose(rg.euler_zxz_to_rotation(ang), R, atol=1e-14)
    np.testing.assert_allclose(rg.EulerZXZ().from_rotation(R), ang, atol=1e-13)


def test_projection_onto_so3_gives_the_nearest_rotation():
    M = R0 + 1e-3 * jnp.asarray(RNG.normal(size=(3, 3)))
    R = rg.project_to_so3(M)
    assert float(rg.orthonormality_residual(R)) < 1e-14
    assert np.isclose(float(jnp.linalg.det(R)), 1.0)
    np.testing.assert_allclose(rg.project_to_so3(R0), R0, atol=1e-14)


def _motion(t):
    """r(t) = r0 + t v + t^2 a, R(t) = exp(t hat(w)) R0: spatial angular velocity w."""
    return jnp.array([1.0, -2.0, 0.5]) + t * V + t**2 * jnp.array([0.1, 0.0, -0.2]), jsl.expm(
        t * rg.hat(W)
    ) @ R0


def test_rigid_body_velocities_follow_definition_2_21():
    t = 0.3
    (r, R), (rd, Rd) = jax.jvp(_motion, (t,), (1.0,))
    w = W  # spatial angular velocity of exp(t w^) R0
    np.testing.assert_allclose(rg.spatial_angular_velocity(R, Rd), w, atol=1e-13)
    np.testing.assert_allclose(rg.body_angular_velocity(R, Rd), R.T @ w, atol=1e-13)
    np.testing.assert_allclose(
        rg.spatial_translational_velocity(r, rd, w), rd + jnp.cross(r, w), atol=1e-14
    )
    np.testing.assert_allclose(rg.body_translational_velocity(R, rd), R.T @ rd, atol=1e-14)
    # spatial translational velocity = velocity of the body point at the spatial origin
    X0 = R.T @ (-r)  # body point currently at the origin
    v_origin = jax.jvp(lambda s: _motion(s)[0] + _motion(s)[1] @ X0, (t,), (1.0,))[1]
    np.testing.assert_allclose(rg.spatial_translational_velocity(r, rd, w), v_origin, atol=1e-13)


@pytest.mark.parametrize("orientation", ORIENTATIONS, ids=lambda o: type(o).__name__)
def test_body_state_kinematics_and_kinetic_energy_in_every_orientation_chart(orientation):
    body = rg.RigidBody(2.0, I_BODY, orientation, offset=2, name="b")
    t = 0.3
    (r, R), (rd, Rd) = jax.jvp(_motion, (t,), (1.0,))
    qb, qdb = body.state(r, R, rd, W)
    q = jnp.concatenate([jnp.array([7.0, 8.0]), qb])
    qd = jnp.concatenate([jnp.array([0.5, 0.6]), qdb])
    assert q.shape == (2 + body.size,) and len(body.coordinate_names()) == body.size
    np.testing.assert_allclose(body.rotation(q), R, atol=1e-13)
    np.testing.assert_allclose(body.angular_velocity(q, qd), W, atol=1e-12)
    np.testing.assert_allclose(body.body_angular_velocity(q, qd), R.T @ W, atol=1e-12)
    X = jnp.array([0.1, -0.3, 0.2])
    x_dot = jax.jvp(lambda s: _motion(s)[0] + _motion(s)[1] @ X, (t,), (1.0,))[1]
    np.testing.assert_allclose(body.point(q, X), r + R @ X, atol=1e-13)
    np.testing.assert_allclose(body.point_velocity(q, qd, X), x_dot, atol=1e-12)
    Om = R.T @ W
    T = 0.5 * 2.0 * rd @ rd + 0.5 * Om @ (I_BODY * Om)
    np.testing.assert_allclose(body.kinetic_energy(q, qd), T, rtol=1e-13)
    np.testing.assert_allclose(body.angular_momentum(q, qd), R @ (I_BODY * Om), atol=1e-12)
    con = body.orientation_constraint()
    if orientation.num_constraints:
        res = cx.constraint_residual(cx.System(lambda t, q, qd, p: 0.0 * q @ q, [con]), 0.0, q, qd)
        assert float(res.max()) < 1e-13
    else:
        assert con is None


def test_euler_angle_chart_is_singular_at_zero_tilt():
    J = jax.jacfwd(lambda v: rg.EulerZXZ().spatial_angular_velocity(jnp.array([0.2, 0.0, 0.4]), v))(
        jnp.zeros(3)
    )
    assert np.linalg.matrix_rank(np.asarray(J)) == 2


# ----------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize("mass", [0.0, -1.0])
def test_non_positive_mass_is_rejected(mass):
    with pytest.raises(ValueError, match="`mass` must be positive"):
        rg.RigidBody(mass, I_BODY)


def test_non_positive_mass_is_rejected_under_jit():
    f = jax.jit(lambda m: rg.RigidBody(m, I_BODY).mass)
    with pytest.raises(Exception, match="`mass` must be positive"):
        jax.block_until_ready(f(-1.0))


@pytest.mark.parametrize(
    "inertia, match",
    [
        (jnp.array([1.0, -1.0, 1.0]), "symmetric positive definite"),
        (jnp.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), "not symmetric"),
        (jnp.eye(2), r"must have shape \(3, 3\)"),
        (jnp.array([1.0, 1.0, 3.0]), "triangle inequality"),
    ],
)
def test_bad_inertia_is_rejected(inertia, match):
    with pytest.raises(ValueError, match=match):
        rg.RigidBody(1.0, inertia)


def test_non_positive_definite_inertia_is_rejected_under_jit():
    f = jax.jit(lambda I: rg.RigidBody(1.0, I).inertia)
    with pytest.raises(Exception, match="symmetric positive definite"):
        jax.block_until_ready(f(jnp.diag(jnp.array([1.0, -1.0, 1.0]))))


def test_non_orthonormal_initial_rotation_is_rejected_or_projected():
    body = rg.RigidBody(1.0, I_BODY, rg.RotationMatrix())
    bad = 1.01 * R0
    with pytest.raises(ValueError, match="not orthonormal.*project=True"):
        body.state(jnp.zeros(3), bad, jnp.zeros(3), jnp.zeros(3))
    q, _ = body.state(jnp.zeros(3), bad, jnp.zeros(3), jnp.zeros(3), project=True)
    assert float(rg.orthonormality_residual(body.rotation(q))) < 1e-14
    np.testing.assert_allclose(body.rotation(q), R0, atol=1e-13)
    with pytest.raises(ValueError, match="not orthonormal"):
        body.state(jnp.zeros(3), jnp.diag(jnp.array([1.0, 1.0, -1.0])), jnp.zeros(3), jnp.zeros(3))


def test_simulate_rejects_a_non_orthonormal_rotation_matrix_state():
    body = rg.RigidBody(1.0, I_BODY, rg.RotationMatrix())
    system = cx.System(
        lambda t, q, qd, p: body.kinetic_energy(q, qd), [body.orientation_constraint()]
    )
    q0 = jnp.concatenate([jnp.zeros(3), (1.01 * R0).ravel()])
    with pytest.raises(Exception, match=r"violates constraint row body\.orientation"):
        cx.simulate(system, q0, jnp.zeros(12), t1=1.0)


def test_bad_shapes_and_frames_are_rejected():
    body = rg.RigidBody(1.0, I_BODY)
    with pytest.raises(ValueError, match=r"`X` must be a 3-vector of shape \(3,\)"):
        body.point(jnp.zeros(7), jnp.zeros(2))
    with pytest.raises(ValueError, match=r"holding the body's coordinates at \[0:7\]"):
        body.position(jnp.zeros(5))
    with pytest.raises(ValueError, match=r"`position` must be a 3-vector"):
        body.state(jnp.zeros(2), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(ValueError, match=r"rotation matrix must have shape \(3, 3\)"):
        body.state(jnp.zeros(3), jnp.eye(2), jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(ValueError, match="`frame` must be 'spatial' or 'body'"):
        body.state(jnp.zeros(3), jnp.eye(3), jnp.zeros(3), jnp.zeros(3), frame="world")
    with pytest.raises(TypeError, match="`orientation` must be"):
        rg.RigidBody(1.0, I_BODY, orientation="quaternion")
    with pytest.raises(ValueError, match=r"`q` must be a quaternion"):
        rg.quaternion_to_rotation(jnp.zeros(3))
    with pytest.raises(ValueError, match=r"`w` must be a 3-vector"):
        rg.hat(jnp.zeros(4))


def test_mass_and_inertia_are_differentiable():
    body_q = jnp.concatenate([jnp.zeros(3), rg.Quaternion().from_rotation(R0)])
    qd = jnp.concatenate([V, rg.Quaternion().velocity_from_angular_velocity(body_q[3:], W)])

    def T(m, I):
        return rg.RigidBody(m, I).kinetic_energy(body_q, qd)

    dm, dI = jax.grad(T, argnums=(0, 1))(2.0, I_BODY)
    Om = R0.T @ W
    np.testing.assert_allclose(dm, 0.5 * V @ V, rtol=1e-13)
    np.testing.assert_allclose(dI, 0.5 * Om**2, rtol=1e-12)
    assert isinstance(eqx.filter(rg.RigidBody(2.0, I_BODY), eqx.is_array).mass, jax.Array)
