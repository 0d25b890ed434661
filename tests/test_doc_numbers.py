"""The performance figures quoted in the README and on the docs pages are those of the
committed benchmark results (`benchmarks/results/*.json`), not stale hand copies.

The benchmarks page includes the full tables from `benchmarks/results/*.md` at build time;
what is checked here is the prose and the README's summary table, which quote them. Each
claim is the text a page must contain (whitespace-normalised, so line breaks do not
matter), formatted from the JSON: a new benchmark run that moves a figure fails here until
the pages quote the new one. Historical figures (earlier runs, "A → B" of a past change)
are not checked.
"""

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RIGID = ("rolling_disk", "turntable")


@pytest.fixture(scope="module")
def cpu():
    return json.loads((RESULTS / "cpu.json").read_text())["cases"]


@pytest.fixture(scope="module")
def counts():
    return json.loads((RESULTS / "jaxpr_counts.json").read_text())["cases"]


def _f(x: float) -> str:
    return f"{x:.2f}"


def _range(xs) -> str:
    xs = list(xs)
    return f"{min(xs):.2f}–{max(xs):.2f}"


def _run(c, kind):  # CPU-time ratio constrax / hand-written of a rollout or gradient
    return c[kind]["run"]["ratio_cpu_min"]


def _compile(c, kind):  # total compile CPU-time ratio
    return c[kind]["compile"]["ratios"]["total_cpu_min"]


def _compile_s(c, kind, who, stage="total"):
    return c[kind]["compile"][who][stage]["cpu_min_s"]


def _rollout_cases(cpu):
    return {n: c for n, c in cpu.items() if "rollout" in c and "gradient" in c}


def missing(text: str, claims: list[str]) -> list[str]:
    """The claims (exact text; whitespace, line breaks included, counts as one space) that
    `text` lacks."""
    norm = lambda s: re.sub(r"\s+", " ", s)
    return [c for c in claims if norm(c) not in norm(text)]


def test_missing_names_a_contradicted_figure():
    page = "compile time:\nrollouts\n1.18–2.16× and 4.2×"
    assert missing(page, ["rollouts 1.18–2.16×", "4.2×"]) == []
    assert missing(page, ["rollouts 1.32–2.16×"]) == ["rollouts 1.32–2.16×"]


def _readme_rows() -> dict[str, list[str]]:
    """The README's performance table: `{case: [cells after the case name]}`."""
    section = (ROOT / "README.md").read_text().split("## Performance", 1)[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] not in ("case", "---"):
            rows[cells[0]] = cells[1:]
    return rows


def test_readme_performance_table_is_the_committed_run(cpu):
    rows = _readme_rows()
    assert len(rows) >= 5
    titles = {c["title"]: c for c in _rollout_cases(cpu).values()}
    aliases = {"nonholonomic particle, vakonomic": "particle vakonomic",
               "5-link chain, maximal coordinates": "5-link chain, maximal"}  # fmt: skip
    wrong = []
    for name, cells in rows.items():
        c = titles[aliases.get(name, name)]
        k = c["jaxpr_counts"]
        a, h = k["constrax"], k["hand"]
        expected = [
            _f(_run(c, "rollout")),
            _f(_run(c, "gradient")),
            _f(_compile(c, "rollout")),
            _f(_compile(c, "gradient")),
            f"{a['vf']} / {h['vf']} ({a['vf_vjp']} / {h['vf_vjp']})",
            f"{_f(c['rollout']['run']['defaults_ratio_cpu_min'])}, "
            f"{_f(c['gradient']['run']['defaults_ratio_cpu_min'])}",
        ]
        for i, (got, want) in enumerate(zip(cells, expected, strict=True)):
            if not got.startswith(want):
                wrong.append(f"README {name!r}, column {i + 2}: {got!r}, results say {want!r}")
    assert not wrong, "\n".join(wrong)


def _summary_claims(cpu, counts) -> dict[str, list[str]]:
    cases = _rollout_cases(cpu)
    small = [c for n, c in cases.items() if n not in RIGID]
    disk, turntable = cpu["rolling_disk"], cpu["turntable"]
    rollouts = [_run(c, "rollout") for n, c in cases.items() if n != "turntable"]
    batched = [b["run"]["ratio_cpu_min"] for b in cpu["batched"]["batches"].values()]
    auto = [r["ratio_cpu"]["AutoSolver"] for r in cpu["solvers"]["rows"]]
    fit = cpu["fit"]["timings"]
    every_step = ("grad_every_step_over_loss", "problem_grad_over_problem_residuals")
    fit_every = [fit[f"{k}_ratio_cpu_min"] for k in every_step]
    back = fit["grad_backsolve_over_loss_ratio_cpu_min"]
    back_wall = fit["grad_backsolve_over_loss_ratio_min"]
    live = {n: c["constrax"]["vf_live"] / c["hand"]["vf_live"] for n, c in counts.items()
            if "vf_live" in c.get("constrax", {})}  # fmt: skip
    traced = [counts[n]["constrax"]["vf"] / counts[n]["hand"]["vf"] for n in RIGID]
    rigid_live = _range_1(live[n] for n in RIGID)
    small_live = _range_1(live[n] for n in ("snake", "particle_dalembert",
                                            "particle_vakonomic", "chain_minimal"))  # fmt: skip
    grad_compile = _range(_compile(c, "gradient") for c in cases.values())
    disk_s = [_compile_s(disk, "gradient", who) for who in ("constrax", "hand")]
    disk_xla = [_compile_s(disk, "gradient", who, "xla") for who in ("constrax", "hand")]
    chain = cpu["chain_maximal"]["rollout"]["run"]
    return {
        "README.md": [
            f"first compile of a gradient costs {grad_compile}×",
            f"{rigid_live}× the hand-written ones once the dead code a trace drops is "
            "removed "
            f"({min(traced):.1f}–{max(traced):.1f}× as traced)",
            f"and {disk_s[0]:.1f} s in this one, against 7.8 s\nand {disk_s[1]:.1f} s hand-written",
            f"{1e3 * chain['hand']['cpu_min_s']:.1f} ms CPU for {1e3 * chain['hand']['min_s']:.1f} "
            f"ms wall, a wall ratio of {chain['ratio_min']:.2f}",
            f"`cx.AutoSolver()`, costs {_range(auto)}× `cx.KKT()` on regular states in\nthis run",
            # The defaults column: the rigid rollouts' wall-time ratios.
            "in wall\ntime they cost "
            + _range(cpu[n]["rollout"]["run"]["defaults_ratio_min"]
                     for n in ("rolling_disk", "turntable", "chain_maximal"))
            + "×",
            f"| tilted rolling disk | {_f(_run(disk, 'rollout'))} | {_f(_run(disk, 'gradient'))}"
            f" | {_f(_compile(disk, 'rollout'))} | {_f(_compile(disk, 'gradient'))} "
            f"({disk_s[0]:.1f} s vs {disk_s[1]:.1f} s)",
        ],
        "docs/benchmarks.md": [
            f"within {_range(rollouts)}× of the hand-written code in CPU time (the ball on the "
            f"turntable {_f(_run(turntable, 'rollout'))}×, wall "
            f"{_f(turntable['rollout']['run']['ratio_min'])}×)",
            f"their gradients within {_range(_run(c, 'gradient') for c in cases.values())}×",
            f"the batched snake cart within {_range(batched)}×",
            f"{_range(_compile(c, 'gradient') for c in small)}× for the small systems' gradients",
            f"{_range(_compile(cpu[n], 'gradient') for n in RIGID)}× for the 3-D rigid bodies'",
            f"(the disk's gradient {disk_s[0]:.1f} CPU s against {disk_s[1]:.1f} s, of which XLA "
            f"{disk_xla[0]:.1f} s against {disk_xla[1]:.1f} s;",
            f"rollouts {_range(_compile(c, 'rollout') for c in cases.values())}×",
            f"`cx.AutoSolver()`, costs {_range(auto)}× a `cx.KKT()` solve on regular states",
            f"costs {_f(fit['grad_over_loss_ratio_cpu_min'])}× the forward loss in CPU time with "
            f"diffrax's default checkpoints (the hand-written code "
            f"{_f(fit['hand_grad_over_hand_loss_ratio_cpu_min'])}×) and {_range(fit_every)}× "
            "with one checkpoint per step, which `cx.fit` uses (the hand-written code "
            f"{_f(fit['hand_grad_every_step_over_hand_loss_ratio_cpu_min'])}×)",
            f"about {back_wall:.1f}× in wall time, {back:.1f}× in CPU time",
            # The traced-size section, from jaxpr_counts.json.
            f"the maximal chain\n({live['chain_maximal']:.1f}×)",
            f"the disk ({live['rolling_disk']:.1f}×) and the turntable ({live['turntable']:.1f}×)",
            f"snake cart, both particles\nand the minimal chain ({small_live}×)",
            f"the disk's {counts['rolling_disk']['constrax']['vf_vjp']} are",
        ],
        # Two runs in each cell of its table, the committed one second.
        "docs/concepts/solve.md": [f", {_f(r['ratio_cpu']['AutoSolver'])} |"
                                   for r in cpu["solvers"]["rows"]],
    }  # fmt: skip


def _range_1(xs) -> str:
    """`a–b` to one decimal, or `a` where both ends round alike."""
    xs = list(xs)
    lo, hi = f"{min(xs):.1f}", f"{max(xs):.1f}"
    return lo if lo == hi else f"{lo}–{hi}"


@pytest.mark.parametrize("path", ["README.md", "docs/benchmarks.md", "docs/concepts/solve.md"])
def test_quoted_figures_are_the_committed_results(cpu, counts, path):
    absent = missing((ROOT / path).read_text(), _summary_claims(cpu, counts)[path])
    assert not absent, (
        f"{path} does not quote these figures of benchmarks/results/*.json (or contradicts "
        "them):\n" + "\n".join(absent)
    )


def test_benchmarks_page_includes_the_generated_tables():
    """The full tables are not copied by hand: the page includes the generated files."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    for name in ("cpu.md", "jaxpr_counts.md"):
        assert f'--8<-- "benchmarks/results/{name}"' in page


def test_stabilisation_pages_quote_the_committed_stabilisation_run():
    """The step counts the stabilisation page and the changelog quote are those of
    `benchmarks/results/stabilisation_cpu.json`."""
    rows = json.loads((RESULTS / "stabilisation_cpu.json").read_text())["adaptive"]
    steps = {r["option"].split(" (")[0]: r["accepted"] for r in rows}
    claim = (
        f"takes {steps['StepProjection()']} accepted steps with the default against "
        f"{steps['None']} without stabilisation and {steps['Projection(10, 0)']} with "
        "`Projection(10, 0)`"
    )
    page = (ROOT / "docs" / "concepts" / "stabilisation.md").read_text()
    assert missing(page, [claim]) == []
    changelog = (ROOT / "CHANGELOG.md").read_text()
    claim = (
        f"{steps['StepProjection()']} accepted steps against {steps['None']} unstabilised "
        f"and {steps['Projection(10, 0)']} before"
    )
    assert missing(changelog, [claim]) == []


def test_stabilisation_page_quotes_the_defaults_ratios_of_the_committed_run():
    """What the default costs against the hand-written field, adaptive and per fixed step,
    as the stabilisation page quotes it, from `benchmarks/results/stabilisation_cpu.json`."""
    result = json.loads((RESULTS / "stabilisation_cpu.json").read_text())
    adaptive = {r["option"].split(" (")[0]: r for r in result["adaptive"]}
    hand = adaptive["hand-written field"]

    def ratio(option, key):
        return _f(adaptive[option][key] / hand[key])

    fixed = {(r["solver"], r["option"].split(" (")[0], r["batch"]): r["us_per_state_step"]
             for r in result["fixed_step"]}  # fmt: skip

    def per_step(solver, option, batch):
        return _f(fixed[solver, option, batch] / fixed[solver, "hand-written field", batch])

    claims = [
        f"rollout costs {ratio('StepProjection()', 'rollout_s')}× the hand-written field's "
        f"and its gradient {ratio('StepProjection()', 'gradient_s')}×",
        f"{ratio('Projection(10, 0)', 'rollout_s')}× and "
        f"{ratio('Projection(10, 0)', 'gradient_s')}× for `Projection(10, 0)`",
        f"256, {per_step('Tsit5', 'StepProjection()', 256)}× the hand-written field with "
        f"Tsit5 and {per_step('RK4', 'StepProjection()', 256)}× with the classical RK4, "
        f"against {per_step('Tsit5', 'None', 256)}× and {per_step('RK4', 'None', 256)}× "
        "without stabilisation",
        f"(Tsit5 {per_step('Tsit5', 'StepProjection()', 1)}×, RK4 "
        f"{per_step('RK4', 'StepProjection()', 1)}× in the committed run",
    ]
    page = (ROOT / "docs" / "concepts" / "stabilisation.md").read_text()
    assert missing(page, claims) == []


def _sci(x: float) -> str:
    """`x` as the gradients page writes it: `7.1\\times10^{-14}`, or `9.1` from 0.1 to 10."""
    if 0.1 <= abs(x) < 10:
        return f"{x:.1f}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return rf"{mantissa}\times10^{{{int(exponent)}}}"


def test_gradients_page_quotes_the_committed_adaptive_reverse_gradient_run():
    """The differences between reverse- and forward-mode Jacobians through adaptive steps
    that the gradients page quotes are those of
    `benchmarks/results/adaptive_reverse_gradients_cpu.json`."""
    settings = json.loads((RESULTS / "adaptive_reverse_gradients_cpu.json").read_text())
    settings = settings["settings"]
    rows = [{r["adjoint"].split(" (")[0]: r["max_abs_difference"] for r in s["rows"]}
            for s in settings]  # fmt: skip
    *repeating, level0 = rows
    assert "optimisation level 0" in settings[-1]["setting"]
    default = "RecursiveCheckpointAdjoint()"
    every_step = "RecursiveCheckpointAdjoint(checkpoints=16384)"
    hand = "hand-written diffrax ODE, RecursiveCheckpointAdjoint()"
    nothing_recomputed = max(*level0[every_step], *level0["fixed steps dt0 = 0.05"])
    claims = [
        f"is at most ${_sci(max(max(v) for r in repeating for v in r.values()))}$",
        f"it is ${_sci(min(level0[default]))}$ to ${_sci(max(level0[default]))}$",
        f"(up to ${_sci(max(level0[hand]))}$)",
        f"the difference is ${_sci(nothing_recomputed)}$ at most again",
    ]
    page = (ROOT / "docs" / "concepts" / "gradients.md").read_text()
    assert missing(page, claims) == []


def test_trajectory_optimisation_page_quotes_the_committed_trajopt_run():
    """The trajectory-optimisation page's benchmark table and compile table are the rows of
    `benchmarks/results/trajopt_cpu.json` (objective, status, iterations, solve times;
    compile times and first-solve overheads), and its text quotes the interleaved ratios."""
    result = json.loads((RESULTS / "trajopt_cpu.json").read_text())
    page = (ROOT / "docs" / "concepts" / "trajectory-optimisation.md").read_text()
    claims = []
    for r in result["rows"]:
        if "solve_min_s" not in r or r["problem"] == "parking" and r["N"] == 25:
            continue  # multiple shooting: quoted in the text, not the table
        objective = f"{r['objective']:.7g}"
        if "t1" in r:
            objective += f" ($t_1$ = {r['t1']:.6g})"
        claims.append(
            f"{objective} | `{r['status']}` | {r['iterations']} | "
            f"{r['solve_min_s']:.3f} ({r['solve_median_s']:.3f}) |"
        )
        c = r.get("compile")
        if c and "multiple shooting" not in r["transcription"]:
            claims.append(
                f"| {c['total_min_s']:.1f} ({c['trace_lower_min_s']:.1f} / "
                f"{c['xla_min_s']:.1f}) | {r['first_minus_warm_s']:.1f} |"
            )
    for pair in result["interleaved"]:
        claims.append(f"{pair['ratio_min']:.2f}")
    assert missing(page, claims) == []


def test_benchmarks_page_quotes_the_committed_reverse_cost_run():
    """The gradient-over-forward ranges the benchmarks page quotes are those of
    `benchmarks/results/reverse_cost_cpu.json`, and the page includes its table."""
    result = json.loads((RESULTS / "reverse_cost_cpu.json").read_text())
    rows = result["gradients"]
    like = _range(r["like for like gradient / forward"] for r in rows)
    defaults = _range(r["defaults gradient / forward"] for r in rows)
    over = _range(r["defaults gradient / like for like gradient"] for r in rows)
    claims = [
        f"**Like for like, the gradient of a batched rollout costs {like}x its forward pass**, "
        f"with the defaults {defaults}x",
        f"**The defaults cost {over}x like for like in the gradient.**",
    ]
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert missing(page, claims) == []
    assert '--8<-- "benchmarks/results/reverse_cost_cpu.md"' in page


def test_trajectory_optimisation_page_quotes_the_committed_opty_run():
    """The figures of the comparison with opty quoted in the text are those of
    `benchmarks/results/trajopt_opty_cpu.json`, and the page includes its table."""
    result = json.loads((RESULTS / "trajopt_opty_cpu.json").read_text())
    page = (ROOT / "docs" / "concepts" / "trajectory-optimisation.md").read_text()
    assert '--8<-- "benchmarks/results/trajopt_opty_cpu.md"' in page
    row = {(r["tool"], r["N"], r["start"]): r for r in result["rows"]}
    ours, theirs = row["constrax", 500, "default"], row["opty", 500, "default"]
    claims = [
        f"{ours['first_result_s']:.1f} s against opty's {theirs['first_result_s']:.1f} s",
        f"{ours['solve_s']:.2f} s against {theirs['solve_s']:.2f} s",
        f"in {ours['iterations']} iterations over its two stages against\n{theirs['iterations']}",
        f"{ours['replay_miss_m']:.2g} m against opty's {theirs['replay_miss_m']:.2g} m",
        f"{row['opty', 200, 'default']['iterations']} iterations at 201",
        f"takes {row['constrax', 100, 'opty']['iterations']} iterations where `guess=None` "
        f"takes {row['constrax', 100, 'default']['iterations']}",
    ]
    assert all(r["success"] for r in result["rows"] if r["tool"] == "constrax")
    assert missing(page, claims) == []


def test_trajectory_optimisation_page_quotes_the_committed_scaling_run():
    """The scaling paragraph's figures are those of
    `benchmarks/results/trajopt_scaling_cpu.json`, whose time per iteration is linear in
    the intervals (within 25 % of its mean per interval at every size); the page includes
    its table."""
    result = json.loads((RESULTS / "trajopt_scaling_cpu.json").read_text())
    page = (ROOT / "docs" / "concepts" / "trajectory-optimisation.md").read_text()
    assert '--8<-- "benchmarks/results/trajopt_scaling_cpu.md"' in page
    rows = {r["N"]: r for r in result["rows"]}
    assert all(r["success"] for r in rows.values())
    per = [r["per_iteration_ms"] / N for N, r in rows.items()]
    mean = sum(per) / len(per)
    assert all(abs(x / mean - 1) < 0.25 for x in per), per
    big, small = rows[max(rows)], rows[min(rows)]
    claims = [
        f"{min(per):.3f}–{max(per):.3f} ms per interval and\niteration",
        f"{big['per_iteration_ms']:.1f} ms an iteration at {big['N']} intervals",
        f"{big['solve_median_s']:.2f} s in {big['iterations']} iterations",
        f"{big['ipopt_cpu_s']['linear_solver']:.2f} s at {big['N']} intervals",
        f"({big['programs_s']:.2f} s: values",
        f"{big['ipopt_cpu_s']['functions'] - big['programs_s']:.2f} s, what lies outside IPOPT",
        f"its checks) {big['solve_median_s'] - big['ipopt_wall_s']:.2f} s",
        f"({small['compile_s']:.1f} s at {small['N']}\nintervals, {big['compile_s']:.1f} s at "
        f"{big['N']}",
        f"({small['peak_rss_mb']:.0f} MB to {big['peak_rss_mb']:.0f} MB",
    ]
    assert missing(page, claims) == []
    linear = big["ipopt_cpu_s"]["linear_solver"] / big["solve_median_s"]
    programs = big["programs_s"] / big["solve_median_s"]
    assert linear > 0.5 and 0.25 < programs < 0.4  # "half of it and more", "about a third"


def test_friction_modes_page_quotes_the_committed_contacts_batch_run():
    """The per-member costs of the batches table are those of
    `benchmarks/results/contacts_batch_cpu.json`, and identical members cost less than
    drawn ones (the waiting the page describes)."""
    result = json.loads((RESULTS / "contacts_batch_cpu.json").read_text())
    page = (ROOT / "docs" / "concepts" / "friction-modes.md").read_text()
    by = {(r["case"], r["dtype"]): r for r in result["cases"]}
    claims = []
    for case, B in (("bouncing balls", 1024), ("tippe tops", 256)):
        cells = []
        for dtype in ("float64", "float32"):
            r = by[(case, dtype)]
            assert r["per_member_identical"] < r["per_member_varied"]
            assert r["statuses"] and set(r["statuses"]) <= {0, 2}  # t1 reached, or the budget
            cells += [f"{r['per_member_varied']:.2f}", f"{r['per_member_identical']:.2f}"]
        claims.append(" | ".join(cells) + " |")
        assert by[(case, "float64")]["B"] == B and f"| {B} {case} (" in page
    assert missing(page, claims) == []


def test_benchmarks_page_quotes_the_committed_contacts_run():
    """The compile times, equation count and eager calls the contact paragraph quotes are
    those of `benchmarks/results/contacts_cpu.json`."""
    result = json.loads((RESULTS / "contacts_cpu.json").read_text())
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    cases, eager = result["cases"], list(result["eager"].values())
    claims = [
        f"compile in {cases['skid']['compile_total_s']:.1f} and "
        f"{cases['bounce']['compile_total_s']:.1f} s and the gradient in "
        f"{cases['skid, grad']['compile_total_s']:.1f} s",
        f"is now {cases['skid']['jaxpr_equations']:,}".replace(",", " "),
        f"bouncing ball takes {eager[0]['wall_s']:.1f} s",
        f"instead of 5 takes {eager[2]['wall_s']:.3f} s and one with a new `max_switches` "
        f"{eager[3]['wall_s']:.3f} s",
        f"= {cases['bounce']['output']:.10g} to 2e-15",
        "grows linearly: {:.1f}, {:.1f}, {:.1f} and {:.1f} s for 1, 2, 4 and 8 contacts".format(
            *(result["contacts"][n]["compile_total_s"] for n in ("1", "2", "4", "8"))
        ),
    ]
    # "Linearly": the cost of a contact added from 4 to 8 within 1.5x of one from 1 to 2.
    t = {int(n): r["compile_total_s"] for n, r in result["contacts"].items()}
    assert (t[8] - t[4]) / 4 <= 1.5 * (t[2] - t[1])
    assert missing(page, claims) == []
    assert abs(cases["bounce"]["output"] - 1.3528071587345922) <= 1e-14  # the closed form
