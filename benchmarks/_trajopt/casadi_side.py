r"""CasADi's side of `benchmarks/trajopt.py`: its trapezoidal and Hermite–Simpson programs
(`casadi.Opti`, Kelly 2017 §3–4) for each problem, their straight-line and perturbed
starts, timed solves, and the replay of their controls through `cx.simulate`.
"""

from __future__ import annotations

import statistics
import time

import diffrax
import jax.numpy as jnp
import numpy as np

import constrax as cx

try:
    import casadi as ca
except ImportError:  # optional
    ca = None

from benchmarks._trajopt.harness import IPOPT_OPTIONS, REPLAY_TOL
from benchmarks._trajopt.problems import (
    CP,
    CP_T1,
    CP_UMAX,
    CP_XMAX,
    PARK_Q1,
    PARK_T1,
    _cartpole_f,
    _knife_f,
    cartpole_lagrangian,
    knife_force,
)

HS = "hermite-simpson"


def casadi_parking_guess(N: int):
    """CasADi's perturbed parking guess (`run_casadi` with `perturb=1e-2`: the straight
    line, then `_perturb_casadi`) as a constrax guess `t -> (q, qd, u)` on its nodes
    (qd = S(q) v): the very starting point of CasADi's iterations."""
    P = _casadi_program("parking", N)
    X0, U0 = _perturb_casadi(P["X0"], P["U0"], 1e-2, 0, P["xb"], P["ub"])

    def guess(t):
        k = int(round(float(t) / PARK_T1 * N))
        x, y, th, v, om = X0[:, k]
        return np.array([x, y, th]), np.array([v * np.cos(th), v * np.sin(th), om]), U0[:, k]

    return guess


def _casadi_program(name: str, N: int, scheme: str = "trapezoidal"):
    """CasADi's program: trapezoidal collocation (Kelly 2017, §3) or Hermite–Simpson in
    separated form (§4: midpoint states and controls as variables, Simpson's quadrature),
    as constrax's transcriptions of the same names. A dict: `opti`, the objective `J`, the
    variables `X (nx, N+1)`, `U (nu, N+1)` [, `Xm (nx, N)`, `Um (nu, N)`], their straight-
    line guesses `X0`, `U0` [, `Xm0`, `Um0`] and the bounds `xb` (on the leading states) and
    `ub`."""
    parking = name == "parking"
    nx, nu, f = (5, 2, _knife_f) if parking else (4, 1, _cartpole_f)
    T1 = PARK_T1 if parking else CP_T1
    x1 = [*PARK_Q1, 0.0, 0.0] if parking else [1.0, np.pi, 0.0, 0.0]
    opti = ca.Opti()
    X, U = opti.variable(nx, N + 1), opti.variable(nu, N + 1)
    hs = scheme == HS
    if hs:
        Xm, Um = opti.variable(nx, N), opti.variable(nu, N)
    h = T1 / N
    J = 0
    for k in range(N):
        f0, f1 = f(X[:, k], U[:, k]), f(X[:, k + 1], U[:, k + 1])
        if hs:
            fm = f(Xm[:, k], Um[:, k])
            opti.subject_to(X[:, k + 1] == X[:, k] + h / 6 * (f0 + 4 * fm + f1))
            opti.subject_to(Xm[:, k] == 0.5 * (X[:, k] + X[:, k + 1]) + h / 8 * (f0 - f1))
            J += h / 6 * (ca.sumsqr(U[:, k]) + 4 * ca.sumsqr(Um[:, k]) + ca.sumsqr(U[:, k + 1]))
        else:
            opti.subject_to(X[:, k + 1] == X[:, k] + h / 2 * (f0 + f1))
            J += h / 2 * (ca.sumsqr(U[:, k]) + ca.sumsqr(U[:, k + 1]))
    opti.subject_to(X[:, 0] == 0)
    opti.subject_to(X[:, N] == ca.DM(x1))
    xb, ub = (None, None), (None, None)
    if not parking:
        ub, xb = (-CP_UMAX, CP_UMAX), (np.array([-CP_XMAX]), np.array([CP_XMAX]))
        for Uv, Xv in ((U, X), (Um, Xm)) if hs else ((U, X),):
            opti.subject_to(opti.bounded(-CP_UMAX, Uv, CP_UMAX))
            opti.subject_to(opti.bounded(-CP_XMAX, Xv[0, :], CP_XMAX))
    opti.minimize(J)

    def line(tau):  # the positions along the straight line, the velocities zero
        X0 = np.zeros((nx, tau.size))
        npos = 3 if parking else 2
        X0[:npos] = np.outer(x1[:npos], tau)
        return X0

    tau = np.linspace(0.0, 1.0, N + 1)
    out = dict(opti=opti, J=J, X=X, U=U, X0=line(tau), U0=np.zeros((nu, N + 1)), xb=xb, ub=ub)
    if hs:
        out.update(Xm=Xm, Um=Um, Xm0=line(0.5 * (tau[:-1] + tau[1:])), Um0=np.zeros((nu, N)))
    return out


def _perturb_casadi(X0, U0, size, seed, xbounds, ubounds, Xm0=None, Um0=None):
    """`size * max(1, |z|) * N(0, 1)` on the free node states (not the fixed first and last
    node), the controls and any midpoint states and controls (drawn after the others, so
    the node draws are the trapezoid's), clipped to the bounds (as `solve_optimal_control`
    does)."""
    rng = np.random.default_rng(seed)
    move = lambda A: A + size * np.maximum(1.0, np.abs(A)) * rng.standard_normal(A.shape)  # noqa: E731
    X = move(X0)
    X[:, 0], X[:, -1] = X0[:, 0], X0[:, -1]
    U = move(U0)
    mids = [move(A) for A in (Xm0, Um0) if A is not None]
    for A in [X, *mids[:1]]:
        if xbounds[0] is not None:
            k = len(xbounds[0])
            A[:k] = np.clip(A[:k], xbounds[0][:, None], xbounds[1][:, None])
    if ubounds[0] is not None:
        U = np.clip(U, *ubounds)
        mids[1:] = [np.clip(A, *ubounds) for A in mids[1:]]
    return (X, U, *mids)


def _casadi_start(name: str, N: int, scheme: str, perturb: float | None, seed: int = 0):
    """CasADi's program with its starting point set (the straight line, perturbed with
    `seed` when `perturb`) and IPOPT as solver, the options of the constrax rows."""
    P = _casadi_program(name, N, scheme)
    hs = scheme == HS
    start = (P["X0"], P["U0"], *((P["Xm0"], P["Um0"]) if hs else ()))
    if perturb:
        start = _perturb_casadi(*start[:2], perturb, seed, P["xb"], P["ub"], *start[2:])
    for var, value in zip(("X", "U", "Xm", "Um"), start, strict=False):
        P["opti"].set_initial(P[var], value)
    P["opti"].solver(
        "ipopt", {"print_time": False}, {"print_level": 0, "sb": "yes", **IPOPT_OPTIONS}
    )
    return P


def casadi_replay(name: str, ts, Xn, Un, Um=None) -> float:
    """The CasADi controls (linear between the nodes; with midpoint controls `Um`, the
    quadratic through node, midpoint and node on each interval, as constrax's
    Hermite–Simpson control) applied to `cx.simulate` of the constrained constrax system;
    the largest difference from the node states."""
    ts = jnp.asarray(ts)
    Un = jnp.asarray(Un.T)  # (N+1, nu)
    Um = None if Um is None else jnp.asarray(Um.T)  # (N, nu)

    def control(t):
        if Um is None:
            return jnp.stack([jnp.interp(t, ts, Un[:, j]) for j in range(Un.shape[1])])
        k = jnp.clip(jnp.searchsorted(ts, t, side="right") - 1, 0, ts.shape[0] - 2)
        r = (t - ts[k]) / (ts[k + 1] - ts[k])
        a, m, b = Un[k], Um[k], Un[k + 1]
        return a * (2 * r - 1) * (r - 1) + m * 4 * r * (1 - r) + b * r * (2 * r - 1)

    if name == "parking":
        model = cx.models.knife_edge()
        params = {**model.params, "u": jnp.zeros(2)}
        system = cx.System(
            model.system.lagrangian,
            model.system.constraints,
            force=lambda t, q, qd, p: knife_force(t, q, qd, {**p, "u": control(t)}),
        )
        x, y, th, v, om = Xn
        q = np.stack([x, y, th], 1)
        qd = np.stack([v * np.cos(th), v * np.sin(th), om], 1)
    else:
        params = {k: jnp.array(v) for k, v in CP.items()} | {"u": jnp.zeros(1)}
        system = cx.System(
            cartpole_lagrangian, force=lambda t, q, qd, p: jnp.stack([control(t)[0], 0.0 * q[1]])
        )
        q, qd = Xn[:2].T, Xn[2:].T
    traj = cx.simulate(
        system,
        jnp.asarray(q[0]),
        jnp.asarray(qd[0]),
        params,
        t0=float(ts[0]),
        t1=float(ts[-1]),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=REPLAY_TOL, atol=REPLAY_TOL),
        constraint_solver=cx.KKT(),
        stabilisation=None,
        max_steps=100_000,
    )
    err = np.concatenate([np.asarray(traj.q) - q, np.asarray(traj.qd) - qd], 1)
    return float(np.abs(err).max())


def run_casadi(
    name: str, N: int, repeats: int, perturb: float | None, scheme: str = "trapezoidal"
) -> dict:
    t0 = time.perf_counter()
    P = _casadi_start(name, N, scheme, perturb)
    opti, J, X, U = P["opti"], P["J"], P["X"], P["U"]
    build_s = time.perf_counter() - t0
    walls, first = [], None
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        try:
            opti.solve()
        except RuntimeError:  # IPOPT failed: Opti raises; the last iterate is in opti.debug
            pass
        w = time.perf_counter() - t0
        if i == 0:
            first = w
        else:
            walls.append(w)
    sol = opti.debug
    stats = opti.stats()
    g = np.asarray(sol.value(opti.g)).ravel()
    lbg = np.asarray(opti.value(opti.lbg)).ravel()
    ubg = np.asarray(opti.value(opti.ubg)).ravel()
    viol = float(np.max(np.maximum(np.maximum(lbg - g, g - ubg), 0.0)))
    Xn, Un = np.asarray(sol.value(X)), np.atleast_2d(np.asarray(sol.value(U)))
    Um = np.atleast_2d(np.asarray(sol.value(P["Um"]))) if scheme == HS else None
    ts = np.linspace(0.0, PARK_T1 if name == "parking" else CP_T1, N + 1)
    finite = bool(np.all(np.isfinite(Xn)) and np.all(np.isfinite(Un)))
    return {
        "problem": name,
        "N": N,
        "contender": "casadi" + (" (Hermite-Simpson)" if scheme == HS else ""),
        "transcription": ("Hermite-Simpson (separated)" if scheme == HS else "trapezoidal")
        + (" (constraint eliminated by hand)" if name == "parking" else ""),
        "guess": f"linear + perturbation {perturb:g}" if perturb else "linear (exact)",
        "objective": float(sol.value(J)),
        "success": bool(stats["success"]),
        "status": stats["return_status"],
        "iterations": int(stats["iter_count"]),
        "solve_min_s": min(walls),
        "solve_median_s": statistics.median(walls),
        "solve_samples_s": walls,
        "first_solve_s": first,
        "build_s": build_s,
        "max_violation": viol,
        "replay_error": casadi_replay(name, ts, Xn, Un, Um) if finite else None,
    }
