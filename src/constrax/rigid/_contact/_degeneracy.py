r"""Degeneracy of primary velocity constraints on one rigid body (Briggs 2016, §4.3–4.6).

Twist coordinates $(\omega, v)\in V\oplus V$ of a reference point $x$ of the body. A
primary angular constraint $g(\omega, \mu_j) = 0$ has the row $(\mu_j, 0)$, a primary
translational one the row $(u_j\times\Delta_j, u_j)$ with $\Delta_j = x - x_j$ (Theorems
4.4, 4.5). The allowable velocities are the orthogonal complement of the span of the rows
(end of §4.6), of dimension $6 - \operatorname{rank}$. Theorem 4.6: with $n$ angular and
$m$ translational constraints the set is non-degenerate iff the rank equals
$\min\{\tilde n + \tilde m, 6\}$, $\tilde n = \min\{n, 3\}$, $\tilde m = \min\{m, 6\}$.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ..._constraints import AbstractConstraint
from ..._state import as_float, as_time, check_state, shape_error
from ..._tolerances import rank_rtol
from .._kinematics._body import AbstractRigidBody, RigidBody
from .._kinematics._so3 import cross


def _rows3(x, name) -> Array:
    x = jnp.asarray(x)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2 or x.shape[1] != 3:
        raise shape_error(name, "have shape (k, 3) (one 3-vector per constraint)", x.shape)
    return as_float(x)


def angular_rows(axes: Float[ArrayLike, "n 3"]) -> Float[Array, "n 6"]:
    r"""Rows $(\mu_j, 0)$ of primary angular velocity constraints (Briggs 2016, Theorem 4.4)."""
    mu = _rows3(axes, "axes")
    return jnp.concatenate([mu, jnp.zeros_like(mu)], 1)


def translational_rows(
    directions: Float[ArrayLike, "m 3"], offsets: Float[ArrayLike, "m 3"]
) -> Float[Array, "m 6"]:
    r"""Rows $(u_j\times\Delta_j, u_j)$ of primary translational velocity constraints, with
    $\Delta_j = x - x_j$ from the constrained point $x_j$ to the reference point $x$
    (Briggs 2016, Theorem 4.5)."""
    u = _rows3(directions, "directions")
    d = _rows3(offsets, "offsets")
    if d.shape != u.shape:
        raise ValueError(
            f"`offsets` must have one offset per direction: expected shape {u.shape}, got {d.shape}"
        )
    return jnp.concatenate([cross(u, d), u], 1)


class PrimaryConstraintAnalysis(eqx.Module):
    r"""Result of `primary_constraint_analysis`.

    - `rows`: the stacked $(\mu_j, 0)$ and $(u_j\times\Delta_j, u_j)$ rows `(k, 6)`.
    - `rank`: numerical rank of `rows`; `dimension`: $6 - \operatorname{rank}$, the dimension of the
      allowable velocities; `expected_dimension`: $\max\{6 - (\tilde n + \tilde m), 0\}$.
    - `degenerate`: `dimension > expected_dimension` (Theorem 4.6).
    - `allowable`: an orthonormal basis `(6, 6)` whose first `dimension` rows span the
      allowable twists $(\omega, v)$; `singular_values` of `rows`.
    """

    rows: Float[Array, "k 6"]
    rank: Int[Array, ""]
    dimension: Int[Array, ""]
    expected_dimension: int = eqx.field(static=True)
    degenerate: Bool[Array, ""]
    singular_values: Float[Array, " r"]
    allowable: Float[Array, "6 6"]


def primary_constraint_analysis(
    axes: Float[ArrayLike, "n 3"] | None = None,
    directions: Float[ArrayLike, "m 3"] | None = None,
    offsets: Float[ArrayLike, "m 3"] | None = None,
    *,
    rtol: float | None = None,
) -> PrimaryConstraintAnalysis:
    r"""Dimension of allowable velocities and degeneracy of primary velocity constraints on
    one body (Briggs 2016, Theorems 4.4–4.6).

    **Arguments:**

    - `axes`: $\mu_j$ of the angular constraints, `(n, 3)` (or `None`).
    - `directions`, `offsets`: $u_j$ and $\Delta_j = x - x_j$ of the translational
      constraints, `(m, 3)` each (or `None`).
    - `rtol`: singular values below `rtol * max(1, largest)` count as zero (default
      $\sqrt\epsilon$).

    **Returns:** a `PrimaryConstraintAnalysis`.

    **Example:** two translational constraints along the line through both points are
    degenerate (Theorem 4.5, case $n = 2$):

    ```python
    a = primary_constraint_analysis(directions=[[1.0, 0, 0], [1.0, 0, 0]],
                                    offsets=[[0.0, 0, 0], [2.0, 0, 0]])
    a.dimension, a.degenerate  # 5, True
    ```
    """
    blocks, n, m = [], 0, 0
    if axes is not None:
        blocks.append(angular_rows(axes))
        n = blocks[-1].shape[0]
    if directions is not None or offsets is not None:
        if directions is None or offsets is None:
            raise ValueError("translational constraints need both `directions` and `offsets`")
        blocks.append(translational_rows(directions, offsets))
        m = blocks[-1].shape[0]
    if not blocks:
        raise ValueError("give at least one constraint: `axes` and/or `directions` with `offsets`")
    rows = jnp.concatenate(blocks, 0)
    return _analyse(rows, n, m, rtol)


def _analyse(rows, n: int, m: int, rtol) -> PrimaryConstraintAnalysis:
    rtol = rank_rtol(rows.dtype) if rtol is None else rtol
    _, s, Vt = jnp.linalg.svd(rows, full_matrices=True)
    rank = jnp.sum(s > rtol * jnp.maximum(1.0, s[0])).astype(jnp.int32)
    dim = (6 - rank).astype(jnp.int32)
    expected = max(6 - (min(n, 3) + min(m, 6)), 0)
    # rows of Vt beyond the rank span the kernel; put them first.
    order = jnp.argsort(jnp.arange(6) < rank, stable=True)
    return PrimaryConstraintAnalysis(
        rows=rows,
        rank=rank,
        dimension=dim,
        expected_dimension=expected,
        degenerate=dim > expected,
        singular_values=s,
        allowable=Vt[order],
    )


def twist_rows(
    body: AbstractRigidBody,
    constraints: AbstractConstraint | list[AbstractConstraint],
    t,
    q: Float[Array, " n"],
    p=None,
    qd: Float[Array, " n"] | None = None,
) -> Float[Array, "k 6"]:
    r"""The rows of engine constraints, restricted to `body`, in twist coordinates
    $(\omega, v)$ of its centre of mass: $A_\text{body}\,\partial\dot q/\partial(\omega, v)$.

    For a `translational_velocity_constraint` at offset $\Delta$ from the centre along $u$
    this is $(u\times\Delta_j, u)$ with $\Delta_j = -\Delta$, for an
    `angular_velocity_constraint` $(\mu, 0)$ (Briggs 2016, Theorems 4.4–4.6); feed them to
    `twist_analysis`. The body's own orientation rows are projected out by construction
    (the tangent velocities used satisfy them). The twists move the body's own block of
    $q$, so `body` must be a `RigidBody`; another `AbstractRigidBody` (a `TreeBody`) raises
    `TypeError`.

    **Example:** `twist_rows(body, [c1, c2], 0.0, q0)`.
    """
    if not isinstance(body, RigidBody):
        raise TypeError(
            f"twist_rows: body {getattr(body, 'name', '?')!r} is a {type(body).__name__}, "
            "whose pose is not a block of q; twist_rows needs a cx.rigid.RigidBody. For "
            "another body, give the constraint axes, directions and offsets to "
            "cx.rigid.primary_constraint_analysis (or angular_rows / translational_rows "
            "and twist_analysis)"
        )
    if isinstance(constraints, AbstractConstraint):
        constraints = [constraints]
    q = jnp.asarray(q)
    qd = jnp.zeros_like(q) if qd is None else qd
    q, qd = check_state(q, qd)
    t = as_time(t, q)
    r, x = body.split(q)

    def tangent(twist):
        w, v = twist[:3], twist[3:]
        xd = body.orientation.velocity_from_angular_velocity(x, w)
        return jnp.zeros_like(q).at[body.offset : body.stop].set(jnp.concatenate([v, xd]))

    M = jax.vmap(tangent, out_axes=1)(jnp.eye(6, dtype=q.dtype))  # (n, 6)

    def A_of(con):
        return jax.jacfwd(lambda v: con.velocity_residual(t, q, v, p))(qd)

    A = jnp.concatenate([A_of(con) for con in constraints], 0)
    return A @ M


def twist_analysis(
    rows: Float[ArrayLike, "k 6"], num_angular: int, num_translational: int, *, rtol=None
) -> PrimaryConstraintAnalysis:
    """`primary_constraint_analysis` for given twist rows (e.g. from `twist_rows`), with the
    numbers of angular and translational constraints among them (for Theorem 4.6)."""
    rows = jnp.asarray(rows)
    if rows.ndim != 2 or rows.shape[1] != 6:
        raise ValueError(f"`rows` must have shape (k, 6), got {rows.shape}")
    if num_angular + num_translational != rows.shape[0]:
        raise ValueError(
            f"num_angular + num_translational = {num_angular + num_translational} must equal "
            f"the number of rows {rows.shape[0]}"
        )
    return _analyse(rows, num_angular, num_translational, rtol)
