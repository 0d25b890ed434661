"""Small optimal-control problems shared by the tests of `cx.fit`."""

import jax.numpy as jnp

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
