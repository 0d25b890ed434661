"""The README's quickstart runs verbatim, and .ci/run calls the README's test command."""

import pathlib
import re

import jax.numpy as jnp
import pytest

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
    # The gradient has one entry per parameter, each finite.
    assert set(namespace["dx_dp"]) == {"m", "I", "a"}
    assert all(jnp.isfinite(v) for v in namespace["dx_dp"].values())


def test_ci_runs_exactly_the_readme_test_command():
    commands = [b.strip() for b in _blocks("bash")]
    test_command = [c for c in commands if "pytest" in c]
    assert len(test_command) == 1
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command[0] in ci.splitlines()


def test_ci_runs_exactly_the_readme_docs_command_in_a_fresh_virtual_environment():
    (command,) = set(re.findall(r"`(python -m pip install -e \".\[docs\]\"[^`]*)`", README))
    assert "mkdocs build --strict" in command
    ci = (ROOT / ".ci" / "run").read_text()
    block = ci.split("# --- begin README docs command")[1].split("# --- end README docs")[0]
    assert command in [line.strip() for line in block.splitlines()]
    before = ci.split("# --- begin README docs command")[0]
    assert "python3 -m venv .ci-docs-venv" in before and ". .ci-docs-venv/bin/activate" in before


def test_readme_optimal_control_example_runs_on_its_own_and_parks_the_knife_edge():
    """The README's optimal-control block, alone (its own imports and float64), solves the
    parking problem: success, the optimum 0.21846 of single shooting to 0.5 %, the replay
    on the collocated states (3e-6 at 50 intervals, fourth order)."""
    pytest.importorskip("cyipopt")
    (block,) = [b for b in _blocks("python") if "OptimalControlProblem" in b]
    namespace: dict = {}
    exec(compile(block, "README-optimal-control", "exec"), namespace)
    sol = namespace["sol"]
    assert sol.success and abs(sol.objective - 0.21846) <= 5e-3 * 0.21846
    assert float(jnp.max(jnp.abs(sol.u))) <= 1.0 + 1e-8
    assert sol.replay_error() <= 1e-5


# The distribution behind each module the tests `importorskip`; a module missing here fails
# the test below, naming it, until it is entered and its distribution put into `.[dev]`.
_DISTRIBUTION = {
    "casadi": "casadi",
    "cyipopt": "cyipopt-wheels",
    "gymnasium": "gymnasium",
    "hypothesis": "hypothesis",
    "mkdocs": "mkdocs",
    "mkdocs_jupyter": "mkdocs-jupyter",
    "mkdocstrings_handlers": "mkdocstrings-python",
    "mujoco": "mujoco",
    "nbclient": "nbclient",
    "nbformat": "nbformat",
    "optax": "optax",
    "sympy": "sympy",
    "sympy2jax": "sympy2jax",
    "tqdm": "tqdm",
}
# Modules that come with constrax itself, its required dependencies (scipy with jax) or
# Python's standard library (tomllib from 3.11).
_ALWAYS_THERE = {"constrax", "diffrax", "scipy", "tomllib"}


def _dev_requirements() -> set[str]:
    """The distribution names `.[dev]` installs: its own entries and, for an entry
    `constrax[a,b]`, the entries of those extras."""
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names, todo, seen = set(), ["dev"], set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for requirement in extras[extra]:
            name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
            inner = re.search(r"\[(.*?)\]", requirement)
            if name == "constrax" and inner:
                todo += [e.strip() for e in inner.group(1).split(",") if e.strip() not in seen]
            else:
                names.add(name)
    return names


def test_readme_test_command_installs_what_every_importorskip_of_the_tests_needs():
    """The README's test command installs `.[dev]`, and `.[dev]` pulls the distribution of
    every module a test imports or skips: a new user runs the tests CI runs."""
    (command,) = [b.strip() for b in _blocks("bash") if "pytest" in b]
    assert '".[dev]"' in command
    modules = set()
    for path in (ROOT / "tests").rglob("*.py"):
        modules |= set(re.findall(r'importorskip\(\s*"([A-Za-z0-9_]+)', path.read_text()))
    unknown = sorted(modules - _DISTRIBUTION.keys() - _ALWAYS_THERE)
    assert not unknown, f"tests importorskip {unknown}: enter them in _DISTRIBUTION"
    missing = sorted({_DISTRIBUTION[m] for m in modules - _ALWAYS_THERE} - _dev_requirements())
    assert not missing, f".[dev] does not install {missing}"
