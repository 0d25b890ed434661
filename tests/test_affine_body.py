"""Affine body (Sławianowski et al. 2013): kinematics, derived quantities, gyroscopic = rigid body,
unconstrained hyperelastic invariants, bad input."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
from constrax import affine as af

J3 = jnp.array([[1.0, 0.2, 0.0], [0.2, 1.5, 0.1], [0.0, 0.1, 2.2]])
A3 = jnp.array([[1.1, 0.1, 0.0], [0.1, 0.9, 0.05], [0.0, 0.05, 1.0]])
ROT3 = jax.scipy.linalg.expm(jnp.array([[0, -0.3, 0.2], [0.3, 0, -0.1], [-0.2, 0.1, 0]]))
PHI3 = ROT3 @ A3
W3 = jnp.array([[0.3, -0.4, 0.3], [0.1, -0.2, -0.2], [-0.3, 0.5, 0.1]])
G3 = jnp.array([[1.2, 0.1, 0.0], [0.1, 0.8, 0.2], [0.0, 0.2, 1.0]])
ETA3 = jnp.array([[0.9, 0.0, 0.1], [0.0, 1.1, 0.0], [0.1, 0.0, 1.3]])
TOL = diffrax.PIDController(rtol=1e-12, atol=1e-12)
simulate = eqx.filter_jit(cx.simulate)


def hat(w):
    return jnp.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])


def vee(W):
    return jnp.stack([W[..., 2, 1], W[..., 0, 2], W[..., 1, 0]], axis=-1)


def _metric_body():
    return af.AffineBody(1.7, J3, g=G3, eta=ETA3, potential=af.StVenantKirchhoff(2.0, 1.0))


def test_kinetic_energy_is_seed_quadratic_form_and_mass_matrix_is_block_diagonal():
    body = _metric_body()
    q, qd = af.affine_state(body, jnp.ones(3), PHI3, jnp.array([0.1, -0.2, 0.3]), W3)
    rd, phid = qd[:3], qd[3:].reshape(3, 3)
    # Index form of the paper: M/2 g_ij rd^i rd^j + 1/2 g_ij phid^i_K phid^j_L J^KL.
    T_ref = 0.5 * body.mass * np.einsum("ij,i,j", G3, rd, rd) + 0.5 * np.einsum(
        "ij,iK,jL,KL", G3, phid, phid, J3
    )
    assert np.isclose(af.kinetic_energy(body, qd), T_ref, rtol=1e-14)
    W = eqx.filter_jit(cx.mass_matrix)(af.affine_system(), 0.0, q, qd, body)
    W_ref = jax.scipy.linalg.block_diag(body.mass * G3, jnp.kron(G3, J3))
    np.testing.assert_allclose(W, W_ref, atol=1e-13)


def test_spin_balance_and_reaction_dipole_identity_match_seed_equations():
    # Seed: dK/dt = phid J phid^T + N (+ N_R);  dK/dt = N + 2 dT_int/dg.
    body = _metric_body()
    q, qd = af.affine_state(body, jnp.zeros(3), PHI3, jnp.zeros(3), W3)

    @eqx.filter_jit
    def sides(system, q, qd, body):
        out = cx.accelerations(system, 0.0, q, qd, body)
        dK = jax.jvp(lambda q_, qd_: af.affine_spin(body, q_, qd_), (q, qd), (qd, out.qdd))[1]
        phid = qd[3:].reshape(3, 3)
        N = af.dipole(body, q)
        NR = af.reaction_dipole(body, q, out.reactions)
        qd_int = qd.at[:3].set(0.0)
        dTdg = jax.grad(lambda b: af.kinetic_energy(b, qd_int))(body).g
        return dK, phid @ body.J @ phid.T + N + NR, phid @ body.J @ phid.T, 2 * dTdg, NR

    for system in (af.affine_system(), af.affine_system(af.gyroscopic(), af.rotation_free())):
        dK, rhs, PJP, two_dTdg, NR = sides(system, q, qd, body)
        np.testing.assert_allclose(dK, rhs, atol=1e-12)
        np.testing.assert_allclose(PJP, two_dTdg, atol=1e-12)
    assert np.max(np.abs(NR)) > 1e-2


def test_force_and_dipole_follow_seed_definitions():
    pot = af.Potential(lambda r, phi: 0.5 * r @ r + jnp.sum(phi**3) + r @ phi @ r)
    body = af.AffineBody(1.0, J3, g=G3, potential=pot)
    q = af.join(jnp.array([0.3, -0.1, 0.2]), PHI3)
    dV = jax.grad(lambda q_: pot.fn(q_[:3], q_[3:].reshape(3, 3)))(q)
    gi = np.linalg.inv(G3)
    np.testing.assert_allclose(af.force(body, q), -gi @ dV[:3], atol=1e-13)
    N_ref = -np.einsum("iA,kA,kj->ij", PHI3, dV[3:].reshape(3, 3), gi)
    np.testing.assert_allclose(af.dipole(body, q), N_ref, atol=1e-13)


def test_polar_decomposition_is_isometry_times_eta_symmetric_and_omega_hat_is_U_inverse_U_dot():
    body = _metric_body()
    q, qd = af.join(jnp.zeros(3), PHI3), af.join(jnp.zeros(3), W3)
    pol = af.polar_decomposition(body, q, qd)
    np.testing.assert_allclose(pol.U @ pol.A, PHI3, atol=1e-13)
    np.testing.assert_allclose(pol.U.T @ G3 @ pol.U, ETA3, atol=1e-13)
    np.testing.assert_allclose(ETA3 @ pol.A, (ETA3 @ pol.A).T, atol=1e-13)
    assert np.all(np.linalg.eigvals(pol.A).real > 0)
    # Rates against central finite differences of the decomposition along phi + s*phid.
    h = 1e-5
    plus = af.polar_decomposition(body, q + h * qd, qd)
    minus = af.polar_decomposition(body, q - h * qd, qd)
    np.testing.assert_allclose(pol.U_dot, (plus.U - minus.U) / (2 * h), atol=1e-8)
    np.testing.assert_allclose(pol.A_dot, (plus.A - minus.A) / (2 * h), atol=1e-8)
    np.testing.assert_allclose(pol.omega_hat, np.linalg.solve(pol.U, pol.U_dot), atol=1e-13)
    np.testing.assert_allclose(ETA3 @ pol.omega_hat, -(ETA3 @ pol.omega_hat).T, atol=1e-12)


@pytest.fixture(scope="module")
def rigid_run():
    body = af.AffineBody(1.3, J3, potential=af.StVenantKirchhoff(2.0, 1.0))
    w0 = jnp.array([0.3, 1.1, -0.5])
    q0, qd0 = af.affine_state(body, jnp.zeros(3), ROT3, jnp.array([0.1, 0.0, -0.2]), ROT3 @ hat(w0))
    ts = jnp.linspace(0.0, 4.0, 41)
    system = af.affine_system(af.gyroscopic())
    traj = simulate(
        system, q0, qd0, body, t1=4.0, saveat=diffrax.SaveAt(ts=ts), stepsize_controller=TOL
    )
    return body, w0, ts, traj


def test_gyroscopic_affine_body_obeys_euler_equations_with_inertia_trJ_minus_J(rigid_run):
    body, w0, ts, traj = rigid_run
    Q = af.affine_quantities(traj)
    w_body = vee(Q.Omega_hat)  # co-moving angular velocity R^T R_dot
    I = jnp.trace(J3) * jnp.eye(3) - J3

    def euler(t, w, args):  # I w_dot = (I w) x w, independent of constrax
        return jnp.linalg.solve(I, jnp.cross(I @ w, w))

    ref = diffrax.diffeqsolve(
        diffrax.ODETerm(euler),
        diffrax.Tsit5(),
        0.0,
        4.0,
        None,
        w0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-13, atol=1e-13),
        max_steps=100_000,
    )
    assert np.max(np.abs(w_body - ref.ys)) <= 1e-9


def test_gyroscopic_affine_body_conserves_energy_and_spin_and_reaction_dipole_is_symmetric(
    rigid_run,
):
    body, w0, ts, traj = rigid_run
    Q = af.affine_quantities(traj)
    assert np.ptp(Q.energy) <= 1e-10
    assert np.max(np.abs(Q.angular_momentum - Q.angular_momentum[0])) <= 1e-10
    NR = Q.reaction_dipole
    assert np.max(np.abs(NR)) > 1e-2  # reactions do not vanish ...
    assert np.max(np.abs(NR - np.swapaxes(NR, 1, 2))) <= 1e-12  # ... but are symmetric
    assert np.max(np.abs(traj.constraint_residual().position)) <= 1e-10


def test_unconstrained_hyperelastic_body_conserves_spin_energy_and_has_symmetric_dipole():
    body = af.AffineBody(1.0, J3, g=G3, eta=ETA3, potential=af.StVenantKirchhoff(2.0, 1.0))
    q0, qd0 = af.affine_state(body, jnp.zeros(3), PHI3, jnp.array([0.2, 0.0, 0.1]), 0.5 * W3)
    traj = simulate(
        af.affine_system(),
        q0,
        qd0,
        body,
        t1=3.0,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 3.0, 31)),
        stepsize_controller=TOL,
    )
    Q = af.affine_quantities(traj)
    assert np.ptp(Q.energy) <= 1e-10
    assert np.max(np.abs(Q.angular_momentum - Q.angular_momentum[0])) <= 1e-10
    assert np.max(np.abs(Q.angular_momentum[0])) > 1e-2
    Ng = Q.dipole @ G3  # N^{ik} g_kj: g-symmetric means N symmetric
    assert np.max(np.abs(Q.dipole - np.swapaxes(Q.dipole, 1, 2))) <= 1e-12
    assert np.max(np.abs(Ng)) > 1e-2
    # Free translation: r(t) = r0 + v0 t.
    np.testing.assert_allclose(Q.r, traj.ts[:, None] * qd0[:3], atol=1e-10)


# ---------------------------------------------------------------------------------------
# Bad input.


def test_singular_phi_at_start_raises():
    body = af.AffineBody(1.0, J3)
    with pytest.raises(Exception, match="singular at the start"):
        af.affine_state(body, jnp.zeros(3), jnp.diag(jnp.array([1.0, 1.0, 0.0])), jnp.zeros(3), W3)


def test_negative_determinant_phi_at_start_raises():
    body = af.AffineBody(1.0, J3)
    with pytest.raises(Exception, match="negative determinant"):
        af.affine_state(body, jnp.zeros(3), jnp.diag(jnp.array([1.0, 1.0, -1.0])), jnp.zeros(3), W3)


@pytest.mark.parametrize(
    "J, match",
    [
        (jnp.array([[1.0, 0.5], [0.0, 1.0]]), "symmetric positive definite"),
        (jnp.array([[1.0, 0.0], [0.0, -1.0]]), "symmetric positive definite"),
        (jnp.eye(4), "n = 2 or 3"),
        (jnp.ones(3), "n = 2 or 3"),
    ],
)
def test_bad_inertia_raises(J, match):
    with pytest.raises(Exception, match=match):
        af.AffineBody(1.0, J)


def test_bad_inertia_raises_under_jit():
    make = jax.jit(lambda J: af.AffineBody(1.0, J).J)
    with pytest.raises(Exception, match="`J` must be symmetric positive definite"):
        make(jnp.array([[1.0, 2.0], [2.0, 1.0]]))


@pytest.mark.parametrize("name", ["g", "eta"])
def test_metric_of_wrong_dimension_raises(name):
    with pytest.raises(ValueError, match=rf"`{name}` must be an \(n, n\) = \(3, 3\) metric"):
        af.AffineBody(1.0, J3, **{name: jnp.eye(2)})


def test_wrong_coordinate_count_raises():
    body = af.AffineBody(1.0, jnp.eye(2))
    with pytest.raises(ValueError, match="n \\+ n\\^2 = 6 coordinates"):
        af.kinetic_energy(body, jnp.zeros(12))


def test_non_body_parameters_raise():
    with pytest.raises(TypeError, match="needs p = an AffineBody"):
        cx.accelerations(af.affine_system(), 0.0, jnp.zeros(6), jnp.zeros(6), {"m": 1.0})


def test_bad_mass_potential_and_state_shapes_raise():
    with pytest.raises(Exception, match="`mass` must be positive"):
        af.AffineBody(-1.0, J3)
    with pytest.raises(TypeError, match="`potential` must be an AbstractPotential"):
        af.AffineBody(1.0, J3, potential=lambda r, phi: 0.0)
    body = af.AffineBody(1.0, J3)
    with pytest.raises(ValueError, match=r"`phi_dot` must have shape \(3, 3\)"):
        af.affine_state(body, jnp.zeros(3), PHI3, jnp.zeros(3), jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"`phi` must have shape \(n, n\) = \(3, 3\)"):
        af.join(jnp.zeros(3), jnp.zeros((2, 2)))


def test_affine_quantities_needs_an_affine_body_trajectory():
    system = cx.System(lagrangian=lambda t, q, qd, p: 0.5 * qd @ qd)
    traj = cx.simulate(system, jnp.zeros(1), jnp.ones(1), None, t1=0.1)
    with pytest.raises(TypeError, match="simulated with p = an AffineBody"):
        af.affine_quantities(traj)
