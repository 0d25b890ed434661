"""`StepProjection`, the default stabilisation: the state projected onto the constraints
after every step, the field unchanged on the constraints (Hairer, Lubich & Wanner 2006,
§IV.4)."""

import sys

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
from benchmarks.stabilisation import SNAKE, SNAKE_SYSTEM, snake_state  # noqa: E402


def _snake(stabilisation, saveat=None, solver=diffrax.Tsit5(), t1=10.0, tol=1e-9, **kw):
    q0, qd0 = snake_state()
    p = {k: jnp.asarray(v) for k, v in SNAKE.items()}
    return cx.simulate(
        SNAKE_SYSTEM,
        q0,
        qd0,
        p,
        t1=t1,
        solver=solver,
        stabilisation=stabilisation,
        stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol),
        saveat=saveat,
        **kw,
    )


def _saved(x, traj):
    """The rows of `x` at the saved steps (`SaveAt(steps=True)` pads with inf)."""
    return np.asarray(x)[np.isfinite(np.asarray(traj.ts))]


def _residual(traj):
    return np.max(np.abs(_saved(traj.constraint_residual().velocity, traj)))


def test_step_projection_is_the_default():
    import inspect

    default = inspect.signature(cx.simulate).parameters["stabilisation"].default
    assert default == cx.StepProjection()


def test_step_projection_takes_the_steps_of_the_unstabilised_field():
    """The projection is not part of the ODE the error estimator sees: within 10 % of the
    steps of `stabilisation=None`, where the in-field decay of `Projection(10, 0)` about
    doubles them (snake cart, rtol = atol = 1e-9)."""
    steps = {
        name: int(_snake(stab).stats["num_accepted_steps"])
        for name, stab in [
            ("none", None),
            ("step", cx.StepProjection()),
            ("decay", cx.Projection(10.0, 0.0)),
        ]
    }
    assert steps["step"] <= 1.1 * steps["none"], steps
    assert steps["decay"] >= 1.5 * steps["none"], steps  # what the new default avoids


def test_every_step_ends_on_the_velocity_constraints_to_round_off():
    traj = _snake(cx.StepProjection(), saveat=diffrax.SaveAt(steps=True))
    unstabilised = _snake(None, saveat=diffrax.SaveAt(steps=True))
    assert _residual(traj) < 1e-14
    assert _residual(unstabilised) > 1e-10  # the drift the projection removes
    # The motion is the unstabilised one to the integrator's tolerance.
    np.testing.assert_allclose(
        _snake(cx.StepProjection()).q[-1], _snake(None).q[-1], rtol=0, atol=1e-7
    )


@pytest.mark.parametrize("solver", [diffrax.Tsit5(), diffrax.Heun()], ids=["fsal", "not_fsal"])
def test_dense_output_is_continuous_and_ends_on_the_projected_state(solver):
    """The interpolant of a step plus the linear correction: at a step's end it is the
    projected state, and saving at arbitrary times sees the constraints kept to the size
    of the correction."""
    traj = _snake(
        cx.StepProjection(),
        saveat=diffrax.SaveAt(steps=True, dense=True),
        solver=solver,
        t1=2.0,
        tol=1e-6,
    )
    ts = np.asarray(traj.ts)
    ts = ts[np.isfinite(ts)]
    assert _residual(traj) < 1e-13
    for t, q, qd in list(zip(ts, traj.q, traj.qd, strict=False))[1:20]:
        left = traj.evaluate(jnp.asarray(t))
        np.testing.assert_allclose(left[0], q, rtol=0, atol=1e-14)
        np.testing.assert_allclose(left[1], qd, rtol=0, atol=1e-14)


def _chain(stabilisation, p=None, q0=None, saveat=diffrax.SaveAt(steps=True)):
    model = cx.models.pendulum_chain(3, "maximal")
    return cx.simulate(
        model.system,
        model.q0 if q0 is None else q0,
        model.qd0,
        model.params if p is None else p,
        t1=2.0,
        dt0=2e-2,
        stepsize_controller=diffrax.ConstantStepSize(),
        stabilisation=stabilisation,
        saveat=saveat,
    )


def test_positions_true_projects_the_holonomic_rows_every_step():
    """On a coarse fixed step (dt = 0.02) the rods drift by the integrator's error without
    the position projection, and stay at round-off with it."""
    projected = _chain(cx.StepProjection(positions=True))
    velocity_only = _chain(cx.StepProjection())
    g = _saved(projected.constraint_residual().position, projected)
    assert np.max(np.abs(g)) < 1e-13
    g = _saved(velocity_only.constraint_residual().position, velocity_only)
    assert np.max(np.abs(g)) > 1e-10
    assert _residual(projected) < 1e-12


def test_vakonomic_state_is_projected_and_its_multipliers_carried():
    model = cx.models.nonholonomic_particle()
    kw = dict(t1=3.0, prescription=cx.Vakonomic(), saveat=diffrax.SaveAt(steps=True))
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, **kw)
    reference = cx.simulate(
        model.system, model.q0, model.qd0, model.params, stabilisation=None, **kw
    )
    assert _residual(traj) < 1e-13
    last, last_ref = np.sum(np.isfinite(traj.ts)) - 1, np.sum(np.isfinite(reference.ts)) - 1
    np.testing.assert_allclose(traj.mu[last], reference.mu[last_ref], rtol=1e-6, atol=1e-8)


def test_gradient_through_the_projection_matches_central_differences():
    """d/d(mass, gravity) of the final state of the chain with positions projected
    every step: AD under jit, vmap of the gradient, against central differences."""
    model = cx.models.pendulum_chain(3, "maximal")

    def loss(theta):
        p = {**model.params, "masses": model.params["masses"].at[1].set(theta[0]), "g": theta[1]}
        traj = _chain(cx.StepProjection(positions=True), p, None, diffrax.SaveAt(t1=True))
        return jnp.sum(traj.q[-1] ** 2) + jnp.sum(traj.qd[-1] ** 2)

    theta = jnp.array([1.3, 9.0])
    grad = eqx.filter_jit(jax.grad(loss))(theta)
    f = jax.jit(loss)
    h = 1e-6
    fd = np.array([(f(theta.at[i].add(h)) - f(theta.at[i].add(-h))) / (2 * h) for i in range(2)])
    assert np.all(np.abs(fd) > 1e-2)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)
    batched = jax.jit(jax.vmap(jax.grad(loss)))(jnp.stack([theta, theta]))
    np.testing.assert_allclose(batched[1], grad, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["snake_cart", "tilted_rolling_disk", "chain3"])
def test_default_holds_the_constraints_over_a_hundred_thousand_steps(name):
    model = (
        cx.models.pendulum_chain(3, "maximal") if name == "chain3" else getattr(cx.models, name)()
    )
    n = 100_000
    traj = cx.simulate(
        model.system,
        model.q0,
        model.qd0,
        model.params,
        t1=n * 1e-3,
        dt0=1e-3,
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=n + 1,
    )
    residual = traj.constraint_residual()
    if residual.position.size:
        assert np.max(np.abs(residual.position)) <= 1e-10
    assert np.max(np.abs(residual.velocity)) <= 1e-10


def test_an_implicit_solver_is_projected_explicitly():
    """An implicit solver's last stage is the step's end only to its root finder's
    tolerance: the projection is evaluated, and the residual is round-off."""
    model = cx.models.snake_cart(tau_amp=0.0)
    traj = cx.simulate(
        model.system,
        model.q0,
        model.qd0,
        model.params,
        t1=2.0,
        solver=diffrax.Kvaerno5(),
        saveat=diffrax.SaveAt(steps=True),
    )
    assert _residual(traj) < 1e-14


@pytest.mark.parametrize(
    "adjoint", [diffrax.ForwardMode(), diffrax.DirectAdjoint()], ids=["forward", "direct"]
)
def test_every_adjoint_differentiates_the_projected_run(adjoint):
    """diffrax's adjoints read and set attributes of the solver they are handed (the wrapper
    forwards them): forward mode and the direct adjoint give the checkpointed gradient."""
    model = cx.models.snake_cart(tau_amp=0.0)

    def loss(p, adjoint):
        traj = cx.simulate(model.system, model.q0, model.qd0, p, t1=1.0, adjoint=adjoint)
        return jnp.sum(traj.q[-1] ** 2)

    diff = jax.jacfwd if isinstance(adjoint, diffrax.ForwardMode) else jax.grad
    got = jax.jit(diff(lambda p: loss(p, adjoint)))(model.params)
    want = jax.jit(jax.grad(lambda p: loss(p, diffrax.RecursiveCheckpointAdjoint())))(model.params)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-9, atol=1e-12, err_msg=key)


NOT_FIRST_SAME_AS_LAST = [diffrax.Heun(), diffrax.Midpoint(), diffrax.Ralston()]


@pytest.mark.parametrize("solver", NOT_FIRST_SAME_AS_LAST, ids=lambda s: type(s).__name__)
def test_first_same_as_last_form_takes_the_solvers_steps_to_its_solution(solver):
    """The tableau with the field at the step's end appended (weight zero): the same
    adaptive steps to the same step ends as the solver itself, on a damped pendulum. Its
    Hermite interpolant takes the field at the step's end instead of at the last stage
    (not the step's end for these solvers): no less accurate between the step ends."""
    from constrax._step_projection import first_same_as_last

    form = first_same_as_last(solver)
    assert type(form) is not type(solver) and type(form).tableau.fsal
    term = diffrax.ODETerm(lambda t, y, a: jnp.stack([y[1], -jnp.sin(y[0]) - 0.1 * y[1]]))
    y0, ts = jnp.array([2.0, 0.0]), jnp.linspace(0.0, 5.0, 11)

    def solve(s, saveat, tol=1e-6):
        controller = diffrax.PIDController(rtol=tol, atol=tol)
        return diffrax.diffeqsolve(
            term, s, 0.0, 5.0, 0.1, y0, stepsize_controller=controller, saveat=saveat
        )

    got, want = (solve(s, diffrax.SaveAt(steps=True)) for s in (form, solver))
    assert int(got.stats["num_accepted_steps"]) == int(want.stats["num_accepted_steps"])
    assert int(got.stats["num_rejected_steps"]) == int(want.stats["num_rejected_steps"])
    np.testing.assert_allclose(got.ts, want.ts, rtol=1e-14)
    np.testing.assert_allclose(got.ys, want.ys, rtol=1e-12, atol=1e-14)
    exact = solve(diffrax.Tsit5(), diffrax.SaveAt(ts=ts), tol=1e-13).ys
    dense = [np.max(np.abs(solve(s, diffrax.SaveAt(ts=ts)).ys - exact)) for s in (form, solver)]
    assert dense[0] <= 1.01 * dense[1], dense


def test_first_same_as_last_form_leaves_other_solvers_as_they_are():
    from constrax._step_projection import first_same_as_last

    for solver in (diffrax.Tsit5(), diffrax.Bosh3(), diffrax.Kvaerno5(), cx.SemiImplicitEuler()):
        assert first_same_as_last(solver) is solver
    assert type(first_same_as_last(diffrax.Euler())).__name__ == "EulerFirstSameAsLast"


@pytest.mark.parametrize(
    "solver", [diffrax.Ralston(), diffrax.Euler()], ids=lambda s: type(s).__name__
)
def test_a_solver_not_first_same_as_last_reads_the_projection_off_its_last_stage(
    monkeypatch, solver
):
    """Ralston and Euler (a one-stage tableau) at a fixed step on the 3-link chain: the
    run in first-same-as-last form
    equals the run that evaluates the projection after each step (the form switched off),
    and every step ends on the velocity constraints; the gradient through it matches
    central differences."""
    import constrax._step_projection as sp

    model = cx.models.pendulum_chain(3, "maximal")

    def run(p, saveat=diffrax.SaveAt(steps=True)):
        return cx.simulate(
            model.system, model.q0, model.qd0, p, t1=1.0, dt0=2e-2, solver=solver,
            stepsize_controller=diffrax.ConstantStepSize(), saveat=saveat,
        )  # fmt: skip

    traj = run(model.params)
    with monkeypatch.context() as m:
        m.setattr(sp, "first_same_as_last", lambda solver: solver)
        explicit = run(model.params)
    assert _residual(traj) < 1e-13 and _residual(explicit) < 1e-13
    np.testing.assert_allclose(_saved(traj.q, traj), _saved(explicit.q, explicit), atol=1e-12)
    np.testing.assert_allclose(_saved(traj.qd, traj), _saved(explicit.qd, explicit), atol=1e-12)

    def loss(g):
        traj = run({**model.params, "g": g}, diffrax.SaveAt(t1=True))
        return jnp.sum(traj.q[-1] ** 2) + jnp.sum(traj.qd[-1] ** 2)

    g0 = jnp.asarray(9.0)
    grad = jax.jit(jax.grad(loss))(g0)
    f, h = jax.jit(loss), 1e-6
    fd = (f(g0 + h) - f(g0 - h)) / (2 * h)
    assert abs(fd) > 1e-2
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_euler_in_first_same_as_last_form_refuses_an_adaptive_controller_as_euler_does():
    model = cx.models.pendulum_chain(3, "maximal")
    with pytest.raises(Exception, match="error estimates"):
        cx.simulate(
            model.system, model.q0, model.qd0, model.params, t1=0.1, dt0=1e-2,
            solver=diffrax.Euler(), stepsize_controller=diffrax.PIDController(1e-6, 1e-6),
        )  # fmt: skip
