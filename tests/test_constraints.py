"""Constraint kinds and the constraint terms the engine derives from them.

References: full `jax.jacfwd` Jacobians of the stacked rows (A and the bias by definition),
and the one-form of a Pfaffian written out by hand against its velocity form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
from constrax._terms import constraint_terms, stacked_residual


def test_constraint_terms_equal_full_jacobians():
    """`constraint_terms` (per kind: A read off, one jvp for the bias) gives the same
    (A, c, c_bias) as full `jax.jacfwd` Jacobians of all stacked rows,
    A = dc/dqd and c_bias = dc/dt + dc/dq qd, in a system mixing every constraint kind
    (both forms of `Pfaffian`)."""

    def g(t, q, p):
        return q[0] ** 2 + q[1] ** 2 - 1.0 + 0.1 * t

    def omega(t, q, p):
        return jnp.stack(
            [
                jnp.stack([-jnp.sin(q[2] + t), jnp.cos(q[2]), q[0], 0.0 * q[0]]),
                jnp.stack([q[1], q[2] ** 2, 1.0 + 0.0 * q[0], jnp.sin(q[3])]),
            ]
        )

    def b(t, q, p):
        return jnp.stack([t * q[0], jnp.cos(q[1])])

    def F(t, q, qd, p):
        return qd @ qd * q[0] - 1.0

    def v(t, q, qd, p):  # the same rows as (omega, b), as a velocity map
        return omega(t, q, p) @ qd + b(t, q, p)

    def g_dot(t, q, qd, p):  # dg/dt written out: Holonomic(g, velocity=g_dot)
        return 2.0 * q[0] * qd[0] + 2.0 * q[1] * qd[1] + 0.1

    system = cx.System(
        lambda t, q, qd, p: 0.5 * qd @ qd,
        [
            cx.Holonomic(g),
            cx.Pfaffian(omega, b),
            cx.VelocityConstraint(F),
            cx.Pfaffian(lambda t, q, p: jnp.stack([1.0, q[0], 0.0, 0.0])),
            cx.Pfaffian(velocity=v),
            cx.Holonomic(g, velocity=g_dot),
        ],
    )

    @jax.jit
    @jax.vmap
    def both(t, q, qd):
        fast = constraint_terms(system, t, q, qd, None)
        c = stacked_residual(system, None)
        dt, dq, dqd = jax.jacfwd(c, argnums=(0, 1, 2))(t, q, qd)
        return fast, (dqd, c(t, q, qd), dt + dq @ qd)

    rng = np.random.default_rng(0)
    fast, ref = both(*(jnp.asarray(rng.normal(size=s)) for s in [(3,), (3, 4), (3, 4)]))
    for a, r in zip(fast, ref, strict=True):
        assert a.shape == r.shape
        np.testing.assert_allclose(np.asarray(a), np.asarray(r), rtol=1e-14, atol=1e-14)


def test_pfaffian_velocity_form_has_the_one_form_and_the_dynamics_of_omega():
    """`Pfaffian(velocity=v)` with v = omega(q) qd + b(t, q): its `one_form` and
    `affine_term` are omega and b, and the sleigh's accelerations, multipliers and
    constraint rank agree with the one-form version."""
    sleigh = cx.models.chaplygin_sleigh()
    (con,) = sleigh.system.constraints

    def v(t, q, qd, p):
        return con.one_form(t, q, p) @ qd + 0.1 * t * q[0]

    def b(t, q, p):
        return jnp.atleast_1d(0.1 * t * q[0])

    velocity_form = cx.Pfaffian(velocity=v, name="v")
    one_form = cx.Pfaffian(con.omega, b, name="w")
    q = jnp.array([0.3, -0.2, 0.7])
    qd = jnp.array([0.5, 0.1, -0.4])
    t, p = jnp.asarray(0.8), sleigh.params
    np.testing.assert_allclose(velocity_form.one_form(t, q, p), con.one_form(t, q, p), atol=1e-15)
    np.testing.assert_allclose(velocity_form.affine_term(t, q, p), b(t, q, p), atol=1e-15)
    acc = []
    for c in (velocity_form, one_form):
        system = cx.System(sleigh.system.lagrangian, [c])
        acc.append(cx.accelerations(system, t, q, qd, p))
    np.testing.assert_allclose(acc[0].qdd, acc[1].qdd, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(acc[0].multipliers, acc[1].multipliers, rtol=1e-14, atol=1e-14)
    system = cx.System(sleigh.system.lagrangian, [velocity_form])
    assert int(cx.constraint_rank(system, t, q, qd, p).rank) == 1


def test_pfaffian_needs_exactly_one_form():
    omega = lambda t, q, p: q
    with pytest.raises(TypeError, match="give exactly one of `omega`"):
        cx.Pfaffian()
    with pytest.raises(TypeError, match="give exactly one of `omega`"):
        cx.Pfaffian(omega, velocity=lambda t, q, qd, p: qd)
    with pytest.raises(TypeError, match="`b` goes with `omega`"):
        cx.Pfaffian(b=lambda t, q, p: q[:1], velocity=lambda t, q, qd, p: qd[:1])
    with pytest.raises(TypeError, match="`velocity` must be callable"):
        cx.Pfaffian(velocity=1.0)
    system = cx.System(
        lambda t, q, qd, p: 0.5 * qd @ qd,
        [cx.Pfaffian(velocity=lambda t, q, qd, p: jnp.outer(qd, qd), name="bad")],
    )
    with pytest.raises(
        ValueError, match=r"constraint 'bad' \(Pfaffian\): velocity\(t, q, qd, p\) must return"
    ):
        cx.accelerations(system, 0.0, jnp.ones(2), jnp.ones(2), None)


def test_holonomic_velocity_form_keeps_g_for_the_position_level_and_checks_its_rows():
    def g(t, q, p):
        return jnp.stack([q[0] - 1.0, q[1] * q[2]])

    con = cx.Holonomic(g, velocity=lambda t, q, qd, p: jnp.stack([qd[0], q[1] * qd[2]]))
    q = jnp.array([2.0, 3.0, 4.0])
    np.testing.assert_allclose(con.position_residual(0.0, q, None), [1.0, 12.0])
    assert con.holonomic
    bad = cx.Holonomic(
        g,
        name="bad",
        velocity=lambda t, q, qd, p: qd[0],
    )
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, [bad])
    with pytest.raises(ValueError, match=r"'bad'.*one row per row of\s+g.*\(2,\), got \(1,\)"):
        cx.accelerations(system, 0.0, q, jnp.ones(3))
    with pytest.raises(TypeError, match="`velocity` must be callable"):
        cx.Holonomic(g, velocity=1.0)


def _rod_systems():
    """A particle on a rod of length 1 in the plane, with a no-side-slip-like Pfaffian row
    on a third coordinate: the rod as `Holonomic` + `Pfaffian`, and as one `Pfaffian` whose
    first row is integrable (`position=`)."""

    def L(t, q, qd, p):
        return 0.5 * qd @ qd - 9.81 * q[1]

    rod = lambda t, q, p: 0.5 * (q[0] ** 2 + q[1] ** 2 - 1.0)
    rod_rate = lambda t, q, qd, p: q[0] * qd[0] + q[1] * qd[1]  # d/dt rod
    steer = lambda t, q, qd, p: qd[2] - q[0] * qd[1]
    rows = lambda t, q, qd, p: jnp.stack([rod_rate(t, q, qd, p), steer(t, q, qd, p)])
    split = cx.System(L, [cx.Holonomic(rod), cx.Pfaffian(velocity=steer)])
    merged = cx.System(L, [cx.Pfaffian(velocity=rows, position=rod, name="rod_and_steer")])
    return split, merged


def test_pfaffian_with_integrable_rows_is_holonomic_at_the_position_level():
    split, merged = _rod_systems()
    q = jnp.array([0.9, -0.5, 0.2])  # off the rod (|q| != 1)
    qd = jnp.array([0.3, 0.7, -0.1])
    (con,) = merged.constraints
    assert con.has_position_rows and not con.holonomic
    np.testing.assert_allclose(con.position_residual(0.0, q, None), [0.5 * (0.81 + 0.25 - 1.0)])
    for fn in (cx.constraint_residual, cx.constraint_jacobian):
        a, b = fn(merged, 0.0, q, qd), fn(split, 0.0, q, qd)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-14, atol=1e-15)
    # The position level acts on the integrable row: Baumgarte's beta^2 g, the initial-state
    # projection onto g = 0, and Projection during a simulation.
    stab = cx.Baumgarte(2.0, 3.0)
    a, b = (cx.accelerations(s, 0.0, q, qd, stabilisation=stab) for s in (merged, split))
    np.testing.assert_allclose(a.qdd, b.qdd, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(a.multipliers, b.multipliers, rtol=1e-13, atol=1e-14)
    (qm, qdm), (qs, qds) = (cx.consistent_initial_state(s, 0.0, q, qd) for s in (merged, split))
    np.testing.assert_allclose(qm[0] ** 2 + qm[1] ** 2, 1.0, rtol=1e-12)
    np.testing.assert_allclose(qm, qs, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(qdm, qds, rtol=1e-12, atol=1e-14)
    tm, ts = (cx.simulate(s, qm, qdm, t1=1.0) for s in (merged, split))
    np.testing.assert_allclose(tm.q, ts.q, rtol=1e-10, atol=1e-12)
    assert float(jnp.max(jnp.abs(tm.q[:, 0] ** 2 + tm.q[:, 1] ** 2 - 1.0))) < 1e-8
    # ... and under jit(grad) and vmap.
    loss = lambda s: jax.jit(
        jax.grad(lambda x: cx.simulate(s, qm * x, qdm, t1=0.3, consistency_rtol=None).q[-1, 2])
    )(1.0)
    np.testing.assert_allclose(loss(merged), loss(split), rtol=1e-9)
    qs_b = qm + jnp.array([[0.0], [0.01], [0.02]]) * jnp.array([1.0, 0.0, 0.0])
    acc = lambda s: jax.vmap(lambda q: cx.accelerations(s, 0.0, q, qd, stabilisation=stab).qdd)
    np.testing.assert_allclose(acc(merged)(qs_b), acc(split)(qs_b), rtol=1e-12, atol=1e-13)


def test_pfaffian_position_rows_are_checked():
    rows = lambda t, q, qd, p: qd[:1]
    bad = cx.Pfaffian(velocity=rows, position=lambda t, q, p: q[:2], name="bad")
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, [bad])
    with pytest.raises(
        ValueError, match=r"'bad'.*position\(t, q, p\).*at most.*1 rows, got \(2,\)"
    ):
        cx.accelerations(system, 0.0, jnp.ones(2), jnp.ones(2))
    with pytest.raises(TypeError, match="`position` must be callable"):
        cx.Pfaffian(velocity=rows, position=1.0)
    plain = cx.Pfaffian(velocity=rows, name="plain")
    assert not plain.has_position_rows
    with pytest.raises(TypeError, match="'plain' has no position-level residual"):
        plain.position_residual(0.0, jnp.ones(2), None)


def _free_body_with_a_spring():
    """A free rigid body in (position, unit quaternion) coordinates, with a spring to the
    origin and a torque-free spin: the quaternion's norm row is its only constraint."""
    body = cx.rigid.RigidBody(1.0, jnp.array([1.0, 2.0, 3.0]), name="body")

    def L(t, q, qd, p):
        return body.kinetic_energy(q, qd) - 0.5 * q[:3] @ q[:3]

    q = jnp.array([0.3, -0.2, 0.1, 0.8, 0.2, -0.4, 0.4])
    q = q.at[3:].set(q[3:] / jnp.linalg.norm(q[3:]))
    qd = jnp.array([0.1, 0.5, -0.3, 0.2, 0.7, -0.1, 0.3])
    qd = qd.at[3:].add(-(q[3:] @ qd[3:]) * q[3:])  # tangent to the unit sphere
    return L, q, qd


def test_unit_quaternion_rows_equal_autodiff_of_the_norm():
    """`cx.UnitQuaternion`'s closed-form terms (A = 2x^T, c = 2x.xd, c_bias = 2|xd|^2) are
    those `cx.Holonomic` of the same norm gets by autodiff, under `jit`, `vmap` and
    `grad`; the accelerations of a free body agree; a quaternion that does not fit in the
    coordinates and a bad start are refused, naming them."""
    L, q, qd = _free_body_with_a_spring()
    closed = cx.UnitQuaternion(3, name="body.orientation")
    auto = cx.Holonomic(lambda t, q, p: q[3:] @ q[3:] - 1.0, name="body.orientation")

    def terms(con):
        return jax.jit(lambda q, qd: constraint_terms(cx.System(L, [con]), 0.0, q, qd, None))

    for a, b in zip(terms(closed)(q, qd), terms(auto)(q, qd), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
    qs = jnp.stack([q, 2.0 * q, -q])
    batched = jax.vmap(terms(closed), (0, None))(qs, qd)[0]
    np.testing.assert_allclose(batched, jax.vmap(terms(auto), (0, None))(qs, qd)[0], atol=1e-15)

    def acc(con):
        return lambda q: cx.accelerations(cx.System(L, [con]), 0.0, q, qd).qdd

    np.testing.assert_allclose(acc(closed)(q), acc(auto)(q), rtol=1e-12, atol=1e-12)
    g = jax.jit(jax.jacrev(lambda q: jnp.sum(acc(closed)(q) ** 2)))(q)
    g_ref = jax.jit(jax.jacrev(lambda q: jnp.sum(acc(auto)(q) ** 2)))(q)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-10)

    with pytest.raises(ValueError, match="'body.orientation'.*q\\[5:9\\].*7 coordinates"):
        cx.accelerations(cx.System(L, [cx.UnitQuaternion(5, "body.orientation")]), 0.0, q, qd)
    with pytest.raises(TypeError, match="`start` must be a non-negative int"):
        cx.UnitQuaternion(-1)
