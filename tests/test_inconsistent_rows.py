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
