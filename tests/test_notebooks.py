"""Execute the tutorial notebooks in `notebooks/` (committed without outputs) with nbclient.

Each notebook prints its own checks (energy drift, closed forms, finite differences);
here every cell must run without error, and the notebooks must be stored without outputs.
"""

import importlib.util
import os
import pathlib

import jax
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_notebooks_exist_and_have_no_outputs():
    assert len(NOTEBOOKS) >= 3, NOTEBOOKS
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, (
                    f"{path.name} is committed with outputs; clear them"
                )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, subprocess_xla_flags):
    docs_build = ("mkdocs", "mkdocstrings_handlers", "mkdocs_jupyter")
    if all(importlib.util.find_spec(m) for m in docs_build):
        pytest.skip(
            "executed, with every cell's errors failing it, by the docs build of "
            "tests/test_docs.py::test_executed_site_shows_every_tutorials_outputs_and_figures"
        )
    nb = nbformat.read(path, as_version=4)
    env = {
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
        "MPLBACKEND": "Agg",
        "XLA_FLAGS": subprocess_xla_flags,
    }
    if jax.config.jax_compilation_cache_dir:  # share conftest's persistent compile cache
        env["JAX_COMPILATION_CACHE_DIR"] = jax.config.jax_compilation_cache_dir
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.5"
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # inherited by the kernel process
    try:
        client = nbclient.NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
