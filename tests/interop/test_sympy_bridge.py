r"""`constrax.interop`: systems built with `sympy.physics.mechanics`, converted to
`cx.System`, against sympy's own equations of motion.

Every reference here is sympy's: the mass matrix and forcing of `LagrangesMethod` /
`KanesMethod` (or their `rhs()`), evaluated with `sympy.lambdify(..., "numpy")` and solved
with numpy, at 20 random admissible states per system (positions through a parametrisation
of the constraint manifold, velocities in the null space of sympy's constraint rows).
The systems:

* the rolling disc of sympy's documentation, in its Lagrange form (`LagrangesMethod`,
  potential energy on the body) and its Kane form (`KanesMethod`, gravity as a load);
* a Cartesian double pendulum (`hol_coneqs`, gravity in the `forcelist`);
* a vertical disk rolling without slipping (`nonhol_coneqs`), pushed by a force and
  turned by a torque (a (Point, Vector) and a (ReferenceFrame, Vector) load);
* a particle held at constant speed (a `nonhol_coneqs` row that is not linear in the
  velocities);
* the "nonminimal coordinates pendulum" of sympy's documentation (`KanesMethod` with a
  dependent coordinate and speed, configuration and velocity constraints);
* a minimal-coordinate double pendulum given as a Lagrangian (`from_lagrangian`), for
  gradients with respect to a parameter against finite differences.
"""

import functools
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

sp = pytest.importorskip("sympy")
me = pytest.importorskip("sympy.physics.mechanics")
ci = pytest.importorskip("constrax.interop")

N_STATES = 20
RTOL = 1e-10
_t = me.dynamicsymbols._t


def _relerr(a, b):
    scale = np.maximum(np.max(np.abs(b), axis=-1), 1e-300)
    return np.max(np.abs(a - b), axis=-1) / scale


def _lagrange_reference(lm, qs, params):
    """`(q, qd, pvals) -> qdd` from sympy's augmented system `mass_matrix_full`,
    `forcing_full` (states q, qd, multipliers), solved with numpy."""
    lm.form_lagranges_equations()
    n = len(qs)
    qd = [q.diff(_t) for q in qs]
    qs_s, qd_s = sp.symbols(f"q0:{n}"), sp.symbols(f"qd0:{n}")
    rule = dict(zip(qd, qd_s, strict=True))
    rule_q = dict(zip(qs, qs_s, strict=True))
    plain = lambda e: me.msubs(me.msubs(e, rule), rule_q)
    M = sp.lambdify((qs_s, qd_s, params), plain(lm.mass_matrix_full), "numpy")
    F = sp.lambdify((qs_s, qd_s, params), plain(lm.forcing_full), "numpy")

    def qdd(q, qd, pv):
        sol = np.linalg.solve(np.asarray(M(q, qd, pv), float), np.ravel(F(q, qd, pv)))
        return sol[n : 2 * n]

    return qdd


def _kane_reference(km, params):
    """`(q, u, pvals) -> (qd, qdd)` from `km.rhs()` and the kinematic equations."""
    qs, us = list(km.q), list(km.u)
    rhs = km.rhs()
    kdd = km.kindiffdict()
    qd = sp.Matrix([kdd[q.diff(_t)] for q in qs])
    udot = {u.diff(_t): rhs[len(qs) + i] for i, u in enumerate(us)}
    qdd = me.msubs(qd.diff(_t), udot, kdd)
    f_qd = sp.lambdify((qs, us, params), qd, "numpy")
    f_qdd = sp.lambdify((qs, us, params), qdd, "numpy")
    return lambda q, u, pv: (np.ravel(f_qd(q, u, pv)), np.ravel(f_qdd(q, u, pv)))


def _null_space(rows, q, rng):
    A = np.atleast_2d(np.asarray(rows(q), float))
    _, s, vt = np.linalg.svd(A)
    basis = vt[len(s) :].T
    return basis @ rng.normal(size=basis.shape[1]) * 2.0


# ----------------------------------------------------------------------------------------
# The systems, built as sympy's documentation builds them.


def _rolling_disc_frames():
    q1, q2, q3 = me.dynamicsymbols("q1 q2 q3")
    r, m, g = sp.symbols("r m g")
    N = me.ReferenceFrame("N")
    Y = N.orientnew("Y", "Axis", [q1, N.z])
    L = Y.orientnew("L", "Axis", [q2, Y.x])
    R = L.orientnew("R", "Axis", [q3, L.y])
    return (q1, q2, q3), (r, m, g), N, Y, L, R


@functools.cache
def rolling_disc_lagrange():
    """sympy docs, "A rolling disc, using Lagrange's Method"."""
    (q1, q2, q3), (r, m, g), N, Y, L, R = _rolling_disc_frames()
    C = me.Point("C")
    C.set_vel(N, 0)
    Dmc = C.locatenew("Dmc", r * L.z)
    Dmc.v2pt_theory(C, N, R)
    I = me.inertia(L, m / 4 * r**2, m / 2 * r**2, m / 4 * r**2)
    BodyD = me.RigidBody("BodyD", Dmc, R, m, (I, Dmc))
    BodyD.potential_energy = -m * g * r * sp.cos(q2)
    Lag = me.Lagrangian(N, BodyD)
    lm = me.LagrangesMethod(Lag, [q1, q2, q3])
    lm.form_lagranges_equations()
    rhs = lm.rhs()  # as in the documentation: [qd; qdd]
    qs = [q1, q2, q3]
    f = sp.lambdify((qs, [q.diff(_t) for q in qs], (r, m, g)), rhs[3:, 0], "numpy")
    return lm, (r, m, g), lambda q, qd, pv: np.ravel(f(q, qd, pv))


@functools.cache
def rolling_disc_kane():
    """sympy docs, "A rolling disc" (Kane's method)."""
    (q1, q2, q3), (r, m, g), N, Y, L, R = _rolling_disc_frames()
    u1, u2, u3 = me.dynamicsymbols("u1 u2 u3")
    w_R_N_qd = R.ang_vel_in(N)
    R.set_ang_vel(N, u1 * L.x + u2 * L.y + u3 * L.z)
    C = me.Point("C")
    C.set_vel(N, 0)
    Dmc = C.locatenew("Dmc", r * L.z)
    Dmc.v2pt_theory(C, N, R)
    I = me.inertia(L, m / 4 * r**2, m / 2 * r**2, m / 4 * r**2)
    kd = [me.dot(R.ang_vel_in(N) - w_R_N_qd, uv) for uv in L]
    ForceList = [(Dmc, -m * g * Y.z)]
    BodyD = me.RigidBody("BodyD", Dmc, R, m, (I, Dmc))
    km = me.KanesMethod(N, q_ind=[q1, q2, q3], u_ind=[u1, u2, u3], kd_eqs=kd)
    km.kanes_equations([BodyD], ForceList)
    return km, (r, m, g), _kane_reference(km, (r, m, g))


@functools.cache
def nonminimal_pendulum_kane():
    """sympy docs, "Nonminimal Coordinates Pendulum" (Kane, dependent q2 and u2)."""
    q1, q2 = me.dynamicsymbols("q1:3")
    q1d, q2d = me.dynamicsymbols("q1:3", level=1)
    u1, u2 = me.dynamicsymbols("u1:3")
    L, m, g, t = sp.symbols("L, m, g, t")
    N = me.ReferenceFrame("N")
    pN = me.Point("N*")
    pN.set_vel(N, 0)
    theta1 = sp.atan(q2 / q1)
    A = N.orientnew("A", "axis", [theta1, N.z])
    P = pN.locatenew("P1", q1 * N.x + q2 * N.y)
    P.set_vel(N, P.pos_from(pN).dt(N))
    pP = me.Particle("pP", P, m)
    kde = sp.Matrix([q1d - u1, q2d - u2])
    dq_dict = sp.solve(kde, [q1d, q2d])
    P.set_vel(N, P.vel(N).subs(dq_dict))
    f_c = sp.Matrix([P.pos_from(pN).magnitude() - L])
    f_v = sp.Matrix([P.vel(N).express(A).dot(A.x)])
    f_v.simplify()
    f_a = f_v.diff(t)
    R = m * g * N.x
    km = me.KanesMethod(
        N,
        q_ind=[q1],
        u_ind=[u1],
        kd_eqs=kde,
        q_dependent=[q2],
        u_dependent=[u2],
        configuration_constraints=f_c,
        velocity_constraints=f_v,
        acceleration_constraints=f_a,
    )
    km.kanes_equations([pP], [(P, R)])
    return km, (L, m, g), _kane_reference(km, (L, m, g))


@functools.cache
def double_pendulum():
    """Cartesian double pendulum: rods as `hol_coneqs`, gravity in the `forcelist`."""
    x1, y1, x2, y2 = me.dynamicsymbols("x1 y1 x2 y2")
    m1, m2, l1, l2, g = sp.symbols("m1 m2 l1 l2 g")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P1 = O.locatenew("P1", x1 * N.x + y1 * N.y)
    P2 = O.locatenew("P2", x2 * N.x + y2 * N.y)
    P1.set_vel(N, P1.pos_from(O).dt(N))
    P2.set_vel(N, P2.pos_from(O).dt(N))
    Lag = me.Lagrangian(N, me.Particle("b1", P1, m1), me.Particle("b2", P2, m2))
    r1, r12 = P1.pos_from(O), P2.pos_from(P1)
    hol = [r1.dot(r1) - l1**2, r12.dot(r12) - l2**2]
    loads = [(P1, -m1 * g * N.y), (P2, -m2 * g * N.y)]
    qs = [x1, y1, x2, y2]
    lm = me.LagrangesMethod(Lag, qs, hol_coneqs=hol, forcelist=loads, frame=N)
    params = (m1, m2, l1, l2, g)
    ref = _lagrange_reference(
        me.LagrangesMethod(Lag, qs, hol_coneqs=hol, forcelist=loads, frame=N), qs, params
    )
    return lm, params, ref


@functools.cache
def rolling_disk():
    """A vertical disk rolling without slipping (`nonhol_coneqs`), pushed by a horizontal
    force at its centre and turned by a torque about the vertical on its heading frame."""
    x, y, th, ph = me.dynamicsymbols("x y theta varphi")
    m, R, Fx, tau = sp.symbols("m R F_x tau")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [th, N.z])
    D = A.orientnew("D", "Axis", [ph, A.y])
    O = me.Point("O")
    O.set_vel(N, 0)
    C = O.locatenew("C", x * N.x + y * N.y + R * N.z)
    C.set_vel(N, C.pos_from(O).dt(N))
    contact = C.locatenew("contact", -R * N.z)
    contact.v2pt_theory(C, N, D)
    inertia = me.inertia(D, m * R**2 / 4, m * R**2 / 2, m * R**2 / 4)
    disk = me.RigidBody("disk", C, D, m, (inertia, C))
    Lag = me.Lagrangian(N, disk)
    nonhol = [contact.vel(N).dot(N.x), contact.vel(N).dot(N.y)]
    loads = [(C, Fx * N.x), (A, tau * N.z)]
    qs = [x, y, th, ph]
    make = lambda: me.LagrangesMethod(Lag, qs, nonhol_coneqs=nonhol, forcelist=loads, frame=N)
    params = (m, R, Fx, tau)
    rows = sp.lambdify((qs, params), sp.Matrix(nonhol).jacobian([q.diff(_t) for q in qs]), "numpy")
    return make(), params, _lagrange_reference(make(), qs, params), rows


@functools.cache
def constant_speed():
    """A particle in a vertical plane held at constant speed v (`nonhol_coneqs` quadratic
    in the velocities), with gravity in the Lagrangian and linear drag as a load."""
    x, y = me.dynamicsymbols("x y")
    m, g, v, c = sp.symbols("m g v c")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y)
    P.set_vel(N, P.pos_from(O).dt(N))
    Lag = me.Lagrangian(N, me.Particle("p", P, m)) - m * g * y
    nonhol = [(x.diff(_t) ** 2 + y.diff(_t) ** 2 - v**2) / 2]
    loads = [(P, -c * P.vel(N))]
    qs = [x, y]
    make = lambda: me.LagrangesMethod(Lag, qs, nonhol_coneqs=nonhol, forcelist=loads, frame=N)
    params = (m, g, v, c)
    return make(), params, _lagrange_reference(make(), qs, params)


PARAMS = {
    "rolling_disc_lagrange": (0.3, 1.2, 9.81),
    "rolling_disc_kane": (0.3, 1.2, 9.81),
    "nonminimal_pendulum_kane": (0.8, 1.3, 9.81),
    "double_pendulum": (1.2, 0.7, 1.1, 0.8, 9.81),
    "rolling_disk": (1.7, 0.35, 0.8, 0.3),
    "constant_speed": (0.9, 9.81, 1.7, 0.4),
}


def _disc_angles(rng):
    """Yaw, lean, spin; the lean away from +-pi/2 (lying flat), where the disc's
    coordinates are singular (mass matrix condition number ~ 1/cos(lean)^2)."""
    q = rng.normal(size=3)
    q[1] = rng.uniform(-1.3, 1.3)
    return q


def sample(name, rng):
    """`(system, p, states q (N, n), qd (N, n), reference qdd (N, n))` for `name`."""
    pv = PARAMS[name]
    qs, qds, refs = [], [], []
    if name == "rolling_disc_lagrange":
        lm, syms, ref = rolling_disc_lagrange()
        conv = ci.from_lagranges_method(lm)
        for _ in range(N_STATES):
            q, qd = _disc_angles(rng), rng.normal(size=3) * 2.0
            qs.append(q), qds.append(qd), refs.append(ref(q, qd, pv))
    elif name in ("rolling_disc_kane", "nonminimal_pendulum_kane"):
        km, syms, ref = globals()[name]()
        conv = ci.from_kanes_method(km)
        for _ in range(N_STATES):
            if name == "rolling_disc_kane":
                q, u = _disc_angles(rng), rng.normal(size=3) * 2.0
            else:
                a, w = rng.uniform(-1.2, 1.2), rng.normal() * 2.0
                Lr = pv[0]
                q = Lr * np.array([np.cos(a), np.sin(a)])
                u = Lr * w * np.array([-np.sin(a), np.cos(a)])
            qd, qdd = ref(q, u, pv)
            qs.append(q), qds.append(qd), refs.append(qdd)
    elif name == "double_pendulum":
        lm, syms, ref = double_pendulum()
        conv = ci.from_lagranges_method(lm)
        _, _, l1, l2, _ = pv
        for _ in range(N_STATES):
            a1, a2, w1, w2 = rng.uniform(-np.pi, np.pi, size=4)
            x1, y1 = l1 * np.sin(a1), -l1 * np.cos(a1)
            q = np.array([x1, y1, x1 + l2 * np.sin(a2), y1 - l2 * np.cos(a2)])
            v1 = np.array([l1 * np.cos(a1) * w1, l1 * np.sin(a1) * w1])
            qd = np.concatenate([v1, v1 + l2 * w2 * np.array([np.cos(a2), np.sin(a2)])])
            qs.append(q), qds.append(qd), refs.append(ref(q, qd, pv))
    elif name == "rolling_disk":
        lm, syms, ref, rows = rolling_disk()
        conv = ci.from_lagranges_method(lm)
        for _ in range(N_STATES):
            q = rng.normal(size=4)
            qd = _null_space(lambda q_: rows(q_, pv), q, rng)
            qs.append(q), qds.append(qd), refs.append(ref(q, qd, pv))
    elif name == "constant_speed":
        lm, syms, ref = constant_speed()
        conv = ci.from_lagranges_method(lm)
        for _ in range(N_STATES):
            q, a = rng.normal(size=2), rng.uniform(-np.pi, np.pi)
            qd = pv[2] * np.array([np.cos(a), np.sin(a)])
            qs.append(q), qds.append(qd), refs.append(ref(q, qd, pv))
    else:
        raise KeyError(name)
    p = conv.make_params(dict(zip(syms, pv, strict=True)))
    return conv, p, np.array(qs), np.array(qds), np.array(refs)


def _accelerations(system, p, qs, qds):
    fn = jax.jit(jax.vmap(lambda q, qd: cx.accelerations(system, 0.0, q, qd, p).qdd))
    return np.asarray(fn(jnp.asarray(qs), jnp.asarray(qds)))


SYSTEMS = list(PARAMS)


@pytest.mark.parametrize("name", SYSTEMS)
def test_accelerations_match_sympy(name):
    conv, p, qs, qds, ref = sample(name, np.random.default_rng(len(name)))
    res = cx.constraint_residual
    for q, qd in zip(qs[:3], qds[:3], strict=True):  # the states are admissible
        r = res(conv.system, 0.0, jnp.asarray(q), jnp.asarray(qd), p)
        assert np.max(np.abs(r.velocity), initial=0.0) < 1e-12
        assert np.max(np.abs(r.position), initial=0.0) < 1e-12
    qdd = _accelerations(conv.system, p, qs, qds)
    err = _relerr(qdd, ref)
    assert np.all(np.isfinite(err))
    assert np.max(err) <= RTOL, f"{name}: max relative error {np.max(err):.3g}"


def test_sympy2jax_backend_matches_sympy():
    pytest.importorskip("sympy2jax")
    lm, syms, ref, _ = rolling_disk()
    conv = ci.from_lagranges_method(lm, backend="sympy2jax")
    _, p, qs, qds, refs = sample("rolling_disk", np.random.default_rng(1))
    p = conv.make_params(dict(zip(syms, PARAMS["rolling_disk"], strict=True)))
    err = _relerr(_accelerations(conv.system, p, qs, qds), refs)
    assert np.max(err) <= RTOL


@pytest.mark.parametrize("backend", ["lambdify", "sympy2jax"])
def test_every_supported_function_converts(backend):
    """Each supported function, evaluated through the converted Lagrangian, against sympy's
    own float evaluation."""
    if backend == "sympy2jax":
        pytest.importorskip("sympy2jax")
    x = me.dynamicsymbols("x")
    k = sp.Symbol("k")
    funcs = [sp.sin, sp.cos, sp.tan, sp.sec, sp.csc, sp.cot, sp.asin, sp.acos, sp.atan]
    funcs += [sp.acot, sp.sinh, sp.cosh, sp.tanh, sp.asinh, sp.atanh, sp.exp, sp.erf]
    terms = [f(x / 3) for f in funcs] + [sp.acosh(x + 2), sp.log(x + 2), sp.Abs(x - 1)]
    terms += [sp.atan2(x, 2), sp.sqrt(x + 2), sp.pi * sp.E * x / 7, sp.Rational(1, 3) * k**3]
    L = sp.Add(*terms) + x.diff(_t) ** 2 / 2
    conv = ci.from_lagrangian(L, [x], backend=backend)
    p = conv.make_params({k: 1.1})
    value = conv.system.lagrangian(0.0, jnp.array([0.4]), jnp.array([0.3]), p)
    expected = float(L.subs({x.diff(_t): 0.3}).subs({x: 0.4, k: 1.1}).evalf(30))
    np.testing.assert_allclose(float(value), expected, rtol=1e-14)


def test_constraint_kinds_and_names():
    disk, _, _, _ = rolling_disk()
    conv = ci.from_lagranges_method(disk)
    assert conv.coordinates == ("x", "y", "theta", "varphi")
    assert conv.parameters == ("F_x", "R", "m", "tau")
    (con,) = conv.system.constraints
    assert isinstance(con, cx.Pfaffian) and con.name == "nonhol_coneqs"
    assert conv.system.force is not None
    lm, _, _ = double_pendulum()
    (con,) = ci.from_lagranges_method(lm).system.constraints
    assert isinstance(con, cx.Holonomic)
    lm, _, _ = constant_speed()
    (con,) = ci.from_lagranges_method(lm).system.constraints
    assert isinstance(con, cx.VelocityConstraint)
    km, _, _ = nonminimal_pendulum_kane()
    kinds = [type(c) for c in ci.from_kanes_method(km).system.constraints]
    assert kinds == [cx.Holonomic, cx.Pfaffian]


@pytest.mark.slow
def test_kane_configuration_and_velocity_constraints_are_redundant_rows():
    """The docs' nonminimal pendulum: the velocity constraint is the derivative of the
    configuration constraint. Udwadia-Kalaba gives sympy's accelerations with rank 1;
    KKT reports the singular saddle matrix."""
    conv, p, qs, qds, ref = sample("nonminimal_pendulum_kane", np.random.default_rng(5))
    q, qd = jnp.asarray(qs[0]), jnp.asarray(qds[0])
    out = cx.accelerations(conv.system, 0.0, q, qd, p, constraint_solver=cx.UdwadiaKalaba())
    assert int(out.rank) == 1
    assert _relerr(np.asarray(out.qdd), ref[0]) <= RTOL
    with pytest.raises(Exception, match="saddle-point matrix .* is singular"):
        cx.accelerations(conv.system, 0.0, q, qd, p, constraint_solver=cx.KKT())


def test_generalized_force_is_the_loads_alone():
    """The force of the converted system is sympy's `forcelist` term, not a reaction:
    with the push and torque set to zero it vanishes."""
    lm, syms, _, _ = rolling_disk()
    conv = ci.from_lagranges_method(lm)
    m, R, Fx, tau = syms
    q, qd = jnp.array([0.1, 0.2, 0.7, -0.4]), jnp.array([0.3, 0.1, 0.5, 0.2])
    p = conv.make_params({m: 1.0, R: 0.5, Fx: 0.0, tau: 0.0})
    np.testing.assert_array_equal(conv.system.force(0.0, q, qd, p), np.zeros(4))
    p = conv.make_params({m: 1.0, R: 0.5, Fx: 2.0, tau: 3.0})
    np.testing.assert_allclose(conv.system.force(0.0, q, qd, p), [2.0, 0.0, 3.0, 0.0])


# ----------------------------------------------------------------------------------------
# Gradients with respect to a symbolic parameter.


@functools.cache
def minimal_double_pendulum():
    th1, th2 = me.dynamicsymbols("theta1 theta2")
    m1, m2, l1, l2, g = sp.symbols("m1 m2 l1 l2 g", positive=True)
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P1 = O.locatenew("P1", l1 * (sp.sin(th1) * N.x - sp.cos(th1) * N.y))
    P2 = P1.locatenew("P2", l2 * (sp.sin(th2) * N.x - sp.cos(th2) * N.y))
    for P in (P1, P2):
        P.set_vel(N, P.pos_from(O).dt(N))
    b1, b2 = me.Particle("b1", P1, m1), me.Particle("b2", P2, m2)
    b1.potential_energy = m1 * g * P1.pos_from(O).dot(N.y)
    b2.potential_energy = m2 * g * P2.pos_from(O).dot(N.y)
    Lag = me.Lagrangian(N, b1, b2)
    params = (m1, m2, l1, l2, g)
    ref = _lagrange_reference(me.LagrangesMethod(Lag, [th1, th2]), [th1, th2], params)
    return ci.from_lagrangian(Lag, [th1, th2]), params, ref


def test_from_lagrangian_matches_sympy_and_the_cartesian_pendulum():
    conv, syms, ref = minimal_double_pendulum()
    pv = PARAMS["double_pendulum"]
    p = conv.make_params(dict(zip(syms, pv, strict=True)))
    rng = np.random.default_rng(3)
    qs, qds = rng.uniform(-np.pi, np.pi, (N_STATES, 2)), rng.normal(size=(N_STATES, 2))
    refs = np.array([ref(q, qd, pv) for q, qd in zip(qs, qds, strict=True)])
    assert np.max(_relerr(_accelerations(conv.system, p, qs, qds), refs)) <= RTOL


def test_gradient_wrt_symbolic_parameter_matches_finite_differences():
    """d qdd / d(l1, g) by `jax.jacfwd` through the converted system, against central
    differences of sympy's own equations (numpy)."""
    conv, syms, ref = minimal_double_pendulum()
    pv = np.array(PARAMS["double_pendulum"])
    p = conv.make_params(dict(zip(syms, pv, strict=True)))
    q, qd = np.array([0.7, -0.4]), np.array([0.9, 1.3])

    def qdd(p):
        return cx.accelerations(conv.system, 0.0, jnp.asarray(q), jnp.asarray(qd), p).qdd

    jac = jax.jit(jax.jacrev(qdd))(p)
    for name, i in [("l1", 2), ("g", 4)]:
        h = 1e-5 * pv[i]
        up, down = pv.copy(), pv.copy()
        up[i] += h
        down[i] -= h
        fd = (ref(q, qd, up) - ref(q, qd, down)) / (2 * h)
        np.testing.assert_allclose(np.asarray(jac[name]), fd, rtol=1e-7, atol=1e-8)


# ----------------------------------------------------------------------------------------
# A rollout against sympy's equations integrated by scipy.


@pytest.mark.slow
def test_rollout_matches_scipy_on_sympys_equations():
    integrate = pytest.importorskip("scipy.integrate")
    diffrax = pytest.importorskip("diffrax")
    lm, syms, ref, rows = rolling_disk()
    pv = PARAMS["rolling_disk"]
    conv = ci.from_lagranges_method(lm)
    p = conv.make_params(dict(zip(syms, pv, strict=True)))
    q0 = np.array([0.1, -0.2, 0.3, 0.0])
    qd0 = _null_space(lambda q_: rows(q_, pv), q0, np.random.default_rng(7))
    t1 = 1.5

    def rhs(t, s):
        return np.concatenate([s[4:], ref(s[:4], s[4:], pv)])

    sol = integrate.solve_ivp(
        rhs, (0.0, t1), np.concatenate([q0, qd0]), method="DOP853", rtol=1e-12, atol=1e-12
    )
    traj = cx.simulate(
        conv.system,
        jnp.asarray(q0),
        jnp.asarray(qd0),
        p,
        t1=t1,
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-11),
    )
    np.testing.assert_allclose(np.asarray(traj.q[-1]), sol.y[:4, -1], rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.asarray(traj.qd[-1]), sol.y[4:, -1], rtol=0, atol=1e-8)


# ----------------------------------------------------------------------------------------
# Parameters, inputs and errors.


def _pendulum():
    th = me.dynamicsymbols("theta")
    m, l, g = sp.symbols("m l g")
    L = m * l**2 * th.diff(_t) ** 2 / 2 + m * g * l * sp.cos(th)
    return th, (m, l, g), L


def test_make_params():
    th, (m, l, g), L = _pendulum()
    conv = ci.from_lagrangian(L, [th])
    assert conv.parameters == ("g", "l", "m")
    p = conv.make_params({m: 1, "l": sp.Rational(1, 2), g: 9.81})
    assert set(p) == {"g", "l", "m"}
    assert all(v.dtype == jnp.float64 and v.shape == () for v in p.values())
    assert float(p["l"]) == 0.5
    with pytest.raises(ValueError, match="missing value for parameter\\(s\\) 'g'"):
        conv.make_params({m: 1.0, l: 1.0})
    with pytest.raises(ValueError, match="unknown parameter\\(s\\) 'k'"):
        conv.make_params({m: 1.0, l: 1.0, g: 1.0, "k": 2.0})
    with pytest.raises(ValueError, match="'m' must be a scalar"):
        conv.make_params({m: [1.0, 2.0], l: 1.0, g: 1.0})
    with pytest.raises(ValueError, match="'m' is given twice"):
        conv.make_params({m: 1.0, "m": 2.0, l: 1.0, g: 1.0})
    with pytest.raises(TypeError, match="must be a real number"):
        conv.make_params({m: "heavy", l: 1.0, g: 1.0})


def test_missing_parameter_at_call_names_it():
    th, (m, l, g), L = _pendulum()
    conv = ci.from_lagrangian(L, [th])
    p = {"m": jnp.asarray(1.0), "l": jnp.asarray(1.0)}
    # constrax re-raises a user function's failure at trace time as a ValueError that names
    # the function and keeps the original message.
    with pytest.raises((KeyError, ValueError), match="no value for 'g'"):
        cx.accelerations(conv.system, 0.0, jnp.array([0.1]), jnp.array([0.0]), p)


def test_input_is_read_from_the_parameters():
    """A declared input (a torque T(t)) enters as p["T"]: theta'' = (T - m g l sin)/ (m l^2)."""
    th, (m, l, g), L = _pendulum()
    T = me.dynamicsymbols("T")
    conv = ci.from_lagrangian(L, [th], generalized_forces=[T], inputs=[T])
    assert conv.parameters == ("g", "l", "m", "T") and conv.inputs == ("T",)
    p = conv.make_params({m: 2.0, l: 0.5, g: 9.81, T: 0.7})
    qdd = cx.accelerations(conv.system, 0.0, jnp.array([0.3]), jnp.array([0.1]), p).qdd
    expected = (0.7 - 2.0 * 9.81 * 0.5 * np.sin(0.3)) / (2.0 * 0.25)
    np.testing.assert_allclose(np.asarray(qdd), [expected], rtol=1e-14)


def test_undeclared_function_of_time_is_named():
    th, _, L = _pendulum()
    f = me.dynamicsymbols("f")
    with pytest.raises(ci.ConversionError, match=r"lagrangian: f\(t\) is a function of time"):
        ci.from_lagrangian(L + f * th, [th])
    with pytest.raises(ci.ConversionError, match=r"generalized force \[0\]: f\(t\)"):
        ci.from_lagrangian(L, [th], generalized_forces=[f])


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda x: sp.Piecewise((x, x > 0), (0, True)), "Piecewise.*piecewise"),
        (lambda x: sp.sign(x), "sign.*not differentiable"),
        (lambda x: sp.Heaviside(x), "Heaviside"),
        (lambda x: sp.gamma(x + 2), "cannot convert gamma"),
        (lambda x: sp.I * x, "cannot convert"),
    ],
)
def test_unconvertible_expression_is_named(bad, match):
    th, _, L = _pendulum()
    with pytest.raises(ci.ConversionError, match=match):
        ci.from_lagrangian(L + bad(th), [th])


def test_second_derivative_and_velocity_in_holonomic_rows_are_rejected():
    th, _, L = _pendulum()
    with pytest.raises(ci.ConversionError, match="derivative of order > 1"):
        ci.from_lagrangian(L + th.diff(_t, 2), [th])
    x = me.dynamicsymbols("x")
    with pytest.raises(ci.ConversionError, match="hol_coneqs\\[0\\].*time and the coordinates"):
        ci.from_lagrangian(L + x.diff(_t) ** 2, [th, x], hol_coneqs=[x - th.diff(_t)])
    T = me.dynamicsymbols("T")
    with pytest.raises(ci.ConversionError, match="input T\\(t\\) appears in a holonomic"):
        ci.from_lagrangian(L + x.diff(_t) ** 2, [th, x], hol_coneqs=[x - T], inputs=[T])


def test_bad_coordinates_and_symbols():
    th, (m, l, g), L = _pendulum()
    with pytest.raises(TypeError, match="coordinates\\[0\\].*dynamicsymbols"):
        ci.from_lagrangian(L, [m])
    with pytest.raises(ValueError, match="given twice"):
        ci.from_lagrangian(L, [th, th])
    m_pos = sp.Symbol("m", positive=True)
    with pytest.raises(ci.ConversionError, match="two different symbols are named 'm'"):
        ci.from_lagrangian(L + m_pos * th, [th])
    with pytest.raises(ci.ConversionError, match="'theta' has the name of a coordinate"):
        ci.from_lagrangian(L + sp.Symbol("theta") * th, [th])
    with pytest.raises(ci.ConversionError, match="prefix '_cx_'"):
        ci.from_lagrangian(L + sp.Symbol("_cx_q0") * th, [th])
    with pytest.raises(ValueError, match="unknown backend 'numpy'"):
        ci.from_lagrangian(L, [th], backend="numpy")
    with pytest.raises(ValueError, match="one entry per coordinate \\(1\\), got 2"):
        ci.from_lagrangian(L, [th], generalized_forces=[0, 1])


def test_bad_forcelist():
    th, (m, l, g), L = _pendulum()
    N = me.ReferenceFrame("N")
    P = me.Point("P")
    P.set_vel(N, l * th.diff(_t) * N.x)
    with pytest.raises(ValueError, match="needs the inertial `frame`"):
        ci.from_lagrangian(L, [th], forcelist=[(P, m * N.x)])
    with pytest.raises(TypeError, match="forcelist\\[0\\] must be a \\(Point, Vector\\)"):
        ci.from_lagrangian(L, [th], forcelist=[P], frame=N)
    with pytest.raises(TypeError, match="forcelist\\[0\\] must start with a Point"):
        ci.from_lagrangian(L, [th], forcelist=[(m, N.x)], frame=N)
    Q = me.Point("Q")
    with pytest.raises(ValueError, match="forcelist\\[1\\] \\(Q\\)"):
        ci.from_lagrangian(L, [th], forcelist=[(P, N.x), (Q, N.x)], frame=N)


def test_bad_methods():
    with pytest.raises(TypeError, match="expected a sympy LagrangesMethod"):
        ci.from_lagranges_method(object())
    with pytest.raises(TypeError, match="expected a sympy KanesMethod"):
        ci.from_kanes_method(object())
    q, u = me.dynamicsymbols("q u")
    N = me.ReferenceFrame("N")
    km = me.KanesMethod(N, q_ind=[q], u_ind=[u], kd_eqs=[q.diff(_t) - u])
    with pytest.raises(ValueError, match="call `method.kanes_equations"):
        ci.from_kanes_method(km)


def test_import_constrax_does_not_import_sympy():
    code = "import sys, constrax, constrax.interop; assert 'sympy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def _pushed_point_mass(input_vector):
    """A point mass in the plane pushed by the inputs Fx(t), Fy(t) (Kane's method)."""
    x, y = me.dynamicsymbols("x y")
    vx, vy = me.dynamicsymbols("v_x v_y")
    Fx, Fy = me.dynamicsymbols("F_x F_y")
    m = sp.symbols("m")
    N = me.ReferenceFrame("N")
    O = me.Point("O")  # noqa: E741
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y)
    P.set_vel(N, vx * N.x + vy * N.y)
    km = me.KanesMethod(N, q_ind=[x, y], u_ind=[vx, vy], kd_eqs=[x.diff() - vx, y.diff() - vy])
    km.kanes_equations([me.Particle("p", P, m)], [(P, Fx * N.x + Fy * N.y)])
    return ci.from_kanes_method(km, inputs=[Fx, Fy], input_vector=input_vector), (m, Fx, Fy)


def test_kane_inputs_as_one_control_vector_solve_the_closed_form_least_effort_motion():
    """`input_vector="u"`: Fx, Fy read from p["u"], the control of an optimal control
    problem. Moved by (d1, d2) = (1, 2) in T = 1 from rest to rest with least
    ∫|F|² dt: F = m u*(t) per axis, u* = 6d/T²(1 - 2t/T), cost m² 12 |d|²/T³."""
    pytest.importorskip("cyipopt")
    model, (m, Fx, Fy) = _pushed_point_mass("u")
    assert model.parameters == ("m", "u") and model.inputs == ("F_x", "F_y")
    p = model.make_params({m: 2.0, Fx: 0.0, Fy: 0.0})
    np.testing.assert_array_equal(np.asarray(p["u"]), [0.0, 0.0])
    acc = cx.accelerations(
        model.system, 0.0, jnp.zeros(2), jnp.zeros(2), {**p, "u": jnp.array([1.0, -4.0])}
    )
    np.testing.assert_allclose(acc.qdd, [0.5, -2.0], rtol=1e-14)  # F / m, in the inputs' order
    d = jnp.array([1.0, 2.0])
    problem = cx.fit.OptimalControlProblem(
        model.system, p, control=lambda p: p["u"], t1=1.0, q0=jnp.zeros(2), qd0=jnp.zeros(2),
        q1=d, qd1=jnp.zeros(2), running_cost=lambda t, q, qd, u, p: u @ u,
    )  # fmt: skip
    sol = cx.fit.solve_optimal_control(problem, transcription=cx.fit.HermiteSimpson(10),
                                       progress=False)  # fmt: skip
    cost = 2.0**2 * 12 * float(d @ d)
    assert sol.success and abs(sol.objective - cost) <= 1e-8 * cost
    t = np.asarray(sol.ts)[:, None]
    np.testing.assert_allclose(np.asarray(sol.u), 2.0 * 6 * np.asarray(d) * (1 - 2 * t), atol=1e-8)


def test_input_vector_is_checked_where_it_is_declared_and_read():
    model, (m, Fx, Fy) = _pushed_point_mass("u")
    p = model.make_params({"m": 1.0, "u": [1.0, 2.0]})  # the vector under its key
    np.testing.assert_array_equal(np.asarray(p["u"]), [1.0, 2.0])
    with pytest.raises(ValueError, match="either all by name or as the vector 'u'"):
        model.make_params({m: 1.0, Fx: 0.0})
    with pytest.raises(ValueError, match=r"the input vector 'u' must have shape \(2,\)"):
        model.make_params({m: 1.0, "u": [1.0]})
    with pytest.raises(ValueError, match=r"p\['u'\] must have shape \(2,\)"):
        cx.accelerations(
            model.system, 0.0, jnp.zeros(2), jnp.zeros(2), {"m": 1.0, "u": jnp.zeros(3)}
        )
    with pytest.raises(ValueError, match="`input_vector` must be a new key of p"):
        _pushed_point_mass("m")
    scalar, _ = _pushed_point_mass(None)  # the default: one scalar parameter per input
    assert scalar.parameters == ("m", "F_x", "F_y") and scalar.input_vector is None
