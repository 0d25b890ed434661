r"""Vakonomic (Hamilton–Lusternik) dynamics against independent references.

Sławianowski et al. (2013): closed forms of the nonholonomic particle under both
prescriptions, holonomic constraints (vakonomic = d'Alembert with lambda = mu_dot), the
linear vakonomic reaction R_i = mu_dot^a w_ai + mu^a (d_j w_ai - d_i w_aj) qd^j against
sympy, a nonlinear velocity constraint (constant speed) with closed forms and the effective
energy E[L, M], sympy accelerations for nonlinear constraints, gradients against finite
differences, bad input.

Sign convention: constrax's effective Lagrangian is L - mu.c (Sławianowski et al. 2013,
"Vakonomic prescription"), so its mu is minus the paper's in the nonlinear section (L + mu F).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
from scipy.integrate import quad

import constrax as cx
from constrax._compare import compare_prescriptions
from constrax._geometry import curl

RTOL = 1e-12
CTRL = diffrax.PIDController(rtol=RTOL, atol=RTOL)
SOLVER = diffrax.Tsit5()


def _run(system, prescription, ts, **kw):
    """One compiled rollout `(q0, qd0, mu0, p) -> (q, qd, mu)` per system/prescription."""

    @eqx.filter_jit
    def run(q0, qd0, mu0, p):
        traj = cx.simulate(
            system,
            q0,
            qd0,
            p,
            t0=ts[0],
            t1=ts[-1],
            solver=SOLVER,
            stepsize_controller=CTRL,
            saveat=diffrax.SaveAt(ts=ts),
            prescription=prescription,
            mu0=mu0,
            max_steps=100_000,
            **kw,
        )
        return traj.q, traj.qd, traj.mu

    return run


# =========================================================================================
# Nonholonomic particle, d'Alembert: L = |qd|^2/2, zd = y xd.
#   xdd = -y lam, ydd = 0, zdd = lam, lam (1 + y^2) = xd yd
#   => y = y0 + v t, xd sqrt(1 + y^2) = C, x = x0 + (C/v)(asinh y - asinh y0),
#      z = z0 + (C/v)(sqrt(1 + y^2) - sqrt(1 + y0^2)).


def particle_lagrangian(t, q, qd, p):
    return 0.5 * qd @ qd


def z_eq_y_xd(t, q, p):  # zd - y xd = 0
    return jnp.array([-q[1], 0.0, 1.0])


def test_dalembert_nonholonomic_particle_matches_closed_form():
    system = cx.System(particle_lagrangian, [cx.Pfaffian(z_eq_y_xd)])
    ts = jnp.linspace(0.0, 10.0, 21)
    x0, y0, z0, xd0, v = 0.3, -1.2, 0.5, 1.1, 0.4
    q0 = jnp.array([x0, y0, z0])
    qd0 = jnp.array([xd0, v, y0 * xd0])
    q, qd, _ = _run(system, cx.DAlembert(), ts)(q0, qd0, None, None)
    t = np.asarray(ts)
    y = y0 + v * t
    C = xd0 * np.sqrt(1 + y0**2)
    ref = np.stack(
        [
            x0 + C / v * (np.arcsinh(y) - np.arcsinh(y0)),
            y,
            z0 + C / v * (np.sqrt(1 + y**2) - np.sqrt(1 + y0**2)),
        ],
        1,
    )
    np.testing.assert_allclose(q, ref, atol=1e-8, rtol=0)
    np.testing.assert_allclose(qd[:, 0], C / np.sqrt(1 + y**2), atol=1e-8, rtol=0)


# =========================================================================================
# Vakonomic nonholonomic particle with L = (xd^2 + yd^2)/2 (the sub-Riemannian problem).
# Heisenberg form zd = (x yd - y xd)/2, Lambda = L - mu (zd - (x yd - y xd)/2):
#   z-equation: d/dt(-mu) = 0 => mu = mu0;  xdd = mu yd, ydd = -mu xd:
#   circles of radius |v0|/|mu0| traversed clockwise at rate mu0,
#   w = x + i y = w0 + (i v0/mu0)(exp(-i mu0 t) - 1), v0 = xd0 + i yd0,
#   z from zd = Im(conj(w) wd)/2 (closed form below).
# The form zd = y xd gives xdd = -mu yd, ydd = mu xd (counter-clockwise), z by quadrature.


def planar_kinetic(t, q, qd, p):
    return 0.5 * (qd[0] ** 2 + qd[1] ** 2)


def heisenberg(t, q, p):
    return jnp.array([q[1] / 2, -q[0] / 2, 1.0])


def _heisenberg_circle(t, w0, v0, mu0, z0):
    c = w0 - 1j * v0 / mu0
    e = np.exp(-1j * mu0 * t)
    w = c + 1j * v0 / mu0 * e
    integral = np.conj(c) * v0 * (e - 1) / (-1j * mu0)  # int conj(c) v0 e^{-i mu t} dt
    z = z0 + 0.5 * (np.imag(integral) - abs(v0) ** 2 * t / mu0)
    return np.stack([w.real, w.imag, z], 1), v0 * e


def _z_eq_y_xd_circle(t, w0, v0, mu0, z0):
    e = np.exp(1j * mu0 * t)
    w = w0 + v0 * (e - 1) / (1j * mu0)
    y = lambda s: (w0 + v0 * (np.exp(1j * mu0 * s) - 1) / (1j * mu0)).imag
    xd = lambda s: (v0 * np.exp(1j * mu0 * s)).real
    z = z0 + np.array(
        [
            quad(lambda s: y(s) * xd(s), 0.0, ti, epsabs=1e-13, epsrel=1e-13, limit=200)[0]
            for ti in t
        ]
    )
    return np.stack([w.real, w.imag, z], 1), v0 * e


@pytest.mark.parametrize(
    "omega, closed_form",
    [(heisenberg, _heisenberg_circle), (z_eq_y_xd, _z_eq_y_xd_circle)],
    ids=["heisenberg", "zd_eq_y_xd"],
)
def test_vakonomic_nonholonomic_particle_moves_on_circles_radius_v_over_mu0(omega, closed_form):
    system = cx.System(planar_kinetic, [cx.Pfaffian(omega)])
    mu0 = 2.0
    revolutions = 4
    ts = jnp.linspace(0.0, revolutions * 2 * np.pi / mu0, 41)
    q0 = jnp.array([0.4, -0.3, 0.2])
    xy_d0 = jnp.array([0.9, 0.5])
    zd0 = -(omega(0.0, q0, None)[:2] @ xy_d0)
    qd0 = jnp.concatenate([xy_d0, zd0[None]])
    q, qd, mu = _run(system, cx.Vakonomic(), ts)(q0, qd0, jnp.array([mu0]), None)
    ref, vel = closed_form(np.asarray(ts), complex(0.4, -0.3), complex(0.9, 0.5), mu0, 0.2)
    np.testing.assert_allclose(q, ref, atol=1e-8, rtol=0)
    np.testing.assert_allclose(qd[:, 0] + 1j * qd[:, 1], vel, atol=1e-8, rtol=0)
    np.testing.assert_allclose(mu[:, 0], mu0, atol=1e-8, rtol=0)
    # the (x, y) projection is a circle of radius |v0| / |mu0|
    centre = ref[0, :2] + np.array([-0.5, 0.9]) / mu0 * (1 if omega is z_eq_y_xd else -1)
    radius = np.linalg.norm(np.asarray(q[:, :2]) - centre, axis=1)
    np.testing.assert_allclose(radius, np.hypot(0.9, 0.5) / mu0, atol=1e-8)


def test_vakonomic_heisenberg_full_kinetic_energy_conserves_its_first_integrals():
    # L = |qd|^2/2 (z has inertia): Lambda is invariant under z-shifts and rotations about z,
    # so p_z = zd - mu and J = x yd - y xd + mu r^2/2 are conserved, hence mu (4 + r^2) too;
    # the energy |qd|^2/2 is conserved (linear constraints, no time dependence).
    system = cx.System(particle_lagrangian, [cx.Pfaffian(heisenberg)])
    ts = jnp.linspace(0.0, 20.0, 41)
    q0 = jnp.array([0.5, 0.1, 0.0])
    xy = jnp.array([0.3, 1.0])
    qd0 = jnp.concatenate([xy, (q0[0] * xy[1] - q0[1] * xy[0])[None] / 2])
    q, qd, mu = _run(system, cx.Vakonomic(), ts)(q0, qd0, jnp.array([1.5]), None)
    mu = mu[:, 0]
    r2 = q[:, 0] ** 2 + q[:, 1] ** 2
    pz = qd[:, 2] - mu
    J = q[:, 0] * qd[:, 1] - q[:, 1] * qd[:, 0] + mu * r2 / 2
    for inv in (pz, J, mu * (4 + r2), 0.5 * jnp.sum(qd**2, 1)):
        np.testing.assert_allclose(inv, inv[0], atol=1e-9, rtol=0)
    assert float(jnp.ptp(mu)) > 0.1  # mu really varies (not a trivial circle)


# =========================================================================================
# Holonomic constraints: vakonomic = d'Alembert with lambda = mu_dot (double pendulum).


def double_pendulum():
    def L(t, q, qd, p):
        m1, m2 = p["m"]
        return (
            0.5 * m1 * (qd[0] ** 2 + qd[1] ** 2)
            + 0.5 * m2 * (qd[2] ** 2 + qd[3] ** 2)
            - p["g"] * (m1 * q[1] + m2 * q[3])
        )

    def rods(t, q, p):
        l1, l2 = p["l"]
        return jnp.array(
            [q[0] ** 2 + q[1] ** 2 - l1**2, (q[2] - q[0]) ** 2 + (q[3] - q[1]) ** 2 - l2**2]
        )

    p = {"m": jnp.array([1.0, 0.7]), "l": jnp.array([1.0, 0.8]), "g": jnp.asarray(9.81)}
    return cx.System(L, [cx.Holonomic(rods)]), p


def _pendulum_state(a1, a2, w1, w2, p):
    l1, l2 = p["l"]
    q = jnp.array(
        [
            l1 * jnp.sin(a1),
            -l1 * jnp.cos(a1),
            l1 * jnp.sin(a1) + l2 * jnp.sin(a2),
            -l1 * jnp.cos(a1) - l2 * jnp.cos(a2),
        ]
    )
    qd = jnp.array(
        [
            l1 * jnp.cos(a1) * w1,
            l1 * jnp.sin(a1) * w1,
            l1 * jnp.cos(a1) * w1 + l2 * jnp.cos(a2) * w2,
            l1 * jnp.sin(a1) * w1 + l2 * jnp.sin(a2) * w2,
        ]
    )
    return q, qd


def test_holonomic_vakonomic_equals_dalembert_with_lambda_eq_mu_dot():
    system, p = double_pendulum()

    @jax.jit
    def both(x, mu):
        q, qd = _pendulum_state(*x, p)
        d = cx.accelerations(system, 0.0, q, qd, p)
        v = cx.accelerations(system, 0.0, q, qd, p, prescription=cx.Vakonomic(), mu=mu)
        return d.qdd, d.multipliers, d.reactions, v.qdd, v.mu_dot, v.reactions, v.reactions_curl

    keys = jax.random.split(jax.random.PRNGKey(1), 5)
    for k in keys:
        x = jax.random.uniform(k, (4,), minval=-2.0, maxval=2.0)
        mu = 10 * jax.random.normal(jax.random.fold_in(k, 1), (2,))
        dq, lam, dR, vq, mud, vR, vcurl = both(x, mu)
        np.testing.assert_allclose(vq, dq, atol=1e-10)
        np.testing.assert_allclose(mud, lam, atol=1e-10)
        np.testing.assert_allclose(vR, dR, atol=1e-10)
        np.testing.assert_allclose(vcurl, 0.0, atol=1e-10)


def test_compare_prescriptions_holonomic_double_pendulum_same_motion_any_mu0():
    system, p = double_pendulum()
    q0, qd0 = _pendulum_state(0.9, -0.4, 0.3, 1.2, p)
    ts = jnp.linspace(0.0, 3.0, 31)
    cmp = compare_prescriptions(
        system,
        q0,
        qd0,
        p,
        mu0=jnp.array([3.0, -2.0]),
        t1=3.0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-11),
        constraint_solver=cx.KKT(),  # regular system: the fast path (and a smaller compile)
    )
    assert float(cmp.max_divergence) < 1e-8
    assert cmp.vakonomic.mu.shape == (31, 2) and cmp.dalembert.mu is None
    # along the motion, mu_dot (vakonomic) equals lambda (d'Alembert)
    mults = eqx.filter_jit(lambda c: (c.vakonomic.multipliers(), c.dalembert.multipliers()))
    mu_dot, lam = mults(cmp)
    np.testing.assert_allclose(mu_dot, lam, atol=1e-7 * float(jnp.max(jnp.abs(lam))))


# =========================================================================================
# Linear vakonomic reactions: the explicit curl formula of Sławianowski et al. (2013)
# (sympy derivatives).


def disk_lagrangian(t, q, qd, p):
    return (
        0.5 * p["m"] * (qd[0] ** 2 + qd[1] ** 2)
        + 0.5 * p["I"] * qd[2] ** 2
        + 0.5 * p["J"] * qd[3] ** 2
        - p["k"] * q[3] ** 2
    )


def disk_rows(t, q, p):  # xd = R cos(th) phid, yd = R sin(th) phid, plus a skew row
    R = p["R"]
    return jnp.array(
        [
            [1.0, 0.0, 0.0, -R * jnp.cos(q[2])],
            [0.0, 1.0, 0.0, -R * jnp.sin(q[2])],
            [q[1], -q[0] * q[3], 1.0, 0.0],
        ]
    )


def _sympy_disk_rows():
    x, y, th, ph, R = sp.symbols("x y theta phi R")
    W = sp.Matrix([[1, 0, 0, -R * sp.cos(th)], [0, 1, 0, -R * sp.sin(th)], [y, -x * ph, 1, 0]])
    qs = [x, y, th, ph]
    dW = [
        [[sp.diff(W[a, i], qs[j]) - sp.diff(W[a, j], qs[i]) for j in range(4)] for i in range(4)]
        for a in range(3)
    ]  # d_j w_ai - d_i w_aj
    return sp.lambdify((x, y, th, ph, R), W), sp.lambdify((x, y, th, ph, R), dW)


def test_linear_vakonomic_reactions_equal_explicit_curl_formula():
    p = {k: jnp.asarray(v) for k, v in dict(m=1.3, I=0.4, J=0.2, k=0.3, R=0.6).items()}
    system = cx.System(disk_lagrangian, [cx.Pfaffian(disk_rows)])
    W_fn, dW_fn = _sympy_disk_rows()

    @jax.jit
    def vak(q, qd, mu):
        out = cx.accelerations(system, 0.0, q, qd, p, prescription=cx.Vakonomic(), mu=mu)
        return out, curl(system, 0.0, q, p)

    rng = np.random.default_rng(0)
    for _ in range(5):
        q = rng.normal(size=4)
        W = np.array(W_fn(*q, 0.6), float)
        qd = np.linalg.svd(W)[2][-1] * rng.normal()  # admissible velocity: W qd = 0
        mu = rng.normal(size=3)
        out, C = vak(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(mu))
        dW = np.array(dW_fn(*q, 0.6), float)
        mud = np.asarray(out.mu_dot)
        curl_ref = np.einsum("a,aij,j->i", mu, dW, qd)
        np.testing.assert_allclose(out.reactions_multiplier, W.T @ mud, atol=1e-10)
        np.testing.assert_allclose(out.reactions_curl, curl_ref, atol=1e-10)
        np.testing.assert_allclose(out.reactions, W.T @ mud + curl_ref, atol=1e-10)
        # the public curl is the same two-form: R_curl = -mu^a (dw_a)_ij qd^j
        np.testing.assert_allclose(-np.einsum("a,aij,j->i", mu, C, qd), curl_ref, atol=1e-12)


# =========================================================================================
# Nonlinear velocity constraint: constant speed |qd| = v in uniform gravity, L = |qd|^2/2 - g y.
# d'Alembert/Chetaev (isokinetic): qdd = -g e_y + lam qd, heading psi obeys
#   psi_dot = -g cos(psi)/v  =>  u = asinh(tan psi) = u0 - g t / v, psi = atan(sinh u),
#   x = x0 - (v^2/g)(psi - psi0), y = y0 - (v^2/g)(log cosh u - log cosh u0).
# Vakonomic: Lambda = (1 - mu)|qd|^2/2 - g y + mu v^2/2  =>  (1 - mu) qd = P0 - g t e_y,
#   P0 = (1 - mu0) qd0, qd = v P/|P|, mu = 1 - |P|/v,
#   x = x0 + (v P0x/g)(asinh(P0y/P0x) - asinh((P0y - g t)/P0x)),
#   y = y0 + (v/g)(|P0| - |P(t)|);  E[L, M] = E - mu qd.dF/dqd = v^2/2 + g y - mu v^2 const.
# With a dissipative force D = -gamma qd: d/dt E[L, M] = D.qd = -gamma v^2
# (Sławianowski et al. 2013).

G, V = 1.5, 1.2


def speed_system():
    L = lambda t, q, qd, p: 0.5 * qd @ qd - G * q[1]
    F = lambda t, q, qd, p: 0.5 * (qd @ qd - V**2)
    Q = lambda t, q, qd, p: -p["gamma"] * qd
    return cx.System(L, [cx.VelocityConstraint(F, name="speed")], force=Q)


PSI0 = 0.7
Q0 = jnp.array([0.2, -0.1])
QD0 = V * jnp.array([np.cos(PSI0), np.sin(PSI0)])


def test_speed_constraint_dalembert_matches_isokinetic_closed_form():
    system = speed_system()
    ts = jnp.linspace(0.0, 10.0, 26)
    p = {"gamma": jnp.asarray(0.0)}
    q, qd, _ = _run(system, cx.DAlembert(), ts)(Q0, QD0, None, p)
    t = np.asarray(ts)
    u0 = np.arcsinh(np.tan(PSI0))
    u = u0 - G * t / V
    psi = np.arctan(np.sinh(u))
    ref = np.stack(
        [
            0.2 - V**2 / G * (psi - PSI0),
            -0.1 - V**2 / G * (np.log(np.cosh(u)) - np.log(np.cosh(u0))),
        ],
        1,
    )
    np.testing.assert_allclose(q, ref, atol=1e-8, rtol=0)
    np.testing.assert_allclose(jnp.linalg.norm(qd, axis=1), V, atol=1e-8, rtol=0)
    # Chetaev reactions do work: q_dot.R = lam qd.dF/dqd = dE/dt = g yd (E not conserved)
    power = jax.jit(jax.vmap(lambda a, b: cx.reaction_power(system, 0.0, a, b, p)))(q, qd)
    np.testing.assert_allclose(power, G * qd[:, 1], atol=1e-10)


@pytest.mark.parametrize("gamma", [0.0, 0.3], ids=["conservative", "dissipative"])
def test_speed_constraint_vakonomic_closed_form_and_effective_energy_balance(gamma):
    system = speed_system()
    ts = jnp.linspace(0.0, 10.0, 26)
    mu0 = 0.4
    p = {"gamma": jnp.asarray(gamma)}
    run = _RUNS.setdefault("speed_vak", _run(system, cx.Vakonomic(), ts))
    q, qd, mu = run(Q0, QD0, jnp.array([mu0]), p)
    t = np.asarray(ts)
    res = jax.vmap(lambda q_, qd_: cx.constraint_residual(system, 0.0, q_, qd_, p).velocity)(q, qd)
    assert float(jnp.max(jnp.abs(res))) <= 1e-8
    EM = jax.vmap(lambda q_, qd_, mu_: cx.effective_energy(system, 0.0, q_, qd_, mu_, p))(q, qd, mu)
    # Sławianowski et al. (2013): d/dt E[L, M] = D.qd = -gamma |qd|^2 = -gamma v^2
    ref_EM = EM[0] - gamma * V**2 * t
    np.testing.assert_allclose(EM, ref_EM, rtol=1e-8, atol=0)
    if gamma == 0.0:
        P0x, P0y = (1 - mu0) * np.asarray(QD0)
        Py = P0y - G * t
        Pn = np.hypot(P0x, Py)
        ref = np.stack(
            [
                0.2 + V * P0x / G * (np.arcsinh(P0y / P0x) - np.arcsinh(Py / P0x)),
                -0.1 + V / G * (np.hypot(P0x, P0y) - Pn),
            ],
            1,
        )
        np.testing.assert_allclose(q, ref, atol=1e-8, rtol=0)
        np.testing.assert_allclose(mu[:, 0], 1 - Pn / V, atol=1e-8, rtol=0)
        np.testing.assert_allclose(EM, 0.5 * V**2 + G * q[:, 1] - mu[:, 0] * V**2, atol=1e-12)


_RUNS: dict = {}


def test_chetaev_energy_conserved_for_homogeneous_velocity_constraint_long_run():
    # F = (xd^2 + yd^2 - zd^2)/2 is homogeneous of degree 2: qd.dF/dqd = 2F = 0 on M, so
    # Chetaev reactions lam dF/dqd do no work and E = |qd|^2/2 + V(q) is conserved.
    L = lambda t, q, qd, p: 0.5 * qd @ qd - 0.5 * (q[0] ** 2 + 2 * q[1] ** 2) + 0.8 * q[2]
    F = lambda t, q, qd, p: 0.5 * (qd[0] ** 2 + qd[1] ** 2 - qd[2] ** 2)
    system = cx.System(L, [cx.VelocityConstraint(F)])
    ts = jnp.linspace(0.0, 40.0, 41)
    qd0 = jnp.array([0.6, 0.8, 1.0])
    q, qd, _ = _run(system, cx.DAlembert(), ts)(jnp.array([1.0, 0.0, 0.0]), qd0, None, None)
    E = jax.vmap(lambda a, b: cx.energy(system, 0.0, a, b))(q, qd)
    np.testing.assert_allclose(E, E[0], rtol=1e-8, atol=0)
    c = jax.vmap(lambda a, b: F(0.0, a, b, None))(q, qd)
    assert float(jnp.max(jnp.abs(c))) <= 1e-8
    assert float(jnp.ptp(qd[:, 2])) > 0.1  # the motion is not trivial


# =========================================================================================
# Nonlinear constraint accelerations and reactions against sympy, both prescriptions.


def _sympy_nonlinear_reference():
    t = sp.symbols("t")
    k, a = sp.symbols("k a")
    x, y = sp.Function("x")(t), sp.Function("y")(t)
    mu = sp.Function("mu")(t)
    q = [x, y]
    qd = [s.diff(t) for s in q]
    T = sp.Rational(1, 2) * (qd[0] ** 2 + (1 + a * x**2) * qd[1] ** 2)
    Lg = T - k * x**2 - sp.sin(y)
    F = qd[0] ** 2 * y + sp.exp(x) * qd[1] ** 2 + qd[0] * qd[1] - 1
    X = sp.symbols("x0 x1 v0 v1 A0 A1 m0 lam md")
    sub = {q[0].diff(t, 2): X[4], q[1].diff(t, 2): X[5]}
    sub2 = {qd[0]: X[2], qd[1]: X[3]}
    sub3 = {x: X[0], y: X[1], mu: X[6]}

    def ev(e):
        return e.subs(mu.diff(t), X[8]).subs(sub).subs(sub2).subs(sub3)

    def EL(Lag):
        return [Lag.diff(qd[i]).diff(t) - Lag.diff(q[i]) for i in range(2)]

    Fdot = F.diff(t)
    args = (X[0], X[1], X[2], X[3], X[6], k, a)

    def linear(eqs, unknowns):  # eqs are linear in the unknowns: M u = b
        M, b = sp.linear_eq_to_matrix(eqs, unknowns)
        return sp.lambdify(args, M), sp.lambdify(args, b)

    # d'Alembert/Chetaev: EL(L) = lam dF/dqd; Fdot = 0.  Vakonomic: EL(L - mu F) = 0, Fdot = 0
    # (mu a function of t). Unknowns (xdd, ydd, lam | mu_dot).
    eqs_d = [ev(e - X[7] * F.diff(qd[i])) for i, e in enumerate(EL(Lg))] + [ev(Fdot)]
    eqs_v = [ev(e) for e in EL(Lg - mu * F)] + [ev(Fdot)]
    sys_d = linear(eqs_d, [X[4], X[5], X[7]])
    sys_v = linear(eqs_v, [X[4], X[5], X[8]])
    # total reaction R = EL(L) evaluated with the accelerations: R = M2 qdd - b2
    R = linear([ev(e) for e in EL(Lg)], [X[4], X[5]])

    def solver(sys_):
        def fn(*vals):
            u = np.linalg.solve(
                np.array(sys_[0](*vals), float), np.array(sys_[1](*vals), float).ravel()
            )
            M2 = np.array(R[0](*vals), float)
            b2 = np.array(R[1](*vals), float).ravel()
            return np.concatenate([u, M2 @ u[:2] - b2])

        return fn

    return solver(sys_d), solver(sys_v)


def test_nonlinear_constraint_accelerations_and_reactions_match_sympy_both_prescriptions():
    def L(t, q, qd, p):
        return (
            0.5 * (qd[0] ** 2 + (1 + p["a"] * q[0] ** 2) * qd[1] ** 2)
            - p["k"] * q[0] ** 2
            - jnp.sin(q[1])
        )

    def F(t, q, qd, p):
        return qd[0] ** 2 * q[1] + jnp.exp(q[0]) * qd[1] ** 2 + qd[0] * qd[1] - 1.0

    system = cx.System(L, [cx.VelocityConstraint(F)])
    p = {"k": jnp.asarray(0.7), "a": jnp.asarray(0.3)}
    fd, fv = _sympy_nonlinear_reference()

    @jax.jit
    def both(q, qd, mu):
        d = cx.accelerations(system, 0.0, q, qd, p)
        v = cx.accelerations(system, 0.0, q, qd, p, prescription=cx.Vakonomic(), mu=mu)
        return (
            jnp.concatenate([d.qdd, d.multipliers, d.reactions]),
            jnp.concatenate([v.qdd, v.mu_dot, v.reactions]),
            v.reactions_multiplier,
            v.reactions_curl,
        )

    rng = np.random.default_rng(7)
    for _ in range(5):
        q, qd = rng.normal(size=2) * 0.5, rng.normal(size=2)
        mu = rng.normal() * 0.3
        gd, gv, r_mult, r_curl = both(jnp.asarray(q), jnp.asarray(qd), jnp.array([mu]))
        # constrax mu multiplies L - mu F exactly as in the sympy derivation
        ref_d = fd(*q, *qd, mu, 0.7, 0.3)
        ref_v = fv(*q, *qd, mu, 0.7, 0.3)
        np.testing.assert_allclose(gd, ref_d, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(gv, ref_v, rtol=1e-10, atol=1e-10)
        # split: mu_dot dF/dqd, and the rest (acceleration-dependent and curl-like terms)
        dF = np.array([2 * qd[0] * q[1] + qd[1], 2 * np.exp(q[0]) * qd[1] + qd[0]])
        np.testing.assert_allclose(r_mult, ref_v[2] * dF, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(r_curl, ref_v[3:] - ref_v[2] * dF, rtol=1e-10, atol=1e-10)


# =========================================================================================
# Gradients through a vakonomic rollout vs central finite differences (fixed steps, so the
# discrete solution is a smooth function of the inputs).


@pytest.mark.slow  # the reverse-mode compile of a full rollout dominates (~15-25 s)
def test_vakonomic_rollout_gradients_wrt_mu0_and_parameters_match_finite_differences():
    L = lambda t, q, qd, p: (
        0.5 * p["m"] * (qd[0] ** 2 + qd[1] ** 2) - 0.5 * p["k"] * (q[0] ** 2 + q[1] ** 2)
    )
    system = cx.System(L, [cx.Pfaffian(heisenberg)])
    q0 = jnp.array([0.4, -0.3, 0.2])
    qd0 = jnp.array([0.9, 0.5, -(heisenberg(0.0, q0, None)[:2] @ jnp.array([0.9, 0.5]))])

    @jax.jit
    def loss(mu0, m, k):
        traj = cx.simulate(
            system,
            q0,
            qd0,
            {"m": m, "k": k},
            t1=2.0,
            dt0=0.01,
            solver=diffrax.Dopri5(),
            stepsize_controller=diffrax.ConstantStepSize(),
            prescription=cx.Vakonomic(),
            mu0=mu0,
        )
        return jnp.sum(traj.q[-1] ** 2) + jnp.sum(jnp.sin(traj.mu[-1]))

    x = (jnp.array([1.3]), jnp.asarray(1.2), jnp.asarray(0.8))
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*x)
    h = 1e-6
    for i in range(3):
        xp = list(x)
        xm = list(x)
        xp[i] = x[i] + h
        xm[i] = x[i] - h
        fdiff = (loss(*xp) - loss(*xm)) / (2 * h)
        np.testing.assert_allclose(jnp.sum(grads[i]), fdiff, rtol=1e-6)
        assert abs(float(fdiff)) > 1e-3


# =========================================================================================
# compare_prescriptions on the Heisenberg particle: line (d'Alembert) vs circle (vakonomic).


def test_compare_prescriptions_heisenberg_divergence_equals_line_minus_circle():
    system = cx.System(planar_kinetic, [cx.Pfaffian(heisenberg)])
    q0 = jnp.array([0.4, -0.3, 0.2])
    qd0 = jnp.array([0.9, 0.5, -(heisenberg(0.0, q0, None)[:2] @ jnp.array([0.9, 0.5]))])
    ts = jnp.linspace(0.0, 3.0, 13)
    cmp = compare_prescriptions(
        system,
        q0,
        qd0,
        None,
        mu0=jnp.array([2.0]),
        t1=3.0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=CTRL,
    )
    t = np.asarray(ts)
    # d'Alembert: lam = 0 (lam (1 + r^2/4) = 0 from the z row), straight line, zd constant
    line = np.stack([0.4 + 0.9 * t, -0.3 + 0.5 * t, 0.2 + float(qd0[2]) * t], 1)
    circle, _ = _heisenberg_circle(t, complex(0.4, -0.3), complex(0.9, 0.5), 2.0, 0.2)
    np.testing.assert_allclose(cmp.dalembert.q, line, atol=1e-9)
    np.testing.assert_allclose(cmp.divergence, np.linalg.norm(line - circle, axis=1), atol=1e-8)
    assert float(cmp.first_divergence_time(0.1)) == pytest.approx(
        t[np.argmax(np.linalg.norm(line - circle, axis=1) > 0.1)]
    )
    # mu0 = 0: the vakonomic multiplier stays zero and the motions coincide
    same = compare_prescriptions(
        system, q0, qd0, None, t1=3.0, saveat=diffrax.SaveAt(ts=ts), stepsize_controller=CTRL
    )
    assert float(same.max_divergence) < 1e-9
    assert float(same.first_divergence_time(1e-6)) == np.inf


# =========================================================================================
# Bad input.


def test_vakonomic_without_constraints_is_the_unconstrained_motion():
    L = lambda t, q, qd, p: 0.5 * qd @ qd - 9.81 * q[1]
    system = cx.System(L)
    ts = jnp.linspace(0.0, 1.0, 5)
    traj = cx.simulate(
        system,
        jnp.zeros(2),
        jnp.array([1.0, 2.0]),
        None,
        t1=1.0,
        saveat=diffrax.SaveAt(ts=ts),
        prescription=cx.Vakonomic(),
    )
    assert traj.mu.shape == (5, 0)
    t = np.asarray(ts)
    np.testing.assert_allclose(traj.q, np.stack([t, 2 * t - 9.81 / 2 * t**2], 1), atol=1e-10)
    out = cx.accelerations(
        system, 0.0, jnp.zeros(2), jnp.ones(2), prescription=cx.Vakonomic(), mu=jnp.zeros(0)
    )
    np.testing.assert_allclose(out.qdd, [0.0, -9.81], atol=1e-14)
    assert out.mu_dot.shape == (0,)


def test_vakonomic_bad_mu_input_messages():
    system = cx.System(planar_kinetic, [cx.Pfaffian(heisenberg)])
    q, qd = jnp.zeros(3), jnp.array([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"the vakonomic prescription needs the multipliers `mu`"):
        cx.accelerations(system, 0.0, q, qd, prescription=cx.Vakonomic())
    with pytest.raises(ValueError, match=r"expected shape \(1,\), got \(2,\)"):
        cx.accelerations(system, 0.0, q, qd, prescription=cx.Vakonomic(), mu=jnp.zeros(2))
    with pytest.raises(ValueError, match=r"expected shape \(1,\), got \(3,\)"):
        cx.simulate(system, q, qd, t1=1.0, prescription=cx.Vakonomic(), mu0=jnp.zeros(3))
    with pytest.raises(ValueError, match=r"`mu` is only used by the vakonomic prescription"):
        cx.accelerations(system, 0.0, q, qd, mu=jnp.zeros(1))
    with pytest.raises(ValueError, match=r"`mu` must have one entry per constraint row"):
        cx.accelerations(system, 0.0, q, qd, prescription=cx.Vakonomic(), mu=jnp.zeros((1, 1)))
    with pytest.raises(Exception, match=r"`mu0` contains NaN or inf"):
        cx.simulate(system, q, qd, t1=1.0, prescription=cx.Vakonomic(), mu0=jnp.array([jnp.nan]))
    with pytest.raises(ValueError, match=r"do not pass `prescription`"):
        compare_prescriptions(system, q, qd, t1=1.0, prescription=cx.Vakonomic())
    with pytest.raises(ValueError, match=r"needs the final time `t1=`"):
        compare_prescriptions(system, q, qd)
