r"""The stability of a fixed step: `StepSizeWarning`, emitted by `simulate` when a fixed
step of an explicit Runge–Kutta solver amplifies a mode of the linearised dynamics at the
initial state that the exact flow does not (Hairer & Wanner, *Solving Ordinary Differential
Equations II*, 1996, §IV.2: the stability function of an explicit Runge–Kutta method)."""

import math
import warnings

import diffrax
import numpy as np


class StepSizeWarning(UserWarning):
    r"""`cx.simulate` was given a fixed step beyond the stability limit of its explicit
    solver: a mode of the linearised dynamics at the initial state, which the exact flow
    does not amplify, is amplified by the solver at every step, so that the run grows
    without bound (silently: the values stay finite for a long time).

    Checked when `stepsize_controller` is `diffrax.ConstantStepSize`, the solver is an
    explicit Runge–Kutta method (`diffrax.Tsit5`, `Dopri5`, `Dopri8`, `Bosh3`, `Heun`,
    `Midpoint`, `Ralston`, or `Euler`) and the call is eager (concrete `dt0`, states and
    parameters): the eigenvalues $\lambda_i$ of the Jacobian of the vector field at
    $(t_0, y_0)$ are computed once (a small dense matrix, a program compiled apart from the
    run's), and the warning is emitted when $|R(\lambda_i\,dt_0)|^N$ exceeds 10 for one
    of them, where $R$ is the solver's stability function (from its Butcher tableau) and
    $N$ the number of steps to `t1`, growth the exact flow has (a mode with
    $\mathrm{Re}\,\lambda > 0$) divided out. The result of the run is never changed. See
    the docs page "Choosing the integrator".

    **Example:**

    ```python
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", cx.StepSizeWarning)   # make it an error here
        cx.simulate(system, q0, qd0, p, t1=1.0, dt0=0.01,
                    stepsize_controller=diffrax.ConstantStepSize())
    ```
    """


try:  # False while a transformation (jit, vmap, grad) traces
    from jax._src.core import trace_state_clean as trace_state_clean
except ImportError:  # pragma: no cover
    trace_state_clean = lambda: True  # noqa: E731

#: Growth of a mode over the run, beyond that of the exact flow, above which
#: `StepSizeWarning` is emitted.
_GROWTH_LIMIT = 10.0


def stability_polynomial(solver) -> np.ndarray | None:
    r"""Coefficients $c_k$ (lowest first) of the stability function $R(z) = \sum c_k z^k$
    of an explicit Runge–Kutta `solver`, or `None` for any other solver."""
    if type(solver) is diffrax.Euler:
        return np.array([1.0, 1.0])
    if not isinstance(solver, diffrax.AbstractERK):
        return None
    tableau = getattr(solver, "tableau", None)
    if not isinstance(tableau, diffrax.ButcherTableau):
        return None
    b = np.asarray(tableau.b_sol, dtype=float)
    s = b.shape[0]
    A = np.zeros((s, s))
    for i, row in enumerate(tableau.a_lower):
        A[i + 1, : len(row)] = np.asarray(row, dtype=float)
    # R(z) = 1 + z b^T (I - zA)^{-1} 1 = 1 + sum_k z^k b^T A^{k-1} 1 (A nilpotent).
    coefs, v = [1.0], np.ones(s)
    for _ in range(s):
        coefs.append(float(b @ v))
        v = A @ v
    return np.array(coefs)


def spurious_growth(coefs: np.ndarray, z: np.ndarray) -> np.ndarray:
    r"""Per-step amplification $|R(z)|$ beyond the exact flow's $\max(1, |e^z|)$."""
    R = np.abs(np.polyval(coefs[::-1], z))
    return R / np.maximum(1.0, np.exp(np.minimum(z.real, 700.0)))


def step_limit(coefs, lam, n_steps_times_dt) -> float:
    r"""The largest $|\lambda|\,dt$ along the direction of `lam` for which the growth over
    the run stays below `_GROWTH_LIMIT` (the number of steps scales as $1/dt$)."""
    r = np.linspace(1e-3, abs(lam) * n_steps_times_dt, 4000)
    r = r[r <= 20.0] if np.any(r <= 20.0) else r[:1]
    z = r * lam / abs(lam)
    n = np.ceil(abs(lam) * n_steps_times_dt / r)
    ok = n * np.log(spurious_growth(coefs, z)) <= math.log(_GROWTH_LIMIT)
    bad = np.flatnonzero(~ok)
    return float(r[bad[0] - 1]) if bad.size and bad[0] > 0 else float(r[0] if bad.size else r[-1])


def warn_if_unstable(solver, coefs, J, t0: float, t1: float, dt: float, max_steps) -> None:
    r"""`StepSizeWarning` if the fixed step `dt` of `solver` (stability polynomial `coefs`)
    amplifies a mode of the Jacobian `J` of the vector field at the initial state by more
    than `_GROWTH_LIMIT` over the run from `t0` to `t1`, beyond the exact flow's growth.
    Called from `simulate`'s precheck: the warning points at the caller of `cx.simulate`."""
    lam = np.linalg.eigvals(J)
    steps = min(math.ceil(abs(t1 - t0) / abs(dt) - 1e-9), max_steps or math.inf)
    growth = spurious_growth(coefs, lam * abs(dt))
    log_total = steps * np.log(np.maximum(growth, 1.0))
    worst = int(np.argmax(log_total))
    if log_total[worst] <= math.log(_GROWTH_LIMIT):
        return
    lw = lam[worst]
    limit = step_limit(coefs, lw, abs(t1 - t0))
    name = type(solver).__name__
    kind = "an undamped oscillation" if abs(lw.real) <= 1e-6 * abs(lw) else f"eigenvalue {lw:.4g}"
    warnings.warn(
        f"constrax.simulate: the fixed step dt0={dt:g} is beyond the stability limit of "
        f"{name} for this system: the linearised dynamics at the initial state have an "
        f"eigenvalue of magnitude |lambda| = {abs(lw):.4g} ({kind}), so |lambda|*dt0 = "
        f"{abs(lw) * abs(dt):.3g}, where {name} amplifies that mode by "
        f"{growth[worst]:.4g} a step, a factor of 10^{log_total[worst] / math.log(10):.0f} "
        f"over the {steps} steps to t1, which the exact motion does not have. Keeping the "
        f"growth below {_GROWTH_LIMIT:g}x needs |lambda|*dt0 <= {limit:.3g}, i.e. dt0 <= "
        f"{limit / abs(lw):.3g}. Use a smaller dt0, an adaptive controller "
        "(diffrax.PIDController, the default), or an implicit solver (diffrax.Kvaerno5) for "
        "a stiff system. The results are not changed; see the docs page 'Choosing the "
        "integrator'.",
        StepSizeWarning,
        stacklevel=6,  # the caller of cx.simulate
    )
