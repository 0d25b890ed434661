import os

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "standard")
# Cache compiled XLA programs across test processes (pytest-xdist workers, reruns).
_default_cache = os.path.join(os.path.dirname(__file__), ".jax_cache")
_cache = os.environ.get("CONSTRAX_TEST_CACHE", _default_cache)
jax.config.update("jax_compilation_cache_dir", _cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)
