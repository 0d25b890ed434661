r"""The impulsive velocity jump at a singular configuration
(docs/concepts/solve.md, "Inconsistent rows at a singular configuration").

Where the constraint rows lose rank at $q^\ast$, a velocity that satisfies the velocity
constraints can leave the acceleration rows inconsistent: no smooth motion reaches such a
state. A motion that leaves $q^\ast$ along a direction $d$ sees the limit of the constraint
distribution along $d$. To first order $A(q^\ast + \varepsilon d) = A^\ast +
\varepsilon\,\partial_d A$, and the combinations $u^\top A$ with $u$ in the left null space
of $A^\ast$ (columns $U_\perp$) vanish at $q^\ast$ but not their derivative: the limiting
rows are

$$A_d = \begin{bmatrix} A^\ast \\ P_\perp\partial_d A / |d| \end{bmatrix},
\qquad P_\perp = I - A^\ast A^{\ast+} = U_\perp U_\perp^\top,$$

with the affine part of the rows treated alike. A perfectly plastic constraint impulse
(in the span of $A_d^\top$, no restitution) maps $\dot q$ to its $W$-orthogonal projection
$\dot q^+$ onto $\{v : A_d v + b_d = 0\}$, and removes the kinetic energy
$\tfrac12\delta^\top W\delta$, $\delta = \dot q - \dot q^+$. The departure direction is
the motion's own, $d = \dot q^+$: a fixed point, found by iterating from $d = \dot q$.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._checks import check_system
from ._compilation import compiled
from ._custom_types import Params, Time
from ._layout import row_layout
from ._solve import UdwadiaKalaba
from ._state import as_time, check_state
from ._system import System
from ._terms import constraint_terms, lagrangian_terms
from ._tolerances import rank_rtol


class ImpulsiveJump(eqx.Module):
    r"""Output of `impulsive_jump`.

    - `qd`: the velocity after the jump, $\dot q^+$, shape `(n,)`.
    - `energy_removed`: the kinetic energy the impulse removes,
      $\tfrac12(\dot q - \dot q^+)^\top W(\dot q - \dot q^+) \ge 0$.
    - `impulse`: the generalized constraint impulse $W(\dot q^+ - \dot q)$, shape `(n,)`.
    - `rank`: the rank of the limiting rows $A_d$ the velocity was projected onto.
    - `converged`: whether the fixed point $d = \dot q^+$ settled within `max_iterations`
      (the last iterate moved by less than $\sqrt\epsilon\,|\dot q^+|_\infty$).
    """

    qd: Float[Array, " n"]
    energy_removed: Float[Array, ""]
    impulse: Float[Array, " n"]
    rank: Int[Array, ""]
    converged: Bool[Array, ""]


@compiled(times=("t",), states=("q", "qd"), params=("p",))
def impulsive_jump(
    system: System,
    t: Time,
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    p: Params = None,
    *,
    rtol: float | None = None,
    max_iterations: int = 8,
) -> ImpulsiveJump:
    r"""The plastic velocity jump that makes a state at a singular configuration one that
    a motion can leave: the $W$-orthogonal projection of $\dot q$ onto the limit of the
    constraint distribution along the departing motion (see the module docstring and
    docs/concepts/solve.md).

    At a regular configuration the limiting rows are the rows themselves: a state that
    satisfies the velocity constraints is returned unchanged (and one that does not is
    projected onto them). Only constraints linear in the velocities (`Holonomic`,
    `Pfaffian`) are supported.

    **Arguments:**

    - `system`, `t`, `q`, `qd`, `p`: the system and the state before the jump.
    - `rtol`: singular values of $A$ below `rtol * max` span its left null space; also the
      pseudoinverse cutoff of the projection (default $\sqrt\epsilon$ of the dtype).
    - `max_iterations`: iterations of the fixed point $d = \dot q^+$ (default 8).

    **Returns:** an `ImpulsiveJump` (`qd`, `energy_removed`, `impulse`, `rank`, `converged`).

    **Example:**

    ```python
    jump = cx.impulsive_jump(system, 0.0, q, qd, p)
    traj = cx.simulate(system, q, jump.qd, p, t1=1.0)   # now a motion can leave q
    ```
    """
    check_system(system)
    for con in system.constraints:
        if not con.linear_in_velocity:
            raise TypeError(
                f"cx.impulsive_jump: constraint {con.name!r} ({type(con).__name__}) is not "
                "linear in the velocities; only Holonomic and Pfaffian rows are supported"
            )
    if not isinstance(max_iterations, int) or max_iterations < 1:
        raise ValueError(f"`max_iterations` must be a positive int, got {max_iterations!r}")
    q, qd = check_state(q, qd)
    t = as_time(t, q)
    m = sum(row_layout(system, t, q, qd, p).counts)
    rtol = rank_rtol(q.dtype) if rtol is None else rtol
    W = lagrangian_terms(system, t, q, qd, p, bias=False)[0]
    zero = jnp.zeros((), q.dtype)
    if m == 0:
        return ImpulsiveJump(qd, zero, jnp.zeros_like(qd), jnp.zeros((), jnp.int32), True)

    rows = lambda q_: constraint_terms(system, t, q_, qd, p, bias=False)[:2]  # (A, c at qd)
    (A, c), rows_along = jax.linearize(rows, q)  # the rows once, their derivative along d
    # The projector onto the left null space of A (pinv's derivative keeps the rank).
    P_perp = jnp.eye(m, dtype=q.dtype) - A @ jnp.linalg.pinv(A, rtol=rtol)

    solver = UdwadiaKalaba(rtol=rtol)

    def project(v):
        speed = jnp.max(jnp.abs(v))
        d = v / jnp.where(speed > 0, speed, 1.0)
        dA, dc = rows_along(d)
        A_d = jnp.concatenate([A, P_perp @ dA])
        r_d = jnp.concatenate([c, P_perp @ dc])  # A_d qd + b_d
        state = solver.factor(W, A_d)
        delta = solver.project(state, r_d)
        return qd - delta, solver.rank(state)

    def body(_, carry):
        v, _, _ = carry
        v_new, rank = project(v)
        return v_new, jnp.max(jnp.abs(v_new - v)), rank

    init = (qd, jnp.asarray(jnp.inf, q.dtype), jnp.zeros((), jnp.int32))
    qd_plus, change, rank = jax.lax.fori_loop(0, max_iterations, body, init)
    delta = qd - qd_plus
    tol = rtol * jnp.maximum(jnp.max(jnp.abs(qd_plus)), jnp.finfo(q.dtype).tiny)
    return ImpulsiveJump(
        qd=qd_plus,
        energy_removed=0.5 * delta @ W @ delta,
        impulse=-(W @ delta),
        rank=rank,
        converged=change <= tol,
    )
