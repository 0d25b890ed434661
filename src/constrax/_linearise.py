r"""Linearisation on the constraint manifold: $(A, B)$ for feedback
(docs/concepts/linearisation.md). The eigenvalues of steady motions are in
`_eigenvalues.py`, the time-varying LQR along a trajectory in `_tvlqr.py`.

The state $x = (q, \dot q)\in\mathbb R^{2n}$ of a constrained system moves on the manifold
$\mathcal M = \{x : g(t, q) = 0,\ c(t, q, \dot q) = 0\}$ ($g$ the position-level rows, $c$
all velocity-level rows). With $f(t, x, u) = (\dot q, \ddot q(t, q, \dot q, u))$ the vector
field of `accelerations`, the full-state Jacobians are

$$F = \partial f/\partial x,\qquad G = \partial f/\partial u,$$

and a tangent basis $T$ ($2n\times k$, orthonormal columns) spans
$T_x\mathcal M = \ker J$, $J = \partial(g, c)/\partial x$. Perturbations that keep the
constraints are $\delta x = Tz$, and the reduced linear system is

$$\dot z = A z + B\,\delta u,\qquad A = T^\top F T,\quad B = T^\top G.$$

Why this is exact to first order: the index-reduced dynamics make $\dot\Phi = Jf$ vanish
on $\mathcal M$ ($\Phi = (g, c)$). Differentiating $J(x)f(x) = 0$ along a tangent vector
$v$ gives $JFv = -\partial^2\Phi[v, f]$, and since $\partial^2\Phi$ is symmetric, the
variational equation $\delta\dot x = F\delta x$ keeps $J(x(t))\,\delta x(t) = 0$ along any
solution (tangent vectors stay tangent). Where $f$ points along directions on which $\Phi$
does not depend — an equilibrium, or a steady motion along cyclic coordinates — $JFv = 0$:
$F$ maps $T_x\mathcal M$ into itself and $A = T^\top FT$ is the linearisation. Along a
general trajectory $T$ moves, $\dot z = (T^\top FT - T^\top\dot T)z + \ldots$; `tvlqr` avoids
$\dot T$ by discretising: $z_{j+1} = T_{j+1}^\top e^{hF_j}T_j z_j + \ldots$.

Cyclic coordinates (whose value enters neither the Lagrangian, the force nor the
constraints: the position of a vehicle in the plane, the spin angle of a symmetric disk)
give zero columns of $F$ and neutral (zero) eigenvalues, often in Jordan blocks; marking
them in `cyclic=` drops them from the state (the quotient by the symmetry): the rows and
columns of $F$, $J$ and $G$ for those positions are removed before the kernel is taken.

References: Peterson, Gede & Hubbard, "Symbolic linearization of equations of motion of
constrained multibody systems", Multibody System Dynamics (2015); Anderson & Moore,
*Optimal Control: Linear Quadratic Methods* (1990).
"""

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._checks import check_finite, check_options, check_system
from ._compilation import compiled
from ._custom_types import Params, Time
from ._dynamics import _step
from ._layout import row_layout
from ._prescriptions import AbstractPrescription, DAlembert
from ._solve import AbstractConstraintSolver, AutoSolver
from ._state import as_time, check_state
from ._system import System
from ._terms import position_residual, stacked_residual
from ._tolerances import rank_rtol

ControlWhere = Callable[[Params], Array]
"""`where(p)`: locates the control leaf `u` in the parameters, e.g. `lambda p: p["u"]`."""


class Linearisation(eqx.Module):
    r"""Output of `linearise`: the linear system on the tangent space of the constraint
    manifold at one state.

    - `F`: $\partial(\dot q, \ddot q)/\partial(q, \dot q)$, shape `(d, d)`.
    - `G`: $\partial(\dot q, \ddot q)/\partial u$, shape `(d, n_u)` (`n_u = 0` without a
      control).
    - `T`: orthonormal basis of the tangent space $\ker J$, shape `(d, k)`.
    - `A`: $T^\top F T$, shape `(k, k)`; `B`: $T^\top G$, shape `(k, n_u)`.
    - `J`: the stacked Jacobian $\partial(g, c)/\partial x$ of the position rows $g$ and
      velocity rows $c$, shape `(h + m, d)`.
    - `state`: the indices into $x = (q, \dot q)$ kept (all but the cyclic positions), so
      that `d = len(state)`; a full-state perturbation `dx` `(2n,)` has reduced
      coordinates `T.T @ dx[state]`.
    - `singular_values`: of `J`, descending; the rank is `J.shape[0]` (checked).
    """

    F: Float[Array, "d d"]
    G: Float[Array, "d nu"]
    T: Float[Array, "d k"]
    A: Float[Array, "k k"]
    B: Float[Array, "k nu"]
    J: Float[Array, "r d"]
    singular_values: Float[Array, " r"]
    state: tuple[int, ...] = eqx.field(static=True)

    def reduce(self, dx: Float[ArrayLike, " 2n"]) -> Float[Array, " k"]:
        r"""Reduced coordinates $z = T^\top\delta x$ of a full-state perturbation
        $\delta x = (\delta q, \delta\dot q)$ (cyclic positions dropped)."""
        return self.T.T @ jnp.asarray(dx)[np.asarray(self.state)]


def _check_cyclic(cyclic, n: int) -> tuple[int, ...]:
    try:
        cyc = tuple(int(i) for i in cyclic)
    except TypeError:
        raise TypeError(
            f"`cyclic` must be a sequence of coordinate indices, got {cyclic!r}"
        ) from None
    for i in cyc:
        if not -n <= i < n:
            raise ValueError(
                f"`cyclic` index {i} is out of range for a system with n = {n} coordinates"
            )
    cyc = tuple(sorted({i % n for i in cyc}))
    if len(cyc) != len(tuple(cyclic)):
        raise ValueError(f"`cyclic` has repeated indices: {tuple(cyclic)}")
    return cyc


def _control_value(control, p, where: str) -> Array | None:
    if control is None:
        return None
    if not callable(control):
        raise TypeError(
            f"{where}: `control` must be a function where(p) locating the control array in "
            f'`p`, e.g. lambda p: p["u"], got {control!r}'
        )
    try:
        u = control(p)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise ValueError(
            f"{where}: `control` could not locate the control in `p`: {type(e).__name__}: {e}"
        ) from e
    if not eqx.is_array_like(u) or jnp.ndim(u) != 1:
        raise ValueError(
            f"{where}: `control` must locate a 1-D array u of shape (n_u,) in `p`, got "
            f"{getattr(u, 'shape', type(u).__name__)}"
        )
    return jnp.asarray(u)


def _with_control(control, p, u):
    return p if control is None else eqx.tree_at(control, p, u)


def _field(system, prescription, solver, mask, control, t, p):
    """`(x, u) -> (qd, qdd)`: the vector field of `accelerations`, no stabilisation."""

    def f(x, u):
        n = x.shape[0] // 2
        pu = p if u is None else _with_control(control, p, u)
        step = _step(system, prescription, solver, None, t, x[:n], x[n:], None, pu, mask)
        return jnp.concatenate([step.q_dot, step.qdd])

    return f


def _manifold_rows(system, t, p):
    """`x -> (g, c)`: position rows and velocity rows of the state constraint manifold."""

    def phi(x):
        n = x.shape[0] // 2
        q, qd = x[:n], x[n:]
        return jnp.concatenate(
            [position_residual(system, t, q, p), stacked_residual(system, p)(t, q, qd)]
        )

    return phi


def _tangent_basis(J: Array, rank: int, rtol: float) -> tuple[Array, Array, Array]:
    r"""`(T, s, bad)`: an orthonormal basis of $\ker J$ (the last `d - rank` right singular
    vectors), the singular values, and whether the numerical rank differs from `rank`.

    The SVD picks one basis among many (any rotation of the kernel), and its derivative is
    undefined where singular values repeat (the zeros of the kernel). The basis is therefore
    computed without gradient, $T_0$, and moved with $J$ to first order,
    $T = T_0 - J^+JT_0$ (equal to $T_0$ in value, since $JT_0 = 0$), with one
    Newton–Schulz step keeping the columns orthonormal: derivatives of basis-independent
    quantities ($\operatorname{tr}A$, $TT^\top$, eigenvalues of $A$) are then right.
    """
    d = J.shape[1]
    if J.shape[0] == 0:
        return jnp.eye(d, dtype=J.dtype), jnp.zeros((0,), J.dtype), jnp.zeros((), bool)
    Js = jax.lax.stop_gradient(J)
    _, s, Vh = jnp.linalg.svd(Js, full_matrices=True)
    T0 = Vh[rank:].T
    smax = s[0]
    numerical = jnp.sum(s > rtol * smax)
    bad = (numerical != rank) | ~jnp.isfinite(smax)
    Jpinv = jax.lax.stop_gradient(jnp.linalg.pinv(Js, rtol=rtol))
    T = T0 - Jpinv @ (J @ T0)
    T = T @ (1.5 * jnp.eye(T.shape[1], dtype=T.dtype) - 0.5 * T.T @ T)
    return T, s, bad


def _rank_message(rank: int) -> str:
    return (
        f"constrax.linearise: the stacked constraint Jacobian J = d(g, c)/d(q, qd) does not "
        f"have rank {rank} at this state (dependent or degenerate constraint rows: a "
        f"singular configuration, see cx.constraint_rank). Pass rank= the number of "
        f"independent rows (the tangent space then has dimension d - rank), or move away "
        f"from the singular configuration."
    )


@compiled(times=("t",), states=("q", "qd"), params=("p",))
def linearise(
    system: System,
    t: Time,
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    p: Params = None,
    *,
    control: ControlWhere | None = None,
    cyclic: Sequence[int] = (),
    rank: int | None = None,
    prescription: AbstractPrescription = DAlembert(),
    constraint_solver: AbstractConstraintSolver = AutoSolver(),
    rtol: float | None = None,
) -> Linearisation:
    r"""Linearise the constrained dynamics at one state, in coordinates of the tangent
    space of the constraint manifold.

    With $x = (q, \dot q)$, $f = (\dot q, \ddot q)$ from `accelerations`,
    $F = \partial f/\partial x$, $G = \partial f/\partial u$ (forward-mode `jax.jacfwd`), and
    $T$ an orthonormal basis of $\ker\partial(g, c)/\partial x$ (position rows $g$, velocity
    rows $c$; an SVD with the relative cutoff `rtol`):

    $$\delta x = Tz,\qquad \dot z = T^\top F T\,z + T^\top G\,\delta u = Az + B\,\delta u.$$

    This is the linearisation at equilibria and at steady motions along cyclic coordinates
    (where $F$ maps tangent vectors to tangent vectors; docs/concepts/linearisation.md);
    along a general trajectory use `tvlqr`, which accounts for the moving tangent space.

    **Arguments:**

    - `system`, `t`, `q`, `qd`, `p`: the system and the state (on the constraints:
      `cx.consistent_initial_state`), parameters.
    - `control`: `where(p)` locating a 1-D array $u$ (shape `(n_u,)`) in `p` that the
      system's force reads, e.g. `lambda p: p["u"]`; `None`: no input (`B` has no columns).
    - `cyclic`: indices of coordinates whose value does not enter the dynamics (the
      Lagrangian, the force and the constraints); their positions are dropped from the
      state (the velocities stay).
    - `rank`: the number of independent constraint rows (static; default: all rows,
      position and velocity level, as stacked). A different numerical rank raises.
    - `prescription`: `cx.DAlembert()` (the vakonomic multipliers are state, not
      supported here).
    - `constraint_solver`: as in `accelerations`.
    - `rtol`: relative singular-value cutoff of the rank of $J$ (default $\sqrt\epsilon$).

    **Returns:** a `Linearisation` (`A`, `B`, `T`, `F`, `G`, ...).

    **Example:**

    ```python
    qd_line = jnp.array([1.0, 0.0, 0.0])        # the sleigh sliding straight ahead
    lin = cx.linearise(system, 0.0, q, qd_line, p, cyclic=(0, 1))
    lin.A.shape                                 # (3, 3): heading, speed, turning rate
    ```
    """
    check_system(system)
    check_options(prescription=prescription, constraint_solver=constraint_solver)
    if prescription.multiplier_state:
        raise ValueError(
            "constrax.linearise: `prescription` must be cx.DAlembert(); under "
            f"{type(prescription).__name__} the multipliers mu are part of the state"
        )
    q, qd = check_state(q, qd)
    t = as_time(t, q)
    n = q.shape[0]
    cyc = _check_cyclic(cyclic, n)
    where = "constrax.linearise"
    u = _control_value(control, p, where)
    layout = row_layout(system, t, q, qd, p)
    t = check_finite(t, "t", where)
    q = check_finite(q, "q", where)
    qd = check_finite(qd, "qd", where)
    p = check_finite(p, "p", where)
    rows = int(layout.mask.sum()) + sum(layout.counts)
    if rank is None:
        rank = rows
    elif not (isinstance(rank, (int, np.integer)) and 0 <= rank <= rows):
        raise ValueError(
            f"`rank` must be an integer between 0 and the {rows} stacked constraint rows, "
            f"got {rank!r}"
        )
    rtol = rank_rtol(q.dtype) if rtol is None else float(rtol)
    state = tuple(i for i in range(n) if i not in cyc) + tuple(range(n, 2 * n))
    if 2 * n - len(cyc) - rank <= 0:
        raise ValueError(
            f"constrax.linearise: the tangent space is empty ({2 * n - len(cyc)} state "
            f"directions, {rank} constraint rows)"
        )
    keep = np.asarray(state)
    x = jnp.concatenate([q, qd])
    f = _field(system, prescription, constraint_solver, layout.mask, control, t, p)
    if u is None:
        F = jax.jacfwd(lambda x_: f(x_, None))(x)
        G = jnp.zeros((2 * n, 0), x.dtype)
    else:
        F, G = jax.jacfwd(f, argnums=(0, 1))(x, u.astype(x.dtype))
    J = jax.jacfwd(_manifold_rows(system, t, p))(x)
    F, G, J = F[keep][:, keep], G[keep], J[:, keep]
    T, s, bad = _tangent_basis(J, rank, rtol)
    T = eqx.error_if(T, bad, _rank_message(rank))
    return Linearisation(
        F=F, G=G, T=T, A=T.T @ F @ T, B=T.T @ G, J=J, singular_values=s, state=state
    )
