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
