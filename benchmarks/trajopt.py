r"""Trajectory optimisation: constrax (`cx.fit.HermiteSimpson` or `cx.fit.Trapezoidal` +
`cx.fit.IPOPT`) against CasADi + IPOPT (`casadi.Opti`, trapezoidal and Hermite–Simpson
collocation, equations typed in by hand). Like for like means the same transcription on
the same grid: constrax's trapezoidal rows against CasADi's trapezoid, its (default)
Hermite–Simpson rows against CasADi's Hermite–Simpson (on the cart-pole, whose coordinates
are the same on both sides, the same discrete problems: the optima agree to the digits
printed).

Usage (from the repository root):

    python benchmarks/trajopt.py                  # -> benchmarks/results/trajopt_cpu.{json,md}
    python benchmarks/trajopt.py --out /tmp/bench --repeats 3 --note "..."
    python benchmarks/trajopt.py --compile-repeats 1    # one cold compile per structure

The run takes about 9 minutes on a loaded 2-core machine (most of it the constrax compiles:
`--repeats` cold compiles of ~10 s per structure, plus the first solve's own).

CasADi is optional (`pip install casadi`); without it its rows are skipped with a note.
constrax's IPOPT comes from `cyipopt` (`pip install 'constrax[trajopt]'`).

Problems (docs page "Trajectory optimisation"):

- **parking** — knife edge (`cx.models.knife_edge()`, $m = 1$, $I = 0.1$) driven by a push
  $u_1$ along the heading and a torque $u_2$: from rest at the origin to rest at
  $(0, 1, 0)$ (a sideways move) in $t_1 = 5$, minimising $\int_0^{t_1}|u|^2dt$. constrax
  solves the constrained system in $(x, y, \theta)$ with the no-side-slip row; CasADi the
  reduced equations with the constraint eliminated by hand ($v$ the forward speed):
  $m\dot v = u_1$, $I\ddot\theta = u_2$, $\dot x = v\cos\theta$, $\dot y = v\sin\theta$.
- **cart-pole swing-up** (Kelly, SIAM Review 2017, §6): $m_1 = 1$, $m_2 = 0.3$, $l = 0.5$,
  $g = 9.81$, from $(0, 0)$ to $(1, \pi)$ at rest in $t_1 = 2$, $|u| \le 20$, $|x| \le 2$,
  minimising $\int u^2dt$. constrax from the Lagrangian; CasADi with Kelly's closed-form
  equations of motion.
- **minimum-time cart-pole** (constrax only): the same boundary conditions, $t_1$ free in
  $[0.1, 10]$, terminal cost $t_1$.
- **parking by direct multiple shooting** (constrax only): 25 segments of 8 Tsit5 steps,
  exact Hessian and L-BFGS, in the default coordinates and on quasi-velocities.

Both sides start from the same linear interpolation of the end states (velocities and
controls zero) and run IPOPT (MUMPS) with the same options (`tol = 1e-9`,
`constr_viol_tol = 1e-10`, `mu_strategy = adaptive`). constrax by default moves that guess
by seeded relative noise of size `jitter = 1e-2` (`solve_optimal_control`); CasADi's
trapezoid is run from the exact guess and from the same kind of perturbation
(`1e-2 * max(1, |z|) * N(0, 1)` on the free node states and the controls, numpy seed 0),
its Hermite–Simpson from the perturbed guess (the midpoint states and controls moved too).
At the end: interleaved pairs of solves (one process, alternating, 15 rounds) and a survey
of 10 seeded starts.

Per row: objective, IPOPT status and iterations, solve wall time (min and median over
`--repeats` solves, after a first one: compile/build excluded), the largest constraint or
bound violation, and the replay error: the controls (constrax: its piecewise-quadratic
control, `sol.replay_error()`; CasADi: its node controls interpolated linearly, or
quadratically through the midpoint control for Hermite–Simpson) applied to
`cx.simulate` of the constrained system (rtol = atol = 1e-12) from the first node, the
largest difference from the node states. For constrax also the compile time of the three
programs behind IPOPT's callbacks (objective and constraints; gradient and Jacobian values;
Hessian values): trace + lower and XLA compile, each from cold caches
(`jax.clear_caches()`), `--repeats` times, plus the first solve minus the median of the later
ones (the same cost seen by a user).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

if __name__ == "__main__":  # the entry point: float64 before constrax makes an array
    jax.config.update("jax_enable_x64", True)

import constrax as cx  # noqa: E402
from benchmarks._cases import require_x64  # noqa: E402
from benchmarks._report import loadavg, machine_info, md_table, write_json  # noqa: E402
from benchmarks._timing import cold_compile_settings  # noqa: E402
from constrax.fit import _ipopt  # noqa: E402
from constrax.fit._optimal_control import _guess  # noqa: E402

try:
    import casadi as ca
except ImportError:  # optional
    ca = None

IPOPT_OPTIONS = dict(tol=1e-9, constr_viol_tol=1e-10, mu_strategy="adaptive")
REPLAY_TOL = 1e-12  # as OptimalControlSolution.replay: no stabilisation

# ----------------------------------------------------------------------------------------
# The problems in constrax.

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


# ----------------------------------------------------------------------------------------
# constrax


def compile_callbacks(nlp, z0: np.ndarray, repeats: int, hessian: bool = True) -> dict:
    """Trace + lower and XLA compile of the programs behind IPOPT's callbacks (`values`:
    objective and constraints; `derivatives`: gradient and Jacobian; `hessian`, only when
    IPOPT uses it), from cold caches."""
    z = np.asarray(z0, np.float64)
    lam = np.ones(nlp.layout.nc)
    one = np.asarray(1.0)
    treedef, leaves, arrays_treedef, arrays = _ipopt._split(nlp)
    jitted = lambda name: _ipopt._jitted(treedef, leaves, arrays_treedef, name)
    calls = {
        "values": (jitted("values"), (arrays, z)),
        "derivatives": (jitted("derivatives"), (arrays, z)),
    }
    if hessian:
        calls["hessian"] = (jitted("hessian"), (arrays, z, lam, one))
    samples = []
    for _ in range(repeats):
        per = {}
        for name, (fn, args) in calls.items():
            jax.clear_caches()
            t0 = time.perf_counter()
            lowered = fn.lower(*args)
            t1 = time.perf_counter()
            lowered.compile()
            t2 = time.perf_counter()
            per[name] = {"trace_lower_s": t1 - t0, "xla_s": t2 - t1}
        per["total_trace_lower_s"] = sum(v["trace_lower_s"] for v in per.values())
        per["total_xla_s"] = sum(
            v["xla_s"] for k, v in per.items() if isinstance(v, dict) and "xla_s" in v
        )
        samples.append(per)
    jax.clear_caches()
    tot = [s["total_trace_lower_s"] + s["total_xla_s"] for s in samples]
    return {
        "samples": samples,
        "trace_lower_min_s": min(s["total_trace_lower_s"] for s in samples),
        "xla_min_s": min(s["total_xla_s"] for s in samples),
        "total_min_s": min(tot),
        "total_median_s": statistics.median(tot),
    }


def run_constrax(
    name: str,
    problem,
    N: int,
    repeats: int,
    jitter: float = 1e-2,
    compile_repeats=None,
    transcription=None,
    hessian: str = "exact",
) -> dict:
    transcription = cx.fit.HermiteSimpson(N) if transcription is None else transcription
    solver = cx.fit.IPOPT(
        tol=IPOPT_OPTIONS["tol"], constr_viol_tol=IPOPT_OPTIONS["constr_viol_tol"], hessian=hessian
    )  # mu_strategy adaptive is IPOPT()'s default
    nlp = transcription.nlp(problem)
    z0, _ = _guess(nlp, transcription, None)
    compile_ = compile_callbacks(
        nlp, z0, repeats if compile_repeats is None else compile_repeats, hessian == "exact"
    )

    def solve():
        t0 = time.perf_counter()
        sol = cx.fit.solve_optimal_control(
            problem, transcription=transcription, solver=solver, jitter=jitter
        )
        return sol, time.perf_counter() - t0

    sol, first = solve()
    walls = []
    for _ in range(repeats):
        s, w = solve()
        walls.append(w)
        assert s.objective == sol.objective and s.iterations == sol.iterations
    t0 = time.perf_counter()
    replay = sol.replay_error()
    replay_s = time.perf_counter() - t0
    row = _row(name, N, transcription, jitter, sol, walls)
    row["transcription"] += "" if hessian == "exact" else ", L-BFGS"
    row.update(
        {
            "first_solve_s": first,
            "first_minus_warm_s": first - statistics.median(walls),
            "compile": compile_,
            "replay_error": replay,
            "replay_wall_s_with_compile": replay_s,
            "nlp_variables": int(nlp.layout.nz),
            "nlp_constraints": int(nlp.layout.nc),
        }
    )
    if problem.free_time:
        row["t1"] = float(sol.t1)
        row["max_abs_u"] = float(jnp.max(jnp.abs(jnp.concatenate([sol.u, sol.u_mid]))))
    return row, sol


def _row(name, N, transcription, jitter, sol, walls) -> dict:
    """The fields every constrax row has: what was solved, the result, the solve times."""
    kind = ""
    if isinstance(transcription, cx.fit.DirectMultipleShooting):
        kind = " (shooting)"
    elif isinstance(transcription, cx.fit.Trapezoidal):
        kind = " (trapezoidal)"
    if getattr(transcription, "velocity_basis", None) is not None:
        kind = kind[:-1] + ", quasi-velocities)" if kind else " (quasi-velocities)"
    return {
        "problem": name,
        "N": N,
        "contender": "constrax" + kind,
        "transcription": _describe(transcription),
        "guess": f"linear + jitter {jitter:g}" if jitter else "linear (exact)",
        "objective": sol.objective,
        "success": sol.success,
        "status": sol.status,
        "iterations": sol.iterations,
        "solve_min_s": min(walls),
        "solve_median_s": statistics.median(walls),
        "solve_samples_s": walls,
        "max_violation": sol.constraint_violation,
        "manifold_violation": sol.manifold_violation,
    }


def _describe(transcription) -> str:
    if isinstance(transcription, cx.fit.DirectMultipleShooting):
        where = (
            "rows at the nodes"
            if transcription.velocity_basis is None
            else "on quasi-velocities (q, v), qd = S(q) v"
        )
        return (
            f"multiple shooting ({transcription.segments} x {transcription.steps} Tsit5 steps), "
            + where
        )
    if getattr(transcription, "velocity_basis", None) is not None:
        scheme = (
            "trapezoidal" if isinstance(transcription, cx.fit.Trapezoidal) else "Hermite-Simpson"
        )
        return f"{scheme} on quasi-velocities (q, v), qd = S(q) v"
    if isinstance(transcription, cx.fit.Trapezoidal):
        return "trapezoidal, rows at the nodes"
    return "Hermite-Simpson (separated), rows at the nodes"


def run_constrax_again(
    name, problem, N, repeats, jitter, transcription=None, guess=None, guess_name=None
) -> dict:
    """Another guess on an already compiled structure (no compile measurement)."""
    transcription = cx.fit.HermiteSimpson(N) if transcription is None else transcription
    solver = cx.fit.IPOPT(
        tol=IPOPT_OPTIONS["tol"], constr_viol_tol=IPOPT_OPTIONS["constr_viol_tol"]
    )
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sol = cx.fit.solve_optimal_control(
            problem, guess, transcription=transcription, solver=solver, jitter=jitter
        )
        walls.append(time.perf_counter() - t0)
    row = {
        **_row(name, N, transcription, jitter, sol, walls),
        "replay_error": sol.replay_error() if sol.success else None,
    }
    if guess_name is not None:
        row["guess"] = guess_name
    return row


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


# ----------------------------------------------------------------------------------------
# CasADi


HS = "hermite-simpson"


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


# ----------------------------------------------------------------------------------------
# Report


def _g(x, digits=7):
    return "—" if x is None else f"{x:.{digits}g}"


def _e(x):
    return "—" if x is None else f"{x:.1e}"


def _esc(s) -> str:
    return str(s).replace("|", "\\|")


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        "# Trajectory optimisation benchmarks (CPU)",
        "",
        f"- date (UTC): {m['date_utc']}; wall time of the run {result['wall_s']:.0f} s",
        f"- machine: {m['cpu_model']}, {m['cpu_cores']} cores ({m['platform']}); "
        f"load average (1, 5, 15 min) at start {m['loadavg_at_start']}, at end "
        f"{m['loadavg_at_end']}",
        f"- versions: python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, "
        f"diffrax {m['diffrax']}, equinox {m['equinox']}, constrax {m['constrax']}, "
        f"cyipopt {m['cyipopt']}, casadi {m['casadi']}; persistent compilation cache: "
        f"{'on' if m['persistent_compilation_cache'] else 'off'}",
        f"- IPOPT options (both): {result['config']['ipopt_options']}, MUMPS",
        f"- note: {result['note']}",
        "",
        "Solve: wall time of one solve, minimum (median) over "
        f"{result['config']['repeats']} repeats after a first solve (compile / build "
        "excluded). Violation: the largest constraint or bound violation. Replay: the "
        "controls applied to `cx.simulate` of the constrained system (rtol = atol = 1e-12, "
        "no stabilisation), "
        "largest difference from the node states. Compile (constrax): trace + lower and "
        "XLA compile of the IPOPT callbacks from cold caches (no Hessian under L-BFGS), "
        "minimum over "
        f"{result['config']['compile_repeats']}.",
        "",
    ]
    header = [
        "problem",
        "N",
        "contender",
        "guess",
        "objective",
        "status",
        "iter",
        "solve s",
        "compile s (trace+lower / XLA)",
        "violation",
        "replay error",
    ]
    rows = []
    for r in result["rows"]:
        if r.get("skipped"):
            rows.append(
                [
                    r["problem"],
                    r["N"],
                    r["contender"],
                    "—",
                    "—",
                    _esc(r["skipped"]),
                    "—",
                    "—",
                    "—",
                    "—",
                    "—",
                ]
            )
            continue
        c = r.get("compile")
        comp = (
            f"{c['total_min_s']:.1f} ({c['trace_lower_min_s']:.1f} / {c['xla_min_s']:.1f})"
            if c
            else "—"
        )
        obj = _g(r["objective"])
        if "t1" in r:
            obj += f" (t1 = {r['t1']:.6g}, max \\|u\\| = {r['max_abs_u']:.4g})"
        rows.append(
            [
                r["problem"],
                r["N"],
                r["contender"],
                _esc(r["guess"]),
                obj,
                _esc(r["status"]),
                r["iterations"],
                f"{r['solve_min_s']:.3f} ({r['solve_median_s']:.3f})",
                comp,
                _e(r["max_violation"]),
                _e(r["replay_error"]),
            ]
        )
    lines += md_table(header, rows)
    lines += [
        "",
        "First constrax solve minus the median warm solve (compile as a user sees it):",
        "",
    ]
    for r in result["rows"]:
        if r.get("contender", "").startswith("constrax") and "first_minus_warm_s" in r:
            lines.append(
                f"- {r['problem']} N={r['N']}, {r['transcription']}: "
                f"{r['first_minus_warm_s']:.1f} s "
                f"(NLP {r['nlp_variables']} variables, {r['nlp_constraints']} constraints)"
            )
    pairs = result.get("interleaved")
    if pairs:
        lines += [
            "",
            "Like for like, interleaved: CasADi's parking program and constrax's on the same "
            f"grid, solved alternately {pairs[0]['rounds']} times each in one process; wall "
            "time of a solve, minimum (median), and the iterations (CasADi / constrax). "
            "CasADi starts from its perturbed straight line (seed 0); constrax's trapezoid on "
            "quasi-velocities from that very point (the same program: the same iterates), "
            "its Hermite-Simpson rows from its own jittered default guess (seed 0).",
            "",
        ]
        rows = [
            [
                r["N"],
                r["pair"],
                f"{r['casadi']['min_s']:.3f} ({r['casadi']['median_s']:.3f})",
                f"{r['constrax']['min_s']:.3f} ({r['constrax']['median_s']:.3f})",
                f"{r['casadi']['iterations']} / {r['constrax']['iterations']}",
                f"{r['ratio_min']:.2f} ({r['ratio_median']:.2f})",
            ]
            for r in pairs
        ]
        header = ["N", "programs", "casadi s", "constrax s", "iterations", "constrax / casadi"]
        lines += md_table(header, rows)
    survey = result.get("survey")
    if survey:
        lines += [
            "",
            f"Parking from {len(survey['seeds'])} seeded starts (seeds {survey['seeds'][0]}–"
            f"{survey['seeds'][-1]}: constrax's `jitter=1e-2` with `seed=`, CasADi's "
            "perturbation with the numpy seed): how many reach the optimum (objective "
            f"within {survey['within']:.0%} of {survey['optimum']}, status solved), IPOPT's "
            "iterations over all the starts, and the objectives of the others (local minima "
            "or failures).",
            "",
        ]
        rows = [
            [
                r["N"],
                r["contender"],
                f"{r['reached']} / {len(r['objectives'])}",
                f"{statistics.median(r['iterations']):g} ({min(r['iterations'])}–"
                f"{max(r['iterations'])})",
                ", ".join(_g(o) for o, ok in zip(r["objectives"], r["ok"], strict=True) if not ok)
                or "—",
            ]
            for r in survey["rows"]
        ]
        header = [
            "N",
            "contender",
            "reached",
            "iterations, median (range)",
            "objectives of the others",
        ]
        lines += md_table(header, rows)
    lines.append("")
    return "\n".join(lines)


INTERLEAVED = (
    # (label, CasADi's scheme, constrax's transcription, constrax from CasADi's start)
    ("trapezoid on quasi-velocities, CasADi's start (the same program and iterates)",
     "trapezoidal", lambda N: cx.fit.Trapezoidal(N, velocity_basis=knife_basis), True),
    ("Hermite-Simpson, default coordinates (each from its own perturbed start)",
     HS, lambda N: cx.fit.HermiteSimpson(N), False),
    ("Hermite-Simpson on quasi-velocities (each from its own perturbed start)",
     HS, lambda N: cx.fit.HermiteSimpson(N, velocity_basis=knife_basis), False),
)  # fmt: skip


def interleaved(problem, N: int, label, scheme, transcription, casadi_start, rounds=15):
    """CasADi's parking program and constrax's, solved alternately `rounds` times each in
    one process (the machine's load shared alike): minimum and median wall times and
    iterations. CasADi from its perturbed start (seed 0); constrax from the same point
    (`casadi_start`, the trapezoid on quasi-velocities: the same program, the same
    iterates) or from its own jittered default guess (seed 0)."""
    if ca is None:
        return None
    P = _casadi_start("parking", N, scheme, 1e-2)
    transcription = transcription(N)
    solver = cx.fit.IPOPT(
        tol=IPOPT_OPTIONS["tol"], constr_viol_tol=IPOPT_OPTIONS["constr_viol_tol"]
    )
    guess = casadi_parking_guess(N) if casadi_start else None
    sols = {}

    def constrax_solve():
        sols["constrax"] = cx.fit.solve_optimal_control(
            problem, guess, transcription=transcription, solver=solver
        )

    run = {"casadi": P["opti"].solve, "constrax": constrax_solve}
    walls = {name: [] for name in run}
    for fn in run.values():
        fn()  # build / compile
    for _ in range(rounds):
        for name, fn in run.items():
            t0 = time.perf_counter()
            fn()
            walls[name].append(time.perf_counter() - t0)
    out = {"N": N, "pair": label, "rounds": rounds}
    for name, w in walls.items():
        out[name] = {"min_s": min(w), "median_s": statistics.median(w)}
    out["casadi"]["iterations"] = int(P["opti"].stats()["iter_count"])
    out["casadi"]["objective"] = float(P["opti"].value(P["J"]))
    out["constrax"]["iterations"] = int(sols["constrax"].iterations)
    out["constrax"]["objective"] = float(sols["constrax"].objective)
    out["ratio_min"] = out["constrax"]["min_s"] / out["casadi"]["min_s"]
    out["ratio_median"] = out["constrax"]["median_s"] / out["casadi"]["median_s"]
    return out


def seed_survey(problem, seeds, within: float = 0.02) -> dict:
    """Parking from seeded starts, constrax (every collocation variant, `seed=k`) and CasADi
    (`_perturb_casadi` with seed k): which reach the optimum 0.21846."""
    optimum = 0.21846
    rows = []
    for N in (50, 100):
        variants = [
            cx.fit.HermiteSimpson(N),
            cx.fit.Trapezoidal(N),
            cx.fit.HermiteSimpson(N, velocity_basis=knife_basis),
            cx.fit.Trapezoidal(N, velocity_basis=knife_basis),
        ]
        for transcription in variants:
            sols = [
                cx.fit.solve_optimal_control(problem, transcription=transcription, seed=k)
                for k in seeds
            ]
            objs = [s.objective for s in sols]
            ok = [s.success and abs(s.objective - optimum) <= within * optimum for s in sols]
            contender = _row("parking", N, transcription, 1e-2, sols[0], [0.0])["contender"]
            rows.append(
                {"N": N, "contender": contender, "objectives": objs, "ok": ok, "reached": sum(ok),
                 "iterations": [int(s.iterations) for s in sols]}
            )  # fmt: skip
        if ca is None:
            continue
        for scheme in ("trapezoidal", HS):
            objs, ok, its = [], [], []
            for k in seeds:
                P = _casadi_start("parking", N, scheme, 1e-2, seed=k)
                try:
                    P["opti"].solve()
                    solved = True
                except RuntimeError:
                    solved = False
                objs.append(float(P["opti"].debug.value(P["J"])))
                ok.append(solved and abs(objs[-1] - optimum) <= within * optimum)
                its.append(int(P["opti"].stats()["iter_count"]))
            contender = "casadi" + (" (Hermite-Simpson)" if scheme == HS else "")
            rows.append(
                {"N": N, "contender": contender, "objectives": objs, "ok": ok, "reached": sum(ok),
                 "iterations": its}
            )  # fmt: skip
    return {"seeds": list(seeds), "optimum": optimum, "within": within, "rows": rows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--compile-repeats",
        type=int,
        default=None,
        help="cold compiles per structure (default: --repeats; 1 for a quicker run)",
    )
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    require_x64()
    cold_compile_settings()
    import cyipopt

    start = time.perf_counter()
    machine = machine_info()
    machine["cyipopt"] = cyipopt.__version__
    machine["casadi"] = ca.__version__ if ca is not None else None
    R = args.repeats
    RC = R if args.compile_repeats is None else args.compile_repeats
    rows = []

    def log(r):
        print(
            f"{r['problem']:>9} N={r['N']:<4} {r['contender']:<8} {r.get('guess', ''):<26} "
            f"obj={_g(r.get('objective'))} {r.get('status', r.get('skipped'))} "
            f"it={r.get('iterations')} viol={_e(r.get('max_violation'))} "
            f"replay={_e(r.get('replay_error'))}",
            flush=True,
        )
        rows.append(r)

    problems = {"parking": parking_problem(), "cart-pole": cartpole_problem()}
    for name, problem in problems.items():
        for N in (50, 100):
            row, _ = run_constrax(name, problem, N, R, compile_repeats=RC)
            log(row)
            if name == "parking":  # the exact straight-line guess
                log(run_constrax_again(name, problem, N, R, jitter=0.0))
            # The transcription CasADi's rows use (like for like on the same grid).
            row, _ = run_constrax(
                name, problem, N, R, compile_repeats=RC, transcription=cx.fit.Trapezoidal(N)
            )
            log(row)
            if name == "parking":  # the node states of CasADi's model: (q, v)
                for scheme in (cx.fit.HermiteSimpson, cx.fit.Trapezoidal):
                    quasi = scheme(N, velocity_basis=knife_basis)
                    row, _ = run_constrax(
                        name, problem, N, R, compile_repeats=RC, transcription=quasi
                    )
                    log(row)
                # CasADi's program, from CasADi's starting point: the same iterates.
                log(
                    run_constrax_again(
                        name, problem, N, R, 0.0, transcription=quasi,
                        guess=casadi_parking_guess(N), guess_name="casadi's perturbed guess",
                    )
                )  # fmt: skip
            for perturb in (None, 1e-2):
                if ca is None:
                    log(
                        {
                            "problem": name,
                            "N": N,
                            "contender": "casadi",
                            "skipped": "casadi not importable (pip install casadi)",
                        }
                    )
                    break
                log(run_casadi(name, N, R, perturb))
            if ca is not None:  # like for like with constrax's default transcription
                log(run_casadi(name, N, R, 1e-2, scheme=HS))
    row, _ = run_constrax(
        "cart-pole min-time", cartpole_problem(min_time=True), 50, R, compile_repeats=RC
    )
    log(row)
    for basis in (None, knife_basis):
        for hessian in ("exact", "limited-memory"):
            shooting = cx.fit.DirectMultipleShooting(25, 8, velocity_basis=basis)
            row, _ = run_constrax(
                "parking", problems["parking"], 25, R, compile_repeats=RC,
                transcription=shooting, hessian=hessian,
            )  # fmt: skip
            log(row)
    pairs = [interleaved(problems["parking"], N, *pair) for N in (50, 100) for pair in INTERLEAVED]
    for r in pairs:
        if r is not None:
            print(f"  interleaved N={r['N']} {r['pair']}: ratio {r['ratio_min']:.2f}", flush=True)
    survey = seed_survey(problems["parking"], range(10))
    for r in survey["rows"]:
        print(f"  survey N={r['N']} {r['contender']}: {r['reached']} / {len(r['ok'])}", flush=True)
    machine["loadavg_at_end"] = loadavg()
    result = {
        "config": {
            "repeats": R,
            "compile_repeats": RC,
            "ipopt_options": IPOPT_OPTIONS,
            "replay_tol": REPLAY_TOL,
            "jitter": 1e-2,
            "perturbation_seed": 0,
        },
        "note": args.note,
        "machine": machine,
        "rows": rows,
        "survey": survey,
        "interleaved": [r for r in pairs if r is not None],
        "wall_s": time.perf_counter() - start,
    }
    write_json(os.path.join(args.out, "trajopt_cpu.json"), result)
    with open(os.path.join(args.out, "trajopt_cpu.md"), "w") as fh:
        fh.write(markdown(result))
    print(f"wrote {args.out}/trajopt_cpu.{{json,md}} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
