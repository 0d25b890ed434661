r"""What every transcription of an `OptimalControlProblem` shares: the decision vector's
node states, controls, projection multipliers and shared variables (optimised parameters,
final time); the constrained dynamics and the constraint rows at a point; the boundary
block; bounds, names and the block-sparse derivative structures (docs page "Trajectory
optimisation").

On a grid $t_k = t_0 + \tau_k (t_1 - t_0)$, $\tau_k = k/N$, node $k + 1$ carries the
constraint rows $H = (g, c)(t_{k+1}, x_{k+1}) = 0$, and the continuity equation of step
$k$ has the projection $J(x_{k+1})^\top\nu_k$ along the rows' normals (a free $\nu_k$ per
row), which keeps equations and unknowns in balance while the solution stays on the
constraint manifold (Ascher & Petzold 1998; Bordalba, Schoels, Ros, Porta & Diehl 2023).
"""

import abc
import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._coordinates import AbstractStateCoordinates, multipliers
from ._ocp import OptimalControlProblem


class AbstractTranscription(eqx.Module):
    """A way of turning an `OptimalControlProblem` into a nonlinear program.

    `exact_hessian` says whether the program's Hessian of the Lagrangian is available
    (else the NLP solver approximates it); `size_name` names the field that holds the
    number of intervals or segments (what a coarser version of the transcription changes).
    """

    exact_hessian: eqx.AbstractClassVar[bool]
    size_name: eqx.AbstractClassVar[str]

    @abc.abstractmethod
    def nlp(self, problem: OptimalControlProblem) -> "AbstractNLP":
        """The nonlinear program of `problem`."""


class Sizes(NamedTuple):
    N: int  # intervals or segments
    s: int  # state size
    nu: int  # controls
    r: int  # constraint rows at a node (position rows, then velocity rows)
    nsh: int  # shared variables: optimised parameters, then the final time if free
    npath: int
    nterm: int
    r0: int  # constraint rows imposed at node 0 (0 if the initial state is fixed)
    npoint: int = 0  # rows of the point constraints
    point_nodes: tuple[int, ...] = ()  # the node of each point constraint


def point_vars(z: Sizes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The nodes whose state (`0 < k < N`) and whose control (`k < N`) the boundary block
    holds beyond $x_0$, $x_N$, $u_N$: the point constraints' nodes, each once, in order."""
    nodes = sorted(set(z.point_nodes))
    return tuple(k for k in nodes if 0 < k < z.N), tuple(k for k in nodes if k < z.N)


def block_structure(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of every entry of the dense blocks `rows (B, R) x cols (B, w)`."""
    shape = rows.shape + cols.shape[1:]
    return (
        np.broadcast_to(rows[:, :, None], shape).ravel(),
        np.broadcast_to(cols[:, None, :], shape).ravel(),
    )


def lower_pairs(blocks, nz: int):
    """The unique lower-triangle pairs of the Hessian blocks `blocks` (each `(B, w)` of
    variable indices): `(rows, cols, keep, segments)` — per block the positions of its
    flattened `(B, w, w)` values that are kept, and for each kept value its pair."""
    hr, hc, keep = [], [], []
    for cols in blocks:
        a = np.broadcast_to(cols[:, :, None], cols.shape + cols.shape[1:]).ravel()
        b = np.broadcast_to(cols[:, None, :], cols.shape + cols.shape[1:]).ravel()
        kept = np.flatnonzero(a >= b)
        keep.append(kept)
        hr.append(a[kept])
        hc.append(b[kept])
    hr, hc = np.concatenate(hr), np.concatenate(hc)
    pairs, segments = np.unique(hr.astype(np.int64) * nz + hc, return_inverse=True)
    return pairs // nz, pairs % nz, tuple(keep), segments.ravel()


def boundary_indices(off: dict, z: Sizes) -> np.ndarray:
    """Indices of the boundary block's variables: $x_0$, $x_N$, $u_N$, the shared
    variables, then the point constraints' node states and controls (`point_vars`)."""
    states, controls = point_vars(z)
    return np.concatenate(
        [
            off["X"] + np.arange(z.s),
            off["X"] + z.N * z.s + np.arange(z.s),
            off["U"] + z.N * z.nu + np.arange(z.nu),
            off["shared"] + np.arange(z.nsh),
        ]
        + [off["X"] + k * z.s + np.arange(z.s) for k in states]
        + [off["U"] + k * z.nu + np.arange(z.nu) for k in controls]
    )


class Layout(NamedTuple):
    """Index arrays of the decision vector and of the constraint vector (numpy)."""

    nz: int
    offsets: dict  # start of each part of z: "X", "U", "V", "shared" (and "Xm", "Um")
    vars: dict  # the transcription's blocks of variable indices, each (B, w)
    boundary_vars: np.ndarray  # (1, 2s + nu + nsh [+ the point constraints' nodes])
    step_rows: int
    boundary_rows: int
    nc: int
    jac_rows: np.ndarray
    jac_cols: np.ndarray
    hess_rows: np.ndarray  # unique lower-triangle pairs
    hess_cols: np.ndarray
    hess_keep: tuple  # per Hessian block, the positions of its values kept
    hess_segments: np.ndarray  # per kept value, its pair


def build_layout(z: Sizes, parts, R: int, vars: dict, step: str, hessian: tuple) -> Layout:
    """A `Layout` from the parts of $z$, the rows per step `R`, the transcription's index
    blocks `vars`: the Jacobian's dense blocks are each step's rows by `vars[step]` and the
    boundary rows by the boundary variables; the Hessian's blocks are `vars[name]` for
    the names in `hessian`, then the boundary block."""
    off, nz = offsets(parts)
    vars = {name: fn(off) for name, fn in vars.items()}
    step_vars = vars[step]
    hessian_blocks = tuple(vars[name] for name in hessian) + (boundary_indices(off, z)[None],)
    N = z.N
    Rb = z.nterm + z.npoint + z.npath + z.r0
    boundary_vars = hessian_blocks[-1]
    jr, jc = zip(
        block_structure(np.arange(N * R).reshape(N, R), step_vars),
        block_structure(N * R + np.arange(Rb).reshape(1, Rb), boundary_vars),
        strict=True,
    )
    hr, hc, keep, segments = lower_pairs(hessian_blocks, nz)
    return Layout(
        nz=nz,
        offsets=off,
        vars=vars,
        boundary_vars=boundary_vars,
        step_rows=R,
        boundary_rows=Rb,
        nc=N * R + Rb,
        jac_rows=np.concatenate(jr),
        jac_cols=np.concatenate(jc),
        hess_rows=hr,
        hess_cols=hc,
        hess_keep=keep,
        hess_segments=segments,
    )


def x64_enabled() -> bool:
    """Part of the key of the cached layouts (`_layout` of each transcription): a layout's
    numpy index arrays, first indexed with under x64 off, come back as int32 indices when
    the same arrays index a float64 problem's variables, and the indexing fails (`lax.add`
    of int32 and int64; a float32 solve, then a float64 one of the same sizes, in one
    process). One layout per x64 mode keeps them apart."""
    return bool(jax.config.jax_enable_x64)


def offsets(parts) -> tuple[dict, int]:
    """Start of each named part of the decision vector, and its length."""
    off, k = {}, 0
    for name, size in parts:
        off[name] = k
        k += size
    return off, k


class AbstractNLP(eqx.Module):
    r"""A transcribed problem: flat decision vector $z$, objective, constraints
    $c_l \le c(z) \le c_u$, bounds $z_l \le z \le z_u$, and the sparse Jacobian and
    Hessian of the Lagrangian as values on fixed structures (`layout`)."""

    problem: OptimalControlProblem
    N: int = eqx.field(static=True)
    # What the node state holds and which rows are imposed at the nodes.
    coordinates: eqx.AbstractVar[AbstractStateCoordinates]

    # -- to be given by each transcription -----------------------------------------------
    @property
    @abc.abstractmethod
    def layout(self):
        """Offsets (`X`, `U`, `V`, `shared`, ...), `nz`, `nc`, `jac_rows/cols`,
        `hess_rows/cols`, `step_rows` (rows per step), `boundary_rows`."""

    @abc.abstractmethod
    def objective(self, z) -> Float[Array, ""]: ...

    @abc.abstractmethod
    def constraints(self, z) -> Float[Array, " nc"]: ...

    def objective_gradient(self, z) -> Float[Array, " nz"]:
        return jax.grad(self.objective)(z)

    @abc.abstractmethod
    def jacobian_values(self, z) -> Float[Array, " nnz"]: ...

    @abc.abstractmethod
    def hessian_values(self, z, lagrange, obj_factor) -> Float[Array, " nnzh"]: ...

    @abc.abstractmethod
    def step_row_kinds(self) -> list[tuple[str, int]]:
        """`(kind, count)` of the rows of one step, in order; kinds `"equality"`,
        `"manifold"` (the rows $H$ at node $k+1$) and `"path"`."""

    @abc.abstractmethod
    def step_row_names(self, k: int) -> list[str]: ...

    @abc.abstractmethod
    def from_samples(self, X_at, U_at) -> np.ndarray:
        """The decision vector from the states `X_at(ts) -> (k, s)` and controls
        `U_at(ts) -> (k, nu)` at the grid's times (numpy; projection multipliers zero,
        shared variables from the problem)."""

    @abc.abstractmethod
    def controls(self, z) -> tuple[Array, Array]:
        r"""`(U (N+1, nu), U_mid (N, nu))`: the node controls and their values at the
        middle of each step (with the node values they fix the control's interpolant)."""

    # -- sizes ---------------------------------------------------------------------------
    # Cached on the instance (`functools.cached_property`): the solve asks for the sizes,
    # the layout and the bounds hundreds of times, and each costs ~0.1-1 ms of Python
    # (equinox wraps every method access in a bound-method module).
    @functools.cached_property
    def sizes(self) -> Sizes:
        pr = self.problem
        fixed0 = pr.q0 is not None and pr.qd0 is not None
        r = self.coordinates.rows(pr)
        # Sizes from shapes alone: this runs inside traced code, where computing the
        # flattened parameters would add equations for a number.
        k = (
            0
            if pr.parameters is None
            else sum(np.size(x) for x in jax.tree.leaves(pr.parameters(pr.params)))
        )
        nsh = int(k) + int(pr.free_time)
        return Sizes(
            self.N,
            self.coordinates.size(pr),
            pr.nu,
            r,
            nsh,
            pr.n_path,
            pr.n_terminal,
            0 if fixed0 else r,
            sum(pr.n_point),
            self.point_nodes,
        )

    @functools.cached_property
    def point_nodes(self) -> tuple[int, ...]:
        """The grid node of each of the problem's point constraints; a `ValueError` naming
        the constraint, its time and the nearest nodes where a time is not a node."""
        # From the static fractions `point_taus`: `problem.t1` is traced inside the solve.
        pr, N = self.problem, self.N
        nodes = []
        for i, (t, tau) in enumerate(zip(pr.point_times, pr.point_taus, strict=True)):
            k = int(round(tau * N))
            if abs(k - tau * N) > 1e-9 * N:
                h = (t - pr.t0) / (tau * N)  # the step in seconds (tau > 0 here)
                j = int(np.floor(tau * N))
                raise ValueError(
                    f"`point_constraints[{i}]` at t = {t:g} is not a node of the "
                    f"{type(self).__name__.removesuffix('NLP')} grid of {N} intervals of "
                    f"{h:g} from t0 = {pr.t0:g} (the nearest nodes are t = {pr.t0 + j * h:g} "
                    f"and {pr.t0 + (j + 1) * h:g}): choose a number of intervals that puts a "
                    "node there"
                )
            nodes.append(k)
        return tuple(nodes)

    def taus(self) -> np.ndarray:
        """Normalised node times $\\tau_k = k/N$."""
        return np.linspace(0.0, 1.0, self.N + 1)

    def part(self, z, name: str, rows: int, cols: int):
        start = self.layout.offsets[name]
        return z[start : start + rows * cols].reshape(rows, cols)

    def nodes(self, z):
        """`(X (N+1, s), shared (nsh,))`."""
        S = self.sizes
        return self.part(z, "X", S.N + 1, S.s), z[self.layout.offsets["shared"] :]

    def final_time(self, shared) -> Array:
        return shared[-1] if self.problem.free_time else self.problem.t1

    def parameters(self, shared) -> Array:
        return shared[:-1] if self.problem.free_time else shared

    def time(self, tau, shared):
        t0 = self.problem.t0
        return t0 + tau * (self.final_time(shared) - t0)

    def step_length(self, shared):
        return (self.final_time(shared) - self.problem.t0) / self.N

    # -- the pieces at one point ---------------------------------------------------------
    def field(self, t, x, u, shared) -> Float[Array, " s"]:
        r"""$f(t, x, u) = \dot x$ of the constrained dynamics in the node state's
        coordinates (`coordinates.field`)."""
        pr = self.problem
        p = pr.params_at(self.parameters(shared), u)
        return self.coordinates.field(pr, t, x, p)

    def manifold(self, t, x, u, shared):
        pr = self.problem
        p = pr.params_at(self.parameters(shared), u)
        return self.coordinates.manifold(pr, t, x, p)

    def path(self, t, x, u, shared):
        pr = self.problem
        if pr.path_constraint is None:
            return jnp.zeros((0,), x.dtype)
        p = pr.params_at(self.parameters(shared), u)
        q, qd, _ = self.coordinates.unpack(pr, t, x, p)
        return jnp.atleast_1d(pr.path_constraint(t, q, qd, u, p)).astype(x.dtype)

    def running(self, t, x, u, shared) -> Array:
        r"""$\ell(t, q, \dot q, u, p)$ (zero without a running cost)."""
        pr = self.problem
        if pr.running_cost is None:
            return jnp.zeros((), x.dtype)
        p = pr.params_at(self.parameters(shared), u)
        q, qd, _ = self.coordinates.unpack(pr, t, x, p)
        return jnp.asarray(pr.running_cost(t, q, qd, u, p), x.dtype)

    def projection(self, tau1, x1, u1, nu_k, shared):
        r"""$(H(x_{k+1}), J(x_{k+1})^\top\nu_k)$, the latter zero in the $\mu$ slots (the
        last $m$ entries of the node state, under the vakonomic prescription)."""
        t1 = self.time(tau1, shared)
        H1, pullback = jax.vjp(lambda y: self.manifold(t1, y, u1, shared), x1)
        (proj,) = pullback(nu_k)
        pr = self.problem
        if pr.prescription.multiplier_state:
            proj = proj.at[self.sizes.s - multipliers(pr) :].set(0.0)
        return H1, proj

    def boundary(self, v) -> tuple[Array, Array]:
        """(terminal cost, rows: terminal, point constraints, path at $t_1$, manifold at
        $t_0$) from `v = (x_0, x_N, u_N, shared, the point constraints' node states and
        controls)` (`boundary_indices`)."""
        pr, S = self.problem, self.sizes
        s, nu = S.s, S.nu
        states, controls = point_vars(S)
        x0, x1, u1, shared, xs, us = jnp.split(v, np.cumsum([s, s, nu, S.nsh, len(states) * s]))
        T = self.final_time(shared)
        p = pr.params_at(self.parameters(shared), u1)
        q1, qd1, _ = self.coordinates.unpack(pr, T, x1, p)
        cost = jnp.zeros((), v.dtype)
        if pr.terminal_cost is not None:
            cost = jnp.asarray(pr.terminal_cost(T, q1, qd1, p), v.dtype)
        rows = []
        if pr.terminal_constraint is not None:
            rows.append(jnp.atleast_1d(pr.terminal_constraint(T, q1, qd1, p)))
        xs, us = xs.reshape(-1, s), us.reshape(-1, nu)
        for fn, k in zip(pr.point_constraints, S.point_nodes, strict=True):
            x = x0 if k == 0 else x1 if k == S.N else xs[states.index(k)]
            u = u1 if k == S.N else us[controls.index(k)]
            t = self.time(k / S.N, shared)
            p_k = pr.params_at(self.parameters(shared), u)
            q, qd, _ = self.coordinates.unpack(pr, t, x, p_k)
            rows.append(jnp.atleast_1d(fn(t, q, qd, u, p_k)))
        rows.append(self.path(T, x1, u1, shared))
        if S.r0:
            t0 = jnp.asarray(pr.t0, v.dtype)
            rows.append(self.manifold(t0, x0, jnp.zeros(nu, v.dtype), shared))
        return cost, jnp.concatenate([jnp.asarray(x, v.dtype) for x in rows])

    # -- bounds, names, residuals (numpy, outside jit) ------------------------------------
    def variable_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """States and controls (nodes, and midpoints where the transcription has them)
        within their bounds, the fixed initial and terminal values, the shared bounds
        (read-only arrays)."""
        return self._variable_bounds

    @functools.cached_property
    def _variable_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        pr, S, L = self.problem, self.sizes, self.layout
        N, s = S.N, S.s
        lo, hi = np.full(L.nz, -np.inf), np.full(L.nz, np.inf)
        # The bounds of the nodes and midpoints at their times (a bound may be a function
        # of time; such a problem has a fixed final time).
        taus = {("X", "U"): self.taus(), ("Xm", "Um"): (np.arange(N) + 0.5) / N}
        for (name, uname), tau in taus.items():
            if name not in L.offsets:
                continue
            B = pr.bounds_at(pr.t0 + tau * (float(pr.t1) - pr.t0))
            count = tau.shape[0]
            state = self.coordinates.state_bounds(pr, B)
            sl = slice(L.offsets[name], L.offsets[name] + count * s)
            lo[sl], hi[sl] = state[0].ravel(), state[1].ravel()
            if uname in L.offsets:
                sl = slice(L.offsets[uname], L.offsets[uname] + count * S.nu)
                lo[sl], hi[sl] = B["u"][0].ravel(), B["u"][1].ravel()
        for node, start, value in self._fixed():
            i = L.offsets["X"] + (node % (N + 1)) * s + start
            lo[i : i + value.shape[0]] = hi[i : i + value.shape[0]] = value
        sh = L.offsets["shared"]
        if pr.parameters is not None:
            k = S.nsh - int(pr.free_time)
            lo[sh : sh + k], hi[sh : sh + k] = pr.bounds["parameters"]
        if pr.free_time:
            lo[L.nz - 1], hi[L.nz - 1] = pr.bounds["t1"]
        return _read_only(lo, hi)

    def _row_kind_mask(self, kind: str) -> np.ndarray:
        S, L = self.sizes, self.layout
        step = np.concatenate([np.full(k, name == kind) for name, k in self.step_row_kinds()])
        bnd = np.zeros(L.boundary_rows, bool)
        path = S.nterm + S.npoint
        if kind == "path":
            bnd[path : path + S.npath] = True
        if kind == "manifold":
            bnd[path + S.npath :] = True
        return np.concatenate([np.tile(step, S.N), bnd])

    def constraint_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Zero for the equations; $(-\\infty, 0]$ for the path rows (read-only arrays)."""
        return self._constraint_bounds

    @functools.cached_property
    def _constraint_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        L = self.layout
        lo, hi = np.zeros(L.nc), np.zeros(L.nc)
        lo[self._row_kind_mask("path")] = -np.inf
        return _read_only(lo, hi)

    def manifold_residuals(self, c: np.ndarray) -> np.ndarray:
        """The constraint rows $H$ at the nodes, from the constraint vector `c`."""
        return c[self._row_kind_mask("manifold")]

    def terminal_residuals(self, c: np.ndarray) -> np.ndarray:
        S, L = self.sizes, self.layout
        start = S.N * L.step_rows
        return c[start : start + S.nterm]

    def _fixed(self) -> list[tuple[int, int, np.ndarray]]:
        """The node-state entries fixed by the initial and terminal values."""
        return self.coordinates.fixed(self.problem, self.problem.params)

    def state_names(self) -> list[str]:
        return self.coordinates.state_names(self.problem)

    def manifold_names(self) -> list[str]:
        """Names of the constraint rows imposed at a node."""
        return self.coordinates.manifold_names(self.problem)

    def constraint_names(self) -> list[str]:
        S = self.sizes
        names = []
        for k in range(S.N):
            names += self.step_row_names(k)
        names += [f"terminal_constraint[{j}]" for j in range(S.nterm)]
        pr = self.problem
        for i, (t, k, rows) in enumerate(
            zip(pr.point_times, S.point_nodes, pr.n_point, strict=True)
        ):
            names += [f"point_constraints[{i}][{j}] at t = {t:g} (node {k})" for j in range(rows)]
        names += [f"path_constraint[{j}] at node {S.N}" for j in range(S.npath)]
        if S.r0:
            names += [f"constraint {row} at node 0" for row in self.manifold_names()]
        return names

    def variable_names(self) -> list[str]:
        pr, S, L = self.problem, self.sizes, self.layout
        state = self.state_names()
        names = [f"{x} at node {k}" for k in range(S.N + 1) for x in state]
        if "Xm" in L.offsets:
            names += [f"{x} at midpoint {k}" for k in range(S.N) for x in state]
        names += [f"u[{j}] at node {k}" for k in range(S.N + 1) for j in range(S.nu)]
        if "Um" in L.offsets:
            names += [f"u[{j}] at midpoint {k}" for k in range(S.N) for j in range(S.nu)]
        names += [f"projection nu[{j}] (step {k})" for k in range(S.N) for j in range(S.r)]
        names += [f"parameter[{j}]" for j in range(S.nsh - int(pr.free_time))]
        if pr.free_time:
            names.append("t1")
        return names

    def shared_guess(self) -> np.ndarray:
        """The shared variables at the problem's values (parameters, then `t1`)."""
        pr = self.problem
        parts = [np.asarray(pr.optimised_parameters(pr.params), np.float64)]
        if pr.free_time:
            parts.append(np.asarray(pr.t1, np.float64)[None])
        return np.concatenate(parts)


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for a in arrays:
        a.setflags(write=False)
    return arrays
