r"""constrax and CasADi side by side in `benchmarks/trajopt.py`: interleaved pairs of solves
of the parking problem (one process, alternating, the machine's load shared alike) and the
survey of seeded starts (which reach the optimum).
"""

from __future__ import annotations

import statistics
import time

import constrax as cx

try:
    import casadi as ca
except ImportError:  # optional
    ca = None


from benchmarks._trajopt.casadi_side import HS, _casadi_start, casadi_parking_guess
from benchmarks._trajopt.harness import IPOPT_OPTIONS, _row
from benchmarks._trajopt.problems import knife_basis

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
            problem,
            guess,
            transcription=transcription,
            solver=solver,
            coarse=None,
            progress=False,
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
                cx.fit.solve_optimal_control(
                    problem, transcription=transcription, seed=k, coarse=None, progress=False
                )
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
