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


# A pytest-xdist worker that dies (a segfault, not a failing assertion) reruns its test once
# on a fresh worker. Why: XLA's CPU compiler (jaxlib 0.10) has crashed nondeterministically
# inside `backend_compile_and_load` on three different tests across runs, each of which
# passes when run again; a crash says nothing about constrax. A test that crashes twice
# fails, an ordinary failure fails at once, and every rerun is listed in the summary.
_CRASH_RERUNS = 1
_crashed: dict[str, int] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    count = _crashed.get(crashitem, 0)
    _crashed[crashitem] = count + 1
    if count < _CRASH_RERUNS:
        sched.mark_test_pending(crashitem)
        report.outcome = "rerun"


def pytest_report_teststatus(report, config):
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _crashed:
        terminalreporter.section("tests whose worker crashed")
        for nodeid, count in _crashed.items():
            rerun = "rerun once" if count <= _CRASH_RERUNS else "crashed again: failed"
            terminalreporter.line(f"{nodeid}: crashed {count}x, {rerun}")
