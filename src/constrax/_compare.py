r"""Run one system under the Lagrange–d'Alembert and the vakonomic prescriptions.

Sławianowski et al. 2013: the two
prescriptions give the same motion for holonomic constraints ($\lambda = \dot\mu$) and
generally different motions for non-integrable ones, where the vakonomic reaction carries
the curl term $\mu^a(\partial_j\omega_{ai} - \partial_i\omega_{aj})\dot q^j$ and depends on
the free initial multipliers $\mu_0$.
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import Params
from ._prescriptions import DAlembert, Vakonomic
from ._simulate import simulate
from ._system import System
from ._trajectory import Trajectory


class PrescriptionComparison(eqx.Module):
    r"""Outcome of `compare_prescriptions`.

    - `dalembert`, `vakonomic`: the two `Trajectory`s (same save times).
    - `ts`: the save times `(k,)`.
    - `divergence`: $|q_\text{d'Alembert}(t) - q_\text{vakonomic}(t)|_2$ at each save time.
    - `velocity_divergence`: the same for $\dot q$.
    - `max_divergence`: the largest `divergence`.
    """

    dalembert: Trajectory
    vakonomic: Trajectory
    ts: Float[Array, " k"]
    divergence: Float[Array, " k"]
    velocity_divergence: Float[Array, " k"]
    max_divergence: Float[Array, ""]

    def first_divergence_time(self, threshold: float) -> Float[Array, ""]:
        """The first save time at which `divergence > threshold` (`inf` if never)."""
        above = self.divergence > threshold
        return jnp.where(jnp.any(above), self.ts[jnp.argmax(above)], jnp.inf)


def compare_prescriptions(
    system: System,
    q0: Float[Array, " n"],
    qd0: Float[Array, " n"],
    p: Params = None,
    *,
    mu0: Float[Array, " m"] | None = None,
    **simulate_kwargs,
) -> PrescriptionComparison:
    r"""Simulate `system` from the same initial state under `DAlembert()` and `Vakonomic()`.

    Sławianowski et al. 2013 (d'Alembert vs vakonomic prescription). Both runs use the same
    `simulate` options; `mu0` (default zeros) is the vakonomic initial multiplier. The divergence
    $|q_\text{dA}(t) - q_\text{vak}(t)|$ is zero (to integration error) for holonomic
    constraints and, for linear constraints, for $\mu_0 = 0$ along motions on which
    $\dot\mu$ stays zero; it grows where the curl $d\omega$ acts.

    **Arguments:**

    - `system`, `q0`, `qd0`, `p`: as for `simulate`.
    - `mu0`: initial vakonomic multipliers `(m,)` (default zeros).
    - `**simulate_kwargs`: passed to both `simulate` calls (`t1`, `saveat`, `solver`,
      ...). `prescription` is not allowed (both are run).

    **Returns:** a `PrescriptionComparison` (`dalembert`, `vakonomic`, `divergence`, ...).

    **Example:**

    ```python
    cmp = cx.compare_prescriptions(system, q0, qd0, p, mu0=jnp.array([1.0]), t1=5.0,
                                   saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 5.0, 51)))
    cmp.divergence, cmp.vakonomic.mu
    ```
    """
    for bad in ("prescription", "mu"):
        if bad in simulate_kwargs:
            raise ValueError(
                f"compare_prescriptions runs both prescriptions itself; do not pass `{bad}` "
                "(use `mu0=` for the vakonomic initial multipliers)"
            )
    if "t1" not in simulate_kwargs:
        raise ValueError("compare_prescriptions needs the final time `t1=` (passed to simulate)")
    dal = simulate(system, q0, qd0, p, prescription=DAlembert(), **simulate_kwargs)
    vak = simulate(system, q0, qd0, p, prescription=Vakonomic(), mu0=mu0, **simulate_kwargs)
    div = jnp.linalg.norm(dal.q - vak.q, axis=-1)
    vdiv = jnp.linalg.norm(dal.qd - vak.qd, axis=-1)
    return PrescriptionComparison(
        dalembert=dal,
        vakonomic=vak,
        ts=dal.ts,
        divergence=div,
        velocity_divergence=vdiv,
        max_divergence=jnp.max(div),
    )
