r"""Every error message of the core engine, and the degenerate-but-valid cases next to them.

Trace-time mistakes (shapes, types) raise `ValueError`/`TypeError` naming the argument and
shapes; value problems under `jit` surface as `equinox.EquinoxRuntimeError` or
`jax.errors.JaxRuntimeError` carrying our message, matched here on its text.

Also: the sub-Riemannian (Heisenberg) particle $L = \tfrac12(\dot x^2 + \dot y^2)$,
$\dot z = \tfrac12(x\dot y - y\dot x)$ has a singular $W$ that is positive definite on
$\ker A$; it must work with every solver and give the d'Alembert motion: straight lines
at constant speed in $(x, y)$ ($\lambda = 0$ from the $z$ row), $\dot z$ constant.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

RUNTIME = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)


def free_L(t, q, qd, p):
    return 0.5 * qd @ qd


def pendulum_L(t, q, qd, p):
    return 0.5 * qd @ qd - p["g"] * q[1]


def rod(t, q, p):
    return q @ q - p["l"] ** 2


PENDULUM = cx.System(pendulum_L, [cx.Holonomic(rod)])
P = {"g": jnp.asarray(9.81), "l": jnp.asarray(1.0)}
Q0 = jnp.array([0.6, -0.8])
QD0 = jnp.array([0.8, 0.6])  # tangent to the circle

# ----------------------------------------------------------------------------------------
# Trace-time validation.


def test_non_scalar_lagrangian_raises():
    system = cx.System(lambda t, q, qd, p: 0.5 * qd * qd)
    with pytest.raises(
        ValueError, match=r"Lagrangian L\(t, q, qd, p\) must return a scalar, got shape \(2,\)"
    ):
        cx.accelerations(system, 0.0, jnp.zeros(2), jnp.zeros(2))


def test_q_and_qd_shape_mismatch_raises():
    with pytest.raises(
        ValueError,
        match=r"`q` and `qd` must have the same shape, got q.shape=\(2,\) and qd.shape=\(3,\)",
    ):
        cx.accelerations(PENDULUM, 0.0, Q0, jnp.zeros(3), P)


def test_q_not_1d_raises():
    with pytest.raises(
        ValueError, match=r"`q` must be a 1-D array of generalized coordinates, got shape \(2, 1\)"
    ):
        cx.accelerations(PENDULUM, 0.0, Q0[:, None], QD0[:, None], P)


def test_non_scalar_time_raises():
    with pytest.raises(ValueError, match=r"`t` must be a scalar time, got shape \(2,\)"):
        cx.accelerations(PENDULUM, jnp.zeros(2), Q0, QD0, P)


def test_holonomic_wrong_shape_names_the_constraint():
    def bad_g(t, q, p):
        return jnp.outer(q, q)

    system = cx.System(free_L, [cx.Holonomic(bad_g)])
    with pytest.raises(
        ValueError,
        match=r"constraint 'bad_g' \(Holonomic\): g\(t, q, p\) must return a scalar "
        r"or shape \(k,\), got \(2, 2\)",
    ):
        cx.accelerations(system, 0.0, Q0, QD0)


def test_pfaffian_wrong_shape_names_the_constraint():
    def bad_omega(t, q, p):
        return jnp.ones((1, 3))

    system = cx.System(free_L, [cx.Pfaffian(bad_omega)])
    with pytest.raises(
        ValueError,
        match=r"constraint 'bad_omega' \(Pfaffian\): omega\(t, q, p\) must return shape "
        r"\(k, n\) = \(k, 2\) or \(2,\), got \(1, 3\)",
    ):
        cx.accelerations(system, 0.0, Q0, QD0)


def test_pfaffian_affine_term_wrong_shape_names_the_constraint():
    def omega(t, q, p):
        return jnp.eye(2)

    system = cx.System(free_L, [cx.Pfaffian(omega, b=lambda t, q, p: jnp.ones(3), name="belt")])
    with pytest.raises(
        ValueError,
        match=r"constraint 'belt' \(Pfaffian\): b\(t, q, p\) must return shape \(k,\) = "
        r"\(2,\) to match omega's 2 rows, got \(3,\)",
    ):
        cx.accelerations(system, 0.0, Q0, QD0)


def test_velocity_constraint_wrong_shape_names_the_constraint():
    def bad_F(t, q, qd, p):
        return jnp.outer(qd, qd)

    system = cx.System(free_L, [cx.VelocityConstraint(bad_F)])
    with pytest.raises(
        ValueError,
        match=r"constraint 'bad_F' \(VelocityConstraint\): F\(t, q, qd, p\) must return "
        r"a scalar or shape \(k,\), got \(2, 2\)",
    ):
        cx.accelerations(system, 0.0, Q0, QD0)


def test_force_wrong_shape_raises():
    system = cx.System(free_L, force=lambda t, q, qd, p: jnp.zeros(3))
    with pytest.raises(
        ValueError,
        match=r"the force Q\(t, q, qd, p\) must return shape \(n,\) = \(2,\) like `q`, got \(3,\)",
    ):
        cx.accelerations(system, 0.0, Q0, QD0)


def test_system_arguments_of_the_wrong_type_raise():
    with pytest.raises(TypeError, match=r"`lagrangian` must be callable L\(t, q, qd, p\)"):
        cx.System(3.0)
    with pytest.raises(
        TypeError,
        match=r"`constraints\[1\]` must be a cx.Holonomic, cx.Pfaffian, cx.UnitQuaternion or "
        r"cx.VelocityConstraint, got function",
    ):
        cx.System(free_L, [cx.Holonomic(rod), rod])
    with pytest.raises(TypeError, match=r"`force` must be callable Q\(t, q, qd, p\) or None"):
        cx.System(free_L, force=1.0)


def test_position_residual_of_a_velocity_constraint_raises():
    con = cx.Pfaffian(lambda t, q, p: jnp.ones(2), name="skate")
    with pytest.raises(TypeError, match=r"constraint 'skate' has no position-level residual"):
        con.position_residual(0.0, Q0, None)


def test_unknown_stabilisation_raises():
    with pytest.raises(TypeError, match=r"unknown stabilisation 'baumgarte'"):
        jax.eval_shape(
            lambda: cx.accelerations(PENDULUM, 0.0, Q0, QD0, P, stabilisation="baumgarte")
        )


def test_vakonomic_multiplier_errors():
    with pytest.raises(
        ValueError,
        match=r"`mu` is only used by the vakonomic prescription, got prescription=DAlembert",
    ):
        cx.accelerations(PENDULUM, 0.0, Q0, QD0, P, mu=jnp.zeros(1))
    with pytest.raises(
        ValueError, match=r"the vakonomic prescription needs the multipliers `mu` \(shape \(1,\)"
    ):
        cx.accelerations(PENDULUM, 0.0, Q0, QD0, P, prescription=cx.Vakonomic())
    with pytest.raises(
        ValueError,
        match=r"`mu` must have one entry per constraint row: expected shape \(1,\), got \(2,\)",
    ):
        cx.accelerations(PENDULUM, 0.0, Q0, QD0, P, prescription=cx.Vakonomic(), mu=jnp.zeros(2))


# ----------------------------------------------------------------------------------------
# Singular mass matrices: an error on ker A, valid when W is definite on ker A.

DEGENERATE = cx.System(lambda t, q, qd, p: 0.5 * qd[0] ** 2)  # y has no inertia, no constraint


@pytest.mark.parametrize(
    "solver, message",
    [
        (cx.KKT(), r"saddle-point matrix \[\[W, A\^T\], \[A, 0\]\] is singular"),
        (
            cx.UdwadiaKalaba(),
            r"mass matrix W = d2L/dqd2 is not positive definite on the admissible velocities ker A",
        ),
        (
            cx.AutoSolver(),
            r"mass matrix W = d2L/dqd2 is not positive definite on the admissible velocities ker A",
        ),
    ],
    ids=["kkt", "uk", "auto"],
)
def test_mass_matrix_singular_on_ker_A_raises(solver, message):
    fn = jax.jit(
        lambda q, qd: cx.accelerations(DEGENERATE, 0.0, q, qd, constraint_solver=solver).qdd
    )
    with pytest.raises(RUNTIME, match=message):
        jax.block_until_ready(fn(jnp.array([1.0, 2.0]), jnp.array([0.3, 0.4])))


def heisenberg_L(t, q, qd, p):
    return 0.5 * (qd[0] ** 2 + qd[1] ** 2)


def heisenberg(t, q, qd, p):
    x, y, _ = q
    return qd[2] - 0.5 * (x * qd[1] - y * qd[0])


HEISENBERG = cx.System(heisenberg_L, [cx.VelocityConstraint(heisenberg)])
SOLVERS = {"kkt": cx.KKT(), "uk": cx.UdwadiaKalaba(), "auto": cx.AutoSolver()}


def _heisenberg_state(x, y, vx, vy, z=0.3):
    return jnp.array([x, y, z]), jnp.array([vx, vy, 0.5 * (x * vy - y * vx)])


def test_sub_riemannian_particle_has_zero_accelerations_with_every_solver():
    rng = np.random.default_rng(3)
    states = [_heisenberg_state(*rng.normal(size=4)) for _ in range(8)]
    qs = jnp.stack([s[0] for s in states])
    qds = jnp.stack([s[1] for s in states])

    @jax.jit
    @jax.vmap
    def accel(q, qd):
        out = {
            k: cx.accelerations(HEISENBERG, 0.0, q, qd, constraint_solver=s)
            for k, s in SOLVERS.items()
        }
        return out, cx.mass_matrix(HEISENBERG, 0.0, q, qd, None)

    out, W = accel(qs, qds)
    np.testing.assert_array_equal(W, np.broadcast_to(np.diag([1.0, 1.0, 0.0]), W.shape))
    for k, acc in out.items():
        np.testing.assert_allclose(acc.qdd, 0.0, atol=1e-12, err_msg=k)
        np.testing.assert_allclose(acc.multipliers, 0.0, atol=1e-12, err_msg=k)


def test_sub_riemannian_particle_moves_on_straight_lines_with_every_solver():
    x0, y0, vx, vy, z0 = 0.4, -0.7, 0.9, 0.5, 0.3
    q0, qd0 = _heisenberg_state(x0, y0, vx, vy, z0)
    ts = jnp.linspace(0.0, 2.0, 9)

    @jax.jit
    def run(q0, qd0):
        return {
            k: cx.simulate(
                HEISENBERG, q0, qd0, t1=2.0, saveat=diffrax.SaveAt(ts=ts), constraint_solver=s
            ).q
            for k, s in SOLVERS.items()
        }

    t = np.asarray(ts)
    expected = np.stack([x0 + vx * t, y0 + vy * t, z0 + 0.5 * (x0 * vy - y0 * vx) * t], axis=1)
    for k, q in run(q0, qd0).items():
        np.testing.assert_allclose(q, expected, rtol=0, atol=1e-10, err_msg=k)


# ----------------------------------------------------------------------------------------
# simulate: inconsistent initial states, non-finite inputs, failed solves.


def snake_L(t, q, qd, p):
    xd, yd, thd, phd = qd
    return 0.5 * 1.4 * (xd**2 + yd**2) + 0.5 * 0.4 * thd**2 + 0.05 * phd**2


def wheels(t, q, p):
    """Briggs 2016, eq. (1.2.1), with l = 1."""
    _, _, th, ph = q
    h = 0.5 * jnp.cos(ph)
    z = jnp.zeros_like(th)
    return jnp.stack(
        [
            jnp.stack([-jnp.sin(th + ph), jnp.cos(th + ph), h, z]),
            jnp.stack([jnp.sin(th - ph), -jnp.cos(th - ph), h, z]),
        ]
    )


SNAKE = cx.System(snake_L, [cx.Pfaffian(wheels, name="wheels")])


@eqx.filter_jit
def _snake_run(q0, qd0, project_initial):
    traj = cx.simulate(SNAKE, q0, qd0, t1=0.5, project_initial=project_initial)
    return traj.q, traj.constraint_residual().velocity


def test_initial_state_violating_a_constraint_names_the_row_and_projection_fixes_it():
    th, ph = 0.3, 0.4
    q0 = jnp.array([0.0, 0.0, th, ph])
    # Velocity along wheel 1's heading with the matching rotation: row 0 holds, row 1 fails.
    qd0 = jnp.array([jnp.cos(th + ph), jnp.sin(th + ph), 0.0, 0.0])
    c = np.asarray(wheels(0.0, q0, None) @ qd0)
    assert abs(c[0]) < 1e-15 and abs(c[1]) > 0.1
    with pytest.raises(
        RUNTIME,
        match=r"initial state violates constraint row wheels\[1\] by more than "
        r"initial_tolerance=1e-08",
    ):
        jax.block_until_ready(_snake_run(q0, qd0, False))
    q, c = _snake_run(q0, qd0, True)
    assert np.all(np.isfinite(q))
    assert np.max(np.abs(c)) < 1e-6


MAX_STEPS = 64


@eqx.filter_jit
def _pendulum_run_jit(q0, qd0, p, t1):
    return cx.simulate(PENDULUM, q0, qd0, p, t1=t1, max_steps=MAX_STEPS)


def _pendulum_run(q0, qd0, p, t1):
    # One compilation serves every test below: t1 is traced, max_steps is tiny.
    return _pendulum_run_jit(q0, qd0, p, jnp.asarray(t1))


def test_initial_position_off_a_holonomic_constraint_names_the_row():
    with pytest.raises(RUNTIME, match=r"violates constraint row rod\[0\]"):
        jax.block_until_ready(_pendulum_run(Q0 * 1.01, QD0, P, 0.5).q)


@pytest.mark.parametrize("solver", list(SOLVERS.values()), ids=list(SOLVERS))
def test_initial_state_off_a_constraint_names_the_row_with_every_solver(solver):
    # KKT and AutoSolver check the rows together with the mass matrix on ker A (one trace
    # of the rows for A and c); UdwadiaKalaba checks the rows alone.
    fn = jax.jit(
        lambda q0, qd0: (
            cx.simulate(
                PENDULUM, q0, qd0, P, t1=0.01, max_steps=MAX_STEPS, constraint_solver=solver
            ).q
        )
    )
    with pytest.raises(RUNTIME, match=r"violates constraint row rod\[0\]"):
        jax.block_until_ready(fn(Q0, QD0 + jnp.array([0.06, 0.08])))  # radial velocity
    assert np.all(np.isfinite(fn(Q0, QD0)))


def test_valid_pendulum_run_succeeds():
    traj = _pendulum_run(Q0, QD0, P, 0.5)
    assert np.all(np.isfinite(traj.q))
    assert abs(float(traj.q[-1] @ traj.q[-1]) - 1.0) < 1e-7
    assert traj.stats["num_steps"] < MAX_STEPS


def test_nan_in_q0_raises():
    with pytest.raises(RUNTIME, match=r"constrax.simulate: `q0` contains NaN or inf"):
        jax.block_until_ready(_pendulum_run(Q0.at[0].set(jnp.nan), QD0, P, 0.5).q)


def test_nan_in_params_raises():
    p = dict(P, g=jnp.asarray(jnp.nan))
    with pytest.raises(RUNTIME, match=r"constrax.simulate: `p` contains NaN or inf"):
        jax.block_until_ready(_pendulum_run(Q0, QD0, p, 0.5).q)


def test_nan_in_python_scalar_params_raises_at_trace_time():
    with pytest.raises(ValueError, match=r"constrax.simulate: `p` contains NaN or inf"):
        cx.simulate(PENDULUM, Q0, QD0, {"g": float("nan"), "l": 1.0}, t1=1.0)


def test_max_steps_exhaustion_raises():
    with pytest.raises(RUNTIME, match=r"the solver took `max_steps` steps without reaching t1"):
        jax.block_until_ready(_pendulum_run(Q0, QD0, P, 100.0).q)


def test_effective_energy_of_a_dalembert_trajectory_raises():
    traj = _pendulum_run(Q0, QD0, P, 0.5)
    with pytest.raises(
        ValueError, match=r"effective_energy needs a vakonomic trajectory \(with `mu`\)"
    ):
        traj.effective_energy()


def test_failed_solve_raises():
    # A minimum step far above what rtol = 1e-13 needs: diffrax stops with dt_min_reached.
    controller = diffrax.PIDController(rtol=1e-13, atol=1e-13, dtmin=0.2, force_dtmin=False)
    run = eqx.filter_jit(
        lambda q0, qd0, p: (
            cx.simulate(PENDULUM, q0, qd0, p, t1=1.0, dt0=0.2, stepsize_controller=controller).q
        )
    )
    with pytest.raises(RUNTIME, match=r"the diffrax solve did not succeed"):
        jax.block_until_ready(run(Q0, QD0, P))


def test_non_finite_trajectory_raises():
    # A potential -sqrt(x) evaluated at x < 0 after the first fixed step.
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd + jnp.sqrt(q[0]))
    run = eqx.filter_jit(
        lambda q0, qd0: (
            cx.simulate(
                system, q0, qd0, t1=0.1, dt0=0.05, stepsize_controller=diffrax.ConstantStepSize()
            ).q
        )
    )
    with pytest.raises(RUNTIME, match=r"the trajectory contains NaN or inf"):
        jax.block_until_ready(run(jnp.array([0.01]), jnp.array([-10.0])))
