"""mkdocs hook: the environment of the kernel that executes the tutorials at build time.

mkdocs-jupyter runs each notebook in a kernel that inherits this process's environment.
Two settings there decide what the pages show and what the build costs:

* `MPLBACKEND`: the figures reach the page only through the inline backend. A
  non-interactive backend set for scripts (`MPLBACKEND=Agg`, as the test suite sets for
  tests/test_notebooks.py) would make every `plt.show()` draw nothing, so the backend is
  set to the inline one for the kernel;
* `XLA_FLAGS`: the tutorials' short runs are dominated by XLA compile time; the same
  fast-compile flags as tests/test_notebooks.py are added (unless `XLA_FLAGS` already
  sets the optimisation level).

`CONSTRAX_DOCS_EXECUTE=false` in the environment builds the site without executing the
notebooks (mkdocs.yml); nothing is changed then.
"""

import os

INLINE = "module://matplotlib_inline.backend_inline"
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def on_config(config):
    plugin = config["plugins"].get("mkdocs-jupyter")
    if plugin is None or not plugin.config["execute"]:
        return config
    os.environ["MPLBACKEND"] = INLINE
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {FAST_COMPILE}".strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    return config
