import os

import jax
import pytest

# float64 unless CONSTRAX_TEST_X64=0 (CI runs tests/test_float32.py that way too).
jax.config.update("jax_enable_x64", os.environ.get("CONSTRAX_TEST_X64", "1") != "0")
jax.config.update("jax_numpy_dtype_promotion", "standard")
# Cache compiled XLA programs across test processes (pytest-xdist workers, reruns).
_default_cache = os.path.join(os.path.dirname(__file__), ".jax_cache")
_cache = os.environ.get("CONSTRAX_TEST_CACHE", _default_cache)
jax.config.update("jax_compilation_cache_dir", _cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)
