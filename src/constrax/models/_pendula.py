r"""The planar N-link pendulum in maximal (Cartesian, with rod constraints) or minimal
(joint angle, unconstrained) coordinates."""

import jax
import jax.numpy as jnp

from .._constraints import Holonomic
from .._system import System
from ._model import Model, resolve_params

_COORDINATES = ("maximal", "minimal")


def chain_positions(theta, lengths):
    r"""Bob positions $r_i = \sum_{j\le i} l_j(\sin\theta_j, -\cos\theta_j)$ as an
    `(n, 2)` array (angles from the downward vertical)."""
    links = lengths[:, None] * jnp.stack([jnp.sin(theta), -jnp.cos(theta)], axis=-1)
    return jnp.cumsum(links, axis=0)


def _minimal_lagrangian(t, q, qd, p):
    r, v = jax.jvp(lambda th: chain_positions(th, p["lengths"]), (q,), (qd,))
    kinetic = 0.5 * p["masses"] @ jnp.sum(v**2, axis=-1)
    return kinetic - p["g"] * (p["masses"] @ r[:, 1])


def _maximal_lagrangian(t, q, qd, p):
    r, v = q.reshape(-1, 2), qd.reshape(-1, 2)
    return 0.5 * p["masses"] @ jnp.sum(v**2, axis=-1) - p["g"] * (p["masses"] @ r[:, 1])


def _rods(t, q, p):
    r = q.reshape(-1, 2)
    d = r - jnp.concatenate([jnp.zeros_like(r[:1]), r[:-1]])
    return jnp.sum(d**2, axis=-1) - p["lengths"] ** 2


def pendulum_chain(n: int = 2, coordinates: str = "maximal", **overrides) -> Model:
    r"""A planar chain of $n$ point masses joined by massless rigid rods, hanging from a
    fixed pivot at the origin under gravity (the double pendulum for $n = 2$; e.g.
    Goldstein, *Classical Mechanics*, §1.6).

    **Coordinates:**

    - `"maximal"`: $q = (x_1, y_1, \dots, x_n, y_n)$, Cartesian bob positions ($y$ up),
      $L = \sum_i \tfrac12 m_i(\dot x_i^2 + \dot y_i^2) - m_i g y_i$, with one
      `cx.Holonomic` named `"rods"` of $n$ rows
      $|r_i - r_{i-1}|^2 - l_i^2 = 0$ ($r_0 = 0$).
    - `"minimal"`: $q = (\vartheta_1, \dots, \vartheta_n)$, angles of the rods from the
      downward vertical, $r_i = \sum_{j\le i} l_j(\sin\vartheta_j, -\cos\vartheta_j)$,
      $L = \sum_i \tfrac12 m_i|\dot r_i|^2 - m_i g\,y_i$ (velocities by a `jax.jvp` of
      the positions), no constraints.

    Both describe the same motion of the bobs.

    **Arguments:**

    - `n`: number of links (a positive `int`, static).
    - `coordinates`: `"maximal"` or `"minimal"`.
    - parameter overrides (SI units): `masses` `(n,)` bob masses [kg] (ones),
      `lengths` `(n,)` rod lengths [m] (ones), `g` gravity [m/s²] (9.81).

    **Initial state:** $\vartheta_{0,i} = 0.5 + 0.2(i-1)$,
    $\dot\vartheta_{0,i} = 0.3(-1)^{i-1}$ (mapped to Cartesian for `"maximal"`).

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.pendulum_chain(3, "minimal", g=1.62)
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=2.0)
    ```
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"pendulum_chain: `n` must be a positive int, got {n!r}")
    if coordinates not in _COORDINATES:
        raise ValueError(
            f"pendulum_chain: unknown coordinates {coordinates!r}; valid choices are "
            f"{', '.join(repr(c) for c in _COORDINATES)}"
        )
    defaults = dict(masses=jnp.ones(n), lengths=jnp.ones(n), g=9.81)
    p = resolve_params("pendulum_chain", defaults, overrides)
    i = jnp.arange(n)
    theta0 = (0.5 + 0.2 * i).astype(p["lengths"].dtype)
    thetad0 = (0.3 * (-1.0) ** i).astype(p["lengths"].dtype)

    if coordinates == "minimal":
        names = tuple(f"theta{k + 1}" for k in range(n))
        return Model(System(_minimal_lagrangian), p, theta0, thetad0, names)
    system = System(_maximal_lagrangian, [Holonomic(_rods, name="rods")])
    r0, v0 = jax.jvp(lambda th: chain_positions(th, p["lengths"]), (theta0,), (thetad0,))
    names = tuple(f"{c}{k + 1}" for k in range(n) for c in ("x", "y"))
    return Model(system, p, r0.reshape(-1), v0.reshape(-1), names)
