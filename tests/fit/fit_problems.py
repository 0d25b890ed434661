"""Small optimal-control problems shared by the tests of `cx.fit`."""

import pathlib
import sys

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


# opty's parallel park (`benchmarks/_trajopt/park.py`: the problem and its optimum).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from benchmarks._trajopt.park import OPTY_PARK_OPTIMUM, parallel_park  # noqa: E402, F401
