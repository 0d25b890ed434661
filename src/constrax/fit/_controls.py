r"""Controls parameterised over time, entering the generalized force $Q(t, q, \dot q, p)$.

A control is data inside the parameter pytree `p`: the force reads it, e.g.
`Q = B(q) @ p["u"](t)`, so gradients with respect to its knots flow through diffrax
like those of any physical parameter.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float


class AbstractControl(eqx.Module):
    """A time-dependent input $u(t) \\in \\mathbb{R}^d$ with a quadratic effort."""

    @abc.abstractmethod
    def __call__(self, t: Float[ArrayLike, ""]) -> Float[Array, " d"]:
        """$u(t)$."""

    @abc.abstractmethod
    def effort_residuals(self) -> Float[Array, " r"]:
        """A vector $e$ with $|e|^2 = \\int_{t_0}^{t_1} |u(t)|^2\\,dt$ exactly."""


class PiecewiseLinear(AbstractControl):
    r"""Piecewise-linear control through `N` knots equally spaced on $[t_0, t_1]$.

    $u(t) = u_i + (u_{i+1} - u_i)(t - \tau_i)/h$ for $\tau_i \le t \le \tau_{i+1}$,
    $\tau_i = t_0 + i h$, $h = (t_1 - t_0)/(N - 1)$; held constant outside
    $[t_0, t_1]$. The effort is exact: on each interval
    $\int |u|^2 = \tfrac{h}{6}(|u_i|^2 + |u_{i+1}|^2 + |u_i + u_{i+1}|^2)$.

    **Arguments:**

    - `knots`: the values $u_i$, shape `(N, d)` with `N >= 2`.
    - `t0`, `t1`: the span of the knots (static floats, `t0 < t1`).

    **Example:**

    ```python
    u = cx.fit.PiecewiseLinear(jnp.zeros((21, 2)), 0.0, 4.0)
    u(1.3)            # (2,)
    ```
    """

    knots: Float[Array, "N d"]
    t0: float = eqx.field(static=True)
    t1: float = eqx.field(static=True)

    def __init__(self, knots: Float[ArrayLike, "N d"], t0: float, t1: float):
        knots = jnp.asarray(knots)
        if knots.ndim == 1:
            knots = knots[:, None]
        if knots.ndim != 2 or knots.shape[0] < 2:
            raise ValueError(f"`knots` must have shape (N, d) with N >= 2, got {knots.shape}")
        t0, t1 = float(t0), float(t1)
        if not t0 < t1:
            raise ValueError(f"PiecewiseLinear: expected t0 < t1, got t0={t0}, t1={t1}")
        self.knots = knots
        self.t0 = t0
        self.t1 = t1

    @property
    def times(self) -> np.ndarray:
        """The knot times $\\tau_i$."""
        return np.linspace(self.t0, self.t1, self.knots.shape[0])

    def __call__(self, t):
        times = jnp.asarray(self.times, dtype=self.knots.dtype)
        return jax.vmap(lambda col: jnp.interp(t, times, col), in_axes=1)(self.knots)

    def effort_residuals(self):
        h = (self.t1 - self.t0) / (self.knots.shape[0] - 1)
        a, b = self.knots[:-1], self.knots[1:]
        return jnp.sqrt(h / 6.0) * jnp.concatenate([a, b, a + b], axis=0).reshape(-1)


class Tabulated(eqx.Module):
    r"""A known input trajectory given as a table: $w(t)$ linear between the samples
    $(t_k, w_k)$ (times not necessarily equally spaced), held constant outside them.

    It is data in the parameters, like a control's knots: a force reads it,
    `Q = ... + p["wind"](t)`, and a trajectory optimisation keeps it fixed (only `control`
    and `parameters=` are optimised), so a measured disturbance, a prescribed motion of a
    support or a reference signal enters the dynamics as it was recorded (opty's "known
    trajectories"). A new table of the same shape is new data, not a new program.

    **Arguments:**

    - `ts`: the sample times `(K,)`, strictly increasing, `K >= 2`.
    - `values`: the samples `(K,)` (a scalar input) or `(K, d)`.

    **Example:**

    ```python
    wind = cx.fit.Tabulated(jnp.array([0.0, 0.5, 2.0]), jnp.array([0.0, 1.0, 0.0]))
    wind(1.25)        # 0.5
    ```
    """

    ts: Float[Array, " K"]
    values: Float[Array, " K *d"]

    def __init__(self, ts: Float[ArrayLike, " K"], values: Float[ArrayLike, " K *d"]):
        ts, values = jnp.asarray(ts), jnp.asarray(values)
        if ts.ndim != 1 or ts.shape[0] < 2:
            raise ValueError(f"Tabulated: `ts` must have shape (K,) with K >= 2, got {ts.shape}")
        if values.ndim not in (1, 2) or values.shape[0] != ts.shape[0]:
            raise ValueError(
                f"Tabulated: `values` must have shape (K,) or (K, d) with K = len(ts) = "
                f"{ts.shape[0]}, got {values.shape}"
            )
        if not isinstance(ts, jax.core.Tracer):
            t = np.asarray(ts)
            if not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
                raise ValueError(f"Tabulated: `ts` must be finite and strictly increasing, got {t}")
        if not isinstance(values, jax.core.Tracer) and not np.all(np.isfinite(values)):
            bad = np.argwhere(~np.isfinite(np.asarray(values)))[0]
            raise ValueError(
                f"Tabulated: `values` is not finite at index {tuple(int(i) for i in bad)}"
            )
        dtype = jnp.result_type(ts, values, float)
        self.ts, self.values = ts.astype(dtype), values.astype(dtype)

    def __call__(self, t: Float[ArrayLike, ""]) -> Float[Array, " *d"]:
        """$w(t)$: `()` for a scalar table, `(d,)` otherwise."""
        if self.values.ndim == 1:
            return jnp.interp(t, self.ts, self.values)
        return jax.vmap(lambda col: jnp.interp(t, self.ts, col), in_axes=1)(self.values)
