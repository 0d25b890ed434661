r"""Bad inputs that used to give a silent wrong answer or an unclear error (issue 11,
items 5 and 6): each is now refused with a message naming the argument, what was expected
and what was given, and what to do.

Trace-time mistakes raise `TypeError`/`ValueError`; values known only at run time raise
`equinox.EquinoxRuntimeError` (or `jax.errors.JaxRuntimeError` carrying our message)
under `jit`, and `ValueError` when they are concrete.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

RUNTIME = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)


def pendulum_L(t, q, qd, p):
    return 0.5 * qd @ qd - p["g"] * q[1]


def rod(t, q, p):
    return q @ q - p["l"] ** 2


PENDULUM = cx.System(pendulum_L, [cx.Holonomic(rod)])
P = {"g": jnp.asarray(9.81), "l": jnp.asarray(1.0)}
Q0 = jnp.array([0.6, -0.8])
QD0 = jnp.array([0.8, 0.6])


def free_L(t, q, qd, p):
    return 0.5 * qd @ qd


# ----------------------------------------------------------------------------------------
# Item 5: silent results that are now errors.


@jax.jit
def _pendulum_qdd(q, qd, p):
    return cx.accelerations(PENDULUM, 0.0, q, qd, p).qdd


def test_accelerations_with_a_nan_parameter_raises_eagerly_and_under_jit():
    p = dict(P, g=jnp.asarray(jnp.nan))
    with pytest.raises(ValueError, match=r"constrax.accelerations: `p` contains NaN or inf"):
        cx.accelerations(PENDULUM, 0.0, Q0, QD0, p)
    with pytest.raises(RUNTIME, match=r"constrax.accelerations: `p` contains NaN or inf"):
        jax.block_until_ready(_pendulum_qdd(Q0, QD0, p))
    assert np.all(np.isfinite(_pendulum_qdd(Q0, QD0, P)))


def test_nan_in_q_is_reported_as_nan_not_as_a_singular_mass_matrix():
    q = Q0.at[0].set(jnp.nan)
    with pytest.raises(ValueError, match=r"constrax.accelerations: `q` contains NaN or inf"):
        cx.accelerations(PENDULUM, 0.0, q, QD0, P)
    with pytest.raises(RUNTIME, match=r"constrax.accelerations: `q` contains NaN or inf"):
        jax.block_until_ready(_pendulum_qdd(q, QD0, P))
    with pytest.raises(RUNTIME, match=r"constrax.accelerations: `qd` contains NaN or inf"):
        jax.block_until_ready(_pendulum_qdd(Q0, QD0.at[1].set(jnp.inf), P))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(t1=float("nan")), r"`t1` must be a finite time, got nan"),
        (dict(t1=1.0, t0=float("-inf")), r"`t0` must be a finite time, got -inf"),
        (dict(t1=1.0, dt0=float("inf")), r"`dt0` must be a finite, non-zero initial step"),
        (dict(t1=1.0, dt0=0.0), r"`dt0` must be a finite, non-zero initial step"),
        (dict(t1=1.0, dt0=-0.1), r"`dt0`=-0.1 points away from t1"),
        (dict(t1=jnp.zeros(2)), r"`t1` must be a scalar time, got shape \(2,\)"),
    ],
    ids=["t1-nan", "t0-inf", "dt0-inf", "dt0-zero", "dt0-sign", "t1-vector"],
)
def test_bad_times_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cx.simulate(PENDULUM, Q0, QD0, P, **kwargs)


def test_traced_nan_t1_raises_under_jit():
    run = eqx.filter_jit(lambda t1: cx.simulate(PENDULUM, Q0, QD0, P, t1=t1, max_steps=64).q)
    with pytest.raises(RUNTIME, match=r"constrax.simulate: `t1` must be a finite time"):
        jax.block_until_ready(run(jnp.asarray(jnp.nan)))


CONTRADICTORY = cx.System(
    free_L,
    [
        cx.Pfaffian(
            lambda t, q, p: jnp.array([[1.0, 0.0], [1.0, 0.0]]),
            b=lambda t, q, p: jnp.array([0.0, -1.0]),
            name="belts",
        )
    ],
)


def test_contradictory_rows_with_project_initial_raise_naming_the_rows():
    # x' = 0 and x' = 1 at once: no velocity satisfies both; the least-squares
    # projection leaves the residual (0.5, -0.5).
    with pytest.raises(
        RUNTIME,
        match=r"constrax.consistent_initial_state: the initial state could not be made "
        r"consistent: constraint row belts\[[01]\] still has a residual above "
        r"tolerance=1e-08",
    ):
        jax.block_until_ready(
            cx.simulate(
                CONTRADICTORY, jnp.zeros(2), jnp.array([1.0, 1.0]), t1=0.1, project_initial=True
            ).q
        )


def test_contradictory_holonomic_rows_raise_in_consistent_initial_state():
    system = cx.System(
        free_L, [cx.Holonomic(lambda t, q, p: jnp.stack([q[0] - 1.0, q[0] - 2.0]), name="two")]
    )
    with pytest.raises(RUNTIME, match=r"could not be made consistent: constraint row two\[[01]\]"):
        jax.block_until_ready(cx.consistent_initial_state(system, 0.0, jnp.zeros(2), jnp.zeros(2)))
    q, qd = cx.consistent_initial_state(system, 0.0, jnp.zeros(2), jnp.zeros(2), throw=False)
    assert np.all(np.isfinite(q))


def test_consistent_rows_still_project():
    q, qd = cx.consistent_initial_state(PENDULUM, 0.0, Q0 * 1.1, QD0 + 0.3, P)
    np.testing.assert_allclose(q @ q, 1.0, atol=1e-12)
    np.testing.assert_allclose(q @ qd, 0.0, atol=1e-12)


# ----------------------------------------------------------------------------------------
# Item 6: unclear errors made clear.


def test_wrong_length_state_for_a_model_names_the_function_and_shape():
    m = cx.models.snake_cart()
    with pytest.raises(
        ValueError,
        match=r"the Lagrangian L\(t, q, qd, p\) failed when traced with q of shape \(3,\): "
        r"ValueError: not enough values to unpack.*Check that `q` and `qd` have the "
        r"system's number of coordinates \(got 3\)",
    ):
        cx.simulate(m.system, m.q0[:3], m.qd0[:3], m.params, t1=1.0)


def test_shape_mismatch_inside_a_user_function_names_the_function():
    M = jnp.eye(4)
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ M @ qd)
    with pytest.raises(
        TypeError,
        match=r"the Lagrangian L\(t, q, qd, p\) failed when traced with q of shape \(3,\): "
        r"TypeError: dot_general requires contracting dimensions",
    ):
        cx.accelerations(system, 0.0, jnp.zeros(3), jnp.zeros(3))

    def bad_g(t, q, p):
        return q @ jnp.ones(5)

    system = cx.System(free_L, [cx.Holonomic(bad_g)])
    with pytest.raises(
        TypeError, match=r"constraint 'bad_g' \(Holonomic\): g\(t, q, p\) failed when traced"
    ):
        cx.accelerations(system, 0.0, jnp.zeros(3), jnp.zeros(3))


def test_constraint_returning_a_list_raises():
    system = cx.System(free_L, [cx.Holonomic(lambda t, q, p: [q[0], q[1]], name="pair")])
    with pytest.raises(
        TypeError,
        match=r"constraint 'pair' \(Holonomic\): g\(t, q, p\) must return one JAX array, got "
        r"list of 2 entries: stack the entries with jnp.stack",
    ):
        cx.accelerations(system, 0.0, Q0, QD0)


def test_missing_parameters_raise():
    with pytest.raises(
        TypeError,
        match=r"the Lagrangian L\(t, q, qd, p\) failed .*'NoneType' object is not "
        r"subscriptable.*pass the parameters `p`",
    ):
        cx.accelerations(PENDULUM, 0.0, Q0, QD0)
    with pytest.raises(
        ValueError, match=r"constraint 'rod' \(Holonomic\): g\(t, q, p\) failed .*KeyError: 'l'"
    ):
        cx.accelerations(PENDULUM, 0.0, Q0, QD0, {"g": 9.81})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(constraint_solver=cx.KKT),
            r"`constraint_solver` must be an instance .*got the "
            r"class KKT: write constraint_solver=cx.KKT\(\)",
        ),
        (dict(constraint_solver="kkt"), r"`constraint_solver` must be cx.AutoSolver\(\)"),
        (
            dict(prescription=cx.Vakonomic),
            r"got the class Vakonomic: write "
            r"prescription=cx.Vakonomic\(\)",
        ),
        (
            dict(stabilisation=cx.Projection),
            r"got the class Projection: write "
            r"stabilisation=cx.Projection\(\)",
        ),
        (dict(stabilisation="baumgarte"), r"unknown stabilisation 'baumgarte'"),
    ],
    ids=["kkt-class", "kkt-string", "vakonomic-class", "projection-class", "stab-string"],
)
def test_classes_and_strings_instead_of_instances_raise(kwargs, message):
    with pytest.raises(TypeError, match=message):
        cx.accelerations(PENDULUM, 0.0, Q0, QD0, P, **kwargs)
    with pytest.raises(TypeError, match=message):
        cx.simulate(PENDULUM, Q0, QD0, P, t1=1.0, **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(solver="tsit5"),
            r"`solver` must be a diffrax solver instance, got the string "
            r"'tsit5': pass e.g. solver=diffrax.Tsit5\(\)",
        ),
        (
            dict(solver=diffrax.Dopri5),
            r"`solver` must be an instance .*write "
            r"solver=diffrax.Dopri5",
        ),
        (
            dict(stepsize_controller=1e-8),
            r"`stepsize_controller` must be a "
            r"diffrax.AbstractStepSizeController",
        ),
        (dict(saveat=[0.0, 1.0]), r"`saveat` must be a diffrax.SaveAt instance"),
    ],
    ids=["solver-string", "solver-class", "controller", "saveat"],
)
def test_diffrax_options_of_the_wrong_kind_raise(kwargs, message):
    with pytest.raises(TypeError, match=message):
        cx.simulate(PENDULUM, Q0, QD0, P, t1=1.0, **kwargs)


def test_model_instead_of_system_raises():
    m = cx.models.snake_cart()
    with pytest.raises(TypeError, match=r"got a Model: pass `model.system`"):
        cx.simulate(m, m.q0, m.qd0, m.params, t1=1.0)


def test_constructors_refuse_bad_arguments():
    with pytest.raises(TypeError, match=r"cx.VelocityConstraint: `F` must be callable"):
        cx.VelocityConstraint(3.0)
    with pytest.raises(
        ValueError, match=r"cx.Baumgarte: `alpha` must be a non-negative finite rate"
    ):
        cx.Baumgarte(-20, -20)
    with pytest.raises(ValueError, match=r"cx.Projection: `beta` must be a non-negative finite"):
        cx.Projection(10.0, float("nan"))
    with pytest.raises(TypeError, match=r"cx.Baumgarte: `alpha` must be a non-negative rate"):
        cx.Baumgarte("fast")
    # Zero rates, arrays of rates and traced rates stay valid.
    cx.Baumgarte(0.0, 0.0)
    cx.Projection(jnp.array([1.0, 2.0]), 3.0)
    jax.grad(lambda a: cx.Baumgarte(a, 1.0).alpha)(2.0)


def test_rollout_batch_names_unknown_parameter_keys_and_mismatched_leaves():
    system = cx.System(lambda t, q, qd, p: 0.5 * p["m"] * qd @ qd - p["k"] * q @ q)
    ts = jnp.linspace(0.0, 1.0, 3)
    x = jnp.ones((3, 2))
    with pytest.raises(
        ValueError,
        match=r"`p_axes` has key\(s\) \['mass'\] that `ps` does not have and lacks key\(s\) "
        r"\['m', 'k'\]; the keys of `ps` are \['k', 'm'\]",
    ):
        cx.rollout_batch(system, x, x, {"m": 1.0, "k": jnp.ones(3)}, ts=ts, p_axes={"mass": 0})
    with pytest.raises(
        ValueError,
        match=r"same batch size, got 3 \(`q0s`\), 2 \(`ps` leaf \['k'\]\)",
    ):
        cx.rollout_batch(
            system, x, x, {"m": 1.0, "k": jnp.ones(2)}, ts=ts, p_axes={"m": None, "k": 0}
        )
    with pytest.raises(
        ValueError, match=r"`ps` leaf \['m'\] is mapped over axis 0 but is a scalar"
    ):
        cx.rollout_batch(system, x, x, {"m": 1.0, "k": jnp.ones(3)}, ts=ts)


def test_forward_mode_through_simulate_hints_at_forward_mode_adjoint():
    def final_q(p, **kw):
        return cx.simulate(PENDULUM, Q0, QD0, p, t1=0.05, max_steps=64, **kw).q[-1]

    with pytest.raises(
        TypeError,
        match=r"forward-mode autodiff \(jax.jvp, jax.jacfwd\) cannot go through the default "
        r"adjoint.*adjoint=diffrax.ForwardMode\(\)",
    ):
        jax.jacfwd(final_q)(P)
    # (The hinted fix, `adjoint=diffrax.ForwardMode()`, is exercised by tests/fit.)


def test_a_trajectory_can_be_returned_from_jax_jit_and_vmap():
    # It used to fail in JAX's output check ("returned a value of type function at
    # .system.lagrangian"): the system is now a static field, the rest are arrays.
    run = lambda q: cx.simulate(PENDULUM, q, QD0, P, t1=0.05, max_steps=64)
    eager, jitted = run(Q0), jax.jit(run)(Q0)
    assert jitted.system == PENDULUM
    np.testing.assert_allclose(jitted.q, eager.q, rtol=1e-12)
    np.testing.assert_allclose(
        jax.jit(lambda traj: traj.constraint_residual().position)(jitted),
        eager.constraint_residual().position,
        atol=1e-14,
    )
    batched = jax.vmap(run)(jnp.stack([Q0, Q0]))
    np.testing.assert_allclose(batched.q[1], eager.q, rtol=1e-12)
