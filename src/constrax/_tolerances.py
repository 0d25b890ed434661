r"""Default tolerances that scale with the working dtype (docs page "Precision").

Every default tolerance of constrax is `max(f64_value, factor * eps)`: the float64 value
the library was verified with, or a multiple of the dtype's machine epsilon where that is
larger — so the same defaults work in float32 ($\epsilon = 1.2\times10^{-7}$), where a
float64 tolerance of $10^{-8}$ is below the rounding of a single operation.
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
