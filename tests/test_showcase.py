"""`python -m constrax.showcase --quick`: every section runs, writes its figure, and reports
sane measured figures in `summary.json` / `summary.md`.

The physics claims are checked against references computed *inside* the sections from
independent closed forms (straight lines and circles of the Heisenberg particle, the
turntable orbit) or conservation laws (energy balance of the snake cart); here we check
that those comparisons come out at the expected accuracy.
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from constrax.showcase import QUICK_XLA_FLAGS, SECTIONS, main, use_quick_xla_flags, write_summary


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, subprocess_xla_flags):
    out = tmp_path_factory.mktemp("showcase")
    env = dict(
        os.environ,
        JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"),
        MPLBACKEND="Agg",
        XLA_FLAGS=subprocess_xla_flags,
    )
    if jax.config.jax_compilation_cache_dir:  # share conftest's persistent compile cache
        env["JAX_COMPILATION_CACHE_DIR"] = jax.config.jax_compilation_cache_dir
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.5"
    proc = subprocess.run(
        [sys.executable, "-m", "constrax.showcase", "--quick", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return out, proc


@pytest.mark.slow
def test_showcase_quick_runs_every_section(quick_run):
    out, proc = quick_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert str(out) in proc.stdout  # the folder is named at the end
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["mode"] == "quick"
    for key, _, _ in SECTIONS:
        assert summary[key]["status"] == "ok", summary[key]
        assert (out / summary[key]["figure"]).is_file()
    md = (out / "summary.md").read_text()
    for _, _, title in SECTIONS:
        assert title in md
    # Output to a pipe, as to a log: no progress bar, nor its fragments or cursor moves.
    for stream in (proc.stdout, proc.stderr):
        assert "%|" not in stream and "\x1b[A" not in stream, stream[-2000:]


@pytest.mark.slow
def test_showcase_figures_are_sane(quick_run):
    out, _ = quick_run
    s = json.loads((out / "summary.json").read_text())
    dv = s["dalembert_vs_vakonomic"]
    assert dv["final_separation"] > 1.0  # the two prescriptions give different motions
    assert dv["dalembert_error_vs_closed_form"] < 1e-8
    assert dv["vakonomic_error_vs_closed_form"] < 1e-6  # z by Simpson quadrature, h = 0.01
    assert dv["dalembert_max_virtual_work"] < 1e-10 < 1e-2 < dv["vakonomic_max_virtual_work"]
    sc = s["snake_cart"]
    assert sc["crossings"] >= 2 and sc["rank_at_singularity"] == 1
    assert sc["kkt_fails_at_singularity"] and sc["auto_accelerations_finite_at_singularity"]
    assert sc["max_velocity_residual"] < 1e-8 and sc["energy_balance_error"] < 1e-6
    tt = s["turntable"]
    assert abs(tt["orbit_rate_nu"] - 2 / 7 * tt["Omega"]) < 1e-12  # homogeneous ball
    assert tt["max_position_error"] < 1e-8
    fm = s["friction_modes"]  # skid -> roll -> slide, against Newton-Euler's closed forms
    assert fm["switch_modes"] == [0, 1]  # rolling, then sliding
    np.testing.assert_allclose(fm["switch_times"], fm["closed_form_switch_times"], rtol=1e-8)
    assert fm["dissipated_while_rolling"] < 1e-6  # the rolling constraint does no work
    pi = s["parameter_identification"]
    assert pi["converged"] and pi["z_score_max"] < 4.0 and pi["relative_error_max"] < 0.01
    assert 0.5 < pi["rms_normalised_residual"] < 1.5  # residuals at the noise level
    to = s["trajectory_optimisation"]
    for key in ("plain", "constrained"):
        r = to[key]
        assert r["success"] and r["status"] == "solved", (key, r)
        assert r["terminal_error"] < 1e-8 and r["constraint_violation"] < 1e-8, (key, r)
        assert r["max_velocity_residual"] < 1e-9  # no slip along the replay
    # Replay (the controls through cx.simulate) against the collocated nodes, N = 40:
    # measured 1.2e-2 for the plain optimum (its front wheel spins through 340°) and
    # 4.9e-6 for the constrained one.
    assert to["plain"]["replay_error"] < 0.05 and to["constrained"]["replay_error"] < 1e-4
    # Measured on the replay, independently of the NLP: the plain optimum overshoots the
    # target and reverses into it; the constrained one never drives backwards, keeps its
    # speed above the floor and its steering within the bound (up to the replay error).
    pl, co = to["plain"], to["constrained"]
    assert pl["max_x"] > 1.6 and pl["min_forward_speed"] < 0 and pl["reversing_s"] > 0.3
    assert co["min_forward_speed"] >= to["v_min"] - 1e-6 and co["reversing_s"] == 0.0
    assert co["max_x"] < 1.5 + 1e-4 and co["max_abs_steering_deg"] < to["max_steering_deg"] + 0.01
    assert co["replay_pose_error"] < 1e-4 and co["objective"] > pl["objective"]
    br = s["batched_rollouts"]
    assert br["success_fraction"] == 1.0 and br["env_steps_per_s"] > 0
    assert br["env_steps"] == br["batch"] * round(br["horizon_s"] / br["dt_env"])
    assert br["max_error_vs_adaptive"] < 1e-6 and br["min_abs_cos_phi"] > 0.1


def test_progress_bar_writes_nothing_when_the_output_is_not_a_terminal(capsys):
    from constrax._showcase._common import progress

    pytest.importorskip("tqdm")
    assert list(progress(range(3), "sections", total=3)) == [0, 1, 2]
    captured = capsys.readouterr()  # pytest's capture is not a terminal
    assert captured.err == "" and captured.out == ""


def test_quick_adds_xla_fast_compile_unless_the_user_set_an_optimisation_level(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_thunk_runtime=true")
    assert use_quick_xla_flags()
    assert os.environ["XLA_FLAGS"] == f"--xla_cpu_use_thunk_runtime=true {QUICK_XLA_FLAGS}"
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
    assert not use_quick_xla_flags()
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=2"


def test_xla_flags_set_after_importing_the_showcase_still_reach_xla(tmp_path):
    """`--quick` sets its XLA flags in `main`, after `import constrax`: that works only if
    no import starts XLA's backend (an array made at import does). An unknown flag set
    after the import must still be read: XLA then refuses it and the process stops."""
    code = (
        "import os, constrax.showcase\n"
        "os.environ['XLA_FLAGS'] = '--xla_no_such_flag_for_this_test=1'\n"
        "import jax.numpy as jnp\n"
        "jnp.zeros(1).block_until_ready()\n"
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0 and "xla_no_such_flag_for_this_test" in proc.stderr, proc.stderr[
        -2000:
    ]


def test_write_summary_reports_failed_sections(tmp_path):
    meta = dict(
        constrax_version="0", jax_version="0", platform="cpu", devices=1, mode="quick", wall_s=1.0
    )
    write_summary(str(tmp_path), {"turntable": {"status": "failed", "error": "boom"}}, meta)
    assert "**failed:** `boom`" in (tmp_path / "summary.md").read_text()
    assert json.loads((tmp_path / "summary.json").read_text())["turntable"]["error"] == "boom"


def test_unknown_section_is_an_error(capsys):
    with pytest.raises(SystemExit):
        main(["--sections", "nope", "--out", "unused"])
    assert "unknown showcase section 'nope'" in capsys.readouterr().err


def test_log_axis_with_zeros_draws_exact_zeros_at_zero():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from constrax._showcase._common import log_axis_with_zeros, zero_note

    fig, (ax1, ax2) = plt.subplots(1, 2)
    zeros, small = np.zeros(5), np.array([0.0, 1e-14, 3e-12, 1e-10, 2e-9])
    log_axis_with_zeros(ax1, zeros, small)
    assert ax1.get_yscale() == "symlog"
    lo, hi = ax1.get_ylim()
    assert lo < 0.0 < 1e-14 and hi >= 2e-9  # 0 and every positive value are on the axis
    assert 0.0 in ax1.get_yticks()
    log_axis_with_zeros(ax2, zeros, np.array([0.5, 1.5]))  # < 2 decades: linear from 0
    assert ax2.get_yscale() == "linear" and ax2.get_ylim()[0] < 0.0 < 0.5
    assert zero_note("a", zeros) == "a (exactly 0)" and zero_note("b", small) == "b"
    plt.close(fig)
