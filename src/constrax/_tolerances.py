r"""Default tolerances that scale with the working dtype (docs page "Precision"): the one
home of every default tolerance of the engine, each function's docstring saying why its
value.

Checks and integration tolerances are `max(f64_value, factor * eps)` (`tolerance`): the
float64 value the library was verified with, or a multiple of the dtype's machine epsilon
where that is larger — so the same defaults work in float32
($\epsilon = 1.2\times10^{-7}$), where a float64 tolerance of $10^{-8}$ is below the
rounding of a single operation. Rank decisions are relative to the largest singular value
or pivot: `rank_rtol` ($\sqrt\epsilon$), `pivot_rtol` (`100 eps`), `switch_rtol`;
`consistency_rtol` is a fraction of the constraint rows' scale.
"""

import numpy as np


def tolerance(dtype, f64_value: float, eps_factor: float) -> float:
    """`max(f64_value, eps_factor * eps(dtype))` for a floating `dtype`."""
    eps = float(np.finfo(np.dtype(dtype) if np.issubdtype(dtype, np.floating) else float).eps)
    return max(float(f64_value), float(eps_factor) * eps)


def initial_tolerance(dtype) -> float:
    """Initial-state constraint check of `simulate`: `1e-8` in float64, `1.2e-4` in float32."""
    return tolerance(dtype, 1e-8, 1000)


def integration_tolerance(dtype) -> float:
    """Default adaptive rtol = atol of `simulate`: `1e-8` in float64, `1.2e-5` in float32."""
    return tolerance(dtype, 1e-8, 100)


def fit_integration_tolerance(dtype) -> float:
    """Default adaptive rtol = atol of `cx.fit`: `1e-10` in float64, `1.2e-5` in float32."""
    return tolerance(dtype, 1e-10, 100)


def projection_tolerance(dtype) -> float:
    """Gauss–Newton rtol = atol of `consistent_initial_state`: `1e-12` / `1.2e-6`."""
    return tolerance(dtype, 1e-12, 10)


def rounding_tolerance(dtype, f64_value: float = 1e-12) -> float:
    """Relative tolerance of exact-in-theory checks (symmetry, unit norms): `100 eps`."""
    return tolerance(dtype, f64_value, 100)


def rank_rtol(dtype) -> float:
    r"""Default relative cutoff of every numerical rank and pseudoinverse: $\sqrt\epsilon$.

    Singular values below `rank_rtol * max` count as zero — in the rank of the constraint
    rows (`constraint_rank`, the geometry of the constraint distribution, the rigid-body
    degeneracy analysis), the pseudoinverse of `UdwadiaKalaba`, and the projection of
    `impulsive_jump`. $1.5\times10^{-8}$ in float64, $3.5\times10^{-4}$ in float32.

    Why $\sqrt\epsilon$: a singular value that is zero in exact arithmetic comes out of
    the rows (themselves computed by autodiff) at a few $\epsilon$ times the largest, so
    the cutoff must sit well above $\epsilon$; a singular value $\sigma$ that is kept is
    inverted, amplifying the rows' rounding by $1/\sigma$. At $\sqrt\epsilon$, halfway
    between the two on a log scale, nothing that is rounding counts as rank, and what is
    kept loses at most half the digits: a solve stays accurate to about $\sqrt\epsilon$
    relative to its scale. Configurations within about $\sqrt\epsilon$ of a singular one
    are treated as singular.
    """
    return float(np.sqrt(np.finfo(dtype).eps))


def pivot_rtol(dtype) -> float:
    r"""Default singularity test of `KKT`: a pivot of the LU factor below
    `pivot_rtol * max|pivot|` flags the saddle matrix as singular; `100 eps`.

    Gaussian elimination with partial pivoting leaves a pivot that is zero in exact
    arithmetic at a small multiple of $\epsilon$ times the largest: `100 eps` catches those
    and leaves every reasonably conditioned matrix to the LU.
    """
    return 100 * float(np.finfo(dtype).eps)


def switch_rtol(dtype) -> float:
    r"""Default pivot ratio below which `AutoSolver` leaves the KKT path for the rank-robust
    `UdwadiaKalaba` one: `1e-10` in float64, `rank_rtol` ($\sqrt\epsilon$) in lower
    precision.

    In float64 the switch comes well before `pivot_rtol` would call the saddle matrix
    singular, so that nearly singular configurations get the rank-robust answer rather than
    a badly conditioned LU. In float32 the pivots of a singular matrix are only resolved to
    a few $\epsilon$, so the rank cutoff itself is used.
    """
    return 1e-10 if np.finfo(dtype).bits >= 64 else rank_rtol(dtype)


def consistency_rtol(dtype) -> float:
    """Default relative tolerance of the acceleration-level residual (`inconsistent`).

    `0.05` in float64, `0.2` in float32. Contradicting rows at a singular configuration miss
    by a finite fraction of the rows' scale. An unstabilised run through a singular
    configuration leaves a residual from its drift, which shrinks with the integration
    tolerance and is larger in float32, where the rank cut-off also drops near-singular
    rows in a wide band. The defaults sit between the two (docs page "Precision" has the
    snake cart's figures); `Projection` stabilisation removes the drift.
    """
    return 0.05 if np.finfo(dtype).bits >= 64 else 0.2


def ipopt_tolerance(dtype) -> float:
    """IPOPT's `tol` in `cx.fit.IPOPT`: `1e-9` in float64, `1.2e-6` (`10 eps`) in float32,
    where the scaled optimality error of a well-posed problem stops at a few `eps`."""
    return tolerance(dtype, 1e-9, 10)


def ipopt_constraint_tolerance(dtype) -> float:
    """IPOPT's `constr_viol_tol` in `cx.fit.IPOPT`: `1e-10` in float64, `1.2e-6` in float32,
    where constraint rows of order one are evaluated to a few `eps` (the knife-edge
    parking leaves `3.9e-7`)."""
    return tolerance(dtype, 1e-10, 10)


def violation_tolerance(dtype) -> float:
    """The largest violation `cx.fit.solve_optimal_control` reports as `success`: `1e-8` in
    float64, `1.2e-5` (`100 eps`, as the integration tolerance) in float32; above IPOPT's
    `constr_viol_tol`, so that a point IPOPT solved is not refused for its rounding."""
    return tolerance(dtype, 1e-8, 100)
