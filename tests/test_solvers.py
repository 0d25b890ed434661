"""`cx.SemiImplicitEuler`: velocities first, then positions with the new velocities
(Hairer, Lubich & Wanner 2006, §VI.3), on the constraint manifold under the default
`cx.StepProjection()`, MuJoCo's integrator."""

import diffrax
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
from constrax._solvers import EulerFirstSameAsLast


def _pendulum():
    def L(t, q, qd, p):
        return 0.5 * p["m"] * p["l"] ** 2 * qd[0] ** 2 + p["m"] * p["g"] * p["l"] * jnp.cos(q[0])

    return cx.System(L), {"m": jnp.array(1.3), "l": jnp.array(0.7), "g": jnp.array(9.81)}


def _fixed(system, q0, qd0, p, solver, h, steps, **kw):
    return cx.simulate(
        system, q0, qd0, p, t1=h * steps, dt0=h, solver=solver, max_steps=steps + 1,
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, h * steps, steps + 1)), **kw,
    )  # fmt: skip


def test_semi_implicit_euler_is_the_velocity_first_update_written_out():
    system, p = _pendulum()
    h, steps = 0.01, 200
    traj = _fixed(system, jnp.array([1.0]), jnp.array([0.5]), p, cx.SemiImplicitEuler(), h, steps)
    m, l, g = (float(p[k]) for k in ("m", "l", "g"))
    q, qd = 1.0, 0.5
    qs = [q]
    for _ in range(steps):
        qd = qd + h * (-g / l * np.sin(q))  # the velocity first
        q = q + h * qd  # then the position with the new velocity
        qs.append(q)
    np.testing.assert_allclose(traj.q[:, 0], qs, rtol=1e-12, atol=1e-12)


def test_semi_implicit_euler_keeps_the_pendulums_energy_bounded_where_explicit_euler_gains():
    system, p = _pendulum()
    h, steps = 0.02, 5000  # 100 s, about 60 periods
    q0, qd0 = jnp.array([1.0]), jnp.array([0.0])

    def drift(solver):
        traj = _fixed(system, q0, qd0, p, solver, h, steps)
        e = np.asarray(traj.energy())
        return np.max(np.abs(e - e[0])) / abs(e[0])

    symplectic, explicit = drift(cx.SemiImplicitEuler()), drift(diffrax.Euler())
    assert symplectic < 0.05, symplectic  # O(h) oscillation, no growth
    assert explicit > 10 * symplectic, (explicit, symplectic)


def test_semi_implicit_euler_converges_at_first_order_on_the_constraint_manifold():
    model = cx.models.pendulum_chain(3, "maximal")
    t1 = 0.5
    exact = cx.simulate(
        model.system, model.q0, model.qd0, model.params, t1=t1,
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
    ).q[-1]  # fmt: skip
    errors = []
    for h in (4e-3, 2e-3, 1e-3):
        traj = _fixed(model.system, model.q0, model.qd0, model.params, cx.SemiImplicitEuler(),
                      h, round(t1 / h))  # fmt: skip
        # Every step ends on the velocity constraints (the default StepProjection).
        assert np.max(np.abs(traj.constraint_residual().velocity)) < 1e-12
        errors.append(float(jnp.max(jnp.abs(traj.q[-1] - exact))))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    np.testing.assert_allclose(orders, 1.0, atol=0.15)


def test_semi_implicit_euler_rollouts_differentiate_and_batch():
    model = cx.models.pendulum_chain(3, "maximal")

    def loss(g, qd0=model.qd0):
        p = {**model.params, "g": g}
        traj = cx.simulate(
            model.system, model.q0, qd0, p, t1=0.2, dt0=1e-2, solver=cx.SemiImplicitEuler(),
            stepsize_controller=diffrax.ConstantStepSize(),
        )  # fmt: skip
        return jnp.sum(traj.q[-1] ** 2) + jnp.sum(traj.qd[-1] ** 2)

    g0, h = jnp.asarray(9.0), 1e-6
    fd = (loss(g0 + h) - loss(g0 - h)) / (2 * h)
    assert abs(fd) > 1e-3
    np.testing.assert_allclose(jax.jit(jax.grad(loss))(g0), fd, rtol=1e-6)
    gs = jnp.array([8.0, 9.0, 10.0])
    batched = jax.jit(jax.vmap(jax.grad(loss)))(gs)
    np.testing.assert_allclose(batched[1], jax.grad(loss)(g0), rtol=1e-10)


def test_semi_implicit_euler_refuses_an_adaptive_step_size_controller():
    system, p = _pendulum()
    with pytest.raises(Exception, match="error estimates"):
        cx.simulate(
            system, jnp.array([1.0]), jnp.array([0.0]), p, t1=0.1, dt0=1e-2,
            solver=cx.SemiImplicitEuler(), stepsize_controller=diffrax.PIDController(1e-6, 1e-6),
        )  # fmt: skip


def test_diffraxs_two_term_semi_implicit_euler_is_refused_naming_the_constrax_one():
    system, p = _pendulum()
    with pytest.raises(TypeError, match=r"integrates one ODE term.*cx\.SemiImplicitEuler\(\)"):
        cx.simulate(
            system, jnp.array([1.0]), jnp.array([0.0]), p, t1=0.1, dt0=1e-2,
            solver=diffrax.SemiImplicitEuler(), stepsize_controller=diffrax.ConstantStepSize(),
        )  # fmt: skip


def test_semi_implicit_euler_steps_a_hinge_chain_as_mujocos_euler_integrator():
    """MuJoCo's `mjINT_EULER` is the semi-implicit Euler step (no joint damping, so its
    implicit damping term is zero): 200 steps of a 4-link hinge chain, constrax's state
    mapped to and from MuJoCo's."""
    mujoco = pytest.importorskip("mujoco")
    body = ""
    for i in reversed(range(4)):
        axis = "0 1 0" if i % 2 == 0 else "1 0 0"
        pos = "0 0 0" if i == 0 else "0 0 -0.2"
        body = (
            f'<body pos="{pos}"><joint type="hinge" axis="{axis}"/>'
            f'<geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02"/>{body}</body>'
        )
    m = mujoco.MjModel.from_xml_string(
        f'<mujoco><option integrator="Euler" timestep="0.002"/><worldbody>{body}</worldbody>'
        "</mujoco>"
    )
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    d = mujoco.MjData(m)
    d.qpos[:] = [0.4, -0.3, 0.2, 0.5]
    d.qvel[:] = [0.1, 0.0, -0.2, 0.3]
    imported = cx.rigid.from_mjcf(m)
    q0, qd0 = imported.from_mujoco_state(d.qpos.copy(), d.qvel.copy())
    steps = 200
    for _ in range(steps):
        mujoco.mj_step(m, d)
    traj = _fixed(imported.system, jnp.asarray(q0), jnp.asarray(qd0), imported.params,
                  cx.SemiImplicitEuler(), m.opt.timestep, steps)  # fmt: skip
    qpos, qvel = imported.to_mujoco_state(traj.q[-1], traj.qd[-1])
    np.testing.assert_allclose(qpos, d.qpos, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(qvel, d.qvel, rtol=1e-9, atol=1e-11)


def _field_call_sites(jaxpr) -> int:
    """How many times the program calls the vector field (the nested `jit` named
    `_vector_field`), counted through every sub-program (loops, conds)."""
    n = 0
    for eqn in jaxpr.eqns:
        if eqn.params.get("name") == "_vector_field":
            n += 1
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            n += _field_call_sites(sub)
    return n


def _while_loops(jaxpr) -> int:
    """How many `while` loops the program holds, counted through every sub-program."""
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.primitive.name == "while"
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            n += _while_loops(sub)
    return n


@pytest.mark.parametrize("solver", [diffrax.Euler(), cx.SemiImplicitEuler()])
def test_carried_field_solvers_evaluate_the_field_once_per_step_with_no_loop_in_the_step(solver):
    """Under the default `StepProjection` a one-stage fixed-step solver carries the field
    at each step's end to the next step; the field at the initial state is evaluated once,
    before the first step (`init`). So a step is one evaluation with no loop in it: the
    run holds as many loops as `diffrax.Euler` without stabilisation (diffrax's own), and
    the field twice (the initial state, the step). The earlier form, a loop of up to two
    evaluations in every step, took the 5-link chain's batched Euler gradient with the
    defaults to 1.85x like for like's, 1.53x without it
    (benchmarks/results/reverse_cost_cpu.md, the runs before and after)."""
    model = cx.models.pendulum_chain(3, "maximal")

    def jaxpr(solver, **options):
        def run(qd0):
            traj = _fixed(model.system, model.q0, qd0, model.params, solver, 1e-2, 5, **options)
            return traj.q[-1]

        return jax.make_jaxpr(run)(model.qd0).jaxpr

    plain = jaxpr(diffrax.Euler(), stabilisation=None)
    assert _while_loops(jaxpr(solver)) == _while_loops(plain)
    assert _field_call_sites(jaxpr(solver)) == 2
    assert _field_call_sites(plain) == 1


def test_a_position_projection_makes_a_carried_field_solver_evaluate_the_field_afresh():
    """Under `StepProjection(positions=True)` the field a carried-field solver holds at a
    step's end is that of the coordinates before their projection: the step after it
    evaluates the field afresh at the projected state (diffrax's `made_jump`), so the run
    is the one of `diffrax.Euler` projected after every step. A stale field would move
    the state by the position correction."""
    model = cx.models.pendulum_chain(3, "maximal")
    stab = cx.StepProjection(positions=True)
    qd0 = model.qd0 * 3.0
    ref = _fixed(model.system, model.q0, qd0, model.params, diffrax.Euler(), 2e-2, 40,
                 stabilisation=stab)  # fmt: skip
    out = _fixed(model.system, model.q0, qd0, model.params, EulerFirstSameAsLast(), 2e-2, 40,
                 stabilisation=stab)  # fmt: skip
    np.testing.assert_allclose(out.q, ref.q, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out.qd, ref.qd, rtol=1e-12, atol=1e-13)
    # The correction is not negligible here: the unprojected run drifts off the rows.
    loose = _fixed(model.system, model.q0, qd0, model.params, diffrax.Euler(), 2e-2, 40)
    assert float(jnp.max(jnp.abs(loose.q[-1] - ref.q[-1]))) > 1e-6


@pytest.mark.parametrize("solver", [diffrax.Euler(), cx.SemiImplicitEuler()])
def test_carried_field_solvers_differentiate_in_forward_mode(solver):
    """`adjoint=diffrax.ForwardMode()` runs the step's loop as a plain loop (forward-mode
    autodiff cannot go through the checkpointed one), `diffrax.DirectAdjoint()` as a
    bounded one: the Jacobians agree with reverse mode's."""
    model = cx.models.pendulum_chain(3, "maximal")

    def final(qd0, adjoint):
        traj = _fixed(model.system, model.q0, qd0, model.params, solver, 1e-2, 5, adjoint=adjoint)
        return traj.q[-1]

    rev = jax.jacrev(final)(model.qd0, diffrax.RecursiveCheckpointAdjoint())
    fwd = jax.jacfwd(final)(model.qd0, diffrax.ForwardMode())
    direct = jax.jacfwd(final)(model.qd0, diffrax.DirectAdjoint())
    assert float(jnp.max(jnp.abs(rev))) > 1e-3
    np.testing.assert_allclose(fwd, rev, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(direct, rev, rtol=1e-10, atol=1e-12)
