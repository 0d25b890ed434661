r"""The report of `benchmarks/trajopt.py`: `trajopt_cpu.md` from the result dict."""

from __future__ import annotations

import statistics

from benchmarks._report import md_table

try:
    import casadi as ca
except ImportError:  # optional
    ca = None


def _g(x, digits=7):
    return "—" if x is None else f"{x:.{digits}g}"


def _e(x):
    return "—" if x is None else f"{x:.1e}"


def _esc(s) -> str:
    return str(s).replace("|", "\\|")


def _preamble(result: dict) -> list[str]:
    """The run's date, machine, versions, options and note, and what the columns mean."""
    m = result["machine"]
    return [
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


def _rows_table(result: dict) -> list[str]:
    """One line per row of the run: objective, status, iterations, times, errors."""
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
    return md_table(header, rows)


def _first_solves(result: dict) -> list[str]:
    """constrax's first solve minus its median warm solve, per structure."""
    lines = [
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
    return lines


def _interleaved_table(result: dict) -> list[str]:
    """The interleaved pairs of CasADi and constrax solves, if the run made them."""
    lines = []
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
    return lines


def _survey_table(result: dict) -> list[str]:
    """The seeded starts: how many of each contender reach the optimum."""
    lines = []
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
    return lines


def markdown(result: dict) -> str:
    """`trajopt_cpu.md`: the preamble, the rows, the first solves, the interleaved pairs
    and the survey of seeded starts."""
    lines = _preamble(result) + _rows_table(result) + _first_solves(result)
    lines += _interleaved_table(result) + _survey_table(result)
    lines.append("")
    return "\n".join(lines)
