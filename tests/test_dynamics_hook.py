r"""`System(dynamics=...)`: a user-written `cx.AbstractDynamics` feeds the engine.

Reference: a cart-pole (cart mass $M$, point mass $m$ on a massless rod of length $l$,
angle $\theta$ from the downward vertical),
$L = \tfrac12(M + m)\dot x^2 + m l\dot x\dot\theta\cos\theta + \tfrac12 m l^2\dot\theta^2
+ m g l\cos\theta$, whose Euler–Lagrange terms are written out by hand below
(Tedrake, *Underactuated Robotics*, ch. 3, the cart-pole's manipulator equations, with
$\theta$ measured from the bottom): $W = \begin{pmatrix} M + m & m l\cos\theta \\
m l\cos\theta & m l^2\end{pmatrix}$, $f_0 = (m l\dot\theta^2\sin\theta,\ -m g l\sin\theta)$.
The engine's default path is autodiff of $L$; both must give the same accelerations,
multipliers and gradients, under both prescriptions, `jit`, `vmap` and `grad`.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

G = 9.81


def L(t, q, qd, p):
    x, th = q
    xd, thd = qd
    M, m, l = p["M"], p["m"], p["l"]
    return (
        0.5 * (M + m) * xd**2
        + m * l * xd * thd * jnp.cos(th)
        + 0.5 * m * l**2 * thd**2
        + m * G * l * jnp.cos(th)
    )


class CartPole(cx.AbstractDynamics):
    """The cart-pole's mass matrix and bias, written by hand."""

    def euler_lagrange_terms(self, t, q, qd, p, bias=True):
        M, m, l = p["M"], p["m"], p["l"]
        c = m * l * jnp.cos(q[1])
        W = jnp.stack([jnp.stack([M + m, c]), jnp.stack([c, m * l**2])])
        return W, self.euler_lagrange_rhs(t, q, qd, p) if bias else None

    def euler_lagrange_rhs(self, t, q, qd, p):
        m, l = p["m"], p["l"]
        s = jnp.sin(q[1])
        return jnp.stack([m * l * qd[1] ** 2 * s, -m * G * l * s])


def rail(t, q, p):  # the cart on a rail driven in step with the pole: x = r * theta
    return jnp.atleast_1d(q[0] - p["r"] * q[1])


def one_form(t, q, p):  # a nonholonomic-looking row (integrable): xd - r cos(theta) thd = 0
    return jnp.array([1.0, -p["r"] * jnp.cos(q[1])])


P = {"M": jnp.array(1.3), "m": jnp.array(0.4), "l": jnp.array(0.7), "r": jnp.array(0.2)}
Q = jnp.array([0.1, 0.8])
QD = jnp.array([0.3, -1.1])


def _systems(constraints):
    return (
        cx.System(L, constraints, dynamics=CartPole()),
        cx.System(L, constraints),  # autodiff of L
        cx.System(L, constraints, dynamics=cx.LagrangianDynamics(L)),
    )


def test_hand_written_terms_equal_autodiff():
    ours = CartPole().euler_lagrange_terms(0.0, Q, QD, P)
    ref = cx.LagrangianDynamics(L).euler_lagrange_terms(0.0, Q, QD, P)
    for a, b in zip(ours, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
    assert CartPole().euler_lagrange_terms(0.0, Q, QD, P, bias=False)[1] is None


@pytest.mark.parametrize(
    "constraints, prescription",
    [
        ("none", "dalembert"),
        ("holonomic", "dalembert"),
        ("holonomic", "vakonomic"),
        ("pfaffian", "dalembert"),
        ("pfaffian", "vakonomic"),
    ],
)
def test_accelerations_equal_the_lagrangian_path(constraints, prescription):
    cons = {
        "none": [],
        "holonomic": [cx.Holonomic(rail)],
        "pfaffian": [cx.Pfaffian(one_form)],
    }[constraints]
    kw = {}
    if prescription == "vakonomic":
        kw = dict(prescription=cx.Vakonomic(), mu=jnp.array([0.7]))
    systems = _systems(cons)

    @eqx.filter_jit
    def run(system, q, qd, p):
        return cx.accelerations(system, 0.0, q, qd, p, **kw)

    outs = [run(s, Q, QD, P) for s in systems]
    for out in outs[1:]:
        np.testing.assert_allclose(outs[0].qdd, out.qdd, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(outs[0].multipliers, out.multipliers, rtol=1e-12, atol=1e-13)
    if not cons:  # the closed form: W qdd = f0
        W, f0 = CartPole().euler_lagrange_terms(0.0, Q, QD, P)
        np.testing.assert_allclose(W @ outs[0].qdd, f0, rtol=1e-12)
    np.testing.assert_allclose(
        cx.mass_matrix(systems[0], 0.0, Q, QD, P), cx.mass_matrix(systems[1], 0.0, Q, QD, P)
    )


def test_vmap_and_gradients_equal_the_lagrangian_path_and_central_differences():
    ours, ref, _ = _systems([cx.Holonomic(rail)])
    rng = np.random.default_rng(0)
    qs = jnp.asarray(rng.normal(size=(5, 2)))
    qds = jnp.asarray(rng.normal(size=(5, 2)))

    def qdd(system, q, qd, p):
        return cx.accelerations(system, 0.0, q, qd, p).qdd

    batch = jax.vmap(lambda q, qd: qdd(ours, q, qd, P))(qs, qds)
    np.testing.assert_allclose(
        batch, jax.vmap(lambda q, qd: qdd(ref, q, qd, P))(qs, qds), rtol=1e-12, atol=1e-13
    )
    for i in range(5):  # vmap equals a loop
        np.testing.assert_allclose(batch[i], qdd(ours, qs[i], qds[i], P), rtol=1e-12)

    loss = lambda system: lambda p: qdd(system, Q, QD, p) @ jnp.array([1.0, -0.4])
    g = jax.grad(loss(ours))(P)
    g_ref = jax.grad(loss(ref))(P)
    h = 1e-6
    for k in P:
        np.testing.assert_allclose(g[k], g_ref[k], rtol=1e-11, atol=1e-12)
        fd = (loss(ours)({**P, k: P[k] + h}) - loss(ours)({**P, k: P[k] - h})) / (2 * h)
        np.testing.assert_allclose(g[k], fd, rtol=1e-7, atol=1e-9)


def test_a_rollout_uses_the_hook():
    """The trajectory of `cx.simulate` is the same whichever path gives the terms, and a
    deliberately wrong hook (gravity doubled) gives a different one: the engine reads it."""

    class Heavier(CartPole):
        def euler_lagrange_rhs(self, t, q, qd, p):  # the pole's row: -2 m g l sin(theta)
            return super().euler_lagrange_rhs(t, q, qd, p) * jnp.array([1.0, 2.0])

    ours, ref, _ = _systems([cx.Holonomic(rail)])
    q0, qd0 = cx.consistent_initial_state(ref, 0.0, Q, QD, P)
    end = lambda s: cx.simulate(s, q0, qd0, P, t1=0.5).q[-1]
    np.testing.assert_allclose(end(ours), end(ref), rtol=1e-9, atol=1e-10)
    heavier = cx.System(L, [cx.Holonomic(rail)], dynamics=Heavier())
    assert np.abs(end(heavier) - end(ref)).max() > 1e-3


def test_the_abstract_interface_is_enforced():
    class Incomplete(cx.AbstractDynamics):
        def euler_lagrange_rhs(self, t, q, qd, p):
            return q

    with pytest.raises(TypeError):
        Incomplete()
    with pytest.raises(TypeError, match="`dynamics` must be an AbstractDynamics"):
        cx.System(L, dynamics=CartPole)  # the class, not an instance
