r"""Linearisation on the constraint manifold: $(A, B)$ for feedback, eigenvalues of steady
motions, and a time-varying LQR (docs/concepts/linearisation.md).

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

import warnings
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
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
from .fit._controls import AbstractControl

ControlWhere = Callable[[Params], Array]
"""`where(p)`: locates the control leaf `u` in the parameters, e.g. `lambda p: p["u"]`."""


class IllConditionedWarning(UserWarning):
    r"""An eigenvalue of a linearisation is ill-conditioned: its condition number
    $\kappa_i = 1/|y_i^H x_i|$ (unit right and left eigenvectors) is above the threshold of
    `eigenvalues`, so that rounding of size $\epsilon|A|$ moves it by about
    $\kappa_i\epsilon|A|$ — or, for a defective (Jordan) block, by $(\epsilon|A|)^{1/p}$.

    **Example:**

    ```python
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", cx.IllConditionedWarning)  # make it an error here
        cx.eigenvalues(jnp.array([[-1.0, 0.0], [0.0, -2.0]]))    # well-conditioned: fine
    ```
    """


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


# ----------------------------------------------------------------------------------------
# Eigenvalues of steady motions.


class Eigenvalues(eqx.Module):
    r"""Output of `eigenvalues`: the spectrum of the reduced $A$ with condition numbers.

    - `values`: eigenvalues $\lambda_i$, shape `(k,)` (complex), sorted by real part,
      largest first.
    - `vectors`: unit right eigenvectors in reduced coordinates, columns, `(k, k)`.
    - `state_vectors`: the same in state coordinates, $T x_i$, `(d, k)`.
    - `conditions`: $\kappa_i = 1/|y_i^H x_i|$ with $x_i$, $y_i$ unit right and left
      eigenvectors (Wilkinson's condition number of a simple eigenvalue; $\infty$ or very
      large in a Jordan block), `(k,)`.
    - `condition`: $\kappa_2(V)$, the condition number of the eigenvector matrix (the
      Bauer–Fike constant).
    - `threshold`: the cutoff the warning used; `ill_conditioned`: `conditions > threshold`.
    """

    values: np.ndarray
    vectors: np.ndarray
    state_vectors: np.ndarray
    conditions: np.ndarray
    condition: float
    threshold: float
    ill_conditioned: np.ndarray

    @property
    def max_real(self) -> float:
        r"""$\max_i \operatorname{Re}\lambda_i$: negative for asymptotic stability."""
        return float(np.max(self.values.real)) if self.values.size else -np.inf


def default_condition_threshold(dtype) -> float:
    r"""$\epsilon^{-1/3}$ of the dtype: $1.7\times10^5$ in float64, $203$ in float32.

    An eigenvalue with $\kappa_i\epsilon|A|$ error keeps two thirds of its digits below
    this; a perturbed Jordan block of size 2 has $\kappa\approx\epsilon^{-1/2}$ and is
    flagged.
    """
    return float(np.finfo(dtype).eps) ** (-1.0 / 3.0)


def eigenvalues(
    linearisation: Linearisation,
    *,
    threshold: float | None = None,
    warn: bool = True,
) -> Eigenvalues:
    r"""Eigenvalues of the reduced linearisation $A = T^\top FT$ (steady-motion stability),
    with condition numbers; warns where the eigenvalue problem is ill-conditioned.

    A steady motion is linearly (asymptotically) stable when every $\operatorname{Re}
    \lambda_i < 0$, unstable when one is positive; purely imaginary pairs are the neutral
    oscillations of conservative and nonholonomic systems (rolling disks), zeros the
    families of steady motions (speed, heading). The condition number of each eigenvalue,
    $\kappa_i = 1/|y_i^H x_i|$ (unit right/left eigenvectors), bounds its sensitivity:
    a perturbation $E$ of $A$ moves it by about $\kappa_i|E|$ (Wilkinson, *The Algebraic
    Eigenvalue Problem*, 1965). Eigenvalues in a Jordan block (a defective $A$: a cyclic
    coordinate left in the state, a free particle) have $\kappa_i = \infty$ in exact
    arithmetic; computed in floating point they split by $\sim(\epsilon|A|)^{1/p}$ and their
    imaginary parts and signs of real parts are not to be trusted.

    Runs eagerly on the host (NumPy/SciPy LAPACK `geev`), not under `jit`.

    **Arguments:**

    - `linearisation`: a `Linearisation` (from `linearise`), or a square array `A`.
    - `threshold`: $\kappa_i$ above which an `IllConditionedWarning` is emitted (default
      $\epsilon^{-1/3}$ of the dtype: $1.7\times10^5$ in float64).
    - `warn`: `False` to skip the warning (read `ill_conditioned` instead).

    **Returns:** an `Eigenvalues`.

    **Example:**

    ```python
    lin = cx.linearise(system, 0.0, q, jnp.array([1.0, 0.0, 0.0]), p, cyclic=(0, 1))
    ev = cx.eigenvalues(lin)   # 0, 0 and -m a v / (I + m a^2): stable moving forward
    ev.values, ev.conditions
    ```
    """
    if isinstance(linearisation, Linearisation):
        A, T = np.asarray(linearisation.A), np.asarray(linearisation.T)
    else:
        A = np.asarray(linearisation)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(
                f"`linearisation` must be a cx.Linearisation or a square matrix, got shape "
                f"{A.shape}"
            )
        T = np.eye(A.shape[0], dtype=A.dtype)
    if not np.all(np.isfinite(A)):
        raise ValueError("constrax.eigenvalues: the reduced matrix A contains NaN or inf")
    dtype = A.dtype if np.issubdtype(A.dtype, np.floating) else np.float64
    threshold = default_condition_threshold(dtype) if threshold is None else float(threshold)
    k = A.shape[0]
    if k == 0:
        empty = np.zeros((0,), complex)
        return Eigenvalues(
            empty, np.zeros((0, 0), complex), np.zeros((T.shape[0], 0), complex),
            np.zeros((0,)), 1.0, threshold, np.zeros((0,), bool),
        )  # fmt: skip
    w, vl, vr = scipy.linalg.eig(A, left=True, right=True)
    order = np.lexsort((w.imag, -w.real))
    w, vl, vr = w[order], vl[:, order], vr[:, order]
    vr = vr / np.linalg.norm(vr, axis=0)
    vl = vl / np.linalg.norm(vl, axis=0)
    overlap = np.abs(np.sum(vl.conj() * vr, axis=0))
    with np.errstate(divide="ignore"):
        conditions = np.where(overlap > 0, 1.0 / np.maximum(overlap, np.finfo(float).tiny), np.inf)
    sv = np.linalg.svd(vr, compute_uv=False)
    condition = float(sv[0] / sv[-1]) if sv[-1] > 0 else np.inf
    bad = conditions > threshold
    if warn and bad.any():
        listed = ", ".join(
            f"{v:.6g} (cond {c:.2g})" for v, c in zip(w[bad], conditions[bad], strict=True)
        )
        warnings.warn(
            f"constrax.eigenvalues: the eigenvalue problem is ill-conditioned: eigenvalues "
            f"{listed} have condition numbers above threshold={threshold:.3g} (eigenvector "
            f"matrix condition {condition:.3g}). They are nearly defective (a Jordan block): "
            f"rounding moves them by far more than machine precision, and their imaginary "
            f"parts and the signs of their real parts are unreliable. A neutral direction "
            f"such as the position of a cyclic coordinate makes zero eigenvalues defective: "
            f"mark it with `cyclic=` in cx.linearise.",
            IllConditionedWarning,
            stacklevel=2,
        )
    return Eigenvalues(
        values=w,
        vectors=vr,
        state_vectors=T @ vr,
        conditions=conditions,
        condition=condition,
        threshold=threshold,
        ill_conditioned=bad,
    )


# ----------------------------------------------------------------------------------------
# Time-varying LQR along a reference trajectory.


class LQRFeedback(eqx.Module):
    r"""A time-varying LQR feedback law along a reference trajectory (from `tvlqr`).

    Called as `policy(t, q, qd) -> u`:

    $$u(t) = u_\text{ref}(t) - K(t)\,T(t)^\top\big(x - x_\text{ref}(t)\big),$$

    with $x_\text{ref}$, $u_\text{ref}$ and the full-state gain $K_jT_j^\top$ interpolated
    linearly in $t$ between the grid nodes (the product does not depend on which basis of
    the tangent space the SVD picked at each node); held constant outside the grid.

    Fields: `ts` `(N,)`, `qs`, `qds` `(N, n)`, `us` `(N, n_u)` (the reference), `K`
    `(N, n_u, k)` the gains on the reduced error, `T` `(N, 2n, k)` the tangent bases,
    `P` `(N, k, k)` the Riccati solution (cost-to-go $z^\top P_j z$).

    Use it inside `cx.simulate` through `cx.closed_loop`.
    """

    ts: Float[Array, " N"]
    qs: Float[Array, "N n"]
    qds: Float[Array, "N n"]
    us: Float[Array, "N nu"]
    K: Float[Array, "N nu k"]
    T: Float[Array, "N d k"]
    P: Float[Array, "N k k"]

    def _interp(self, t, values):
        flat = values.reshape(values.shape[0], -1)
        out = jax.vmap(lambda col: jnp.interp(t, self.ts, col), in_axes=1)(flat)
        return out.reshape(values.shape[1:])

    def reference(self, t) -> tuple[Array, Array, Array]:
        """`(q_ref, qd_ref, u_ref)` at time `t` (linear interpolation between nodes)."""
        return self._interp(t, self.qs), self._interp(t, self.qds), self._interp(t, self.us)

    def gain(self, t) -> Float[Array, "nu d"]:
        r"""The full-state gain $K(t)T(t)^\top$ at time `t`, shape `(n_u, 2n)`."""
        return self._interp(t, jnp.einsum("juk,jdk->jud", self.K, self.T))

    def __call__(self, t, q, qd) -> Float[Array, " nu"]:
        q_ref, qd_ref, u_ref = self.reference(t)
        dx = jnp.concatenate([q - q_ref, qd - qd_ref])
        return u_ref - self.gain(t) @ dx


def _weights(W, size: int, name: str, dtype) -> Array:
    W = jnp.asarray(W, dtype=dtype)
    if W.shape == (size,):
        return jnp.diag(W)
    if W.shape == (size, size):
        return 0.5 * (W + W.T)
    raise ValueError(
        f"`{name}` must have shape ({size},) (a diagonal) or ({size}, {size}), got {W.shape}"
    )


@compiled(times=("ts",), states=("qs", "qds", "us"), params=("p", "Q", "R", "Qf"))
def tvlqr(
    system: System,
    ts: Float[ArrayLike, " N"],
    qs: Float[ArrayLike, "N n"],
    qds: Float[ArrayLike, "N n"],
    us: Float[ArrayLike, "N nu"],
    p: Params,
    *,
    control: ControlWhere,
    Q: Float[ArrayLike, "2n 2n"],
    R: Float[ArrayLike, "nu nu"],
    Qf: Float[ArrayLike, "2n 2n"] | None = None,
    rank: int | None = None,
    constraint_solver: AbstractConstraintSolver = AutoSolver(),
) -> LQRFeedback:
    r"""Time-varying LQR gains along a reference trajectory, on the tangent space of the
    constraint manifold.

    At every node $t_j$ of the grid the dynamics are linearised (`linearise`:
    $F_j$, $G_j$, tangent basis $T_j$). Over a step $h_j = t_{j+1} - t_j$ with the input
    held, the variational equation is discretised exactly for the frozen matrices,
    $[M_j, N_j] = [I, 0]\exp\!\big(h_j\begin{smallmatrix}F_j & G_j\\0 & 0\end{smallmatrix}\big)$,
    and projected onto the tangent space at the next node — which the variational flow
    preserves — so the moving basis needs no derivative:

    $$z_{j+1} = T_{j+1}^\top M_j T_j\,z_j + T_{j+1}^\top N_j\,\delta u_j.$$

    The discrete Riccati recursion (Anderson & Moore, *Optimal Control: Linear Quadratic
    Methods*, 1990, §2.4) minimises
    $z_N^\top Q_{f,z}z_N + \sum_j h_j(z_j^\top Q_z z_j + \delta u_j^\top R\,\delta u_j)$,
    $Q_z = T_j^\top QT_j$, backwards from $P_N = T_N^\top Q_f T_N$:

    $$K_j = (h_jR + N_z^\top P_{j+1}N_z)^{-1}N_z^\top P_{j+1}M_z,\qquad
    P_j = h_jQ_z + M_z^\top P_{j+1}(M_z - N_zK_j).$$

    The grid should resolve the reference (a step well below its time scales): the
    discretisation is first-order accurate in $h$ in the frozen matrices.

    **Arguments:**

    - `system`, `p`: the system (its force reads the control at `control(p)`) and
      parameters.
    - `ts` `(N,)`, `qs`, `qds` `(N, n)`, `us` `(N, n_u)`: the reference on an increasing
      grid (e.g. `cx.simulate` saved at `ts`, with the control that produced it).
    - `control`: `where(p)` locating the 1-D control array in `p`, as in `linearise`.
    - `Q` `(2n, 2n)` or `(2n,)`, `R` `(n_u, n_u)` or `(n_u,)`: state and input weights, in
      full coordinates $x = (q, \dot q)$ (projected on the tangent space); `Qf` the terminal
      weight (default `Q`).
    - `rank`, `constraint_solver`: as in `linearise`.

    **Returns:** an `LQRFeedback`, a policy `(t, q, qd) -> u`.

    **Example:**

    ```python
    def pushed(t, q, qd, p):                    # the sleigh pushed along its heading
        return p["u"][0] * jnp.stack([jnp.cos(q[2]), jnp.sin(q[2]), 0.0 * q[2]])
    sys_u = cx.System(system.lagrangian, system.constraints, force=pushed)
    ts = jnp.linspace(0.0, 1.0, 11)
    qs = jnp.stack([ts, 0 * ts, 0 * ts], axis=1)
    qds = jnp.stack([1 + 0 * ts, 0 * ts, 0 * ts], axis=1)
    policy = cx.tvlqr(sys_u, ts, qs, qds, jnp.zeros((11, 1)), {**p, "u": jnp.zeros(1)},
                      control=lambda p: p["u"], Q=jnp.ones(6), R=jnp.ones(1))
    policy(0.5, qs[5], qds[5])                  # u_ref on the reference: [0.]
    ```
    """
    check_system(system)
    ts = jnp.asarray(ts)
    qs, qds, us = jnp.asarray(qs), jnp.asarray(qds), jnp.asarray(us)
    dtype = jnp.result_type(qs.dtype, float)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"`ts` must be a 1-D grid of at least 2 times, got shape {ts.shape}")
    N = ts.shape[0]
    if qs.ndim != 2 or qs.shape[0] != N:
        raise ValueError(f"`qs` must have shape (N, n) with N = len(ts) = {N}, got {qs.shape}")
    n = qs.shape[1]
    if qds.shape != qs.shape:
        raise ValueError(f"`qds` must have the shape of `qs`, {qs.shape}, got {qds.shape}")
    u0 = _control_value(control, p, "constrax.tvlqr")
    if u0 is None:
        raise ValueError("constrax.tvlqr: `control` is required (where(p) of the control array)")
    nu = u0.shape[0]
    if us.shape != (N, nu):
        raise ValueError(
            f"`us` must have shape (N, n_u) = ({N}, {nu}): one control per node of `ts`, "
            f"of the shape of control(p) {tuple(u0.shape)}, got {us.shape}"
        )
    ts = ts.astype(dtype)
    qs, qds, us = qs.astype(dtype), qds.astype(dtype), us.astype(dtype)
    ts = eqx.error_if(ts, jnp.any(jnp.diff(ts) <= 0), "`ts` must be strictly increasing")
    Qm = _weights(Q, 2 * n, "Q", dtype)
    Rm = _weights(R, nu, "R", dtype)
    Qfm = Qm if Qf is None else _weights(Qf, 2 * n, "Qf", dtype)

    def lin(t, q, qd, u):
        pu = eqx.tree_at(control, p, u)
        return linearise(
            system, t, q, qd, pu, control=control, rank=rank, constraint_solver=constraint_solver
        )

    lins = jax.vmap(lin)(ts, qs, qds, us)
    F, G, T = lins.F, lins.G, lins.T
    h = jnp.diff(ts)
    d = 2 * n

    def discretise(Fj, Gj, hj):
        top = jnp.concatenate([Fj, Gj], axis=1)
        aug = jnp.concatenate([top, jnp.zeros((nu, d + nu), dtype)], axis=0)
        E = jax.scipy.linalg.expm(hj * aug)
        return E[:d, :d], E[:d, d:]

    M, Nmat = jax.vmap(discretise)(F[:-1], G[:-1], h)
    Mz = jnp.einsum("jdk,jde,jel->jkl", T[1:], M, T[:-1])
    Nz = jnp.einsum("jdk,jdu->jku", T[1:], Nmat)
    Qz = jnp.einsum("jdk,de,jel->jkl", T[:-1], Qm, T[:-1])
    PN = T[-1].T @ Qfm @ T[-1]

    def backward(P, inputs):
        Mj, Nj, Qj, hj = inputs
        S = hj * Rm + Nj.T @ P @ Nj
        K = jnp.linalg.solve(S, Nj.T @ P @ Mj)
        Pj = hj * Qj + Mj.T @ P @ (Mj - Nj @ K)
        Pj = 0.5 * (Pj + Pj.T)
        return Pj, (K, Pj)

    _, (K, P) = jax.lax.scan(backward, PN, (Mz, Nz, Qz, h), reverse=True)
    K = jnp.concatenate([K, K[-1:]])  # the last interval's gain at the final node
    P = jnp.concatenate([P, PN[None]])
    return LQRFeedback(ts=ts, qs=qs, qds=qds, us=us, K=K, T=T, P=P)


class _ClosedLoopForce(eqx.Module):
    force: Callable
    control: Callable

    def __call__(self, t, q, qd, p):
        policy = self.control(p)
        u = policy(t) if isinstance(policy, AbstractControl) else policy(t, q, qd)
        u = jnp.asarray(u)
        return self.force(t, q, qd, eqx.tree_at(self.control, p, u))


def closed_loop(system: System, control: ControlWhere) -> System:
    r"""The system driven by a policy stored in the parameters: its force evaluates
    $u = \pi(t, q, \dot q)$ with $\pi$ = `control(p)` and calls the original force with
    $u$ in that place of `p`.

    So one `System`, whose force reads a control array `p["u"]`, serves `linearise` and
    `tvlqr` (with an array there) and `cx.simulate` (with a policy there: an
    `LQRFeedback`, an open-loop `cx.fit.PiecewiseLinear` or other
    `cx.fit.AbstractControl`, called as `u(t)`, or any equinox Module called as
    `policy(t, q, qd)`). The policy is data in `p` — a pytree of arrays, so a plain Python
    function does not fit there. Gradients with respect to the policy's arrays flow like
    those of any parameter.

    **Arguments:** `system` (with a force), `control` the `where(p)` of the control.

    **Returns:** a `System`.

    **Example:**

    ```python
    def pushed(t, q, qd, p):
        return p["u"][0] * jnp.stack([jnp.cos(q[2]), jnp.sin(q[2]), 0.0 * q[2]])
    sys_u = cx.System(system.lagrangian, system.constraints, force=pushed)
    driven = cx.closed_loop(sys_u, lambda p: p["u"])
    p_open = {**p, "u": cx.fit.PiecewiseLinear(jnp.array([[0.0], [1.0]]), 0.0, 1.0)}
    driven.force(0.0, q, qd, p_open)            # the push at t = 0: zero
    ```
    """
    check_system(system)
    if system.force is None:
        raise ValueError(
            "constrax.closed_loop: `system` has no force to read the control; build it with "
            "force=Q(t, q, qd, p) reading control(p)"
        )
    if not callable(control):
        raise TypeError(
            f'`control` must be a function where(p), e.g. lambda p: p["u"], got {control!r}'
        )
    return System(
        system.lagrangian,
        system.constraints,
        _ClosedLoopForce(system.force, control),
        dynamics=system.dynamics,
    )
