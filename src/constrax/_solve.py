r"""Solvers for the saddle-point system of constrained dynamics (docs/concepts/solve.md)

$$W\ddot q = f + A^\top\lambda, \qquad A\ddot q = b.$$

* `KKT`: LU of the $(n+m)$ saddle matrix $\begin{bmatrix}W & A^\top\\ A & 0\end{bmatrix}$.
  Fast ($\tfrac23(n+m)^3$ flops, no SVD), valid whenever $A$ has full row rank and $W$
  is positive definite on $\ker A$ (so $W$ itself may be singular). A (near-)zero pivot is
  reported as an error instead of returning garbage.
* `UdwadiaKalaba`: Gauss's principle of least constraint,
  $\ddot q = a + W^{-1/2}(AW^{-1/2})^+(b - Aa)$, $a = W^{-1}f$ (Briggs 2016, §1.2 motivates
  it). A Cholesky of $W_a = W + \kappa A^\top A$ (positive definite whenever $W$ is on
  $\ker A$; it leaves $\ddot q$ and $\lambda$ unchanged because $A\ddot q = b$) and an SVD
  pseudoinverse of the $m\times n$ matrix $B = AL^{-\top}$ with a relative cutoff. The
  accelerations are unique even where $A$ loses rank or rows are redundant; the
  multipliers returned are then the minimum-norm ones, and the rank is reported.
  Costs one Cholesky ($\tfrac13 n^3$) plus an SVD ($O(mn^2)$); the pseudoinverse has a
  custom JVP (Golub–Pereyra), so gradients stay finite at rank-deficient points.
* `AutoSolver` (the default): the KKT path, switching to `UdwadiaKalaba` at points where
  the KKT pivots say the saddle matrix is numerically singular. The switch is a
  `lax.cond` on whether *any* batch element is singular, so under `vmap` a batch of
  regular states costs about what `KKT` costs; where it is taken, it computes the
  rank-robust solution operator once, and every solve with that factorisation uses it.
"""

import abc
import dataclasses
from typing import ClassVar

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import custom_batching
from jaxtyping import Array, Float, Int

from . import _lapack as lapack
from ._constraints import distinct_unit_quaternions
from ._guards import checked
from ._precision import full_precision
from ._tolerances import pivot_rtol, rank_rtol, switch_rtol

_SINGULAR_KKT = (
    "constrax: the saddle-point matrix [[W, A^T], [A, 0]] is singular. Either the constraint "
    "rows are linearly dependent (A lost rank: a singular configuration or redundant "
    "constraints) or the mass matrix W = d2L/dqd2 is singular on the admissible velocities "
    "ker A. Use `constraint_solver=cx.UdwadiaKalaba()` or `cx.AutoSolver()` for the former; "
    "check the Lagrangian for the latter."
    " More on the 'Sharp bits' page of the documentation (docs/sharp-bits.md)."
)
_SINGULAR_MASS = (
    "constrax: the mass matrix W = d2L/dqd2 is not positive definite on the admissible "
    "velocities ker A (the Cholesky factor of W + k A^T A is not finite). Check the "
    "Lagrangian's kinetic energy, its parameters, and that the state is finite."
)


_INCONSISTENT = (
    "constrax.simulate: the acceleration-level constraint rows are inconsistent at a "
    "singular configuration: the state satisfies the velocity constraints, but no "
    "acceleration satisfies their time derivatives (A qdd = b has no solution where A lost "
    "rank). Smooth motion cannot reach such a state; it needs an impulsive velocity jump: "
    "cx.impulsive_jump(system, t, q, qd, p).qd is the velocity after a plastic one. Or "
    "start from a state reached by the motion, or away from the singular configuration "
    "(cx.constraint_rank); Accelerations.acceleration_residual shows the mismatch. If it "
    "fires while integrating *through* a singular configuration, the drift of the "
    "integration made the rows inconsistent: keep the default stabilisation "
    "(cx.StepProjection()) or use a tighter tolerance. consistency_rtol=None turns this "
    "check off."
    " More on the 'Sharp bits' page of the documentation (docs/sharp-bits.md)."
)


def inconsistent(A, qdd, b, rtol) -> tuple[Array, Array]:
    r"""$(r, \text{flag})$: the acceleration-level residual $r = A\ddot q - b$ and whether
    $|r|_\infty > \text{rtol}\,(|b|_\infty + |A|_\infty|\ddot q|_\infty + \text{tiny})$.

    A least-squares answer of a rank-deficient solve leaves $r \neq 0$ exactly when the
    acceleration rows are inconsistent — a state that satisfies $A\dot q = 0$ at a singular
    configuration but not the rows' derivatives, which no smooth motion reaches.
    """
    r = A @ qdd - b
    if r.shape[0] == 0:
        return r, jnp.zeros((), bool)
    scale = jnp.max(jnp.abs(b)) + jnp.max(jnp.sum(jnp.abs(A), axis=1)) * jnp.max(jnp.abs(qdd))
    flag = jnp.max(jnp.abs(r)) > rtol * (scale + jnp.finfo(qdd.dtype).tiny)
    return r, jax.lax.stop_gradient(flag)


def _checked_consistent(qdd, A, b, rtol):
    """`qdd`, or an error where it misses the acceleration rows `A qdd = b` (`inconsistent`)."""
    if rtol is None:
        return qdd
    _, bad = inconsistent(A, qdd, b, rtol)
    return checked(qdd, bad, _INCONSISTENT)


def diagonal(a):
    """The diagonal of a square matrix `(n, n)` as a strided slice of its entries: two
    equations, where `jnp.diagonal` traces a gather of 23 (the solves below take it several
    times in every evaluation of the dynamics)."""
    n = a.shape[-1]
    return jnp.ravel(a)[:: n + 1]


def _cholesky_failed(L):
    """Whether a Cholesky factor has a non-finite diagonal (its matrix not positive definite)."""
    return ~jnp.all(jnp.isfinite(diagonal(L)))


class AbstractConstraintSolver(eqx.Module):
    """Factor $(W, A)$ once; solve for $(\\ddot q, \\lambda)$; project onto $A\\delta = r$."""

    rank_robust: eqx.AbstractClassVar[bool]
    """Whether a rank-deficient $A$ gets a least-squares answer (rather than an error)."""
    checks_mass_matrix: eqx.AbstractClassVar[bool]
    r"""Whether `factor` itself refuses a mass matrix that is not positive definite on
    $\ker A$ (a Cholesky does, at every step; an LU does not, and `simulate` then checks
    once, at the initial state)."""

    @abc.abstractmethod
    def factor(self, W: Float[Array, "n n"], A: Float[Array, "m n"], inactive=None):
        r"""Return a factorisation state (a pytree).

        `inactive` (optional, `(m,)`, 1 where a row is switched off and 0 elsewhere; the
        caller zeroes those rows of `A` and of the right-hand sides) makes each such row
        $\lambda_i = 0$: a unit row of the saddle matrix instead of a zero one, so that
        rows switched on and off at run time (the modes of `cx.rigid.simulate_contacts`)
        keep one shape without making the saddle matrix singular. A solver whose
        pseudoinverse already gives a zero row a zero multiplier may ignore it."""

    @abc.abstractmethod
    def solve(
        self,
        state,
        f: Float[Array, " n"],
        b: Float[Array, " m"],
        consistency_rtol: float | None = None,
    ):
        r"""Return `(qdd, lam)` with `W qdd = f + A^T lam`, `A qdd = b`.

        With `consistency_rtol`, a rank-robust solver raises where its least-squares answer
        misses $A\ddot q = b$ by more than `consistency_rtol` times the rows' scale (the
        rows are inconsistent, `inconsistent`); an exact solve has nothing to check."""

    @abc.abstractmethod
    def project(self, state, r: Float[Array, " m"]) -> Float[Array, " n"]:
        r"""The minimum-$W$-norm $\delta$ with $A\delta = r$ (least squares if rank-deficient)."""

    @abc.abstractmethod
    def rank(self, state) -> Int[Array, ""]:
        """Numerical rank of $A$ used by the solve."""


class _KKTState(eqx.Module):
    K: Array  # the saddle matrix; derivatives flow through it, not through the LU
    lu: Array
    piv: Array  # LAPACK's row interchanges (`jax.scipy.linalg.lu_solve`)
    perm: Array  # the same as a permutation: (PK)[i] = K[perm[i]]
    singular: Array
    n: int = eqx.field(static=True)
    # Solve a singular matrix's factor as if its pivots were ones (`AutoSolver`, whose
    # answer there is another solver's): finite values, finite cotangents, no refactoring.
    unit_pivots_if_singular: bool = eqx.field(static=True, default=False)


# Triangular solves (`KKT`'s LU solves of the saddle matrix, `UdwadiaKalaba`'s Cholesky
# solves, the Cholesky factor's derivative) are written out in `jax.numpy` at every size
# (`substitution_solve`, `triangular_solve`), which XLA fuses, instead of LAPACK's: their
# fixed cost per call dominates a small matrix and, under `vmap`, is paid for every element
# of a batch; and jaxlib 0.10's batched LAPACK kernels can deadlock its CPU thread pool
# (docs page "Sharp bits", "A compiled program that never returns"). Up to
# `UNROLL_MAX_SIZE` unknowns the substitution is unrolled (three equations per unknown);
# above, the same column step runs in a `lax.fori_loop`, so that the program does not grow
# with the size. At 15 x 15 the LU and two solves took 0.8-1.2x LAPACK's time across runs
# (`benchmarks/field_cost.py`; docs/concepts/stabilisation.md, "Where one evaluation's time
# goes"). The factorisations stay LAPACK's (written out they cost 2-2.5x as much under
# `vmap` at 25 x 25, and 10x to compile), called so that they cannot deadlock
# (`_lapack.py`). `SUBSTITUTION_MAX_SIZE` is the size above which LAPACK's triangular solves
# are used instead: none by default (`benchmarks/_cases.lapack_solves` sets it to 0).
# One exception (`_lu_solve_one_system`): on a CPU, an LU solve of more than
# `ONE_SYSTEM_LAPACK_MIN_SIZE` unknowns that is not batched (one trajectory, not under `vmap`)
# is LAPACK's, which cannot deadlock with no batch and which costs less there: the imported
# humanoid's field (25 x 25) 26.0 against 31.1 us, its VJP 195 against 214 us and the VJP's
# compile 10.5 against 12.6 s (the fastest of four fresh processes each on 2 cores,
# 2026-11-29, one-off). Under `vmap` the substitution is faster (25 x 25, a batch of 256:
# the LU and a solve 0.66 against 1.01 us per element), and it stays.
SUBSTITUTION_MAX_SIZE: float = float("inf")
UNROLL_MAX_SIZE = 32
ONE_SYSTEM_LAPACK_MIN_SIZE = 20


def _substitute(T, b, *, lower: bool):
    r"""$x$ with $Tx = b$ for the lower (or upper) triangle of `T`, whose diagonal is taken
    to be ones, and `b` a vector `(n,)` or a matrix `(n, k)`: column by column, each unknown
    found is eliminated from the rest of `b` by one array operation (three equations per
    column, unrolled up to `UNROLL_MAX_SIZE` unknowns, a `lax.fori_loop` above; the entries
    above (below) `T`'s diagonal are not read)."""
    n = b.shape[0]
    strict = T * (np.tri(n, k=-1) if lower else np.tri(n, k=-1).T).astype(T.dtype)
    x = b[:, None] if b.ndim == 1 else b
    k = x.shape[1]
    if n <= UNROLL_MAX_SIZE:
        columns = jnp.split(strict, n, axis=1)
        for j in range(n - 1) if lower else range(n - 1, 0, -1):
            x = x - jax.lax.slice(x, (j, 0), (j + 1, k)) * columns[j]
    else:

        def column(i, x):
            j = i if lower else n - 1 - i
            row = jax.lax.dynamic_index_in_dim(x, j, 0, keepdims=True)
            return x - row * jax.lax.dynamic_index_in_dim(strict, j, 1, keepdims=True)

        x = jax.lax.fori_loop(0, n - 1, column, x)
    return x[:, 0] if b.ndim == 1 else x


def triangular_solve(T, b, *, lower: bool):
    r"""$T^{-1}b$ for the lower (or upper) triangle of `T` and `b` `(n,)` or `(n, k)`:
    `_substitute` on $TD^{-1}$ (lower) or $D^{-1}T$ (upper), $D$ the diagonal, whose
    diagonal is ones (LAPACK's above `SUBSTITUTION_MAX_SIZE`)."""
    if T.shape[0] > SUBSTITUTION_MAX_SIZE:
        return jsl.solve_triangular(T, b, lower=lower)
    d = diagonal(T)
    scale = d if b.ndim == 1 else d[:, None]
    if lower:
        return _substitute(T / d[None, :], b, lower=True) / scale
    return _substitute(T / d[:, None], b / scale, lower=False)


@jax.custom_jvp
def cholesky(A):
    r"""The lower Cholesky factor $L$ of `A` (LAPACK's, `_lapack.cholesky`), differentiated by
    $\dot L = L\,\Phi(L^{-1}\dot A L^{-\top})$ with $\Phi$ the lower triangle and half the
    diagonal (Murray, "Differentiation of the Cholesky decomposition", 2016), its triangular
    solves by `triangular_solve`: `jnp.linalg.cholesky`'s own rule calls LAPACK's, batched
    over the tangents under `jax.jacfwd` (docs page "Sharp bits", "A compiled program that
    never returns")."""
    return lapack.cholesky(A)


@cholesky.defjvp
@full_precision  # traced when differentiated, perhaps outside `full_precision` callers
def _cholesky_jvp(primals, tangents):
    (A,), (dA,) = primals, tangents
    L = cholesky(A)
    Linv = triangular_solve(L, jnp.eye(A.shape[0], dtype=A.dtype), lower=True)
    X = Linv @ (0.5 * (dA + dA.T)) @ Linv.T
    return L, L @ (jnp.tril(X) - 0.5 * X * np.eye(X.shape[0], dtype=X.dtype))


def substitution_solve(lu, perm, r, d=None):
    r"""$K^{-1}r$ from $PK = LU$ (`jax.lax.linalg.lu`'s `lu` and `permutation`):
    $Ly = Pr$, then $D^{-1}Ux = D^{-1}y$ ($D$ the diagonal of $U$, or `d`), by
    `_substitute`."""
    d = diagonal(lu) if d is None else d
    y = _substitute(lu, r[perm], lower=True)
    return _substitute(lu / d[:, None], y / d, lower=False)


def _lu_solve(state: _KKTState, r):
    """$K^{-1}r$: `substitution_solve` (LAPACK's `lu_solve` above `SUBSTITUTION_MAX_SIZE`,
    and for one system outside `vmap` above `ONE_SYSTEM_LAPACK_MIN_SIZE` on a CPU)."""
    lu = state.lu
    if lu.shape[0] > SUBSTITUTION_MAX_SIZE:
        if state.unit_pivots_if_singular:
            lu = jnp.where(state.singular, jnp.eye(lu.shape[0], dtype=lu.dtype), lu)
        return jsl.lu_solve((lu, state.piv), r)
    d = diagonal(lu)
    if state.unit_pivots_if_singular:
        d = jnp.where(state.singular, jnp.ones_like(d), d)
    if lu.shape[0] > ONE_SYSTEM_LAPACK_MIN_SIZE and jax.default_backend() == "cpu":
        return _lu_solve_one_system(lu, state.piv, state.perm, d, r)
    return substitution_solve(lu, state.perm, r, d)


@custom_batching.custom_vmap
def _lu_solve_one_system(lu, piv, perm, d, r):
    r"""$K^{-1}r$ for one system: LAPACK's `lu_solve` on the factor with the diagonal `d`
    (unit pivots where `_lu_solve` put them); under `vmap`, `substitution_solve` (see
    `ONE_SYSTEM_LAPACK_MIN_SIZE`)."""
    n = lu.shape[0]
    lu = jnp.where(np.eye(n, dtype=bool), d[None, :], lu)
    return jsl.lu_solve((lu, piv), r)


@_lu_solve_one_system.def_vmap
def _lu_solve_batched(axis_size, in_batched, lu, piv, perm, d, r):
    args = [
        x if batched else jnp.broadcast_to(x, (axis_size,) + x.shape)
        for x, batched in zip((lu, perm, d, r), (in_batched[0], *in_batched[2:]), strict=True)
    ]
    lu, perm, d, r = args
    return jax.vmap(lambda lu, perm, d, r: substitution_solve(lu, perm, r, d))(lu, perm, d, r), True


class KKT(AbstractConstraintSolver):
    """Direct LU solve of the saddle-point (KKT) system; the fast path for full-rank `A`.

    **Arguments:**

    - `pivot_rtol`: a pivot of the LU factor below `pivot_rtol * max|pivot|` flags the
      saddle matrix as singular (default `100 * eps`).
    - `throw`: raise (via `equinox.error_if`) on a singular saddle matrix (default `True`).
    """

    rank_robust: ClassVar[bool] = False
    checks_mass_matrix: ClassVar[bool] = False

    pivot_rtol: float | None = None
    throw: bool = True

    def _factor(self, W, A, inactive=None):
        n, m = W.shape[0], A.shape[0]
        # A Hessian of the Lagrangian, symmetric up to the rounding of autodiff: made exactly
        # so, K is symmetric and its transpose's solves are its own (`_solve`).
        W = 0.5 * (W + W.T)
        if inactive is None:
            corner = jnp.zeros((m, m), W.dtype)
        else:
            # A switched-off row is a unit row scaled like W (a pivot of its own size).
            scale = jax.lax.stop_gradient(jnp.max(jnp.abs(diagonal(W))))
            corner = jnp.diag(jnp.asarray(inactive, W.dtype) * scale)
        K = jnp.block([[W, A.T], [A, corner]])
        lu, piv, perm = lapack.lu(jax.lax.stop_gradient(K))
        d = jnp.abs(jnp.ravel(lu)[:: n + m + 1])
        rtol = pivot_rtol(W.dtype) if self.pivot_rtol is None else self.pivot_rtol
        singular = jax.lax.stop_gradient(
            ~jnp.all(jnp.isfinite(d)) | (jnp.min(d) <= rtol * jnp.max(d))
        )
        return _KKTState(K, lu, piv, perm, singular, n)

    def factor(self, W, A, inactive=None):
        return self._factor(W, A, inactive)

    def _solve(self, state, rhs):
        # Implicit differentiation (as `jnp.linalg.solve`): d(K^{-1} r) = K^{-1}(dr - dK x)
        # reuses the LU for the tangent/cotangent solves instead of differentiating the LU
        # factorisation itself. Same forward values; cheaper gradients. K is symmetric
        # (`_factor` symmetrises W), so the cotangent solves are solves with K too.
        out = jax.lax.custom_linear_solve(
            lambda x: jnp.matmul(state.K, x, precision=jax.lax.Precision.HIGHEST),
            rhs,
            solve=lambda _, x: _lu_solve(state, x),
            symmetric=True,
        )
        if self.throw:
            out = checked(out, state.singular, _SINGULAR_KKT)
        return out

    def solve(self, state, f, b, consistency_rtol=None):
        # An LU solve that does not raise is exact: `consistency_rtol` has nothing to check.
        sol = self._solve(state, jnp.concatenate([f, b]))
        return sol[: state.n], -sol[state.n :]

    def project(self, state, r):
        sol = self._solve(state, jnp.concatenate([jnp.zeros(state.n, r.dtype), r]))
        return sol[: state.n]

    def rank(self, state):
        m = state.lu.shape[0] - state.n
        return jnp.where(state.singular, -1, m).astype(jnp.int32)


class _UKState(eqx.Module):
    L: Array  # Cholesky factor of W + kappa A^T A
    Linv: Array  # its inverse (`triangular_solve` of the identity): the solves are products
    A: Array
    kappa: Array
    Bpinv: Array  # (n, m) pseudoinverse of B = A L^{-T}
    B: Array


class UdwadiaKalaba(AbstractConstraintSolver):
    r"""Gauss's principle / Udwadia–Kalaba solve, well defined when $A$ loses rank.

    $\ddot q = a + W^{-1/2}(AW^{-1/2})^+(b - Aa)$, $a = W^{-1}f$ (Udwadia & Kalaba 1992),
    computed with a Cholesky factor $L$ of $W_a = W + \kappa A^\top A$ (positive definite
    whenever $W$ is on $\ker A$; it leaves $\ddot q$ and $\lambda$ unchanged because
    $A\ddot q = b$) and an SVD pseudoinverse of $B = AL^{-\top}$ with a relative cutoff.
    The accelerations are unique even where $A$ loses rank or rows are redundant; the
    multipliers are then the minimum-norm ones and the rank is reported. The pseudoinverse
    has the Golub–Pereyra derivative, so gradients stay finite at rank-deficient points.
    A mass matrix that is not positive definite on $\ker A$ (a negative mass) is refused.

    **Arguments:**

    - `rtol`: singular values of $B = AW^{-1/2}$ below `rtol * max` are treated as zero
      (default $\sqrt{\epsilon}$ of the dtype: $1.5\times10^{-8}$ in float64).
    - `throw`: raise if $W$ is not positive definite on $\ker A$ (default `True`).
    """

    rank_robust: ClassVar[bool] = True
    checks_mass_matrix: ClassVar[bool] = True

    rtol: float | None = None
    throw: bool = True

    def factor(self, W, A, inactive=None):
        del inactive  # zero rows of A get zero multipliers from the pseudoinverse
        n, m = W.shape[0], A.shape[0]
        if m == 0:
            kappa = jnp.zeros((), W.dtype)
            Wa = W
        else:
            kappa = jax.lax.stop_gradient(
                jnp.trace(W) / jnp.maximum(jnp.sum(A * A), jnp.finfo(W.dtype).tiny)
            )
            Wa = W + kappa * (A.T @ A)
        L = cholesky(Wa)
        if self.throw:
            L = checked(L, _cholesky_failed(L), _SINGULAR_MASS)
        Linv = triangular_solve(L, jnp.eye(n, dtype=W.dtype), lower=True)
        if m == 0:
            B = jnp.zeros((0, n), W.dtype)
            Bpinv = jnp.zeros((n, 0), W.dtype)
        else:
            B = A @ Linv.T  # A L^{-T}
            rtol = rank_rtol(W.dtype) if self.rtol is None else self.rtol
            Bpinv = lapack.pinv(B, rtol)
        return _UKState(L, Linv, A, kappa, Bpinv, B)

    def _lt_solve(self, state, y):  # L^{-T} y
        return state.Linv.T @ y

    def solve(self, state, f, b, consistency_rtol=None):
        fa = f + state.kappa * (state.A.T @ b)
        a = self._lt_solve(state, state.Linv @ fa)  # Wa^{-1} fa
        y = state.Bpinv @ (b - state.A @ a)
        qdd = a + self._lt_solve(state, y)
        lam = state.Bpinv.T @ y
        return _checked_consistent(qdd, state.A, b, consistency_rtol), lam

    def project(self, state, r):
        return self._lt_solve(state, state.Bpinv @ r)

    def rank(self, state):
        if state.B.shape[0] == 0:
            return jnp.zeros((), jnp.int32)
        return jnp.round(jnp.trace(state.B @ state.Bpinv)).astype(jnp.int32)


class _AutoState(eqx.Module):
    kkt: _KKTState  # solved with unit pivots where singular
    X: Array  # the rank-robust solution operator, [qdd; -lam] = X [f; b] (zeros if unused)
    rank: Array


class AutoSolver(AbstractConstraintSolver):
    r"""KKT where the saddle matrix is regular, `UdwadiaKalaba` where it is (nearly) singular.

    The fast LU path of `KKT` is taken wherever its pivots say the saddle matrix is regular;
    where a pivot falls below `switch_rtol` (the constraint rows lost rank, or are
    redundant), the rank-robust `UdwadiaKalaba` result is returned instead: unique
    accelerations, minimum-norm multipliers, the rank reported, finite gradients.

    The switch is a `lax.cond` on whether *any* element of a batch is singular
    (`equinox.internal.unvmap_any`), so under `jax.vmap` a batch of regular states costs
    about what `KKT` costs. In the steps where some element is singular, the whole batch
    computes the rank-robust solution operator $X$, $[\ddot q; -\lambda] = X[f; b]$ (the
    `UdwadiaKalaba` solve applied to the columns of the identity: it is linear in
    $(f, b)$), once per factorisation, and every `solve` and `project` (a projection is the
    acceleration for $f = 0$) gives each element the result of its own path; in the other
    steps they are `KKT`'s solves behind a `cond` on the same predicate, and the
    consistency check of `solve` (`consistency_rtol`), which only a least-squares answer
    can fail, is made only in the steps that take the rank-robust path.

    **Arguments:**

    - `switch_rtol`: KKT pivot ratio below which the Gauss/Udwadia–Kalaba path is taken
      (default `1e-10` in float64; $\sqrt\epsilon = 3.5\times10^{-4}$ in float32, where
      the pivots of a singular matrix are only resolved to a few $\epsilon$).
    - `rtol`: the pseudoinverse cutoff of the fallback (see `UdwadiaKalaba`).
    """

    rank_robust: ClassVar[bool] = True
    checks_mass_matrix: ClassVar[bool] = False

    switch_rtol: float | None = None
    rtol: float | None = None

    def _kkt(self, dtype):
        rtol = switch_rtol(dtype) if self.switch_rtol is None else self.switch_rtol
        return KKT(pivot_rtol=rtol, throw=False)

    def factor(self, W, A, inactive=None):
        n, m = W.shape[0], A.shape[0]
        kkt = self._kkt(W.dtype).factor(W, A, inactive)
        singular = kkt.singular
        # A singular element's KKT solves are discarded, but they must not make NaN or inf:
        # their cotangents would turn NaN. Its LU is solved with unit pivots instead (the
        # factor's other entries are bounded by the pivoting; no refactorisation).
        kkt = dataclasses.replace(kkt, unit_pivots_if_singular=True)

        def regular(K, singular):
            return jnp.zeros((n + m, n + m), K.dtype), jnp.asarray(m, jnp.int32)

        # Rematerialised in a reverse pass: a differentiated `cond` saves the residuals of
        # both branches, and this one's (a decomposition, n + m solves) would otherwise be
        # stored in every step, singular or not (the 5-link chain's field VJP about 2x
        # slower). A transformed `cond` may rematerialise a branch it did not take on
        # zero-filled residuals and discard the result (under `vmap`, inside `linearize`, as
        # diffrax's event root find does), so the rematerialised part raises nothing: it
        # says whether the Cholesky factor failed, and the check is made outside it.
        @jax.checkpoint
        @full_precision  # traced again where a reverse pass rematerialises it
        def operator(K, singular):
            # The rank-robust operator, computed for every element of a batch, from the
            # saddle matrix the LU was taken of (the `cond` then needs no other operand).
            W, A = K[:n, :n], K[n:, :n]
            eye = jnp.eye(n + m, dtype=K.dtype)
            uk_solver = UdwadiaKalaba(rtol=self.rtol, throw=False)
            uk = uk_solver.factor(W, A)
            qdd, lam = uk_solver.solve(uk, eye[:n], eye[n:])  # linear in (f, b): all columns
            rank = jnp.where(singular, uk_solver.rank(uk), m)
            return jnp.concatenate([qdd, -lam]), rank, _cholesky_failed(uk.L)

        def rank_robust(K, singular):
            X, rank, failed = operator(K, singular)
            return checked(X, failed, _SINGULAR_MASS), rank

        X, rank = jax.lax.cond(eqxi.unvmap_any(singular), rank_robust, regular, kkt.K, singular)
        return _AutoState(kkt, X, rank)

    def _select(self, state, kkt_out, rhs, check=lambda sol: sol):
        # The product with X, the selection and `check` only in steps where some element is
        # singular: a batch of regular states pays one cond per solve, not a product.
        singular = state.kkt.singular
        return jax.lax.cond(
            eqxi.unvmap_any(singular),
            lambda: check(jnp.where(singular, state.X @ rhs, kkt_out)),
            lambda: kkt_out,
        )

    def solve(self, state, f, b, consistency_rtol=None):
        n = state.kkt.n
        rhs = jnp.concatenate([f, b])

        def check(sol):
            # Only a least-squares answer can miss the rows; the LU's, where the pivots say
            # the saddle matrix is regular, is exact to its conditioning.
            A = state.kkt.K[n:, :n]  # the saddle matrix's constraint block
            qdd = _checked_consistent(sol[:n], A, b, consistency_rtol)
            return jnp.concatenate([qdd, sol[n:]])

        sol = self._select(state, KKT(throw=False)._solve(state.kkt, rhs), rhs, check)
        return sol[:n], -sol[n:]

    def project(self, state, r):
        # The minimum-W-norm correction is the acceleration for f = 0, b = r.
        n = state.kkt.n
        rhs = jnp.concatenate([jnp.zeros(n, r.dtype), r])
        return self._select(state, KKT(throw=False)._solve(state.kkt, rhs), rhs)[:n]

    def rank(self, state):
        return state.rank


def for_rows(solver: AbstractConstraintSolver, constraints) -> AbstractConstraintSolver:
    """`solver` for a system with `constraints`: `AutoSolver` is `KKT` (its pivot test at
    `switch_rtol`, or `KKT`'s default) where the rows cannot lose rank, all of them
    `cx.UnitQuaternion`s of distinct quaternions: there its switch would always take the
    LU, and the rank-robust branch is left out of the program."""
    if type(solver) is AutoSolver and distinct_unit_quaternions(constraints):
        return KKT(pivot_rtol=solver.switch_rtol)
    return solver
