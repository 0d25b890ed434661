"""A 2D affine body built from point masses in `sympy.physics.mechanics` (kinetic energy
from the geometry x_k = r + phi a_k) is an independent oracle for the accelerations and
reactions of `constrax.affine` (free, isochoric, rotation-free; St Venant–Kirchhoff V(G))."""

import functools

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
import sympy.physics.mechanics as me

import constrax as cx
import sympy_oracles
from constrax import affine as af

MASSES = np.array([0.7, 1.1, 0.5, 0.9])
POINTS = np.array([[1.0, 0.2], [-0.5, 0.8], [-0.3, -0.9], [0.6, -0.4]])
POINTS = POINTS - MASSES @ POINTS / MASSES.sum()  # centre of mass at a = 0
LAM, MU = 2.0, 1.0
PHI0 = np.array([[1.1, 0.3], [-0.2, 0.9]])
OMEGA0 = np.array([[0.4, 0.3], [0.3, -0.4]])  # symmetric and traceless: admissible for both
DET0 = float(np.linalg.det(PHI0))


@functools.cache
def _oracle(kind):
    r1, r2 = me.dynamicsymbols("r1 r2")
    f = me.dynamicsymbols("f11 f12 f21 f22")
    qs = [r1, r2, *f]
    phi = sp.Matrix([[f[0], f[1]], [f[2], f[3]]])
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    particles = []
    for k, (m, a) in enumerate(zip(MASSES, POINTS, strict=True)):
        x = sp.Matrix([r1, r2]) + phi * sp.Matrix(a)
        P = O.locatenew(f"P{k}", x[0] * N.x + x[1] * N.y)
        P.set_vel(N, P.pos_from(O).dt(N))
        particles.append(me.Particle(f"p{k}", P, float(m)))
    E = (phi.T * phi - sp.eye(2)) / 2
    V = LAM / 2 * E.trace() ** 2 + MU * (E * E).trace()
    L = me.Lagrangian(N, *particles) - V
    t = me.dynamicsymbols._t
    phid = phi.diff(t)
    adj = sp.Matrix([[f[3], -f[1]], [-f[2], f[0]]])  # det(phi) phi^-1
    kw = {}
    if kind == "isochoric":
        kw["hol_coneqs"] = [phi.det() - DET0]
    elif kind == "rotation_free":
        W = phid * adj  # det(phi) Omega
        kw["nonhol_coneqs"] = [W[0, 1] - W[1, 0]]
    lm = me.LagrangesMethod(L, qs, frame=N, **kw)
    return sympy_oracles._numeric(f"affine_{kind}", lm, qs, ())


@eqx.filter_jit
def _constrax(system, q, qd, body):
    out = cx.accelerations(system, 0.0, q, qd, body)
    return out.qdd, out.reactions


@pytest.mark.parametrize("kind", ["free", "isochoric", "rotation_free"])
def test_affine_body_accelerations_and_reactions_match_sympy_point_mass_model(kind):
    J = np.einsum("k,ki,kj->ij", MASSES, POINTS, POINTS)
    body = af.AffineBody(MASSES.sum(), J, potential=af.StVenantKirchhoff(LAM, MU))
    constraints = {
        "free": (),
        "isochoric": (af.isochoric(DET0),),
        "rotation_free": (af.rotation_free(),),
    }[kind]
    q = np.concatenate([[0.3, -0.2], PHI0.ravel()])
    qd = np.concatenate([[0.1, 0.4], (OMEGA0 @ PHI0).ravel()])
    qdd_ref, R_ref = _oracle(kind)(0.0, q, qd, {})
    qdd, R = _constrax(af.affine_system(*constraints), jnp.asarray(q), jnp.asarray(qd), body)
    np.testing.assert_allclose(qdd, qdd_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(R, R_ref, rtol=1e-10, atol=1e-12)
    if kind != "free":
        assert np.max(np.abs(R_ref)) > 1e-2
