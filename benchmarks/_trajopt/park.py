r"""opty's gallery problem "Parallel Park a Car" (opty 1.5.0,
`examples-gallery/intermediate/plot_parallel_park.py`) on both sides: constrax's
`OptimalControlProblem` of the constrained car, and opty's program as its users write it
(sympy.physics.mechanics' Kane's method, opty's backward-Euler `Problem`, its guess).

The car: mass m = 1200 kg, yaw inertia I, axles a = b = 1.5 m from its centre, a steered
front wheel (mass m/6, inertia I/32) about which the steering torque T acts, a propulsion
force F at the rear axle; neither axle slips sideways. From rest to rest 2 m sideways in
30 s, least ∫F² + T² dt, |F| <= 300 N, |T| <= 50 N m, the steering angle within ±45°.
"""

from __future__ import annotations

import diffrax
import jax.numpy as jnp
import numpy as np

import constrax as cx

PARK_M, PARK_A, PARK_B = 1200.0, 1.5, 1.5
PARK_I = 1 / 12 * 1200 * (2**2 + 3**2)
# opty's optimum on 501 nodes from its own guess (run of 2026-12-02, IPOPT 3.14.11).
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


def opty_guess(t):
    """opty's own guess at time(s) `t`, as `(q, qd, u)` in constrax's coordinates: x out
    to 6 m and back, y linear to 2 m, every other state and input 1 (its body-frame speeds
    vx = vy = ω = β = 1 rotated to ẋ, ẏ at θ = 1)."""
    t = float(t)
    x = 6.0 / 30.0 * t if t < 15.0 else 6.0 - 6.0 / 30.0 * t
    q = np.array([x, 2.0 / 30.0 * t, 1.0, 1.0])
    c, s = np.cos(1.0), np.sin(1.0)
    qd = np.array([c - s, s + c, 1.0, 1.0])
    return q, qd, np.ones(2)


def opty_problem(num_nodes: int):
    """opty's `Problem` on `num_nodes` nodes and its initial guess (the gallery script,
    with `num_nodes` a parameter): `(problem, initial_guess, input names)`."""
    import sympy as sm
    import sympy.physics.mechanics as me
    from opty import Problem, create_objective_function

    m, I, a, b = sm.symbols("m, I, a, b", real=True)
    x, y, vx, vy = me.dynamicsymbols("x, y, v_x, v_y", real=True)
    theta, omega = me.dynamicsymbols("theta, omega", real=True)
    delta, beta = me.dynamicsymbols("delta, beta", real=True)
    T, F = me.dynamicsymbols("T, F", real=True)
    t = me.dynamicsymbols._t
    O, Ao, Pr, Pf = sm.symbols("O, A_o, P_r, P_F", cls=me.Point)
    N, A, B = sm.symbols("N, A, B", cls=me.ReferenceFrame)
    A.orient_axis(N, theta, N.z)
    B.orient_axis(A, delta, A.z)
    Ao.set_pos(O, x * N.x + y * N.y)
    Pr.set_pos(Ao, -b * A.x)
    Pf.set_pos(Ao, a * A.x)
    A.set_ang_vel(N, omega * N.z)
    kinematical = [
        vx - (x.diff() * N.x + y.diff() * N.y).dot(A.x),
        vy - (x.diff() * N.x + y.diff() * N.y).dot(A.y),
        omega - theta.diff(),
        beta - delta.diff(),
    ]
    O.set_vel(N, 0)
    Ao.set_vel(N, vx * A.x + vy * A.y)
    Pr.v2pt_theory(Ao, N, A)
    Pf.v2pt_theory(Ao, N, A)
    nonholonomic = [Pr.vel(N).dot(A.y), Pf.vel(N).dot(B.y)]
    car = me.RigidBody("A", Ao, A, m, (me.inertia(A, 0, 0, I), Ao))
    wheel = me.RigidBody("B", Pf, B, m / 6, (me.inertia(B, 0, 0, I / 32), Pf))
    loads = [(Pr, F * A.x), (A, -T * B.z), (B, T * B.z)]
    kane = me.KanesMethod(N, [x, y, theta, delta], [vx, beta], kd_eqs=kinematical,
                          u_dependent=[vy, omega], velocity_constraints=nonholonomic)  # fmt: skip
    fr, frstar = kane.kanes_equations([car, wheel], loads)
    eom = (fr + frstar).col_join(sm.Matrix(nonholonomic)).col_join(sm.Matrix(kinematical))
    duration = 30.0
    h = duration / (num_nodes - 1)
    par_map = {I: PARK_I, m: PARK_M, a: PARK_A, b: PARK_B}
    states = (x, y, theta, delta, vx, vy, omega, beta)
    obj, obj_grad = create_objective_function(
        sm.Integral(F**2 + T**2, t), states, (T, F), tuple(), num_nodes, h, time_symbol=t
    )
    ends = [s.func(0.0) for s in states] + [s.func(duration) for s in states]
    ends[9] = y.func(duration) - 2.0
    bounds = {delta: (np.deg2rad(-45.0), np.deg2rad(45.0)), T: (-50.0, 50.0), F: (-300.0, 300.0)}
    prob = Problem(obj, obj_grad, eom, states, num_nodes, h, known_parameter_map=par_map,
                   instance_constraints=tuple(ends), bounds=bounds, time_symbol=t)  # fmt: skip
    prob.add_option("nlp_scaling_method", "gradient-based")
    time = prob.time_vector()
    x_guess = 3.0 / duration * 2.0 * time
    x_guess[num_nodes // 2 :] = 6.0 - 3.0 / duration * 2.0 * time[num_nodes // 2 :]
    initial_guess = np.ones(prob.num_free)
    initial_guess[:num_nodes] = x_guess
    initial_guess[num_nodes : 2 * num_nodes] = 2.0 / duration * time
    names = [str(s.func) for s in prob.collocator.unknown_input_trajectories]
    return prob, initial_guess, names


def opty_controls(prob, solution, names):
    """opty's node controls as `(ts, U)`, `U[:, 0]` = T, `U[:, 1]` = F."""
    xs, us, _ = prob.parse_free(solution)
    us = np.atleast_2d(us)
    U = np.stack([us[names.index("T")], us[names.index("F")]], axis=1)
    return np.asarray(prob.time_vector()), U


def replay_miss(control) -> float:
    """The distance (m) from the parking spot (0, 2) at 30 s of the car driven from rest by
    `control(t) -> (T, F)` through the exact constrained dynamics (`cx.simulate`,
    rtol = atol = 1e-12, a rank-robust saddle-point solve)."""
    problem = parallel_park()
    system = problem.system

    def force(t, q, qd, p):
        return system.force(t, q, qd, {"u": control(t)})

    driven = cx.System(system.lagrangian, system.constraints, force=force)
    traj = cx.simulate(driven, jnp.zeros(4), jnp.zeros(4), {"u": jnp.zeros(2)}, t1=30.0,
                       stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
                       constraint_solver=cx.AutoSolver(), stabilisation=None,
                       max_steps=200_000)  # fmt: skip
    q = np.asarray(traj.q[-1])
    return float(np.hypot(q[0] - 0.0, q[1] - 2.0))
