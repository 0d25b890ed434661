"""Constrained affine motion (Sławianowski et al. 2013): isochoric, conformal, rotation-free under
d'Alembert and vakonomic prescriptions, against the paper's reduced descriptions."""

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
SKEW3 = jnp.array([[0.0, -0.4, 0.3], [0.4, 0.0, -0.2], [-0.3, 0.2, 0.0]])
SYM3 = 0.5 * jnp.array([[0.2, 0.5, -0.1], [0.5, -0.3, 0.4], [-0.1, 0.4, 0.1]])
G3 = jnp.array([[1.2, 0.1, 0.0], [0.1, 0.8, 0.2], [0.0, 0.2, 1.0]])
ETA3 = jnp.array([[0.9, 0.0, 0.1], [0.0, 1.1, 0.0], [0.1, 0.0, 1.3]])
SVK = af.StVenantKirchhoff(2.0, 1.0)
N_SAVE = 21


def _sym(X):
    return 0.5 * (X + np.swapaxes(X, -1, -2))


def _skew(X):
    return 0.5 * (X - np.swapaxes(X, -1, -2))


def _make_sim(system, rtol=1e-11, **kw):
    """One compiled rollout per system; t1, initial state, body and mu0 are traced."""

    @eqx.filter_jit
    def sim(q0, qd0, body, t1, mu0=None):
        ts = t1 * jnp.linspace(0.0, 1.0, N_SAVE)
        traj = cx.simulate(
            system,
            q0,
            qd0,
            body,
            t1=t1,
            saveat=diffrax.SaveAt(ts=ts),
            mu0=mu0,
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=rtol),
            **kw,
        )
        return traj, af.affine_quantities(traj)

    return sim


# ---------------------------------------------------------------------------------------
# Isochoric.

ISO_BODY = af.AffineBody(1.0, J3, g=G3, eta=ETA3, potential=SVK)
PHI_ISO = ROT3 @ A3
DET0 = jnp.linalg.det(PHI_ISO)
sim_iso = _make_sim(af.affine_system(af.isochoric(DET0)), rtol=1e-12)


def _iso_state():
    Om = SYM3 - jnp.trace(SYM3) / 3 * jnp.eye(3) + SKEW3  # tr(Omega) = 0
    return af.affine_state(ISO_BODY, jnp.zeros(3), PHI_ISO, jnp.zeros(3), Om @ PHI_ISO)


def _check_isochoric(t1):
    traj, Q = sim_iso(*_iso_state(), ISO_BODY, jnp.asarray(t1))
    assert np.max(np.abs(Q.det_phi - DET0)) <= 1e-10
    # N_R^{ij} = lambda g^{ij}: N_R g is a multiple of the identity.
    NRg = Q.reaction_dipole @ G3
    lam = np.trace(NRg, axis1=1, axis2=2) / 3
    assert np.max(np.abs(lam)) > 1e-2
    assert np.max(np.abs(NRg - lam[:, None, None] * np.eye(3))) <= 1e-12
    assert np.ptp(Q.energy) <= 1e-10
    assert np.max(np.abs(Q.angular_momentum - Q.angular_momentum[0])) <= 1e-10
    return Q


def test_isochoric_keeps_det_phi_and_reaction_dipole_is_pure_trace():
    _check_isochoric(5.0)


@pytest.mark.slow
def test_isochoric_keeps_det_phi_constant_over_long_run():
    Q = _check_isochoric(30.0)
    assert np.ptp(Q.det_phi) <= 2e-10


# ---------------------------------------------------------------------------------------
# Conformal.

CONF_BODY = af.AffineBody(1.0, J3, g=G3, eta=ETA3, potential=SVK)
sim_conf = _make_sim(af.affine_system(af.conformal()))


def _conformal_state(body, scale, alpha):
    Lg, Le = jnp.linalg.cholesky(body.g), jnp.linalg.cholesky(body.eta)
    phi = scale * jnp.linalg.solve(Lg.T, ROT3) @ Le.T  # phi^T g phi = scale^2 eta
    Om = jnp.linalg.solve(body.g, SKEW3) + alpha * jnp.eye(3)  # g-skew + dilatation
    return af.affine_state(body, jnp.zeros(3), phi, jnp.zeros(3), Om @ phi)


def test_conformal_keeps_green_tensor_proportional_to_eta_and_reaction_dipole_symmetric_traceless():
    traj, Q = sim_conf(*_conformal_state(CONF_BODY, 1.1, 0.2), CONF_BODY, jnp.asarray(4.0))
    lam = np.trace(np.linalg.solve(ETA3, Q.green), axis1=1, axis2=2) / 3
    assert np.max(np.abs(Q.green - lam[:, None, None] * ETA3)) <= 1e-10
    assert np.ptp(lam) > 1e-2  # the body dilates
    NR = Q.reaction_dipole
    assert np.max(np.abs(NR)) > 1e-2
    assert np.max(np.abs(NR - np.swapaxes(NR, 1, 2))) <= 1e-12
    assert np.max(np.abs(np.einsum("ij,kij->k", G3, NR))) <= 1e-10  # g_ij N_R^ij = 0
    assert np.ptp(Q.energy) <= 1e-10


def test_conformal_collapse_to_lambda_zero_raises():
    body = af.AffineBody(1.0, J3, g=G3, eta=ETA3, potential=af.StVenantKirchhoff(0.0, 0.0))
    q0, qd0 = _conformal_state(body, 1.0, -1.0)  # free dilatation: lambda -> 0 at t = 1
    with pytest.raises(Exception, match="conformal factor lambda .* reached lambda <= 0"):
        sim_conf(q0, qd0.at[3:].set(-q0[3:]), body, jnp.asarray(4.0))


# ---------------------------------------------------------------------------------------
# Rotation-free (g = eta = 1, where the paper's reduced forms are written).

RF_BODY = af.AffineBody(1.0, J3, potential=SVK)
PHI_RF = ROT3 @ A3
sim_rf = _make_sim(af.affine_system(af.rotation_free()))
sim_rf_vak = _make_sim(af.affine_system(af.rotation_free()), prescription=cx.Vakonomic())
T_RF = 3.0


def _rf_state():
    return af.affine_state(RF_BODY, jnp.zeros(3), PHI_RF, jnp.zeros(3), SYM3 @ PHI_RF)


@pytest.fixture(scope="module")
def rf_dalembert():
    return sim_rf(*_rf_state(), RF_BODY, jnp.asarray(T_RF))


@eqx.filter_jit
def _polar_path(traj):
    """Polar parts (A, A_dot, A_ddot, omega_hat) along an engine trajectory."""
    qdd = traj.accelerations().qdd

    def one(q, qd, qdd):
        pol = af.polar_decomposition(RF_BODY, q, qd)
        Add = jax.jvp(
            lambda q_, qd_: af.polar_decomposition(RF_BODY, q_, qd_).A_dot, (q, qd), (qd, qdd)
        )[1]
        return pol, Add

    return jax.vmap(one)(traj.q, traj.qd, qdd)


def test_rotation_free_dalembert_keeps_omega_symmetric_and_reaction_dipole_antisymmetric(
    rf_dalembert,
):
    traj, Q = rf_dalembert
    assert np.max(np.abs(_skew(Q.Omega))) <= 1e-9
    NR = Q.reaction_dipole
    assert np.max(np.abs(NR)) > 1e-3
    assert np.max(np.abs(_sym(NR))) <= 1e-12
    assert np.ptp(Q.energy) <= 1e-9
    pol, _ = _polar_path(traj)
    omega_seed = jax.vmap(af.rotation_free_omega_hat)(pol.A, pol.A_dot)
    assert np.max(np.abs(pol.omega_hat - omega_seed)) <= 1e-9


def test_rotation_free_dalembert_matches_corrected_usual_reduced_equations(rf_dalembert):
    traj, Q = rf_dalembert
    q0, qd0 = _rf_state()
    pol0 = af.polar_decomposition(RF_BODY, q0, qd0)
    red = af.simulate_reduced(RF_BODY, pol0.A, pol0.A_dot, pol0.U, traj.ts, kind="usual")
    assert np.max(np.abs(red.phi - Q.phi)) <= 1e-9


def test_seed_usual_equation_terms_three_and_four_are_typos(rf_dalembert):
    """The paper's tensor equation fails on the engine's d'Alembert motion; the corrected
    third term -A J A_dot c and fourth term +1/4 A J A c^2 (c = [A^-1, A_dot]) fix it."""
    traj, _ = rf_dalembert
    pol, Add = _polar_path(traj)
    terms = jax.vmap(lambda A, Ad, Add: af.printed_usual_terms(A, Ad, Add, J3))(
        pol.A, pol.A_dot, Add
    )
    Nbar = jax.vmap(lambda A: af.reduced_dipole(RF_BODY, A))(pol.A)

    def residual(*keys):
        return np.max(np.abs(_sym(sum(terms[k] for k in keys) - Nbar)))

    assert residual("T1", "T2", "T3", "T4") <= 1e-9
    assert residual("T1", "T2", "T3_printed", "T4_printed") > 1e-3  # the paper, literally
    assert residual("T1", "T2", "T3_printed", "T4_printed_alt") > 1e-3  # other reading of term 4
    assert residual("T1", "T2", "T3", "T4_printed") > 1e-4  # term 3 fixed alone: still wrong
    assert residual("T1", "T2", "T3_printed", "T4") > 1e-3  # term 4 fixed alone: still wrong


@pytest.mark.parametrize("n", [2, 3])
def test_vakonomic_kinetic_is_T_int_on_rotation_free_velocity_and_seed_first_coefficient_typo(
    n,
):
    k = jax.random.split(jax.random.PRNGKey(n), 4)
    X = jax.random.normal(k[0], (n, n))
    A = X @ X.T + n * jnp.eye(n)
    Ad = _sym(jax.random.normal(k[1], (n, n)))
    U = jnp.linalg.qr(jax.random.normal(k[2], (n, n)))[0]
    U = U * jnp.sign(jnp.linalg.det(U))
    J = jnp.eye(n) + 0.3 * _sym(jax.random.normal(k[3], (n, n)))
    body = af.AffineBody(1.0, J)
    phid = U @ (Ad + af.rotation_free_omega_hat(A, Ad) @ A)  # phi = U A, U_dot = U omega_hat
    q, qd = af.join(jnp.zeros(n), U @ A), af.join(jnp.zeros(n), phid)
    assert np.max(np.abs(_skew(af.affine_velocity(body, q, qd)))) <= 1e-12  # rotation-free
    T_int = af.kinetic_energy(body, qd)
    assert np.isclose(af.vakonomic_kinetic(A, Ad, J), T_int, rtol=1e-13)
    diff = af.printed_vakonomic_kinetic(A, Ad, J) - af.vakonomic_kinetic(A, Ad, J)
    assert np.isclose(diff, 3 / 8 * jnp.trace(Ad @ J @ Ad), rtol=1e-12)


# ---------------------------------------------------------------------------------------
# Rotation-free, vakonomic.


@pytest.fixture(scope="module")
def rf_vakonomic():
    q0, qd0 = _rf_state()
    mu_star = af.vakonomic_spin_free_mu0(RF_BODY, q0, qd0)
    t1 = jnp.asarray(T_RF)
    return (
        mu_star,
        sim_rf_vak(q0, qd0, RF_BODY, t1, mu_star),
        sim_rf_vak(q0, qd0, RF_BODY, t1, jnp.zeros(3)),
    )


def test_spin_free_mu0_is_minus_half_spin(rf_vakonomic):
    mu_star, _, _ = rf_vakonomic
    q0, qd0 = _rf_state()
    S0 = af.angular_momentum(RF_BODY, q0, qd0)
    np.testing.assert_allclose(mu_star, -0.5 * S0[np.triu_indices(3, 1)], atol=1e-13)
    assert np.max(np.abs(S0)) > 1e-2


def test_vakonomic_engine_with_spin_free_mu0_matches_reduced_vakonomic_lagrangian(rf_vakonomic):
    _, (traj, Q), _ = rf_vakonomic
    q0, qd0 = _rf_state()
    pol0 = af.polar_decomposition(RF_BODY, q0, qd0)
    red = af.simulate_reduced(RF_BODY, pol0.A, pol0.A_dot, pol0.U, traj.ts, kind="vakonomic")
    assert np.max(np.abs(red.phi - Q.phi)) <= 1e-9
    assert np.max(np.abs(_skew(Q.Omega))) <= 1e-9
    assert np.ptp(eqx.filter_jit(lambda t: t.effective_energy())(traj)) <= 1e-9


def test_vakonomic_with_zero_mu0_and_dalembert_motions_differ(rf_vakonomic, rf_dalembert):
    _, (_, Qs), (traj0, Q0) = rf_vakonomic
    _, Qd = rf_dalembert
    assert np.max(np.abs(Q0.phi - Qs.phi)) > 1e-3  # mu0 is free data; only mu* is reduced
    assert np.max(np.abs(Qd.phi - Qs.phi)) > 1e-3
    assert np.max(np.abs(Qd.phi - Q0.phi)) > 1e-3
    assert np.max(np.abs(_skew(Q0.Omega))) <= 1e-9  # all of them are rotation-free
    # Vakonomic reactions carry the curl term; d'Alembert ones are A^T lambda only.
    curl = eqx.filter_jit(lambda t: t.accelerations().reactions_curl)(traj0)
    assert np.max(np.abs(curl)) > 1e-3


def test_reduced_paths_reject_non_hyperelastic_potentials():
    body = af.AffineBody(1.0, J3, potential=af.Potential(lambda r, phi: jnp.sum(phi)))
    with pytest.raises(ValueError, match="need a hyperelastic potential"):
        af.reduced_vakonomic_system(body)
    with pytest.raises(ValueError, match="`kind` must be 'vakonomic' or 'usual'"):
        af.simulate_reduced(RF_BODY, A3, A3, jnp.eye(3), jnp.linspace(0, 1, 3), kind="x")


@eqx.filter_jit
def _both_prescriptions(system, q, qd, body, mu):
    d = cx.accelerations(system, 0.0, q, qd, body)
    v = cx.accelerations(system, 0.0, q, qd, body, prescription=cx.Vakonomic(), mu=mu)
    return d.qdd, v.qdd, d.multipliers, v.multipliers


@pytest.mark.parametrize("name", ["gyroscopic", "isochoric", "conformal"])
def test_holonomic_affine_constraints_give_dalembert_motion_under_vakonomic(name):
    # For holonomic rows the vakonomic curl vanishes: same qdd for any mu, lambda = mu_dot.
    constraint, m = {
        "gyroscopic": (af.gyroscopic(), 6),
        "isochoric": (af.isochoric(DET0), 1),
        "conformal": (af.conformal(), 5),
    }[name]  # rows: n(n+1)/2, 1, n(n+1)/2 - 1
    system = af.affine_system(constraint)
    q, qd = af.join(jnp.zeros(3), PHI_ISO), af.join(jnp.zeros(3), SYM3 + SKEW3)
    mu = jnp.linspace(-1.0, 2.0, m)
    qdd_d, qdd_v, lam, mu_dot = _both_prescriptions(system, q, qd, ISO_BODY, mu)
    np.testing.assert_allclose(qdd_v, qdd_d, atol=1e-12)
    np.testing.assert_allclose(mu_dot, lam, atol=1e-11)


def test_rotation_free_with_metrics_keeps_g_omega_symmetric_and_reaction_dipole_antisymmetric():
    # Omega g-symmetric: g Omega symmetric. Rows vanish on such velocities, the reaction
    # dipole N_R^{ij} is antisymmetric and d/dt skew(g Omega) = 0 along the solved qdd.
    body = af.AffineBody(1.0, J3, g=G3, eta=ETA3, potential=SVK)
    Om = jnp.linalg.solve(G3, SYM3)
    q, qd = af.affine_state(body, jnp.zeros(3), PHI_ISO, jnp.zeros(3), Om @ PHI_ISO)
    system = af.affine_system(af.rotation_free())

    @eqx.filter_jit
    def check(q, qd, body):
        out = cx.accelerations(system, 0.0, q, qd, body)
        gOm = lambda q_, qd_: body.g @ af.affine_velocity(body, q_, qd_)
        d_gOm = jax.jvp(gOm, (q, qd), (qd, out.qdd))[1]
        rows = af.rotation_free_one_form(body, q) @ qd
        return rows, af.reaction_dipole(body, q, out.reactions), d_gOm, gOm(q, qd)

    rows, NR, d_gOm, gOm = check(q, qd, body)
    assert np.max(np.abs(_skew(af.affine_velocity(body, q, qd)))) > 1e-2  # Omega itself is not
    assert np.max(np.abs(rows)) <= 1e-14
    assert np.max(np.abs(_skew(gOm))) <= 1e-14
    assert np.max(np.abs(NR)) > 1e-3
    assert np.max(np.abs(_sym(NR))) <= 1e-12
    assert np.max(np.abs(_skew(d_gOm))) <= 1e-12
