"""The tree path (`rigid/_tree/_tree_dynamics.py`: composite-rigid-body mass matrix, recursive
Newton–Euler bias, level-by-level kinematics) against two references nobody here derived
for it:

- the Lagrangian path: autodiff of the imported Lagrangian, $W = \\partial^2L/\\partial\\dot
  q^2$ and $f_0 = \\partial L/\\partial q - (\\partial^2L/\\partial\\dot q\\,\\partial q)\\dot q$
  (written here with plain `jax.hessian`/`jax.jacfwd`, and end to end through
  `cx.accelerations`), on every MJCF model of tests/rigid/test_mjcf.py;
- MuJoCo's C engine on the same `MjModel` with the same phenomena disabled (contacts,
  limits): `mj_fullM`, `qfrc_bias` and `qacc` after `mj_forward`, on gymnasium's models.

Errors are relative to the largest entry of the reference.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

mujoco = pytest.importorskip("mujoco")

from test_mjcf import (  # noqa: E402  (tests/rigid is on sys.path under pytest)
    BALL_XML,
    EQUALITY_XML,
    WHEEL_XML,
    _full_mass_matrix,
    _gym_model,
    _poly_model,
    _random_state,
    _xml,
)

from constrax.rigid._tree._tree_dynamics import (  # noqa: E402
    TreeDynamics,
    solve_with_norm_rows,
)
from constrax.rigid._tree._tree_layout import _Layout  # noqa: E402

D = mujoco.mjtDisableBit

# A hinge, a slide and a ball joint on one body (the later joints' axes and anchors move
# with the earlier ones; MuJoCo allows no rotation after a ball), two hinges on a body
# below, springs and armature, a ball joint without armature on a second child.
STACKED_XML = """
<mujoco model="stacked">
  <option gravity="0.1 0.4 -9.81"/>
  <worldbody>
    <body name="a" pos="0.1 0.2 1" euler="10 -20 5">
      <joint name="h" type="hinge" axis="1 1 0" pos="0.1 0 0" stiffness="2" springref="15"
             armature="0.01"/>
      <joint name="s" type="slide" axis="0 0 1" stiffness="3" ref="0.2"/>
      <joint name="ball" type="ball" pos="0 0.05 0" armature="0.03"/>
      <geom type="box" size="0.1 0.2 0.3" pos="0.1 0 0" euler="5 6 7" contype="0"
            conaffinity="0"/>
      <body name="b" pos="0 0 -0.4" euler="0 30 0">
        <joint name="h2" type="hinge" axis="0 1 0" damping="0.2"/>
        <joint name="h3" type="hinge" axis="1 0 0" pos="0 0 0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0.1 -0.2" size="0.04" contype="0"
              conaffinity="0"/>
      </body>
      <body name="c" pos="0.2 0 0">
        <joint name="ball2" type="ball"/>
        <geom type="ellipsoid" size="0.1 0.05 0.02" pos="0.1 0 0" contype="0"
              conaffinity="0"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def _own_model(xml: str):
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.disableflags |= int(D.mjDSBL_CONTACT)
    return m


MODELS = {
    "ball_chain": lambda: _own_model(BALL_XML),
    "loops": lambda: _own_model(EQUALITY_XML),
    "wheel": lambda: _own_model(WHEEL_XML),
    "two_hinges": lambda: _own_model(_xml()),
    "stacked": lambda: _own_model(STACKED_XML),
    "polynomial_springs": _poly_model,  # MuJoCo 4's -(k0 d + k1 d^2 + k2 d^3)
    "inverted_pendulum": lambda: _gym_model("inverted_pendulum"),
}
SLOW_MODELS = ["reacher", "hopper", "half_cheetah", "walker2d", "ant", "humanoid"]


def _lagrangian_terms(imported, q, qd, p):
    """W and f0 by autodiff of the imported Lagrangian (the engine's Lagrangian path)."""
    L = lambda q, qd: imported.system.lagrangian(0.0, q, qd, p)
    W = jax.jacfwd(jax.grad(L, 1), 1)(q, qd)
    Lq = jax.grad(L, 0)(q, qd)
    _, Lqd_dot = jax.jvp(lambda q_: jax.grad(L, 1)(q_, qd), (q,), (qd,))
    return W, Lq - Lqd_dot


def _lagrangian_system(system):
    """The same system without `dynamics`: the engine's autodiff of its Lagrangian."""
    return cx.System(system.lagrangian, system.constraints, system.force)


def _starts(imported):
    return [s for s, _ in imported.tree.quaternion_slices()]


def _qdd(imported, W, f, q, qd, p):
    Q = imported.system.force(0.0, q, qd, p)
    return solve_with_norm_rows(W, f + Q, q, qd, _starts(imported))


def _rel(a, ref):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(ref))) / np.max(np.abs(ref)))


def _random_case(m, seed: int):
    """The model `m` imported, its tree dynamics, a random state `(q, qd)` with its
    parameters and controls, and the random generator that drew them."""
    imported = cx.rigid.from_mjcf(m)
    rng = np.random.default_rng(seed)
    qpos, qvel, ctrl = _random_state(m, imported, rng)
    q, qd = imported.from_mujoco_state(qpos, qvel)
    p = dict(imported.params, ctrl=jnp.asarray(ctrl))
    return imported, TreeDynamics(imported.tree), q, qd, p, rng


def _compare_with_lagrangian(m, n_states=4, seed=0, params=None):
    imported = cx.rigid.from_mjcf(m)
    dyn = TreeDynamics(imported.tree)

    @jax.jit
    def both(q, qd, p):
        W, f = dyn.euler_lagrange_terms(0.0, q, qd, p)
        Wr, fr = _lagrangian_terms(imported, q, qd, p)
        T, V = dyn.energy(q, qd, p)
        Lr = imported.system.lagrangian(0.0, q, qd, p)
        qdd = _qdd(imported, W, f, q, qd, p)
        qdd_r = _qdd(imported, Wr, fr, q, qd, p)
        return (W, f, T - V, qdd), (Wr, fr, Lr, qdd_r)

    rng = np.random.default_rng(seed)
    errs = np.zeros(4)
    for _ in range(n_states):
        qpos, qvel, ctrl = _random_state(m, imported, rng)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        p = dict(imported.params if params is None else params(imported.params))
        p["ctrl"] = jnp.asarray(ctrl)
        ours, ref = both(q, qd, p)
        errs = np.maximum(errs, [_rel(a, b) for a, b in zip(ours, ref, strict=True)])
    return imported, errs


@pytest.mark.parametrize(
    "name",
    list(MODELS) + [pytest.param(n, marks=pytest.mark.slow) for n in SLOW_MODELS],
)
def test_terms_equal_the_lagrangian_path(name):
    """W, f0, the Lagrangian T - V and the unconstrained accelerations (quaternion norm
    rows only) of the tree path equal autodiff of the imported Lagrangian."""
    m = MODELS[name]() if name in MODELS else _gym_model(name)
    _, errs = _compare_with_lagrangian(m)
    print(f"{name}: W {errs[0]:.1e}, f0 {errs[1]:.1e}, L {errs[2]:.1e}, qdd {errs[3]:.1e}")
    assert np.all(errs <= 1e-12), errs


@pytest.mark.parametrize("name", ["ball_chain", "two_hinges"])
def test_split_terms_equal_the_terms_and_trace_the_kinematics_once(name):
    """`euler_lagrange_split` (what the velocity projection uses: W, then the bias terms
    at the projected velocity) gives the mass matrix of `euler_lagrange_terms` and the
    `euler_lagrange_rhs` at any velocity, under `jit`, `vmap` and `grad`, and its program
    traces the tree's kinematics (a `scan` over depth levels) once where the two calls
    trace it twice."""
    _, dyn, q, qd, p, rng = _random_case(MODELS[name](), seed=3)
    v = qd + jnp.asarray(rng.normal(size=qd.shape))

    def split(q, v):
        W, rhs = dyn.euler_lagrange_split(0.0, q, qd, p)
        return W, rhs(v)

    def separate(q, v):
        return dyn.euler_lagrange_terms(0.0, q, qd, p, bias=False)[0], dyn.euler_lagrange_rhs(
            0.0, q, v, p
        )

    for a, b in zip(jax.jit(split)(q, v), jax.jit(separate)(q, v), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13 * float(jnp.max(jnp.abs(b))))
    vs = jnp.stack([v, 2 * v, -v])
    batched = jax.jit(jax.vmap(split, (None, 0)))(q, vs)[1]
    reference = jax.jit(jax.vmap(separate, (None, 0)))(q, vs)[1]
    np.testing.assert_allclose(batched, reference, rtol=1e-12, atol=1e-12)
    loss = lambda f: lambda q: jnp.sum(f(q, v)[0] ** 2) + jnp.sum(f(q, v)[1] ** 2)  # noqa: E731
    g, g_ref = jax.jit(jax.grad(loss(split)))(q), jax.jit(jax.grad(loss(separate)))(q)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-10 * float(jnp.max(jnp.abs(g_ref))))

    def scans(f):
        jaxpr = jax.make_jaxpr(f)(q, v).jaxpr
        return sum(e.primitive.name == "scan" for e in jaxpr.eqns) + sum(
            e.primitive.name == "scan"
            for e2 in jaxpr.eqns
            for sub in jax.extend.core.jaxprs_in_params(e2.params)
            for e in sub.eqns
        )

    assert scans(split) == 1 and scans(separate) == 2


def test_anisotropic_ball_armature_keeps_its_gyroscopic_term():
    """An armature that differs between a ball joint's three dofs (possible through the
    parameters only) is $\\tfrac12 v^\\top A v$ in the Lagrangian, whose Euler–Lagrange
    terms hold $\\Omega\\times A\\Omega$; the tree path keeps it."""

    def params(p):
        return dict(p, dof_armature=p["dof_armature"] + jnp.arange(p["dof_armature"].size))

    _, errs = _compare_with_lagrangian(_own_model(STACKED_XML), params=params)
    assert np.all(errs <= 1e-12), errs


def test_accelerations_equal_the_engines():
    """End to end: the tree terms' accelerations equal `cx.accelerations` of the imported
    system (its only constraint rows are the quaternions' norms)."""
    m = _own_model(BALL_XML)
    imported = cx.rigid.from_mjcf(m)
    dyn = TreeDynamics(imported.tree)

    reference = _lagrangian_system(imported.system)

    @jax.jit
    def both(q, qd, p):
        W, f = dyn.euler_lagrange_terms(0.0, q, qd, p)
        ref = cx.accelerations(reference, 0.0, q, qd, p, constraint_solver=cx.KKT())
        return _qdd(imported, W, f, q, qd, p), ref.qdd

    rng = np.random.default_rng(7)
    for _ in range(3):
        qpos, qvel, ctrl = _random_state(m, imported, rng)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        ours, ref = both(q, qd, dict(imported.params, ctrl=jnp.asarray(ctrl)))
        assert _rel(ours, ref) <= 1e-12


def test_frames_and_inverse_dynamics():
    """Level-by-level frames equal `KinematicTree.frames` (also under vmap); the
    Newton–Euler inverse dynamics equals the composite-rigid-body mass matrix times the
    acceleration plus the bias (two different recursions)."""
    m = _own_model(STACKED_XML)
    imported = cx.rigid.from_mjcf(m)
    dyn = TreeDynamics(imported.tree)
    p = imported.params
    rng = np.random.default_rng(3)
    states = [_random_state(m, imported, rng) for _ in range(4)]
    qs = jnp.stack([imported.from_mujoco_state(s[0], s[1])[0] for s in states])
    xpos, xmat = jax.jit(jax.vmap(lambda q: dyn.frames(q)))(qs)
    ref_pos, ref_mat = jax.jit(jax.vmap(imported.tree.frames))(qs)
    np.testing.assert_allclose(xpos, ref_pos, atol=1e-14)
    np.testing.assert_allclose(xmat, ref_mat, atol=1e-14)
    v, a = jnp.asarray(rng.normal(size=m.nv)), jnp.asarray(rng.normal(size=m.nv))

    @jax.jit
    def both(q):
        tau = dyn.inverse_dynamics(q, v, a, p)
        return tau, dyn.mass_matrix(q, p) @ a + dyn.bias(q, v, p)

    tau, ref = both(qs[0])
    assert _rel(tau, ref) <= 1e-13


GYM_MODELS = [
    "inverted_pendulum",
    "inverted_double_pendulum",
    "reacher",
    "point",
    "pusher",
    "pusher_v5",
    "hopper",
    "half_cheetah",
    "walker2d",
    "walker2d_v5",
    "swimmer",
    "ant",
    "humanoidstandup",
]


def _compare_with_mujoco(m, n_states=5, seed=0):
    """Max relative errors of M (mj_fullM), the bias (qfrc_bias) and qacc (mj_forward)."""
    imported = cx.rigid.from_mjcf(m)
    dyn = TreeDynamics(imported.tree)

    @jax.jit
    def ours(q, qd, v, p):
        W, f = dyn.euler_lagrange_terms(0.0, q, qd, p)
        qdd = _qdd(imported, W, f, q, qd, p)
        return dyn.mass_matrix(q, p), dyn.bias(q, v, p), imported.mujoco_acceleration(q, qd, qdd)

    data = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    errs = np.zeros(3)
    for _ in range(n_states):
        qpos, qvel, ctrl = _random_state(m, imported, rng)
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(m, data)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        p = dict(imported.params, ctrl=jnp.asarray(ctrl))
        out = ours(q, qd, jnp.asarray(qvel), p)
        refs = (_full_mass_matrix(m, data), data.qfrc_bias, data.qacc)
        errs = np.maximum(errs, [_rel(a, b) for a, b in zip(out, refs, strict=True)])
    return errs


def _gym_model_without_fluid(name):
    m = _gym_model(name)
    m.opt.density, m.opt.viscosity = 0.0, 0.0  # the swimmer's fluid forces are not imported
    return m


@pytest.mark.parametrize(
    "name",
    ["humanoid", "ball_chain"] + [pytest.param(n, marks=pytest.mark.slow) for n in GYM_MODELS],
)
def test_mass_matrix_bias_and_qacc_match_mujoco(name):
    m = _own_model(BALL_XML) if name == "ball_chain" else _gym_model_without_fluid(name)
    errs = _compare_with_mujoco(m)
    print(f"{name}: M {errs[0]:.1e}, qfrc_bias {errs[1]:.1e}, qacc {errs[2]:.1e}")
    assert np.all(errs <= 1e-10), errs


def _gradient_case():
    imported, dyn, q, qd, p, rng = _random_case(_own_model(BALL_XML), seed=11)
    w = jnp.asarray(rng.normal(size=q.shape))

    def tree(q):
        return w @ _qdd(imported, *dyn.euler_lagrange_terms(0.0, q, qd, p), q, qd, p)

    def lagrangian(q):
        return w @ _qdd(imported, *_lagrangian_terms(imported, q, qd, p), q, qd, p)

    return dyn, tree, lagrangian, q, qd, p, w


@pytest.mark.slow
def test_gradient_equals_the_lagrangian_paths():
    """jax.grad of a scalar of the accelerations in q: tree path = Lagrangian path."""
    _, tree, lagrangian, q, _, _, _ = _gradient_case()
    grad_tree = jax.jit(jax.grad(tree))(q)
    grad_ref = jax.jit(jax.grad(lagrangian))(q)
    assert _rel(grad_tree, grad_ref) <= 1e-10


def test_gradient_equals_central_differences_and_vmap_a_loop():
    """jax.grad of a scalar of the tree path's accelerations in q equals central
    differences; the terms under vmap equal a loop."""
    dyn, tree, _, q, qd, p, w = _gradient_case()
    grad_tree = jax.jit(jax.grad(tree))(q)
    f = jax.jit(tree)
    h = 1e-6
    eye = np.eye(q.size)
    fd = np.array([(f(q + h * e) - f(q - h * e)) / (2 * h) for e in eye])
    np.testing.assert_allclose(grad_tree, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(fd)))

    qs = jnp.stack([q, q + 0.01 * w, q - 0.02 * w])
    batched = jax.jit(jax.vmap(lambda q: dyn.euler_lagrange_terms(0.0, q, qd, p)))(qs)
    for k in range(3):
        one = dyn.euler_lagrange_terms(0.0, qs[k], qd, p)
        np.testing.assert_allclose(batched[0][k], one[0], rtol=0, atol=1e-13)
        np.testing.assert_allclose(batched[1][k], one[1], rtol=0, atol=1e-12)


def test_a_free_joint_after_another_joint_is_refused():
    with pytest.raises(ValueError, match="body 1: a free joint must be the first joint"):
        _Layout(
            parent=(0, 0),
            body_joints=((), ((3, 0, 0), (0, 1, 1))),
            joints=((3, 0, 0), (0, 1, 1)),
            nq=8,
            nv=7,
        )


def test_wrong_shapes_are_refused_naming_the_argument():
    dyn = TreeDynamics(cx.rigid.from_mjcf(_own_model(BALL_XML)).tree)
    nq, nv = dyn.layout.nq, dyn.layout.nv
    p = None
    with pytest.raises(
        ValueError, match=rf"`q` must have shape \(nq,\) = \({nq},\), got \({nv},\)"
    ):
        dyn.mass_matrix(jnp.zeros(nv), p)
    with pytest.raises(ValueError, match=rf"`qd` must have shape \(nq,\) = \({nq},\)"):
        dyn.euler_lagrange_terms(0.0, jnp.zeros(nq), jnp.zeros(nv), p)
    with pytest.raises(ValueError, match=rf"`v` must have shape \(nv,\) = \({nv},\)"):
        dyn.bias(jnp.zeros(nq), jnp.zeros(nq), p)


# ----------------------------------------------------------------------------------------
# The engine's hook: `from_mjcf` systems carry `dynamics=TreeDynamics(tree)`.


def _rolling_wheel():
    """WHEEL_XML with the tyre rolling without slip on the plane z = 0 (nonholonomic rows,
    whose vakonomic reactions have a curl term)."""
    imported = cx.rigid.from_mjcf(_own_model(WHEEL_XML))
    body, shape = imported.wheel("tyre")
    return imported.with_constraints(cx.rigid.rolling_contact(body, shape))


def test_from_mjcf_systems_carry_the_tree_dynamics_through_rebuilds():
    imported = _rolling_wheel()
    assert isinstance(imported.system.dynamics, TreeDynamics)  # with_constraints kept it
    assert len(imported.system.constraints) > 1
    driven = cx.closed_loop(imported.system, lambda p: p["ctrl"])
    assert driven.dynamics is imported.system.dynamics
    with pytest.raises(TypeError, match="`dynamics` must be an AbstractDynamics"):
        cx.System(imported.system.lagrangian, dynamics=lambda t, q, qd, p: q)


ENGINE_MODELS = {
    "ball_chain": lambda: cx.rigid.from_mjcf(_own_model(BALL_XML)),
    "rolling_wheel": _rolling_wheel,
    "humanoid": lambda: cx.rigid.from_mjcf(_gym_model("humanoid")),
}


@pytest.mark.parametrize("prescription", ["dalembert", "vakonomic"])
@pytest.mark.parametrize(
    "name", ["ball_chain", "rolling_wheel", pytest.param("humanoid", marks=pytest.mark.slow)]
)
def test_engine_accelerations_equal_the_lagrangian_systems(name, prescription):
    r"""`cx.accelerations` of a `from_mjcf` system (tree dynamics) equals that of the same
    system without `dynamics` (autodiff of its Lagrangian): accelerations, multipliers and
    reactions, under d'Alembert and vakonomic (whose $-\mu\cdot c$ part is added by
    autodiff), with Baumgarte stabilisation (the bias at the state's velocity) and with
    `Projection` (the bias at a projected velocity). Errors are relative to the field's
    largest entry, or to the accelerations' where the field is at rounding level (the
    quaternion norm rows carry no reaction)."""
    imported = ENGINE_MODELS[name]()
    system, reference = imported.system, _lagrangian_system(imported.system)
    vakonomic = prescription == "vakonomic"
    rng = np.random.default_rng(3)
    qpos = np.array(imported.tree.qpos0) + 0.3 * rng.normal(size=imported.tree.nq)
    q, qd = imported.from_mujoco_state(qpos, rng.normal(size=imported.tree.nv))
    kw = dict(prescription=cx.Vakonomic() if vakonomic else cx.DAlembert())

    @jax.jit
    def both(q, qd, p, mu, stabilisation):
        extra = dict(kw, mu=mu) if vakonomic else kw
        a = cx.accelerations(system, 0.0, q, qd, p, stabilisation=stabilisation, **extra)
        b = cx.accelerations(reference, 0.0, q, qd, p, stabilisation=stabilisation, **extra)
        return a, b

    p = dict(imported.params, ctrl=jnp.asarray(rng.uniform(-1, 1, imported.params["ctrl"].size)))
    m = cx.accelerations(reference, 0.0, q, qd, p).multipliers.size
    mu = jnp.asarray(rng.normal(size=m)) if vakonomic else None
    for stabilisation in (cx.Baumgarte(alpha=2.0, beta=3.0), cx.Projection(alpha=2.0)):
        a, b = both(q, qd + 0.01, p, mu, stabilisation)
        for field in ("qdd", "multipliers", "reactions"):
            ours, ref = np.asarray(getattr(a, field)), np.asarray(getattr(b, field))
            scale = max(np.max(np.abs(ref), initial=0.0), np.max(np.abs(b.qdd)))
            err = np.max(np.abs(ours - ref), initial=0.0) / scale
            assert err <= 1e-12, (field, stabilisation, err)


def test_gradient_of_a_rollout_equals_the_lagrangian_systems():
    """`jax.grad` of a short `cx.simulate` of a free and ball-jointed model in its initial
    velocity: the tree dynamics' equals the Lagrangian's."""
    imported = cx.rigid.from_mjcf(_own_model(BALL_XML))
    p = imported.params
    q0, qd0 = imported.from_mujoco_state(imported.tree.qpos0, 0.3 * jnp.ones(imported.tree.nv))

    def final(system, qd0):
        sol = cx.simulate(system, q0, qd0, p, t1=0.05, dt0=0.01, solver=diffrax.Heun())
        return jnp.sum(jnp.sin(sol.q[-1])) + jnp.sum(sol.qd[-1] ** 2)

    g_tree = jax.jit(jax.grad(lambda v: final(imported.system, v)))(qd0)
    g_ref = jax.jit(jax.grad(lambda v: final(_lagrangian_system(imported.system), v)))(qd0)
    assert _rel(g_tree, g_ref) <= 1e-10
