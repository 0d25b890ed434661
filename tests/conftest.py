import os

# Compile with XLA's LLVM IR emitters (what constrax's own eager calls use, see
# `constrax._compilation`), at XLA's optimisation level 0 and without LLVM's expensive passes.
# The tests compile hundreds of programs and run most of them for milliseconds, so compile
# time is most of the suite's time: 42 % less this way than with XLA's default pipeline,
# measured on 55 of the tests on a 2-core CPU (benchmarks/suite_flags.py). None of the flags
# enables fast-math; the arithmetic is IEEE either way. Set before JAX starts its CPU
# backend; inherited by the subprocesses tests start (notebooks, docs build, benchmarks).
# CONSTRAX_TEST_FAST_COMPILE=0 tests XLA's default pipeline instead.
# One thing differs at optimisation level 0: the backward pass of diffrax's
# RecursiveCheckpointAdjoint does not recompute adaptive steps bit for bit as the forward pass
# took them, and at tolerances near 1e-10 reverse-mode Jacobians through adaptive steps can be
# wrong by O(1) (docs/concepts/gradients.md, "Adaptive steps and the recomputation"). Tests
# that optimise with reverse-mode Jacobians use fixed steps or diffrax.ForwardMode().
FAST_COMPILE = (
    "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"
    " --xla_llvm_disable_expensive_passes=true"
)
# The user's own flags: a pytest-xdist worker inherits the controller's, FAST_COMPILE added.
_USER_XLA_FLAGS = " ".join(
    f for f in os.environ.get("XLA_FLAGS", "").split() if f not in FAST_COMPILE.split()
)
if os.environ.get("CONSTRAX_TEST_FAST_COMPILE", "1") != "0":
    os.environ["XLA_FLAGS"] = f"{_USER_XLA_FLAGS} {FAST_COMPILE}".strip()

import jax  # noqa: E402
import pytest  # noqa: E402

# float64 unless CONSTRAX_TEST_X64=0 (CI runs tests/test_float32.py that way too).
jax.config.update("jax_enable_x64", os.environ.get("CONSTRAX_TEST_X64", "1") != "0")
jax.config.update("jax_numpy_dtype_promotion", "standard")
# Cache compiled XLA programs across test processes (pytest-xdist workers, reruns).
_default_cache = os.path.join(os.path.dirname(__file__), ".jax_cache")
_cache = os.environ.get("CONSTRAX_TEST_CACHE", _default_cache)
jax.config.update("jax_compilation_cache_dir", _cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture(scope="session")
def subprocess_xla_flags() -> str:
    """`XLA_FLAGS` for the short scripts tests run in a subprocess (the showcase, the
    notebooks, the executed docs build), where compile time is nearly all: the user's own
    `XLA_FLAGS` and FAST_COMPILE, also where CONSTRAX_TEST_FAST_COMPILE=0 (which is about the
    programs the tests compile themselves)."""
    return f"{_USER_XLA_FLAGS} {FAST_COMPILE}".strip()


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
