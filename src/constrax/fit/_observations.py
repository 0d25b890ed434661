r"""Observations of a trajectory: times, values, which quantities are observed, noise.

The observation model is $y_{k} = h(t_k, q(t_k), \dot q(t_k), p) + \varepsilon_k$ with
independent Gaussian noise $\varepsilon_{kj} \sim N(0, \sigma_j^2)$. The fit minimises
the negative log-likelihood $\tfrac12\sum_{kj} m_{kj}\,(h_{kj} - y_{kj})^2/\sigma_j^2$,
where the mask $m_{kj}$ drops missing (NaN) entries.
"""

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float


class Observations(eqx.Module):
    r"""Observed data $y_k$ at times $t_k$ and the observation model $h$.

    **Arguments:**

    - `ts`: observation times `(k,)`, strictly increasing and finite.
    - `values`: observed values `(k, d)` (or `(k,)` for one observed quantity).
    - `coordinates`: indices into `q` that are observed, $h = q_{[\text{coordinates}]}$;
      `None` (with `observe=None`) means all of `q`.
    - `observe`: a general observation model `h(t, q, qd, p) -> (d,)` (overrides
      `coordinates`), e.g. a marker position or a velocity.
    - `sigma`: noise standard deviation, a scalar or one per observed quantity `(d,)`;
      residuals are whitened by it. `None` means "unknown": residuals are unweighted
      and the uncertainty estimate uses the residual variance instead.
    - `nan_policy`: `"mask"` (default) treats NaN entries of `values` as missing: they
      are dropped from the loss and from the degrees of freedom. `"raise"` refuses
      them with a `ValueError`. Infinite values are always refused.

    **Example:**

    ```python
    obs = cx.fit.Observations(ts, ys, coordinates=(0, 1, 2), sigma=1e-3)
    ```
    """

    ts: Float[Array, " k"]
    values: Float[Array, "k d"]
    mask: Bool[Array, "k d"]
    sigma: Float[Array, " d"] | None
    coordinates: tuple[int, ...] | None = eqx.field(static=True)
    observe: Callable | None

    def __init__(
        self,
        ts: Float[ArrayLike, " k"],
        values: Float[ArrayLike, "k d"],
        *,
        coordinates: Sequence[int] | None = None,
        observe: Callable | None = None,
        sigma: Float[ArrayLike, " d"] | float | None = 1.0,
        nan_policy: str = "mask",
    ):
        ts_np = np.asarray(ts, dtype=float)
        vals = np.asarray(values, dtype=float)
        if ts_np.ndim != 1 or ts_np.size < 1:
            raise ValueError(
                f"`ts` must be a 1-D array of observation times, got shape {ts_np.shape}"
            )
        if not np.all(np.isfinite(ts_np)):
            raise ValueError("`ts` contains NaN or inf; observation times must be finite")
        if ts_np.size > 1 and not np.all(np.diff(ts_np) > 0):
            i = int(np.flatnonzero(np.diff(ts_np) <= 0)[0])
            raise ValueError(
                f"`ts` must be strictly increasing, got ts[{i}]={ts_np[i]} >= "
                f"ts[{i + 1}]={ts_np[i + 1]}"
            )
        if vals.ndim == 1:
            vals = vals[:, None]
        if vals.ndim != 2 or vals.shape[0] != ts_np.shape[0]:
            raise ValueError(
                f"`values` must have shape (k, d) with k = len(ts) = {ts_np.shape[0]}, "
                f"got {vals.shape}"
            )
        if np.any(np.isinf(vals)):
            raise ValueError("`values` contains inf; only NaN (missing) entries may be masked")
        nan = np.isnan(vals)
        if nan_policy not in ("mask", "raise"):
            raise ValueError(f"`nan_policy` must be 'mask' or 'raise', got {nan_policy!r}")
        if nan.any() and nan_policy == "raise":
            k, j = np.argwhere(nan)[0]
            raise ValueError(
                f"`values` contains {int(nan.sum())} NaN entries (first at row {k}, column "
                f"{j}); pass nan_policy='mask' to treat them as missing"
            )
        if nan.all():
            raise ValueError("`values` is all NaN: there is nothing to fit")
        d = vals.shape[1]
        if coordinates is not None:
            coordinates = tuple(int(c) for c in coordinates)
            if len(coordinates) != d:
                raise ValueError(
                    f"`coordinates` names {len(coordinates)} observed coordinates but `values` "
                    f"has d = {d} columns"
                )
        if observe is not None and not callable(observe):
            raise TypeError(f"`observe` must be callable h(t, q, qd, p), got {observe!r}")
        if sigma is not None:
            s = (
                np.broadcast_to(np.asarray(sigma, dtype=float), (d,))
                if np.ndim(sigma) == 0
                else (np.asarray(sigma, dtype=float))
            )
            if s.shape != (d,):
                raise ValueError(f"`sigma` must be a scalar or shape (d,) = ({d},), got {s.shape}")
            if not np.all(s > 0):
                raise ValueError(f"`sigma` must be positive, got {s}")
            sigma = jnp.asarray(s)
        self.ts = jnp.asarray(ts_np)
        self.values = jnp.asarray(np.where(nan, 0.0, vals))
        self.mask = jnp.asarray(~nan)
        self.sigma = sigma
        self.coordinates = coordinates
        self.observe = observe

    @property
    def num_observed(self) -> int:
        """Number of non-missing scalar observations."""
        return int(np.sum(np.asarray(self.mask)))

    def check(self, n: int, t0: float) -> None:
        """Trace-time checks against a system with `n` coordinates starting at `t0`."""
        if self.coordinates is not None and self.observe is None:
            bad = [c for c in self.coordinates if not -n <= c < n]
            if bad:
                raise ValueError(
                    f"`coordinates` {bad} out of range for a system with n = {n} coordinates"
                )
        if self.coordinates is None and self.observe is None and self.values.shape[1] != n:
            raise ValueError(
                f"without `coordinates` or `observe` all n = {n} coordinates are observed, but "
                f"`values` has {self.values.shape[1]} columns"
            )
        if float(self.ts[0]) < float(t0):
            raise ValueError(f"the first observation time {float(self.ts[0])} is before t0 = {t0}")

    def predict(self, ts, q, qd, p) -> Float[Array, "k d"]:
        """$h(t_k, q_k, \\dot q_k, p)$ for stacked states `q, qd` of shape `(k, n)`."""
        if self.observe is not None:
            return jax.vmap(lambda t, q_, qd_: jnp.atleast_1d(self.observe(t, q_, qd_, p)))(
                ts, q, qd
            )
        if self.coordinates is not None:
            return q[:, np.asarray(self.coordinates)]
        return q

    def residuals(self, predicted: Float[Array, "k d"], index=None, valid=None) -> Array:
        """Whitened residuals $(h - y)/\\sigma$, zero at missing entries.

        `index` selects the observation rows `predicted` stands for (default all);
        `valid` `(k,)` additionally masks rows (padding of shooting segments)."""
        values = self.values if index is None else self.values[index]
        mask = self.mask if index is None else self.mask[index]
        if valid is not None:
            mask = mask & valid[:, None]
        r = predicted - values
        if self.sigma is not None:
            r = r / self.sigma
        return jnp.where(mask, r, 0.0)
