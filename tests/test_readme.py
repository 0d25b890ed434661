"""The README's quickstart runs verbatim, and .ci/run calls the README's test command."""

import pathlib
import re

import jax.numpy as jnp

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_quickstart_runs_verbatim_and_keeps_the_sleigh_on_its_knife_edge():
    (code,) = [b for b in _blocks("python") if "cx.simulate" in b][:1]
    namespace: dict = {}
    exec(compile(code, "README-quickstart", "exec"), namespace)
    traj = namespace["traj"]
    # No stabilisation in the quickstart: the residual is integration drift at rtol=1e-8.
    assert jnp.abs(traj.constraint_residual().velocity).max() < 1e-6
    assert jnp.isfinite(namespace["dx_dm"]["m"])


def test_ci_runs_exactly_the_readme_test_command():
    commands = [b.strip() for b in _blocks("bash")]
    test_command = [c for c in commands if "pytest" in c]
    assert len(test_command) == 1
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command[0] in ci.splitlines()


def test_readme_optimal_control_example_runs_verbatim_and_parks_the_knife_edge():
    """The README's optimal-control block (after the quickstart's imports) solves the
    parking problem: success, the optimum 0.21846 of single shooting to 0.5 %, the replay
    on the collocated states (3e-6 at 50 intervals, fourth order)."""
    import pytest

    pytest.importorskip("cyipopt")
    quickstart, block = [
        b for b in _blocks("python") if "import constrax" in b or "OptimalControlProblem" in b
    ][:2]
    namespace: dict = {}
    exec(compile(quickstart.split("def L(")[0], "README-imports", "exec"), namespace)
    exec(compile(block, "README-optimal-control", "exec"), namespace)
    sol = namespace["sol"]
    assert sol.success and abs(sol.objective - 0.21846) <= 5e-3 * 0.21846
    assert float(jnp.max(jnp.abs(sol.u))) <= 1.0 + 1e-8
    assert sol.replay_error() <= 1e-5
