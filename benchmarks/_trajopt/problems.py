r"""The problems of `benchmarks/trajopt.py`, both sides of each: parking the knife edge and
the cart-pole swing-up (Kelly, SIAM Review 2017, §6) as constrax `OptimalControlProblem`s,
and the equations of motion CasADi's programs are written in (the knife edge reduced by
hand to its forward speed, Kelly's closed-form cart-pole).
"""

from __future__ import annotations

import jax.numpy as jnp

import constrax as cx

try:
    import casadi as ca
except ImportError:  # optional
    ca = None


KNIFE_M, KNIFE_I = 1.0, 0.1
PARK_T1 = 5.0
PARK_Q1 = (0.0, 1.0, 0.0)
CP = dict(m1=1.0, m2=0.3, l=0.5, g=9.81)
CP_T1 = 2.0
CP_UMAX, CP_XMAX = 20.0, 2.0


def knife_force(t, q, qd, p):
    u, th = p["u"], q[2]
    return jnp.stack([u[0] * jnp.cos(th), u[0] * jnp.sin(th), u[1]])


def knife_basis(t, q, p):
    """The knife edge's rolling directions, the columns of S in qd = S v (quasi-velocities
    v = (forward speed, turn rate): the coordinates of CasADi's hand-reduced model)."""
    c, s = jnp.cos(q[2]), jnp.sin(q[2])
    return jnp.array([[c, 0.0], [s, 0.0], [0.0, 1.0]])


def parking_problem() -> cx.fit.OptimalControlProblem:
    model = cx.models.knife_edge()
    assert float(model.params["m"]) == KNIFE_M and float(model.params["I"]) == KNIFE_I
    system = cx.System(model.system.lagrangian, model.system.constraints, force=knife_force)
    return cx.fit.OptimalControlProblem(
        system,
        {**model.params, "u": jnp.zeros(2)},
        control=lambda p: p["u"],
        t1=PARK_T1,
        q0=jnp.zeros(3),
        qd0=jnp.zeros(3),
        q1=jnp.array(PARK_Q1),
        qd1=jnp.zeros(3),
        running_cost=lambda t, q, qd, u, p: u @ u,
    )


def cartpole_lagrangian(t, q, qd, p):
    x, th = q
    xd, thd = qd
    m1, m2, l, g = p["m1"], p["m2"], p["l"], p["g"]
    bob = (xd + l * jnp.cos(th) * thd) ** 2 + (l * jnp.sin(th) * thd) ** 2
    return 0.5 * m1 * xd**2 + 0.5 * m2 * bob + m2 * g * l * jnp.cos(th)


def cartpole_system() -> cx.System:
    return cx.System(
        cartpole_lagrangian, force=lambda t, q, qd, p: jnp.stack([p["u"][0], 0.0 * q[1]])
    )


def cartpole_problem(min_time: bool = False) -> cx.fit.OptimalControlProblem:
    params = {k: jnp.array(v) for k, v in CP.items()} | {"u": jnp.zeros(1)}
    common = dict(
        control=lambda p: p["u"],
        t1=CP_T1,
        q0=jnp.zeros(2),
        qd0=jnp.zeros(2),
        q1=jnp.array([1.0, jnp.pi]),
        qd1=jnp.zeros(2),
        control_bounds=(-CP_UMAX, CP_UMAX),
        q_bounds=([-CP_XMAX, -jnp.inf], [CP_XMAX, jnp.inf]),
    )
    if min_time:
        return cx.fit.OptimalControlProblem(
            cartpole_system(),
            params,
            t1_bounds=(0.1, 10.0),
            terminal_cost=lambda t, q, qd, p: t,
            **common,
        )
    return cx.fit.OptimalControlProblem(
        cartpole_system(), params, running_cost=lambda t, q, qd, u, p: u @ u, **common
    )


def _knife_f(x, u):
    return ca.vertcat(
        x[3] * ca.cos(x[2]), x[3] * ca.sin(x[2]), x[4], u[0] / KNIFE_M, u[1] / KNIFE_I
    )


def _cartpole_f(x, u):  # Kelly 2017, eqs. (6.1)-(6.2)
    m1, m2, l, g = CP["m1"], CP["m2"], CP["l"], CP["g"]
    th, thd = x[1], x[3]
    xdd = (l * m2 * ca.sin(th) * thd**2 + u[0] + m2 * g * ca.cos(th) * ca.sin(th)) / (
        m1 + m2 * (1 - ca.cos(th) ** 2)
    )
    thdd = -(
        l * m2 * ca.cos(th) * ca.sin(th) * thd**2 + u[0] * ca.cos(th) + (m1 + m2) * g * ca.sin(th)
    ) / (l * m1 + l * m2 * (1 - ca.cos(th) ** 2))
    return ca.vertcat(x[2], x[3], xdd, thdd)
