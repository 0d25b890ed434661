r"""Linearisation on the constraint manifold (`cx.linearise`), eigenvalues of steady motions
(`cx.eigenvalues`) and time-varying LQR (`cx.tvlqr`, `cx.closed_loop`).

References nobody here derived:

* the Chaplygin sleigh's straight-line motion (Bloch, *Nonholonomic Mechanics and Control*,
  §1.7; Neimark & Fufaev, *Dynamics of Nonholonomic Systems*, 1972): $(I + ma^2)\dot\omega
  = -mav\omega$, so the turning rate has the eigenvalue $-mav/(I + ma^2)$: stable forward,
  unstable backward;
* the upright rolling disk (Neimark & Fufaev 1972; O'Reilly, "The dynamics of rolling
  disks and sliding disks", Nonlinear Dynamics, 1996): straight rolling with spin $\Omega$
  is stable iff $\Omega^2 > mgaI_1/(I_3(I_3 + ma^2))$, the lean obeying
  $(I_1 + ma^2)\ddot\chi = (mga - I_3(I_3 + ma^2)\Omega^2/I_1)\chi$;
* finite differences of `cx.accelerations` for $F$, $G$ and of `linearise` for gradients.
"""

import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
import pytest

import constrax as cx
from constrax import models

SLEIGH = models.chaplygin_sleigh()


def _pendulum_angle():
    """A pendulum in its angle, unconstrained, with a control torque and damping."""

    def L(t, q, qd, p):
        return 0.5 * p["m"] * p["l"] ** 2 * qd[0] ** 2 + p["m"] * 9.81 * p["l"] * jnp.cos(q[0])

    def Q(t, q, qd, p):
        return p["u"][:1] - p["c"] * qd

    p = {"m": jnp.array(1.3), "l": jnp.array(0.7), "c": jnp.array(0.2), "u": jnp.zeros(1)}
    return cx.System(L, force=Q), p


def _pendulum_cartesian():
    """A planar pendulum in Cartesian coordinates: a holonomic rod, a horizontal push u."""

    def L(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd - p["m"] * 9.81 * q[1]

    def rod(t, q, p):
        return q @ q - p["l"] ** 2

    def Q(t, q, qd, p):
        return jnp.stack([p["u"][0], 0.0 * q[1]])

    p = {"m": jnp.array(0.8), "l": jnp.array(1.2), "u": jnp.array([0.3])}
    return cx.System(L, [cx.Holonomic(rod)], force=Q), p


def test_reduced_A_of_an_unconstrained_system_is_the_plain_jacobian():
    system, p = _pendulum_angle()
    th, thd = 0.4, -0.9
    lin = cx.linearise(system, 0.0, jnp.array([th]), jnp.array([thd]), p, control=lambda p: p["u"])
    ml2 = p["m"] * p["l"] ** 2
    F = np.array([[0.0, 1.0], [-9.81 / p["l"] * np.cos(th), -p["c"] / ml2]])
    np.testing.assert_allclose(lin.T, np.eye(2), atol=0)
    np.testing.assert_allclose(lin.F, F, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(lin.A, F, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(lin.B, [[0.0], [1.0 / ml2]], rtol=1e-13)


def test_tangent_basis_is_orthonormal_and_spans_the_kernel_of_the_constraint_jacobian():
    system, p = _pendulum_cartesian()
    q, qd = jnp.array([0.6, -0.8]), jnp.array([0.5, 0.2])
    q, qd = cx.consistent_initial_state(system, 0.0, q, qd, p)
    lin = cx.linearise(system, 0.0, q, qd, p, control=lambda p: p["u"])
    # one position row g = |q|^2 - l^2 and its velocity row c = 2 q.qd: k = 4 - 2
    assert lin.J.shape == (2, 4) and lin.T.shape == (4, 2)
    np.testing.assert_allclose(lin.T.T @ lin.T, np.eye(2), atol=1e-14)
    np.testing.assert_allclose(lin.J @ lin.T, 0.0, atol=1e-14)
    J = np.array([[2 * q[0], 2 * q[1], 0, 0], [2 * qd[0], 2 * qd[1], 2 * q[0], 2 * q[1]]])
    np.testing.assert_allclose(lin.J, J, rtol=1e-14)
    # the sleigh (a Pfaffian row) at a generic state
    q, qd = jnp.array([0.3, -0.2, 0.7]), jnp.array([0.0, 0.0, 0.4])
    q, qd = cx.consistent_initial_state(SLEIGH.system, 0.0, q, qd + 1.0, SLEIGH.params)
    lin = cx.linearise(SLEIGH.system, 0.0, q, qd, SLEIGH.params)
    assert lin.T.shape == (6, 5)
    np.testing.assert_allclose(lin.T.T @ lin.T, np.eye(5), atol=1e-14)
    np.testing.assert_allclose(lin.J @ lin.T, 0.0, atol=1e-14)


def test_full_state_jacobians_match_finite_differences_of_accelerations():
    system, p = _pendulum_cartesian()
    q, qd = cx.consistent_initial_state(system, 0.0, jnp.array([0.6, -0.8]), jnp.ones(2), p)
    lin = cx.linearise(system, 0.0, q, qd, p, control=lambda p: p["u"])
    x0 = jnp.concatenate([q, qd])

    def f(x, u):
        out = cx.accelerations(system, 0.0, x[:2], x[2:], {**p, "u": u})
        return np.concatenate([x[2:], out.qdd])

    h = 1e-6
    F = np.stack([(f(x0 + h * e, p["u"]) - f(x0 - h * e, p["u"])) / (2 * h) for e in np.eye(4)], 1)
    G = (f(x0, p["u"] + h) - f(x0, p["u"] - h))[:, None] / (2 * h)
    np.testing.assert_allclose(lin.F, F, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(lin.G, G, rtol=1e-7, atol=1e-8)


def test_F_maps_tangent_vectors_to_tangent_vectors_on_a_steady_motion_only():
    r"""The claim of the docs: differentiating $J f = 0$ along a tangent $v$ gives
    $JFv = -\partial^2\Phi[v, f]$, zero on a steady motion along cyclic coordinates (the
    sleigh sliding straight ahead: $f$ points along $x$, on which $\Phi$ does not depend),
    so that there $A = T^\top FT$ is the linearisation."""
    p, v = SLEIGH.params, 0.8
    q, qd = jnp.zeros(3), jnp.array([v, 0.0, 0.0])
    lin = cx.linearise(SLEIGH.system, 0.0, q, qd, p)
    np.testing.assert_allclose(lin.J @ lin.F @ lin.T, 0.0, atol=1e-14)
    # a generic state: J F v equals -d2 Phi[v, f], not zero
    phi = lambda x: -jnp.sin(x[2]) * x[3] + jnp.cos(x[2]) * x[4]
    qg, qdg = jnp.array([0.1, 0.2, 0.5]), jnp.array([0.6 * np.cos(0.5), 0.6 * np.sin(0.5), 0.9])
    lin_g = cx.linearise(SLEIGH.system, 0.0, qg, qdg, p)
    xg = jnp.concatenate([qg, qdg])
    fg = jnp.concatenate([qdg, cx.accelerations(SLEIGH.system, 0.0, qg, qdg, p).qdd])
    d2 = jax.hessian(phi)(xg)
    np.testing.assert_allclose(lin_g.J @ lin_g.F @ lin_g.T, -(fg @ d2 @ lin_g.T)[None], atol=1e-13)
    assert np.abs(fg @ d2 @ lin_g.T).max() > 0.1


@pytest.mark.slow
def test_reduced_linear_flow_predicts_a_perturbed_nonlinear_rollout():
    """On the sleigh's straight-line motion, a small tangent perturbation evolves as
    $\\delta x(t) = T e^{At} z_0$ to first order: checked against the nonlinear rollout."""
    p, v = SLEIGH.params, 0.8
    q, qd = jnp.zeros(3), jnp.array([v, 0.0, 0.0])
    lin = cx.linearise(SLEIGH.system, 0.0, q, qd, p)
    # nonlinear rollout of a small tangent perturbation against the reduced linear flow
    eps, t1 = 1e-5, 1.0
    z0 = eps * jnp.array([0.3, -0.5, 0.2, 0.7, -0.4])
    dx0 = lin.T @ z0
    q1, qd1 = cx.consistent_initial_state(SLEIGH.system, 0.0, q + dx0[:3], qd + dx0[3:], p)
    ctrl = diffrax.PIDController(rtol=1e-12, atol=1e-12)
    traj = cx.simulate(SLEIGH.system, q1, qd1, p, t1=t1, stepsize_controller=ctrl)
    x_ref = jnp.concatenate([jnp.array([v * t1, 0.0, 0.0]), qd])
    dx = jnp.concatenate([traj.q[-1], traj.qd[-1]]) - x_ref
    predicted = lin.T @ jax.scipy.linalg.expm(lin.A * t1) @ z0
    assert np.linalg.norm(dx - predicted) < 1e-3 * np.linalg.norm(predicted)


def test_sleigh_eigenvalues_match_the_closed_form_forward_stable_backward_unstable():
    p = SLEIGH.params
    rate = lambda v: -p["m"] * p["a"] * v / (p["I"] + p["m"] * p["a"] ** 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cx.IllConditionedWarning)
        for v in (1.5, -1.5):
            lin = cx.linearise(
                SLEIGH.system, 0.0, jnp.zeros(3), jnp.array([v, 0, 0]), p, cyclic=(0, 1)
            )
            ev = cx.eigenvalues(lin)
            assert lin.A.shape == (3, 3)
            nonzero = ev.values[np.abs(ev.values) > 1e-12]
            np.testing.assert_allclose(nonzero, [rate(v)], rtol=1e-12)
            np.testing.assert_allclose(np.sort(np.abs(ev.values))[:2], 0.0, atol=1e-13)
            assert (nonzero.real < 0).all() == (v > 0)
            assert not ev.ill_conditioned.any()


def _upright_disk(spin):
    """The tilted rolling disk of `cx.models` in Euler angles, upright and rolling straight
    along x with spin rate `spin`: q = (x, y, z, psi, theta, phi)."""
    model = models.tilted_rolling_disk(orientation=cx.rigid.EulerZXZ())
    a = model.params["radius"]
    q = jnp.array([0.0, 0.0, a, 0.0, jnp.pi / 2, 0.0])
    qd = jnp.stack([-a * spin, 0 * spin, 0 * spin, 0 * spin, 0 * spin, spin])
    return model, q, qd


def _sorted(x):
    x = np.asarray(x, complex)
    return x[np.lexsort((x.imag, np.round(x.real, 6)))]


@pytest.mark.slow
def test_upright_rolling_disk_changes_stability_at_the_critical_spin():
    """Neimark & Fufaev 1972; O'Reilly 1996: stable iff spin^2 > m g a I1 / (I3 (I3 + m a^2)).
    The dynamics do not depend on x, y and the spin angle phi (cyclic); the heading psi
    enters the rolling rows and stays, with a Jordan block at zero (steady turning lets the
    heading drift), which `eigenvalues` flags while the lean pair is well-conditioned."""
    model, _, _ = _upright_disk(1.0)
    p = model.params
    m, g, a, I1, I3 = p["mass"], p["g"], p["radius"], p["I1"], p["I3"]
    critical = float(np.sqrt(m * g * a * I1 / (I3 * (I3 + m * a**2))))
    spins = jnp.array([0.8 * critical, 1.2 * critical, 3.0 * critical])
    q, qd = jax.vmap(lambda s: _upright_disk(s)[1:])(spins)
    res = jax.vmap(lambda q, qd: cx.constraint_residual(model.system, 0.0, q, qd, p))(q, qd)
    assert np.abs(res.position).max() < 1e-15 and np.abs(res.velocity).max() < 1e-15
    lins = jax.vmap(lambda q, qd: cx.linearise(model.system, 0.0, q, qd, p, cyclic=(0, 1, 5)))(
        q, qd
    )
    full = cx.linearise(model.system, 0.0, q[0], qd[0], p)
    np.testing.assert_allclose(full.F[:, np.array([0, 1, 5])], 0.0, atol=1e-12)  # cyclic
    for i, spin in enumerate(np.asarray(spins)):
        with pytest.warns(cx.IllConditionedWarning, match="ill-conditioned"):
            ev = cx.eigenvalues(jax.tree.map(lambda x, i=i: x[i], lins))
        lean2 = (m * g * a - I3 * (I3 + m * a**2) * spin**2 / I1) / (I1 + m * a**2)
        lean = np.sqrt(complex(lean2))
        good = ev.values[~ev.ill_conditioned]
        np.testing.assert_allclose(
            _sorted(good), _sorted([-lean, 0.0, lean]), atol=1e-9 * abs(lean)
        )
        assert np.abs(ev.values[ev.ill_conditioned]).max() < 1e-6  # the zero cluster only
        unstable = np.max(good.real) > 1e-6
        assert unstable == (spin < critical)


def test_ill_conditioned_eigenvalue_problems_warn():
    # a free particle: A = [[0, 1], [0, 0]], a Jordan block
    free = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd)
    lin = cx.linearise(free, 0.0, jnp.zeros(1), jnp.ones(1))
    with pytest.warns(cx.IllConditionedWarning, match="ill-conditioned.*cyclic="):
        ev = cx.eigenvalues(lin)
    assert ev.ill_conditioned.all() and ev.condition > 1e10
    # the sleigh with its positions left in: Jordan blocks at zero; gone with cyclic=
    q, qd = jnp.zeros(3), jnp.array([1.0, 0.0, 0.0])
    with pytest.warns(cx.IllConditionedWarning):
        cx.eigenvalues(cx.linearise(SLEIGH.system, 0.0, q, qd, SLEIGH.params))
    # a nearly defective matrix, and one that is fine
    with pytest.warns(cx.IllConditionedWarning):
        cx.eigenvalues(np.array([[1.0, 1.0], [1e-13, 1.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = cx.eigenvalues(np.array([[-1.0, 1.0], [0.0, -2.0]]))
    np.testing.assert_allclose(ev.values, [-1.0, -2.0])
    assert cx.eigenvalues(np.array([[1.0, 1.0], [0.0, 1.0]]), warn=False).ill_conditioned.all()


def test_linearise_under_jit_and_vmap_matches_eager():
    p = SLEIGH.params
    key = jax.random.PRNGKey(1)
    qs = jax.random.normal(key, (3, 3))
    ths = qs[:, 2]
    speeds = jnp.array([0.5, -1.0, 2.0])
    qds = jnp.stack([speeds * jnp.cos(ths), speeds * jnp.sin(ths), jnp.array([0.3, 0.0, -1.0])], 1)

    def lin(q, qd):
        return cx.linearise(SLEIGH.system, 0.0, q, qd, p, cyclic=(0, 1))

    def invariants(L):  # independent of the basis the SVD picked
        P = L.T @ L.T.T
        return L.F, P, L.T @ L.A @ L.T.T

    batched = jax.vmap(lin)(qs, qds)
    jitted = jax.jit(lin)
    for i in range(3):
        eager = lin(qs[i], qds[i])
        for a, b, c in zip(
            invariants(eager),
            invariants(jax.tree.map(lambda x, i=i: x[i], batched)),
            invariants(jitted(qs[i], qds[i])),
            strict=True,
        ):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-13)


@pytest.mark.slow
def test_gradient_through_linearise_matches_finite_differences():
    """A scalar independent of the tangent basis, tr A + tr(A A^T), differentiated with
    respect to a parameter and a coordinate (the SVD basis itself has no derivative)."""
    q0 = jnp.array([0.1, 0.2, 0.5])
    qd0 = jnp.array([0.6 * np.cos(0.5), 0.6 * np.sin(0.5), 0.9])

    def scalar(a, th):
        p = {**SLEIGH.params, "a": a}
        q = q0.at[2].set(th)
        qd = qd0.at[:2].set(0.6 * jnp.stack([jnp.cos(th), jnp.sin(th)]))
        A = cx.linearise(SLEIGH.system, 0.0, q, qd, p).A
        return jnp.trace(A) + jnp.trace(A @ A.T)

    a, th = jnp.array(0.5), jnp.array(0.5)
    ga, gth = jax.grad(scalar, argnums=(0, 1))(a, th)
    h = 1e-5
    fd_a = (scalar(a + h, th) - scalar(a - h, th)) / (2 * h)
    fd_th = (scalar(a, th + h) - scalar(a, th - h)) / (2 * h)
    assert np.isfinite(ga) and np.isfinite(gth)
    np.testing.assert_allclose(ga, fd_a, rtol=1e-7)
    np.testing.assert_allclose(gth, fd_th, rtol=1e-7, atol=1e-9)


def _steered_knife_edge():
    """The knife edge pushed along its heading (u[0]) and turned by a torque (u[1])."""

    def force(t, q, qd, p):
        u, th = p["u"], q[2]
        return jnp.stack([u[0] * jnp.cos(th), u[0] * jnp.sin(th), u[1]])

    model = models.knife_edge()
    system = cx.System(model.system.lagrangian, model.system.constraints, force=force)
    return system, {**model.params, "u": jnp.zeros(2)}


def test_bad_inputs_raise_naming_the_argument():
    system, p = _steered_knife_edge()
    q, qd = jnp.zeros(3), jnp.array([1.0, 0.0, 0.0])
    u = lambda p: p["u"]
    with pytest.raises(ValueError, match="`control` must locate a 1-D array"):
        cx.linearise(system, 0.0, q, qd, {**p, "u": jnp.zeros((2, 2))}, control=u)
    with pytest.raises(ValueError, match="`control` could not locate"):
        cx.linearise(system, 0.0, q, qd, p, control=lambda p: p["v"])
    with pytest.raises(TypeError, match="`control` must be a function"):
        cx.linearise(system, 0.0, q, qd, p, control="u")
    with pytest.raises(ValueError, match="`cyclic` index 5 is out of range .* n = 3"):
        cx.linearise(system, 0.0, q, qd, p, cyclic=(5,))
    with pytest.raises(ValueError, match="`cyclic` has repeated"):
        cx.linearise(system, 0.0, q, qd, p, cyclic=(0, 0))
    with pytest.raises(ValueError, match="`rank` must be an integer"):
        cx.linearise(system, 0.0, q, qd, p, rank=7)
    with pytest.raises(ValueError, match="`prescription` must be cx.DAlembert"):
        cx.linearise(system, 0.0, q, qd, p, prescription=cx.Vakonomic())
    with pytest.raises(ValueError, match="square matrix"):
        cx.eigenvalues(np.zeros((2, 3)))
    ts = jnp.linspace(0.0, 1.0, 3)
    qs, qds = jnp.zeros((3, 3)), jnp.tile(qd, (3, 1))
    kw = dict(control=u, Q=jnp.ones(6), R=jnp.ones(2))
    with pytest.raises(ValueError, match=r"`us` must have shape \(N, n_u\) = \(3, 2\)"):
        cx.tvlqr(system, ts, qs, qds, jnp.zeros((3, 1)), p, **kw)
    with pytest.raises(ValueError, match="`Q` must have shape"):
        cx.tvlqr(system, ts, qs, qds, jnp.zeros((3, 2)), p, **{**kw, "Q": jnp.ones(5)})
    with pytest.raises(ValueError, match="`qs` must have shape"):
        cx.tvlqr(system, ts, qs[:2], qds, jnp.zeros((3, 2)), p, **kw)
    with pytest.raises(ValueError, match="has no force"):
        cx.closed_loop(SLEIGH.system, u)


def test_dependent_constraint_rows_raise_with_the_rank_to_pass():
    """The snake cart's two wheel rows coincide at phi = pi/2: J loses a rank."""
    model = models.snake_cart()
    q = jnp.array([0.0, 0.0, 0.0, jnp.pi / 2])
    qd = jnp.array([0.0, 0.0, 0.0, 0.3])
    with pytest.raises(Exception, match="does not have rank 2.*Pass rank="):
        cx.linearise(model.system, 0.0, q, qd, model.params)
    lin = cx.linearise(model.system, 0.0, q, qd, model.params, rank=1)
    assert lin.T.shape == (8, 7)
    np.testing.assert_allclose(lin.J @ lin.T, 0.0, atol=1e-14)


@pytest.mark.slow
def test_tvlqr_tracks_a_knife_edge_trajectory_under_perturbed_state_and_parameters():
    """A nonholonomic system: reference from an open-loop control; the tracked system has
    10 % more mass and inertia and starts 0.1 m off sideways, turned by 0.1 rad and faster.
    Open loop misses the reference's final state by ~1.9; the TVLQR by ~100x less."""
    system, p = _steered_knife_edge()
    control = lambda p: p["u"]
    driven = cx.closed_loop(system, control)
    T, N = 4.0, 81
    ts = jnp.linspace(0.0, T, N)
    knots = jnp.stack([0.3 * jnp.sin(ts), 0.5 * jnp.cos(0.8 * ts)], axis=1)
    u_ref = cx.fit.PiecewiseLinear(knots, 0.0, T)
    ref = cx.simulate(
        driven, jnp.zeros(3), jnp.array([1.0, 0.0, 0.0]), {**p, "u": u_ref}, t1=T,
        saveat=diffrax.SaveAt(ts=ts),
    )  # fmt: skip
    policy = cx.tvlqr(
        system, ts, ref.q, ref.qd, knots, p, control=control,
        Q=jnp.ones(6), R=0.1 * jnp.ones(2), Qf=10 * jnp.ones(6),
    )  # fmt: skip
    # on the reference, the policy returns the reference control
    np.testing.assert_allclose(policy(ts[7], ref.q[7], ref.qd[7]), knots[7], atol=1e-12)
    perturbed = {**p, "m": 1.1 * p["m"], "I": 1.1 * p["I"]}
    q0, qd0 = cx.consistent_initial_state(
        system, 0.0, jnp.array([0.0, 0.1, 0.1]), jnp.array([1.1, 0.0, 0.1]), perturbed
    )
    open_loop = cx.simulate(driven, q0, qd0, {**perturbed, "u": u_ref}, t1=T)
    closed = cx.simulate(driven, q0, qd0, {**perturbed, "u": policy}, t1=T)
    x_ref = jnp.concatenate([ref.q[-1], ref.qd[-1]])
    error = lambda tr: np.linalg.norm(np.concatenate([tr.q[-1], tr.qd[-1]]) - x_ref)
    assert error(open_loop) > 1.0
    assert error(closed) < error(open_loop) / 10
    # the gains act on the reduced error only: zero on the normal of the constraint
    lin = cx.linearise(system, ts[0], ref.q[0], ref.qd[0], {**p, "u": knots[0]}, control=control)
    normal = np.linalg.svd(np.asarray(lin.J))[2][:1].T
    np.testing.assert_allclose(policy.gain(0.0) @ normal, 0.0, atol=1e-10)
    assert eqx.is_array(policy.K) and policy.K.shape == (N, 2, 5)
