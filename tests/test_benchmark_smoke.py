"""Smoke tests of the benchmark suite (`benchmarks/`): the hand-written JAX references are
the same physics as constrax, and the suite's command line works.

The benchmarks compare constrax with vector fields written out by hand (explicit mass
matrix, constraint matrix, $\\dot A\\dot q$, the curl formula of the vakonomic particle,
Lagrange's equations of the pendulum chain in joint angles). One evaluation of each must
equal `cx.accelerations` and a few integration steps must agree to 1e-10, otherwise the
timings would compare different problems.
"""

import json
import math
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
from constrax._terms import stacked_residual

_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    if str(_ROOT) not in sys.path:
        sys.path.insert(0, str(_ROOT))
    from benchmarks import cases, run

    return cases, run


@pytest.mark.parametrize(
    "case",
    [
        "snake",
        pytest.param("particle_vakonomic", marks=pytest.mark.slow),
        pytest.param("rolling_disk", marks=pytest.mark.slow),
        "turntable",
        "chain_maximal",
        "chain_minimal",
    ],
)
def test_hand_written_reference_matches_constrax(bench, case):
    """A few fixed Tsit5 steps of constrax and of the hand-written field agree."""
    c = bench[0].ROLLOUT_CASES[case]
    ours, hand = c.smoke(t1=0.05)  # 5 fixed Tsit5 steps
    assert len(ours) == len(hand)
    for a, b in zip(ours, hand, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-10)
    # The state moved: the comparison is not between two copies of the initial state.
    assert float(jnp.max(jnp.abs(ours[0] - c.args()[0]))) > 1e-3


@pytest.mark.parametrize(
    "case",
    [
        "snake",
        "particle_dalembert",
        "particle_vakonomic",
        "rolling_disk",
        "turntable",
        "chain_maximal",
        "chain_minimal",
    ],
)
def test_hand_written_accelerations_match_constrax(bench, case):
    """One evaluation of each hand-written field equals `cx.accelerations(...).qdd` (KKT),
    at the benchmark's state and off the constraint manifold (|Q| != 1, inconsistent
    velocities)."""
    c = bench[0].ROLLOUT_CASES[case]
    t, q, qd, *rest = c.acc_args()
    both = jax.jit(lambda *a: (c.accelerations["constrax"](*a), c.accelerations["hand"](*a)))
    for qq, qqd in ((q, qd), (1.01 * q + 0.003, qd + 0.05)):
        ours, hand = both(t, qq, qqd, *rest)
        assert float(jnp.max(jnp.abs(hand))) > 0.1
        np.testing.assert_allclose(np.asarray(ours), np.asarray(hand), rtol=0, atol=1e-10)


def test_snake_initial_state_satisfies_wheel_constraints(bench):
    snake = bench[0].snake
    system, p = snake.system(), snake.params()
    residual = stacked_residual(system, p)
    q0, qd0 = snake.initial_state()
    np.testing.assert_allclose(np.asarray(residual(jnp.zeros(()), q0, qd0)), 0.0, atol=1e-14)
    q, qd = snake.batch(7)
    cs = jax.jit(jax.vmap(lambda q, qd: residual(jnp.zeros(()), q, qd)))(q, qd)
    np.testing.assert_allclose(np.asarray(cs), 0.0, atol=1e-14)


def test_chain_initial_states_describe_the_same_motion(bench):
    """The maximal and minimal chains start from the same bob positions and velocities."""
    chain = bench[0].chain
    (r0, v0, _), (th0, thd0, p) = chain.MAXIMAL.args(), chain.MINIMAL.args()
    r, v = jax.jvp(lambda th: cx.models._pendula.chain_positions(th, p["lengths"]), (th0,), (thd0,))
    np.testing.assert_allclose(np.asarray(r.reshape(-1)), np.asarray(r0), atol=1e-14)
    np.testing.assert_allclose(np.asarray(v.reshape(-1)), np.asarray(v0), atol=1e-14)


def test_cli_lists_cases_and_rejects_unknown(bench, capsys):
    cases, run = bench
    run.main(["--list"])
    listed = capsys.readouterr().out
    for name in [*cases.ROLLOUT_CASES, *cases.OTHER_CASES, *cases.GROUPS]:
        assert name in listed
    assert run.select(["rigid", "snake"]) == ["snake", "rolling_disk", "turntable"]
    with pytest.raises(SystemExit, match="unknown case 'pendulum'"):
        run.select(["pendulum"])


_NO_X64 = """
import sys
sys.path.insert(0, sys.argv[1])
import jax
from benchmarks import _cases, _jaxpr, _report, _timing, cases, jaxpr_counts, run, trajopt
assert not jax.config.jax_enable_x64, "importing the benchmarks switched jax_enable_x64 on"
for main in (run.main, jaxpr_counts.main, trajopt.main):
    try:
        main([])
    except RuntimeError as e:
        assert "jax_enable_x64 is off" in str(e), e
    else:
        raise AssertionError(f"{main.__module__}.main ran without float64")
print("ok")
"""


def test_importing_the_benchmarks_switches_nothing():
    """No import-time global switch: the scripts turn float64 on in their entry point, and
    their `main()` refuses to run without it (in a fresh process with the default config)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", _NO_X64, str(_ROOT)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


@pytest.mark.slow
def test_quick_run_writes_results(bench, tmp_path):
    """`run.py --quick --only particle_dalembert` runs end to end and writes its files."""
    _, run = bench
    keys = ("jax_enable_compilation_cache", "jax_compilation_cache_dir")
    saved_config = {k: getattr(jax.config, k) for k in keys}
    try:  # run.main turns the persistent compilation cache off
        res = run.main(["--quick", "--only", "particle_dalembert", "--out", str(tmp_path)])
    finally:
        for k, v in saved_config.items():
            jax.config.update(k, v)
    saved = json.loads((tmp_path / "cpu.json").read_text())
    r = saved["cases"]["particle_dalembert"]
    assert r["rollout"]["max_abs_diff"] < 1e-10
    assert r["gradient"]["max_abs_diff"] < 1e-8
    assert r["rollout"]["compile"]["constrax"]["xla"]["cpu_min_s"] > 0
    assert r["jaxpr_counts"]["constrax"]["vf"] > 0
    md = (tmp_path / "cpu.md").read_text()
    assert "## Compile time" in md and "## Jaxpr equation counts" in md
    assert res["cases"]["particle_dalembert"]["rollout"]["run"]["ratio_min"] > 0


@pytest.mark.slow
def test_device_benchmark_runs_both_precisions_and_reports(tmp_path):
    """`benchmarks/gpu.py --quick --only snake` (the script a GPU session runs as it is)
    runs a float32 and a float64 process, and its rows compare the same problem: the
    hand-written field and constrax like for like end at the same state (the same
    equations and steps), the defaults within the velocity projection's effect, every
    contender and gradient finite."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT / "src"), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, str(_ROOT / "benchmarks" / "gpu.py"), "--quick", "--only", "snake",
           "--budget", "400", "--out", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "device_rollouts_cpu.json").read_text())
    assert result["device"].startswith("cpu") and result["machine"]["jax"] == jax.__version__
    rows = result["rows"]
    assert {r["dtype"] for r in rows} == {"float32", "float64"}
    assert not [r for r in rows if "failed" in r or "skipped" in r], rows
    rollouts = [r for r in rows if r["row"] == "snake cart"]
    gradients = [r for r in rows if "gradient" in r["row"]]
    assert len(rollouts) == 4 and len(gradients) == 2
    for r in rollouts:
        like, defaults = (1e-12, 1e-10) if r["dtype"] == "float64" else (1e-5, 1e-5)
        assert r["gap_to_peer"]["constrax like for like"] < like, r
        assert r["gap_to_peer"]["constrax defaults"] < defaults, r
        assert all(r["finite"].values()) and r["over_peer"]["hand-written JAX"] == 1.0
    for r in gradients:
        for who in ("hand-written JAX", "constrax defaults"):
            # A timing, not ordered here (a quick run, beside another test); see the
            # committed results for which costs more.
            assert r[who]["finite"] and r[who]["gradient_over_forward"] > 0, r
    md = (tmp_path / "device_rollouts_cpu.md").read_text()
    assert "| float32 | snake cart | 64 | 50 | constrax defaults |" in md
    assert "Gradient over forward" in md


def _run_quick(module: str, out) -> None:
    """`python -m <module> --quick --out <out>` in a fresh process (x64 as the script sets
    it, the checkout's `src` first on the path); fails with its stderr if it fails."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT / "src"), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", module, "--quick", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=_ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_float32_accuracy_benchmark_runs_and_float32_keeps_its_digits(tmp_path):
    """`benchmarks/float32_accuracy.py --quick`: the imported humanoid's float32
    accelerations against MuJoCo's float64 ones at its own position and 100 m away (about
    2e-5 measured, 1.5e-2 at 10 m before the tree's quantities were taken about its root),
    float64 to 1e-12, and every model of `cx.models` in float32 within a few hundred
    epsilon of float64 (at most 9.3e-7 measured)."""
    pytest.importorskip("mujoco")
    pytest.importorskip("gymnasium")
    _run_quick("benchmarks.float32_accuracy", tmp_path)
    result = json.loads((tmp_path / "float32_accuracy_cpu.json").read_text())
    assert [r["offset_m"] for r in result["rows"]] == [0.0, 100.0]
    for r in result["rows"]:
        assert r["constrax_float32"]["worst"] <= 1e-4, r
        assert r["constrax_float64"]["worst"] <= 1e-12, r
    assert len(result["models"]) == 12
    for r in result["models"]:
        assert r["worst"] <= 1e-5, r
    assert (
        "## `cx.models`: float32 against float64 constrax"
        in (tmp_path / "float32_accuracy_cpu.md").read_text()
    )


@pytest.mark.slow
def test_reverse_cost_benchmark_runs_and_reports_every_field(tmp_path):
    """`benchmarks/reverse_cost.py --quick` (the snake cart, a batch of 8): every field of
    the table and its VJP are timed and compiled, and the gradient of a batched rollout
    and its forward pass are timed, like for like and with the defaults. The quick run's
    timings (4 calls, one round, beside another test) are too short to order: which costs
    more is the full benchmark's result, committed with its machine, not asserted here."""
    _run_quick("benchmarks.reverse_cost", tmp_path)
    result = json.loads((tmp_path / "reverse_cost_cpu.json").read_text())
    fields = {r["field"]: r for r in result["fields"]}
    assert len(fields) == 7 and all(r["model"] == "snake cart" for r in fields.values())
    for r in fields.values():
        assert math.isfinite(r["vjp_us"]) and math.isfinite(r["us"]), r
        assert r["vjp_us"] > 0 and r["us"] > 0 and len(r["compile_s"]) == 2, r
    assert [r["solver"] for r in result["gradients"]] == ["Euler", "Tsit5"]
    for r in result["gradients"]:
        for key in ("like for like gradient / forward", "defaults gradient / forward"):
            assert math.isfinite(r[key]) and r[key] > 0, r
    md = (tmp_path / "reverse_cost_cpu.md").read_text()
    assert "## The gradient of batched rollouts over their forward pass" in md
