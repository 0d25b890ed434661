"""Smoke test of `benchmarks/run.py`: the hand-written JAX references are the same physics.

The benchmark compares constrax with vector fields written out by hand (explicit mass
matrix, constraint matrix, $\\dot A\\dot q$, the seed-002 curl formula for the vakonomic
particle). A few integration steps of each pair must agree to 1e-10, otherwise the
timings would compare different problems.
"""

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
from constrax._system import stacked_residual

_RUN = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("constrax_benchmarks_run", _RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "case", ["snake", pytest.param("particle_vakonomic", marks=pytest.mark.slow)]
)
def test_hand_written_reference_matches_constrax(bench, case):
    ours, hand = bench.smoke(case, t1=0.05)  # 5 fixed Tsit5 steps
    assert len(ours) == len(hand)
    for a, b in zip(ours, hand, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-10)
    # The state moved: the comparison is not between two copies of the initial state.
    q0 = bench.snake_initial_state()[0] if case == "snake" else bench.particle_initial_state()[0]
    assert float(jnp.max(jnp.abs(ours[0] - q0))) > 1e-3


@pytest.mark.parametrize("case", ["rolling_disk", "turntable"])
def test_rigid_hand_written_accelerations_match_constrax(bench, case):
    """One evaluation of each hand-written rigid vector field equals `cx.accelerations`
    (KKT), on the constraint manifold and off it (|Q| != 1, inconsistent velocities)."""
    model, vf = bench.rigid_model(case)
    q, qd, p = model.q0, model.qd0, model.params

    @jax.jit
    def both(q, qd):
        ours = cx.accelerations(model.system, 0.3, q, qd, p, constraint_solver=cx.KKT()).qdd
        return ours, vf(0.3, (q, qd), p)[1]

    for qq, qqd in ((q, qd), (1.01 * q + 0.003, qd + 0.05)):
        ours, hand = both(qq, qqd)
        assert float(jnp.max(jnp.abs(hand))) > 1.0
        np.testing.assert_allclose(np.asarray(ours), np.asarray(hand), rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "case", [pytest.param("rolling_disk", marks=pytest.mark.slow), "turntable"]
)
def test_rigid_hand_written_reference_matches_constrax(bench, case):
    """The hand-written quaternion vector fields (explicit mass matrix, A(q), bias) of the
    tilted rolling disk and the ball on a turntable are constrax's equations of motion."""
    ours, hand = bench.smoke(case, t1=0.03)  # 3 fixed Tsit5 steps
    assert len(ours) == len(hand) == 2
    for a, b in zip(ours, hand, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-10)
    q0 = bench.rigid_args(case)[0]
    assert float(jnp.max(jnp.abs(ours[0] - q0))) > 1e-3


def test_snake_initial_state_satisfies_wheel_constraints(bench):
    system = bench.snake_system()
    q0, qd0 = bench.snake_initial_state()
    c = stacked_residual(system, bench.snake_params())(jnp.zeros(()), q0, qd0)
    np.testing.assert_allclose(np.asarray(c), 0.0, atol=1e-14)
    q, qd = bench.snake_batch(7)
    residual = stacked_residual(system, bench.snake_params())
    cs = jax.jit(jax.vmap(lambda q, qd: residual(jnp.zeros(()), q, qd)))(q, qd)
    np.testing.assert_allclose(np.asarray(cs), 0.0, atol=1e-14)


def test_smoke_rejects_unknown_case(bench):
    with pytest.raises(ValueError, match="unknown smoke case 'pendulum'"):
        bench.smoke("pendulum")
