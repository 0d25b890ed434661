"""Regression guard on the size of constrax's traced graphs.

For every benchmark case, the jaxpr equation count of one vector-field evaluation as
`cx.simulate` traces it, of its VJP, of `cx.accelerations(...).qdd` and of its VJP must
not grow more than 10 % over the figures committed in
`benchmarks/results/jaxpr_counts.json` (counting equations is deterministic, unlike time).
After a deliberate change, regenerate the committed figures with

    python benchmarks/jaxpr_counts.py
"""

import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[1]
_COMMITTED = _ROOT / "benchmarks" / "results" / "jaxpr_counts.json"
_GROWTH = 0.10

if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks._jaxpr import case_counts, count_equations, primitive_counts  # noqa: E402
from benchmarks._report import versions  # noqa: E402
from benchmarks.cases import OTHER_CASES, ROLLOUT_CASES  # noqa: E402


@pytest.fixture(scope="module")
def committed():
    return json.loads(_COMMITTED.read_text())


def _check(committed, case: str, now: dict):
    assert case in committed["cases"], (
        f"{case}: no committed jaxpr counts in {_COMMITTED.name}; regenerate with "
        "`python benchmarks/jaxpr_counts.py`"
    )
    ref = committed["cases"][case]["constrax"]
    grown = [
        f"{case}: jaxpr equation count of constrax's `{m}` grew from {ref[m]} (committed) to "
        f"{n} (+{100 * (n / ref[m] - 1):.0f} %, limit +{100 * _GROWTH:.0f} %)"
        for m, n in now.items()
        if n > (1 + _GROWTH) * ref[m]
    ]
    assert not grown, (
        "; ".join(grown) + f". Committed with {committed['versions']}, now {versions()}. "
        "If the growth is intended, regenerate the figures: python benchmarks/jaxpr_counts.py"
    )


@pytest.mark.parametrize("case", list(ROLLOUT_CASES))
@pytest.mark.parametrize("measure", ["vf", "acc"])
def test_rollout_case_counts_within_budget(committed, case, measure):
    now = case_counts(ROLLOUT_CASES[case], contenders=("constrax",), measures=(measure,))
    _check(committed, case, now["constrax"])


@pytest.mark.parametrize("case", list(OTHER_CASES))
def test_other_case_counts_within_budget(committed, case):
    now = OTHER_CASES[case].counts()
    _check(committed, case, {k: now["constrax"][k] for k in ("vf", "vf_vjp")})


def test_guard_reports_growth(committed):
    """The guard fails, naming the case and both numbers, on a count 11 % over."""
    case = next(iter(committed["cases"]))
    ref = committed["cases"][case]["constrax"]["vf"]
    bigger = int(1.11 * ref) + 1
    with pytest.raises(AssertionError, match=rf"{case}: .*`vf` grew from {ref} .* to {bigger}"):
        _check(committed, case, {"vf": bigger})
    _check(committed, case, {"vf": int(1.1 * ref)})  # within the budget


def test_count_equations_recurses_into_sub_jaxprs():
    """Hand-counted jaxprs: nested `jit`, both `cond` branches, a `scan` body."""

    def two(x):  # 2 equations: sin, add
        return jnp.sin(x) + 1.0

    x = jnp.ones(3)
    assert count_equations(jax.make_jaxpr(two)(x)) == 2
    # jit: the call itself + its body
    assert count_equations(jax.make_jaxpr(jax.jit(two))(x)) == 3
    # cond: the predicate's comparison + convert, the cond, both branches (2 + 1)
    cond = lambda x: jax.lax.cond(x[0] > 0, two, jnp.cos, x)
    jaxpr = jax.make_jaxpr(cond)(x)
    top = len(jaxpr.jaxpr.eqns)
    assert count_equations(jaxpr) == top + 2 + 1
    # scan: the scan + its body (sin, add, and the carry add)
    zero = jnp.zeros((), x.dtype)
    scan = lambda x: jax.lax.scan(lambda c, xi: (c + two(xi), None), zero, x)[0]
    jaxpr = jax.make_jaxpr(scan)(x)
    assert count_equations(jaxpr) == len(jaxpr.jaxpr.eqns) + 3
    assert primitive_counts(jaxpr)["sin"] == 1


# `cx.accelerations` of `cx.models.tilted_rolling_disk()` with its defaults (AutoSolver,
# the friction forces at zero coefficients but traced): 1809 equations and 3552 for the
# VJP until 2026-12-04, 1565 / 3034 after the quaternion angular velocities were written
# out (`Quaternion.*_angular_velocity`) and the two viscous frictions share one trace of
# the angular velocity. A fixed ceiling, not a growth budget: the guard that the core's
# traced size comes back down, not only that it does not grow.
_DISK_CEILING = {"acc": 1615, "acc_vjp": 3167}


def test_tilted_rolling_disk_accelerations_stay_under_their_ceiling():
    import constrax as cx

    model = cx.models.tilted_rolling_disk()
    q0, qd0, p = model.q0, model.qd0, model.params

    def qdd(q, qd):
        return cx.accelerations(model.system, 0.0, q, qd, p).qdd

    def pullback(q, qd):
        return jax.vjp(qdd, q, qd)[1](jnp.ones_like(qd))

    now = {
        "acc": count_equations(jax.make_jaxpr(qdd)(q0, qd0)),
        "acc_vjp": count_equations(jax.make_jaxpr(pullback)(q0, qd0)),
    }
    over = {k: (n, _DISK_CEILING[k]) for k, n in now.items() if n > _DISK_CEILING[k]}
    assert not over, f"tilted rolling disk: equations (now, ceiling) {over}"
