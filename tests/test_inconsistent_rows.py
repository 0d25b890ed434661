r"""Inconsistent acceleration-level rows at a singular configuration are reported.

At the snake cart's singular steering angle $\phi = \pi/2$ the two wheel rows coincide.
A velocity with $A\dot q = 0$ there generally violates the rows' time derivatives: the
acceleration rows $A\ddot q = b$ contradict each other, and no smooth motion reaches such
a state (it needs an impulsive velocity jump). The rank-robust solvers return least
squares; the residual must say so, and `simulate` must refuse.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

MODEL = cx.models.snake_cart(tau_amp=0.0)
Q = jnp.array([0.0, 0.0, 0.0, jnp.pi / 2])
QD = jnp.array([0.0, 0.6, 1.5, 0.5])  # A qd = 0 at phi = pi/2, rows' derivatives differ


def _rows_and_bias(q, qd):
    # Independent of the solver: the wheel rows and their time derivatives by jax.jacfwd.
    omega = MODEL.system.constraints[0].omega
    A = omega(0.0, q, MODEL.params)
    dA = jnp.einsum("kij,j->ki", jax.jacfwd(lambda q: omega(0.0, q, MODEL.params))(q), qd)
    return A, dA @ qd


def test_the_state_satisfies_the_velocity_rows_but_not_their_derivatives():
    A, bias = _rows_and_bias(Q, QD)
    assert np.allclose(A @ QD, 0.0, atol=1e-15)
    assert np.linalg.matrix_rank(np.asarray(A)) == 1
    # Both rows are the same one-form, but their time derivatives differ: no qdd fits both.
    assert abs(float(bias[0] - bias[1])) > 0.1


@pytest.mark.parametrize("solver", [cx.AutoSolver(), cx.UdwadiaKalaba()], ids=["auto", "uk"])
def test_accelerations_report_the_residual_of_inconsistent_rows(solver):
    out = cx.accelerations(MODEL.system, 0.0, Q, QD, MODEL.params, constraint_solver=solver)
    A, bias = _rows_and_bias(Q, QD)
    assert int(out.rank) == 1
    # The residual is A qdd - b with b = -bias, recomputed here from the independent rows.
    np.testing.assert_allclose(out.acceleration_residual, A @ out.qdd + bias, atol=1e-12)
    # Least squares splits the contradiction evenly between the two identical rows.
    np.testing.assert_allclose(
        out.acceleration_residual, 0.5 * (bias[0] - bias[1]) * jnp.array([1.0, -1.0]), atol=1e-12
    )


def test_accelerations_residual_vanishes_for_a_consistent_state():
    out = cx.accelerations(MODEL.system, 0.0, MODEL.q0, MODEL.qd0, MODEL.params)
    assert float(jnp.max(jnp.abs(out.acceleration_residual))) < 1e-12


def test_simulate_refuses_inconsistent_rows_and_the_check_can_be_turned_off():
    with pytest.raises(eqx.EquinoxRuntimeError, match="inconsistent"):
        cx.simulate(MODEL.system, Q, QD, MODEL.params, t1=0.1)
    traj = cx.simulate(MODEL.system, Q, QD, MODEL.params, t1=0.1, consistency_rtol=None)
    assert bool(jnp.all(jnp.isfinite(traj.q)))
    with pytest.raises(ValueError, match="consistency_rtol"):
        cx.simulate(MODEL.system, Q, QD, MODEL.params, t1=0.1, consistency_rtol="loose")


def test_simulate_refuses_inconsistent_rows_under_jit_vmap_and_grad():
    # AutoSolver checks where it takes its rank-robust path: alone, in a batch whose other
    # element is regular (the path is then taken for the whole batch), and in the gradient.
    S, p = MODEL.system, MODEL.params
    final = lambda q, qd: cx.simulate(S, q, qd, p, t1=0.05).q[-1]
    qs, qds = jnp.stack([MODEL.q0, Q]), jnp.stack([MODEL.qd0, QD])
    runs = (
        lambda: jax.jit(final)(Q, QD),
        lambda: jax.jit(jax.vmap(final))(qs, qds),
        lambda: jax.jit(jax.grad(lambda qd: jnp.sum(final(Q, qd))))(QD),
    )
    for run in runs:  # inside a user's `jit` the error arrives as a JaxRuntimeError
        with pytest.raises(Exception, match="constraint rows are inconsistent"):
            jax.block_until_ready(run())


# ---- the plastic impulsive jump (cx.impulsive_jump) -------------------------------------
#
# Hand derivation at theta = 0, phi = pi/2 with qd = (0, w, thd, phd): the rows coincide as
# (-1, 0, 0, 0); their derivatives along a direction d are (0, -(d_th + d_ph), -l/2 d_ph, 0)
# and (0, -(d_th - d_ph), -l/2 d_ph, 0), whose difference (0, -2 d_ph, 0, 0) is the limiting
# row of a motion that keeps steering (d_ph != 0). W is diagonal, so the plastic jump
# zeroes the lateral velocity: qd+ = (0, 0, thd, phd), removes (m_b + 2 m_w) w^2 / 2 and the
# impulse is (0, -(m_b + 2 m_w) w, 0, 0).


def _mass(p):
    return float(p["m_b"] + 2 * p["m_w"])


def test_impulsive_jump_at_the_singular_steering_angle_removes_the_lateral_velocity():
    jump = cx.impulsive_jump(MODEL.system, 0.0, Q, QD, MODEL.params)
    w, M = float(QD[1]), _mass(MODEL.params)
    np.testing.assert_allclose(jump.qd, [0.0, 0.0, QD[2], QD[3]], atol=1e-14)
    np.testing.assert_allclose(jump.energy_removed, 0.5 * M * w**2, rtol=1e-13)
    np.testing.assert_allclose(jump.impulse, [0.0, -M * w, 0.0, 0.0], atol=1e-13)
    assert bool(jump.converged) and int(jump.rank) == 2
    # The kinetic energy drops by what the jump reports (cx.energy, independently).
    drop = cx.energy(MODEL.system, 0.0, Q, QD, MODEL.params) - cx.energy(
        MODEL.system, 0.0, Q, jump.qd, MODEL.params
    )
    np.testing.assert_allclose(drop, jump.energy_removed, rtol=1e-13)
    # After the jump a motion can leave: consistent rows, and simulate runs.
    out = cx.accelerations(MODEL.system, 0.0, Q, jump.qd, MODEL.params)
    assert float(jnp.max(jnp.abs(out.acceleration_residual))) < 1e-12
    traj = cx.simulate(MODEL.system, Q, jump.qd, MODEL.params, t1=0.5)
    assert bool(jnp.all(jnp.isfinite(traj.q)))


def test_impulsive_jump_leaves_a_state_a_motion_reaches_unchanged():
    for q, qd in [(MODEL.q0, MODEL.qd0), (Q, QD.at[1].set(0.0))]:
        jump = cx.impulsive_jump(MODEL.system, 0.0, q, qd, MODEL.params)
        np.testing.assert_allclose(jump.qd, qd, atol=1e-14)
        assert float(jump.energy_removed) < 1e-28


def test_impulsive_jump_under_jit_vmap_and_grad_matches_the_closed_form():
    S, p = MODEL.system, MODEL.params
    removed = lambda qd, p: cx.impulsive_jump(S, 0.0, Q, qd, p).energy_removed
    ws = jnp.array([-0.8, 0.3, 0.6, 1.1])
    qds = jnp.stack([QD.at[1].set(w) for w in ws])
    M = _mass(p)
    np.testing.assert_allclose(jax.jit(jax.vmap(removed, (0, None)))(qds, p), 0.5 * M * ws**2)
    # d/dqd = M w e_y and d/dm_b = w^2 / 2 (closed form), under jit(grad) and jit(vmap(grad)).
    g = jax.jit(jax.grad(removed, argnums=(0, 1)))(QD, p)
    np.testing.assert_allclose(g[0], [0.0, M * QD[1], 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(g[1]["m_b"], 0.5 * QD[1] ** 2, rtol=1e-10)
    gv = jax.jit(jax.vmap(jax.grad(removed), (0, None)))(qds, p)
    np.testing.assert_allclose(gv[:, 1], M * ws, rtol=1e-12)
    # And against central differences in the steering rate (the jump does not depend on it).
    h = 1e-6
    fd = (removed(QD.at[3].add(h), p) - removed(QD.at[3].add(-h), p)) / (2 * h)
    np.testing.assert_allclose(g[0][3], fd, atol=1e-8)


def test_impulsive_jump_refuses_rows_it_cannot_treat():
    sleigh = cx.models.chaplygin_sleigh()
    nonlinear = cx.System(
        sleigh.system.lagrangian, [cx.VelocityConstraint(lambda t, q, qd, p: qd[0] ** 2 - qd[1])]
    )
    with pytest.raises(TypeError, match="not linear in the velocities"):
        cx.impulsive_jump(nonlinear, 0.0, sleigh.q0, sleigh.qd0, sleigh.params)
    with pytest.raises(ValueError, match="max_iterations"):
        cx.impulsive_jump(MODEL.system, 0.0, Q, QD, MODEL.params, max_iterations=0)
