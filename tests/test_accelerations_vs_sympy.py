r"""`cx.accelerations` against independent `sympy.physics.mechanics` derivations.

For five systems — the snake cart of Briggs 2016, §1.2 (Pfaffian rows (1.2.1) and a steering
torque), a vertical rolling disk, the Chaplygin sleigh, a Cartesian double pendulum
(holonomic) and a bead on a spinning hoop (rheonomic holonomic) — the constrax system is
written here with plain user functions (the snake cart's Lagrangian and wheel constraint are
those of `cx.models.snake_cart`), and the accelerations and reaction forces at 20
random *admissible* states are compared with `tests/sympy_oracles.py` (built from bodies,
points and `LagrangesMethod`). Admissible states: positions sampled on the constraint
manifold through a parametrisation, velocities from a null-space basis of the constraint
rows (numpy SVD) or by differentiating the parametrisation.

One `jax.jit(jax.vmap(...))` per system evaluates the KKT, Udwadia–Kalaba and Auto
solvers at once; the results are cached for the tests of this module.
"""

import functools
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
import sympy_oracles

N_STATES = 20
RTOL = 1e-9  # norm-wise relative error per state

# ----------------------------------------------------------------------------------------
# The systems, written as a constrax user would.


# The snake cart: the model zoo's Lagrangian and wheel rows (Briggs 2016, eq. (1.2.1)), with a
# constant steering torque of its own.
_ZOO_SNAKE = cx.models.snake_cart().system
snake_L = _ZOO_SNAKE.lagrangian
wheels = _ZOO_SNAKE.constraints[0].omega


def steering(t, q, qd, p):
    z = jnp.zeros_like(q[0])
    return jnp.stack([z, z, z, p["tau"] * jnp.ones_like(z)])


def disk_L(t, q, qd, p):
    xd, yd, thd, phd = qd
    m, R = p["m"], p["R"]
    return 0.5 * m * (xd**2 + yd**2) + 0.5 * (m * R**2 / 4) * thd**2 + 0.5 * (m * R**2 / 2) * phd**2


def rolling(t, q, p):
    th = q[2]
    z = jnp.zeros_like(th)
    one = jnp.ones_like(th)
    R = p["R"]
    return jnp.stack(
        [jnp.stack([one, z, z, -R * jnp.cos(th)]), jnp.stack([z, one, z, -R * jnp.sin(th)])]
    )


def push(t, q, qd, p):
    z = jnp.zeros_like(q[0])
    return jnp.stack([p["Fx"] * jnp.ones_like(z), z, z, z])


# The Chaplygin sleigh of the model zoo (contact point (x, y), heading th, centre of mass
# a ahead); the sympy oracle derives it independently.
sleigh_L = cx.models.chaplygin_sleigh().system.lagrangian
knife_edge = cx.models.chaplygin_sleigh().system.constraints[0].omega


def pendulum2_L(t, q, qd, p):
    x1, y1, x2, y2 = q
    T = 0.5 * p["m1"] * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * p["m2"] * (qd[2] ** 2 + qd[3] ** 2)
    return T - p["g"] * (p["m1"] * y1 + p["m2"] * y2)


def rods(t, q, p):
    x1, y1, x2, y2 = q
    return jnp.stack([x1**2 + y1**2 - p["l1"] ** 2, (x2 - x1) ** 2 + (y2 - y1) ** 2 - p["l2"] ** 2])


def bead_L(t, q, qd, p):
    return 0.5 * p["m"] * qd @ qd - p["m"] * p["g"] * q[2]


def hoop(t, q, p):
    x, y, z = q
    c, s = jnp.cos(p["w"] * t), jnp.sin(p["w"] * t)
    return jnp.stack([x**2 + y**2 + z**2 - p["R"] ** 2, -s * x + c * y])


SYSTEMS = {
    "snake_cart": cx.System(snake_L, _ZOO_SNAKE.constraints, force=steering),
    "rolling_disk": cx.System(disk_L, [cx.Pfaffian(rolling)], force=push),
    "chaplygin_sleigh": cx.System(sleigh_L, [cx.Pfaffian(knife_edge)]),
    "double_pendulum": cx.System(pendulum2_L, [cx.Holonomic(rods)]),
    "rotating_hoop": cx.System(bead_L, [cx.Holonomic(hoop)]),
}

PARAMS = {
    "snake_cart": dict(m_b=1.3, m_w=0.2, J_b=0.11, J_w=0.05, l=0.9, tau=0.7),
    "rolling_disk": dict(m=1.7, R=0.35, Fx=0.8),
    "chaplygin_sleigh": dict(m=2.1, I=0.4, a=0.3),
    "double_pendulum": dict(m1=1.2, m2=0.7, l1=1.1, l2=0.8, g=9.81),
    "rotating_hoop": dict(m=0.4, R=0.6, w=3.1, g=9.81),
}

# `tests/sympy_oracles.py` names its parameters on its own; map the keys that differ.
ORACLE_KEYS = {"snake_cart": dict(m_b="mb", m_w="mw", J_b="Jb", J_w="Jw")}


def oracle_params(name):
    keys = ORACLE_KEYS.get(name, {})
    return {keys.get(k, k): v for k, v in PARAMS[name].items()}


SCLERONOMIC = ["snake_cart", "rolling_disk", "chaplygin_sleigh", "double_pendulum"]

# ----------------------------------------------------------------------------------------
# Admissible random states (independent of constrax: parametrisations and numpy SVD).


def _null_space_velocities(rows, q, p, rng):
    A = np.atleast_2d(np.asarray(rows(0.0, jnp.asarray(q), p)))
    _, s, vt = np.linalg.svd(A)
    basis = vt[len(s) :].T  # full-rank rows here
    return basis @ rng.normal(size=basis.shape[1]) * 2.0


def sample_states(name, rng):
    p = PARAMS[name]
    ts, qs, qds = [], [], []
    for _ in range(N_STATES):
        t = 0.0
        if name == "snake_cart":
            q = np.concatenate([rng.normal(size=3), rng.uniform(-np.pi, np.pi, size=1)])
            qd = _null_space_velocities(wheels, q, p, rng)
        elif name == "rolling_disk":
            q = rng.normal(size=4)
            thd, phd = rng.normal(size=2) * 2.0
            R = p["R"]
            qd = np.array([R * np.cos(q[2]) * phd, R * np.sin(q[2]) * phd, thd, phd])
        elif name == "chaplygin_sleigh":
            q = rng.normal(size=3)
            qd = _null_space_velocities(knife_edge, q, p, rng)
        elif name == "double_pendulum":
            a1, a2, w1, w2 = rng.uniform(-np.pi, np.pi, size=4)
            l1, l2 = p["l1"], p["l2"]
            x1, y1 = l1 * np.sin(a1), -l1 * np.cos(a1)
            q = np.array([x1, y1, x1 + l2 * np.sin(a2), y1 - l2 * np.cos(a2)])
            v1 = np.array([l1 * np.cos(a1) * w1, l1 * np.sin(a1) * w1])
            v2 = v1 + np.array([l2 * np.cos(a2) * w2, l2 * np.sin(a2) * w2])
            qd = np.concatenate([v1, v2])
        elif name == "rotating_hoop":
            t = rng.uniform(0.0, 5.0)
            al, ald = rng.uniform(-np.pi, np.pi), rng.normal() * 2.0
            R, w = p["R"], p["w"]
            c, s = np.cos(w * t), np.sin(w * t)
            q = R * np.array([np.sin(al) * c, np.sin(al) * s, np.cos(al)])
            qd = R * np.array(
                [
                    np.cos(al) * ald * c - np.sin(al) * w * s,
                    np.cos(al) * ald * s + np.sin(al) * w * c,
                    -np.sin(al) * ald,
                ]
            )
        else:
            raise KeyError(name)
        ts.append(t)
        qs.append(q)
        qds.append(qd)
    return np.array(ts), np.array(qs), np.array(qds)


# ----------------------------------------------------------------------------------------
# One compilation per system: all three solvers in one vmapped function.


def _evaluate(system, ts, qs, qds, p):
    def one(t, q, qd):
        out = {}
        for label, solver in [
            ("kkt", cx.KKT()),
            ("uk", cx.UdwadiaKalaba()),
            ("auto", cx.AutoSolver()),
        ]:
            acc = cx.accelerations(system, t, q, qd, p, constraint_solver=solver)
            out[label] = (acc.qdd, acc.reactions, acc.reaction_power, acc.rank)
        res = cx.constraint_residual(system, t, q, qd, p)
        out["residual"] = (res.position, res.velocity)
        return out

    return jax.jit(jax.vmap(one))(ts, qs, qds)


@functools.cache
def results(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    ts, qs, qds = sample_states(name, rng)
    p = {k: jnp.asarray(v) for k, v in PARAMS[name].items()}
    out = jax.tree_util.tree_map(np.asarray, _evaluate(SYSTEMS[name], ts, qs, qds, p))
    oracle = sympy_oracles.ALL[name]()
    op = oracle_params(name)
    ref = [oracle(t, q, qd, op) for t, q, qd in zip(ts, qs, qds, strict=True)]
    ref_qdd = np.array([r[0] for r in ref])
    ref_R = np.array([r[1] for r in ref])
    return dict(ts=ts, qs=qs, qds=qds, out=out, qdd=ref_qdd, R=ref_R)


def _relerr(a, b):
    scale = np.maximum(np.max(np.abs(b), axis=-1), 1e-300)
    return np.max(np.abs(a - b), axis=-1) / scale


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_sampled_states_are_admissible(name):
    r = results(name)
    pos, vel = r["out"]["residual"]
    assert np.max(np.abs(pos), initial=0.0) < 1e-12
    assert np.max(np.abs(vel)) < 1e-12


@pytest.mark.parametrize("solver", ["kkt", "uk", "auto"])
@pytest.mark.parametrize("name", list(SYSTEMS))
def test_accelerations_match_sympy(name, solver):
    r = results(name)
    err = _relerr(r["out"][solver][0], r["qdd"])
    assert np.all(np.isfinite(err))
    assert np.max(err) <= RTOL, f"max relative error {np.max(err):.3g}"


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_reaction_forces_match_sympy(name):
    r = results(name)
    for solver in ["kkt", "uk"]:
        err = _relerr(r["out"][solver][1], r["R"])
        assert np.max(err) <= RTOL, f"{solver}: max relative error {np.max(err):.3g}"


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_kkt_and_udwadia_kalaba_agree(name):
    r = results(name)
    kkt, uk = r["out"]["kkt"], r["out"]["uk"]
    assert np.max(_relerr(uk[0], kkt[0])) <= RTOL
    assert np.max(_relerr(uk[1], kkt[1])) <= RTOL
    np.testing.assert_array_equal(kkt[3], uk[3])  # full rank reported by both


@pytest.mark.parametrize("name", SCLERONOMIC)
def test_dalembert_reaction_power_vanishes_scleronomic(name):
    r = results(name)
    # Round-off scale of qd . R: |qd| |R| * a few eps.
    scale = np.linalg.norm(r["qds"], axis=-1) * np.linalg.norm(r["R"], axis=-1) + 1e-300
    for solver in ["kkt", "uk", "auto"]:
        power = r["out"][solver][2]
        assert np.max(np.abs(power) / scale) < 1e-12, solver


def test_rheonomic_hoop_reaction_power_is_the_work_of_the_hoop():
    r = results("rotating_hoop")
    expected = np.einsum("ki,ki->k", r["qds"], r["R"])  # qd . R from sympy's reactions
    power = r["out"]["kkt"][2]
    assert np.max(np.abs(expected)) > 1e-2  # the moving hoop does work
    np.testing.assert_allclose(power, expected, rtol=1e-9, atol=1e-9 * np.max(np.abs(expected)))
