r"""Known inputs as tables (`cx.fit.Tabulated`): a recorded disturbance in the dynamics of a
trajectory optimisation, kept fixed.

Reference nobody here derived: a unit mass pushed by the control and a known force,
$\ddot q = u + w(t)$, moved by $d$ in $T$ from rest to rest with least $\int u^2$. With
$v = u + w$ the problem is that of $\ddot q = v$ with cost $\int (v - w)^2$, whose optimum
is $u = a + bt$: linear whatever $w$, with $a, b$ from the boundary conditions,
$aT + bT^2/2 = -\int w$ and $aT^2/2 + bT^3/6 = d - \int (T - s) w(s)\,ds$, and cost
$a^2T + abT^2 + b^2T^3/3$. A table on the grid's nodes makes $q$ a cubic on each interval,
which Hermite–Simpson represents exactly.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

fit = cx.fit
T, D, N = 1.0, 1.0, 10


def _closed_form(ts, w):
    """`a, b, cost` of the optimum for the piecewise-linear `w` through `(ts, w)`: the
    integrals of a linear (and, times T - s, quadratic) function per interval, exact by
    Simpson's rule."""
    lo, hi = ts[:-1], ts[1:]
    h, mid = hi - lo, 0.5 * (lo + hi)
    w_mid = 0.5 * (w[:-1] + w[1:])
    W0 = np.sum(h / 6 * (w[:-1] + 4 * w_mid + w[1:]))
    W1 = np.sum(h / 6 * ((T - lo) * w[:-1] + 4 * (T - mid) * w_mid + (T - hi) * w[1:]))
    a, b = np.linalg.solve([[T, T**2 / 2], [T**2 / 2, T**3 / 6]], [-W0, D - W1])
    return a, b, a**2 * T + a * b * T**2 + b**2 * T**3 / 3


def test_a_tabulated_disturbance_leaves_the_closed_form_linear_control():
    pytest.importorskip("cyipopt")
    ts = np.linspace(0.0, T, N + 1)
    w = np.random.default_rng(0).normal(size=N + 1) * 3.0
    a, b, cost = _closed_form(ts, w)
    system = cx.System(lambda t, q, qd, p: 0.5 * qd @ qd,
                       force=lambda t, q, qd, p: p["u"] + p["wind"](t))  # fmt: skip
    params = {"u": jnp.zeros(1), "wind": fit.Tabulated(ts, w[:, None])}
    problem = fit.OptimalControlProblem(
        system, params, control=lambda p: p["u"], t1=T, q0=jnp.zeros(1), qd0=jnp.zeros(1),
        q1=jnp.full(1, D), qd1=jnp.zeros(1), running_cost=lambda t, q, qd, u, p: u @ u,
    )  # fmt: skip
    sol = fit.solve_optimal_control(problem, transcription=fit.HermiteSimpson(N), progress=False)
    assert sol.success
    assert abs(sol.objective - cost) <= 1e-8 * cost
    np.testing.assert_allclose(np.asarray(sol.u)[:, 0], a + b * np.asarray(sol.ts), atol=1e-8)
    # The table stays what it was: data, not a decision variable.
    np.testing.assert_array_equal(np.asarray(sol.params["wind"].values[:, 0]), w)


def test_tabulated_interpolates_linearly_and_holds_its_ends_under_jit_vmap_and_grad():
    tab = fit.Tabulated(jnp.array([0.0, 0.5, 2.0]), jnp.array([[0.0, 1.0], [1.0, 1.0], [0.0, 4.0]]))
    np.testing.assert_allclose(tab(1.25), [0.5, 2.5])
    np.testing.assert_allclose(jax.jit(lambda t: tab(t))(-1.0), [0.0, 1.0])
    np.testing.assert_allclose(jax.vmap(tab)(jnp.array([0.25, 3.0])), [[0.5, 1.0], [0.0, 4.0]])
    np.testing.assert_allclose(jax.grad(lambda t: tab(t)[1])(1.25), 2.0)  # slope 3 / 1.5
    scalar = fit.Tabulated([0.0, 1.0], [2.0, 4.0])
    assert scalar(0.5).shape == () and float(scalar(0.5)) == 3.0


def test_bad_tables_raise_naming_the_argument():
    with pytest.raises(ValueError, match="`ts` must have shape \\(K,\\) with K >= 2"):
        fit.Tabulated([0.0], [1.0])
    with pytest.raises(ValueError, match="`values` must have shape \\(K,\\) or \\(K, d\\) with K"):
        fit.Tabulated([0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="strictly increasing"):
        fit.Tabulated([0.0, 1.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="`values` is not finite at index \\(1,\\)"):
        fit.Tabulated([0.0, 1.0], [1.0, np.nan])
