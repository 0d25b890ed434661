"""Small optimal-control problems shared by the tests of `cx.fit`."""

import diffrax
import jax.numpy as jnp
import numpy as np

import constrax as cx


def double_integrator(d=10.0, T=1.0, **kw) -> cx.fit.OptimalControlProblem:
    """A unit mass, `q̈ = u`, moved by `d` in time `T` from rest to rest (`kw`: costs,
    bounds, ... of `cx.fit.OptimalControlProblem`)."""
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd, force=lambda t, q, qd, p: p["u"])
    return cx.fit.OptimalControlProblem(
        system,
        {"u": jnp.zeros(1)},
        control=lambda p: p["u"],
        t1=T,
        q0=jnp.zeros(1),
        qd0=jnp.zeros(1),
        q1=jnp.full(1, d),
        qd1=jnp.zeros(1),
        **kw,
    )


def snake_steering(T, points=1001):
    """The snake cart (`cx.models.snake_cart`) steered by its torque, least ∫τ² dt, to the
    pose its default torque τ = 0.3 sin t reaches at `T` (rank-robust saddle-point
    solve), and the default torque's trajectory (tolerances 1e-11, saved on `points`
    times): `(model, problem, reference)`."""
    model = cx.models.snake_cart()
    ts = jnp.linspace(0.0, T, points)
    tight = diffrax.PIDController(rtol=1e-11, atol=1e-11)
    reference = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=T,
                            saveat=diffrax.SaveAt(ts=ts), stepsize_controller=tight,
                            constraint_solver=cx.AutoSolver(), max_steps=100_000)  # fmt: skip
    force = lambda t, q, qd, p: jnp.stack([0 * t, 0 * t, 0 * t, p["u"][0]])  # noqa: E731
    system = cx.System(model.system.lagrangian, model.system.constraints, force=force)
    problem = cx.fit.OptimalControlProblem(
        system,
        {**model.params, "u": jnp.zeros(1)},
        control=lambda p: p["u"],
        t1=T,
        q0=model.q0,
        qd0=model.qd0,
        terminal_constraint=lambda t, q, qd, p: q - reference.q[-1],
        running_cost=lambda t, q, qd, u, p: u @ u,
        constraint_solver=cx.AutoSolver(),
    )
    return model, problem, reference


def crossings(phi) -> int:
    """The number of crossings of φ = π/2 + kπ along the samples `phi`."""
    return int(np.abs(np.diff(np.round((np.asarray(phi) - np.pi / 2) / np.pi))).sum())


# opty 1.5.0's gallery problem "Parallel Park a Car" (examples-gallery/intermediate/
# plot_parallel_park.py): a car (mass m, yaw inertia I, axles a and b from its centre) with a
# steered front wheel (mass m/6, inertia I/32) that slips sideways at neither axle, moved
# 2 m sideways in 30 s from rest to rest by a propulsion force F at the rear axle and a
# steering torque T, minimising ∫F² + T² dt with |F| <= 300 N, |T| <= 50 N m and the
# steering angle within ±45°. opty's optimum on 501 nodes (backward Euler): 3.2022690e5.
PARK_M, PARK_A, PARK_B = 1200.0, 1.5, 1.5
PARK_I = 1 / 12 * 1200 * (2**2 + 3**2)
OPTY_PARK_OPTIMUM = 3.2022690e5


def _car_lagrangian(t, q, qd, p):
    th, (xd, yd, thd, ded) = q[2], qd
    front = jnp.stack([xd - PARK_A * jnp.sin(th) * thd, yd + PARK_A * jnp.cos(th) * thd])
    body = 0.5 * PARK_M * (xd**2 + yd**2) + 0.5 * PARK_I * thd**2
    return body + 0.5 * (PARK_M / 6) * front @ front + 0.5 * (PARK_I / 32) * (thd + ded) ** 2


def _car_no_slip(t, q, p):
    """The lateral velocities of the rear and the front wheel contacts (rows of ω q̇ = 0)."""
    th, de = q[2], q[3]
    return jnp.array([
        [-jnp.sin(th), jnp.cos(th), -PARK_B, 0.0],
        [-jnp.sin(th + de), jnp.cos(th + de), PARK_A * jnp.cos(de), 0.0],
    ])  # fmt: skip


def _car_force(t, q, qd, p):
    T, F = p["u"]
    return jnp.stack([F * jnp.cos(q[2]), F * jnp.sin(q[2]), 0.0 * F, T])


def parallel_park() -> cx.fit.OptimalControlProblem:
    """opty's parallel park (above): q = (x, y, θ, δ), u = (T, F)."""
    system = cx.System(_car_lagrangian, cx.Pfaffian(_car_no_slip), force=_car_force)
    quarter = np.pi / 4
    return cx.fit.OptimalControlProblem(
        system,
        {"u": jnp.zeros(2)},
        control=lambda p: p["u"],
        t1=30.0,
        q0=jnp.zeros(4),
        qd0=jnp.zeros(4),
        q1=jnp.array([0.0, 2.0, 0.0, 0.0]),
        qd1=jnp.zeros(4),
        running_cost=lambda t, q, qd, u, p: u @ u,
        control_bounds=([-50.0, -300.0], [50.0, 300.0]),
        q_bounds=([-np.inf, -np.inf, -np.inf, -quarter], [np.inf, np.inf, np.inf, quarter]),
    )
