r"""The node state of a transcription: which coordinates it holds and which constraint
rows it imposes at the nodes (docs page "Trajectory optimisation", section "Quasi-velocities").

- `Velocities` (the default): $x = (q, \dot q[, \mu])$, with the position rows $g$ and all
  velocity rows $c$ imposed at every node.
- `QuasiVelocities`: $x = (q, v[, \mu])$ with $\dot q = S(t, q)\,v$ for a user's basis $S$ of the
  kernel of the velocity rows (Maggi's quasi-velocities: Maggi, *Principii della teoria
  matematica del movimento dei corpi*, 1896; Neimark & Fufaev, *Dynamics of Nonholonomic
  Systems*, 1972, ch. III). The velocity rows then hold by construction, so only the
  position rows are imposed, and $v$ moves by Maggi's equations, the Lagrange–d'Alembert
  equations projected on the span of $S$ (where the reactions vanish):
  $$S^\top W S\,\dot v = S^\top\left(f + Q - W\dot S v\right),\qquad
  \dot S = \partial_t S + \partial_q S\,[S v],$$
  with the library's mass matrix $W$, bias $f$ and force $Q$. Where the rows have full
  rank and $S$ spans their kernel this is the library's $\ddot q$ (multiply
  $W\ddot q = f + Q + A^\top\lambda$ by $S^\top$, with $\ddot q = S\dot v + \dot S v$);
  where they lose rank (the snake cart at $\phi = \pm\pi/2$) $S^\top W S$ stays positive
  definite, and a smooth basis carries the motion through. For the knife edge the node
  state has 5 entries instead of 6 and needs no projection multiplier: the size of a
  hand-reduced model.
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._dynamics import _step
from .._prescriptions import prescribed_terms
from .._solve import triangular_solve
from .._terms import generalized_force, position_residual, stacked_residual

# Up to this size `spd_solve` unrolls the Cholesky factorisation into scalar operations.
SMALL_SPD = 4


def spd_solve(A: Float[Array, "k k"], b: Float[Array, " k"]) -> Float[Array, " k"]:
    r"""$A^{-1}b$ for a symmetric positive definite $A$ `(k, k)`, by Cholesky,
    $A = LL^\top$ (Golub & Van Loan, *Matrix Computations*, 2013, §4.2).

    Up to $k = $ `SMALL_SPD` the factorisation and the two triangular solves are written
    out in scalar operations, which XLA fuses across a `vmap`; above, LAPACK's
    factorisation and the library's triangular solves (`constrax._solve.triangular_solve`:
    written out up to 16 x 16, which also keeps them off jaxlib 0.10's parallel LAPACK
    path, docs page "Sharp bits"). On a transcription's batched $2\times2$
    systems (Maggi's equations of the knife edge at 51 nodes) LAPACK's calls cost more than
    the arithmetic: the parking program's values, first derivatives and Hessian take
    46 / 142 / 212 µs a call unrolled against 78 / 240 / 340 µs (2-core Intel Xeon,
    2026-11-28), with the same values to round-off. A matrix that is not positive definite
    gives NaN either way (the square root of a negative pivot)."""
    k = A.shape[0]
    if k > SMALL_SPD:
        L = jnp.linalg.cholesky(A)
        return triangular_solve(L.T, triangular_solve(L, b, lower=True), lower=False)
    L = [[None] * k for _ in range(k)]
    for j in range(k):
        L[j][j] = jnp.sqrt(A[j, j] - sum(L[j][m] ** 2 for m in range(j)))
        for i in range(j + 1, k):
            L[i][j] = (A[i, j] - sum(L[i][m] * L[j][m] for m in range(j))) / L[j][j]
    y = []
    for i in range(k):  # L y = b
        y.append((b[i] - sum(L[i][m] * y[m] for m in range(i))) / L[i][i])
    x = [None] * k
    for i in reversed(range(k)):  # L^T x = y
        x[i] = (y[i] - sum(L[m][i] * x[m] for m in range(i + 1, k))) / L[i][i]
    return jnp.stack(x)


class AbstractStateCoordinates(eqx.Module):
    """How a transcription's node state `x` reads as $(q, \\dot q, \\mu)$ (module
    docstring)."""

    @abc.abstractmethod
    def size(self, problem) -> int:
        """Entries of the node state."""

    @abc.abstractmethod
    def rows(self, problem) -> int:
        """Constraint rows imposed at a node."""

    @abc.abstractmethod
    def unpack(self, problem, t, x, p):
        r"""$(q, \dot q, \mu)$ from the node state ($\mu$ `None` without a multiplier
        state)."""

    @abc.abstractmethod
    def field(self, problem, t, x, p):
        r"""$\dot x$: the constrained dynamics in these coordinates."""

    @abc.abstractmethod
    def manifold(self, problem, t, x, p):
        """The constraint rows imposed at a node."""

    @abc.abstractmethod
    def manifold_names(self, problem) -> list[str]: ...

    @abc.abstractmethod
    def state_names(self, problem) -> list[str]: ...

    @abc.abstractmethod
    def pack(self, problem, ts, X, p) -> np.ndarray:
        r"""Node states `(k, size)` from samples `X (k, 2n[+m])` of $(q, \dot q[, \mu])$ at
        the times `ts` (numpy, outside jit; the guess)."""

    @abc.abstractmethod
    def nodes(self, problem, ts, X, p) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        r"""$(q, \dot q, \mu)$ `(K, .)` at the nodes from their states `X (K, size)`
        (numpy, outside jit; the solution)."""

    @abc.abstractmethod
    def unimposed(self, problem, ts, Q, Qd, p) -> tuple[np.ndarray, list[str]]:
        """The constraint rows that hold by construction of the coordinates rather than
        as rows of the program, at the nodes `(K, r')`, and their names: checked at the
        solution."""

    @abc.abstractmethod
    def state_bounds(self, problem, bounds: dict) -> tuple[np.ndarray, np.ndarray]:
        """Bounds `(K, size)` of the node states at `K` times from the bounds of the
        variables there (`OptimalControlProblem.bounds_at`)."""

    @abc.abstractmethod
    def fixed(self, problem, p) -> list[tuple[int, int, np.ndarray]]:
        """`(node, start, values)`: the node-state entries fixed at the first (`0`) and
        last (`-1`) node by `q0`, `qd0`, `mu0`, `q1`, `qd1`."""


class Velocities(AbstractStateCoordinates):
    r"""$x = (q, \dot q[, \mu])$; the rows $(g, c)$ at every node (module docstring)."""

    def size(self, problem):
        return problem.state_size

    def rows(self, problem):
        return problem.h + problem.m

    def unpack(self, problem, t, x, p):
        n = problem.n
        mu = x[2 * n :] if problem.prescription.multiplier_state else None
        return x[:n], x[n : 2 * n], mu

    def field(self, problem, t, x, p):
        r"""$(\dot q, \ddot q[, \dot\mu])$ from the library's accelerations (either
        prescription, the problem's saddle-point solver)."""
        q, qd, mu = self.unpack(problem, t, x, p)
        mask = np.asarray(problem.mask, dtype=bool)
        step = _step(
            problem.system, problem.prescription, problem.constraint_solver, None,
            t, q, qd, mu, p, mask,
        )  # fmt: skip
        return jnp.concatenate([qd, step.qdd] + ([step.lam] if mu is not None else []))

    def manifold(self, problem, t, x, p):
        n = problem.n
        return problem.manifold_rows(t, x[:n], x[n : 2 * n], p)

    def manifold_names(self, problem):
        return problem.manifold_names()

    def state_names(self, problem):
        n = problem.n
        names = [f"q[{i}]" for i in range(n)] + [f"qd[{i}]" for i in range(n)]
        return names + [f"mu[{i}]" for i in range(multipliers(problem))]

    def pack(self, problem, ts, X, p):
        return np.asarray(X, np.float64)

    def nodes(self, problem, ts, X, p):
        n = problem.n
        mu = X[:, 2 * n :] if problem.prescription.multiplier_state else None
        return X[:, :n], X[:, n : 2 * n], mu

    def unimposed(self, problem, ts, Q, Qd, p):
        return np.zeros((Q.shape[0], 0)), []

    def state_bounds(self, problem, bounds):
        B = bounds
        extra = np.full(multipliers(problem), np.inf)
        return (
            _concatenate([B["q"][0], B["qd"][0], -extra]),
            _concatenate([B["q"][1], B["qd"][1], extra]),
        )

    def fixed(self, problem, p):
        n = problem.n
        out = [(0, 0, problem.q0), (0, n, problem.qd0), (-1, 0, problem.q1), (-1, n, problem.qd1)]
        out.append((0, 2 * n, problem.mu0))
        return [(k, i, np.asarray(v)) for k, i, v in out if v is not None]


class QuasiVelocities(AbstractStateCoordinates):
    r"""$x = (q, v[, \mu])$, $\dot q = S(t, q, p)\,v$ for the user's `basis` $S$ `(n, k)`
    of the kernel of the velocity rows (module docstring), with the multipliers $\mu$ of
    the vakonomic prescription as under `Velocities`. Checked at every node of the initial
    guess and of the solution: $c(t, q, S w) = 0$ for $w = 0$ and the unit vectors (the
    rows vanish on the span of $S$, so they are linear and homogeneous there), $k = n -
    \operatorname{rank}\partial c/\partial\dot q$ where the rows have their largest rank
    over the nodes (elsewhere the kernel is larger), and $S$ of full column rank."""

    basis: Callable = eqx.field(static=True)
    k: int = eqx.field(static=True)

    @classmethod
    def of(cls, basis: Callable, problem) -> "QuasiVelocities":
        """The coordinates of `basis` for `problem`, checked at trace time: the basis's
        shape, and a problem the coordinates can carry."""
        lo, hi = problem.bounds["qd"]
        if np.isfinite(lo).any() or np.isfinite(hi).any() or "qd" in dict(problem.bound_functions):
            raise ValueError(
                "`qd_bounds` cannot be imposed on the node states of a `velocity_basis` "
                "transcription (they hold v, not qd): write them as a `path_constraint`"
            )
        n = problem.n
        q = problem.q0 if problem.q0 is not None else problem.q1
        q = jnp.zeros(n, problem.t1.dtype) if q is None else q
        try:
            shape = jax.eval_shape(basis, problem.t1, q, problem.params).shape
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"`velocity_basis(t, q, p)` failed: {e!r}") from e
        if len(shape) != 2 or shape[0] != n or not 1 <= shape[1] <= n:
            raise ValueError(
                f"`velocity_basis(t, q, p)` must return an (n, k) = ({n}, k) matrix with "
                f"1 <= k <= {n}, got shape {shape}"
            )
        coordinates = cls(basis, int(shape[1]))
        for name, qd, q in (("qd0", problem.qd0, problem.q0), ("qd1", problem.qd1, problem.q1)):
            if qd is not None and q is None and bool(jnp.any(qd != 0)):
                raise ValueError(
                    f"`{name}` is fixed and nonzero but its configuration is free: with a "
                    "`velocity_basis` it is fixed through v = S(q)^+ qd, which needs q"
                )
        return coordinates

    def size(self, problem):
        return problem.n + self.k + multipliers(problem)

    def rows(self, problem):
        return problem.h

    def unpack(self, problem, t, x, p):
        n, k = problem.n, self.k
        q, v = x[:n], x[n : n + k]
        mu = x[n + k :] if problem.prescription.multiplier_state else None
        return q, self.basis(t, q, p) @ v, mu

    def field(self, problem, t, x, p):
        r"""$(\dot q, \dot v) = (S v,\ (S^\top W S)^{-1} S^\top(f + Q - W\dot S v))$:
        Maggi's equations, the Lagrange–d'Alembert equations projected on the span of
        $S$, where the reactions $A^\top\lambda$ vanish ($A S = 0$). $W$, $f$ and $Q$ are
        the library's (autodiff of the Lagrangian, or the system's `dynamics`); no
        constraint Jacobian and no saddle-point solve, and $S^\top W S$ is positive
        definite wherever $S$ has full column rank, also where the constraint rows lose
        rank.

        Under the vakonomic prescription $\ddot q$ and $\dot\mu = \lambda$ are the
        library's (its saddle-point solve, `_dynamics._step`, at $(q, Sv, \mu)$), and
        $\dot v = (S^\top S)^{-1}S^\top(\ddot q - \dot S v)$: exact, because $\ddot q -
        \dot S v$ lies in the kernel of the velocity rows (they hold along the motion), which
        $S$ spans."""
        n, k = problem.n, self.k
        q, v = x[:n], x[n : n + k]
        S_at = lambda t, q: self.basis(t, q, p)  # noqa: E731
        S = S_at(t, q)
        qd = S @ v
        _, dS = jax.jvp(S_at, (t, q), (jnp.ones_like(t), qd))
        if problem.prescription.multiplier_state:
            mask = np.asarray(problem.mask, dtype=bool)
            step = _step(
                problem.system, problem.prescription, problem.constraint_solver, None,
                t, q, qd, x[n + k :], p, mask,
            )  # fmt: skip
            vd = spd_solve(S.T @ S, S.T @ (step.qdd - dS @ v))
            return jnp.concatenate([qd, vd, step.lam])
        W, f = prescribed_terms(problem.prescription, problem.system, t, q, qd, None, p)
        force = generalized_force(problem.system, t, q, qd, p)
        WS = S.T @ W @ S
        vd = spd_solve(0.5 * (WS + WS.T), S.T @ (f + force - W @ (dS @ v)))
        return jnp.concatenate([qd, vd])

    def manifold(self, problem, t, x, p):
        return position_residual(problem.system, t, x[: problem.n], p)

    def manifold_names(self, problem):
        return problem.manifold_names()[: problem.h]

    def state_names(self, problem):
        names = [f"q[{i}]" for i in range(problem.n)] + [f"v[{j}]" for j in range(self.k)]
        return names + [f"mu[{i}]" for i in range(multipliers(problem))]

    def pack(self, problem, ts, X, p):
        n = problem.n
        dtype = problem.t1.dtype
        ts = np.asarray(ts, dtype)
        Q, Qd = np.asarray(X[:, :n], dtype), np.asarray(X[:, n : 2 * n], dtype)
        S, rows, A = (np.asarray(a) for a in _at_nodes(self, problem, ts, Q, p))
        self.check_nodes(problem, ts, S, rows, A, "the initial guess")
        V = (np.linalg.pinv(S) @ Qd[:, :, None])[:, :, 0]  # least squares, per node
        Mu = np.asarray(X[:, 2 * n : 2 * n + multipliers(problem)], dtype)
        return np.concatenate([Q, V, Mu], axis=1)

    def nodes(self, problem, ts, X, p):
        Q, Qd = (np.asarray(a) for a in _unpacked(self, problem, ts, X, p))
        mu = np.asarray(X)[:, problem.n + self.k :] if multipliers(problem) else None
        return Q, Qd, mu

    def unimposed(self, problem, ts, Q, Qd, p):
        if not problem.system.constraints:
            return np.zeros((Q.shape[0], 0)), []
        return np.asarray(_velocity_rows(problem, ts, Q, Qd, p)), list(problem.row_names)

    def check_nodes(self, problem, ts, S, rows, A, where: str) -> None:
        r"""Raise if the basis `S (K, n, k)` is not one of the kernel of the velocity rows
        at the nodes, from the rows `(K, k + 1, m)` at $\dot q = S w$ ($w = 0$ and the
        unit vectors) and their Jacobians `A (K, m, n)` in $\dot q$ (class docstring)."""
        if not problem.system.constraints:
            return
        n = problem.n
        names = problem.row_names
        # Vectorised over the nodes; the first failing node is reported.
        scale = np.maximum(1.0, np.abs(S).max(axis=(1, 2)))
        miss = np.abs(rows).max(axis=1)  # (K, m)
        sv = np.linalg.svd(S, compute_uv=False)  # (K, k)
        sa = np.linalg.svd(A, compute_uv=False)  # (K, min(m, n))
        rank = np.sum(sa > 1e-10 * np.maximum(1.0, sa[:, :1]), axis=1)
        # The kernel's dimension where the rows have their generic (largest) rank; where
        # they lose rank the kernel is larger, and the basis carries the generic motions.
        generic = int(np.argmax(rank))
        failures = {
            "span": np.flatnonzero((miss > 1e-8 * scale[:, None]).any(axis=1)),
            "rank": np.flatnonzero(sv[:, -1] <= 1e-10 * sv[:, 0]),
            "kernel": np.array([generic] if S.shape[2] != n - rank[generic] else []),
        }
        first = (
            min((int(ks[0]), kind) for kind, ks in failures.items() if ks.size)
            if any(ks.size for ks in failures.values())
            else None
        )
        if first is None:
            return
        k, kind = first
        at = f"`velocity_basis` at node {k} of {where} (t = {float(ts[k]):.6g})"
        if kind == "span":
            i = int(np.argmax(miss[k]))
            raise ValueError(
                f"{at}: the velocity rows do not vanish on its span ({names[i]} = "
                f"{float(miss[k, i]):.3g} at qd = S w for w = 0 or a unit vector); its "
                "columns must span the kernel of the velocity rows"
            )
        if kind == "rank":
            r = int(np.sum(sv[k] > 1e-10 * sv[k, 0]))
            raise ValueError(f"{at} has rank {r} < {S.shape[2]} columns")
        raise ValueError(
            f"{at} has {S.shape[2]} columns, but the kernel of the velocity rows there (at "
            f"their largest rank over the nodes) has dimension n - rank = {n} - "
            f"{int(rank[k])} = {n - int(rank[k])}"
        )

    def state_bounds(self, problem, bounds):
        free = np.full(self.size(problem) - problem.n, np.inf)  # v and mu
        B = bounds
        return _concatenate([B["q"][0], -free]), _concatenate([B["q"][1], free])

    def fixed(self, problem, p):
        n = problem.n
        out = []
        for node, q, qd in ((0, problem.q0, problem.qd0), (-1, problem.q1, problem.qd1)):
            t = problem.t0 if node == 0 else problem.t1
            if q is not None:
                out.append((node, 0, np.asarray(q)))
            if qd is None:
                continue
            if q is None:  # zero (checked in `of`): v = 0 whatever q
                out.append((node, n, np.zeros(self.k)))
                continue
            S = np.asarray(_basis(self, jnp.asarray(t, problem.t1.dtype), q, p))
            v, *_ = np.linalg.lstsq(S, np.asarray(qd), rcond=None)
            miss = float(np.abs(S @ v - np.asarray(qd)).max())
            if miss > 1e-8 * max(1.0, float(np.abs(qd).max())):
                which = "qd0" if node == 0 else "qd1"
                raise ValueError(
                    f"`{which}` is not in the span of `velocity_basis` at "
                    f"{'q0' if node == 0 else 'q1'} (least-squares miss {miss:.3g})"
                )
            out.append((node, n, v))
        if problem.mu0 is not None:
            out.append((0, n + self.k, np.asarray(problem.mu0)))
        return out


def multipliers(problem) -> int:
    r"""The entries of the vakonomic multipliers $\mu$ in a node state (0 under d'Alembert)."""
    return problem.state_size - 2 * problem.n


def check_velocity_basis(basis) -> None:
    """A transcription's `velocity_basis` argument: a function or `None`."""
    if basis is not None and not callable(basis):
        raise TypeError(
            f"`velocity_basis` must be a function (t, q, p) -> S (n, k) or None, got {basis!r}"
        )


def node_coordinates(basis, problem) -> AbstractStateCoordinates:
    """The node-state coordinates of a transcription with `velocity_basis=basis`."""
    return Velocities() if basis is None else QuasiVelocities.of(basis, problem)


# The node evaluations of `QuasiVelocities`, compiled once per problem structure (outside
# the NLP's programs: on the guess and on the solution).
@eqx.filter_jit
def _at_nodes(coordinates, problem, ts, Q, p):
    """`(S, rows, A)` at the nodes (`QuasiVelocities.check_nodes`)."""
    c = stacked_residual(problem.system, p)

    def at(t, q):
        S = coordinates.basis(t, q, p)
        W = jnp.concatenate([jnp.zeros((1, S.shape[1]), S.dtype), jnp.eye(S.shape[1])])
        rows = jax.vmap(lambda w: c(t, q, S @ w))(W)
        A = jax.jacfwd(lambda qd: c(t, q, qd))(jnp.zeros_like(q))
        return S, rows, A

    return jax.vmap(at)(ts, Q)


@eqx.filter_jit
def _unpacked(coordinates, problem, ts, X, p):
    n, k = problem.n, coordinates.k
    Qd = jax.vmap(lambda t, x: coordinates.basis(t, x[:n], p) @ x[n : n + k])(ts, X)
    return X[:, :n], Qd


@eqx.filter_jit
def _velocity_rows(problem, ts, Q, Qd, p):
    return jax.vmap(stacked_residual(problem.system, p))(ts, Q, Qd)


@eqx.filter_jit
def _basis(coordinates, t, q, p):
    return coordinates.basis(t, q, p)


def _concatenate(parts) -> np.ndarray:
    """The parts joined along their last axis, their leading axes broadcast (bounds
    of `K` times `(K, size)` beside the free parts `(size,)`)."""
    lead = np.broadcast_shapes(*(np.shape(x)[:-1] for x in parts))
    return np.concatenate([np.broadcast_to(x, (*lead, np.shape(x)[-1])) for x in parts], -1)
