r"""Direct collocation on the constraint manifold: an `OptimalControlProblem` as a sparse
nonlinear program (docs page "Trajectory optimisation").

Hermite–Simpson in separated form (Kelly, "An introduction to trajectory optimization",
SIAM Review 2017, §4; Betts, *Practical Methods for Optimal Control*, 2010, §4.6): on
$N$ intervals of length $h = (t_1 - t_0)/N$, with node states $x_k$, midpoint states
$x_{k+1/2}$ and controls $u_k$, $u_{k+1/2}$ (a piecewise-quadratic control),
$$x_{k+1} - x_k - \tfrac h6(f_k + 4f_{k+1/2} + f_{k+1}) - J_{k+1}^\top\nu_k = 0,\qquad
x_{k+1/2} - \tfrac12(x_k + x_{k+1}) - \tfrac h8(f_k - f_{k+1}) = 0,$$
$$H(t_{k+1}, x_{k+1}) = 0,$$
where $f = (\dot q, \ddot q, \dot\mu)$ is the library's exact constrained dynamics
(`cx.accelerations`: either prescription, any constraint kind, the rank-robust solvers),
$H = (g, c)$ are the position- and velocity-level constraint rows and $J = \partial
H/\partial x$. The rows $H = 0$ at every node keep the solution on the constraint manifold
(the collocation equations alone drift by $O(h^4)$ per interval); the free $\nu_k$ (one
per row) project each collocation step onto it along the normal directions, which keeps
the equations and unknowns in balance (Ascher & Petzold, *Computer Methods for Ordinary
Differential Equations and Differential-Algebraic Equations*, 1998, §10.1; Bordalba,
Schoels, Ros, Porta & Diehl, "Direct collocation methods for trajectory optimization in
constrained robotic systems", IEEE Trans. Robotics 2023). At a solution $\nu_k = O(h^5)$.

The costs are integrated by Simpson's rule; path inequalities hold at nodes and
midpoints. Every constraint of interval $k$ reads only that interval's variables (and the
shared parameters and final time), so the Jacobian and the Hessian of the Lagrangian are
block sparse: each block is one `jax.jacfwd` / Hessian of a per-interval function,
evaluated for all intervals with `vmap`.
"""

import abc
import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._dynamics import _step
from ._ocp import OptimalControlProblem


class AbstractTranscription(eqx.Module):
    """A way of turning an `OptimalControlProblem` into a nonlinear program."""

    @abc.abstractmethod
    def nlp(self, problem: OptimalControlProblem) -> "CollocationNLP":
        """The nonlinear program of `problem`."""


class HermiteSimpson(AbstractTranscription):
    r"""Hermite–Simpson direct collocation on `intervals` equal intervals of $[t_0, t_1]$,
    with the constraint rows imposed at every node (module docstring; docs page
    "Trajectory optimisation"). Fourth order in the state; the control is piecewise
    quadratic (node and midpoint values).

    **Example:** `cx.fit.HermiteSimpson(intervals=50)`
    """

    intervals: int = eqx.field(static=True, default=50)

    def __check_init__(self):
        if not isinstance(self.intervals, int) or self.intervals < 1:
            raise ValueError(f"`intervals` must be a positive int, got {self.intervals!r}")

    def nlp(self, problem: OptimalControlProblem) -> "CollocationNLP":
        if not isinstance(problem, OptimalControlProblem):
            raise TypeError(
                f"expected a cx.fit.OptimalControlProblem, got {type(problem).__name__}"
            )
        return CollocationNLP(problem, self.intervals)


class _Sizes(NamedTuple):
    N: int  # intervals
    s: int  # state size
    nu: int  # controls
    r: int  # manifold rows (position rows, then velocity rows)
    nsh: int  # shared variables: optimised parameters, then the final time if free
    npath: int
    nterm: int
    r0: int  # manifold rows imposed at node 0 (0 if the initial state is fixed)


class _Layout(NamedTuple):
    """Index arrays of the decision vector and of the constraint vector (numpy)."""

    nz: int
    offsets: dict
    interval_vars: np.ndarray  # (N, w + nsh)
    boundary_vars: np.ndarray  # (1, wb + nsh)
    point_vars: np.ndarray  # (2N + 1, s + nu + nsh): nodes, then midpoints
    node_vars: np.ndarray  # (N, s + nu + r + nsh): node k+1 with nu_k
    interval_rows: int
    boundary_rows: int
    nc: int
    jac_rows: np.ndarray
    jac_cols: np.ndarray
    hess_rows: np.ndarray  # unique lower-triangle pairs
    hess_cols: np.ndarray
    hess_keep: tuple  # per Hessian block, the positions kept (lower triangle)
    hess_segments: np.ndarray  # per kept entry: its unique pair


@functools.lru_cache(maxsize=32)
def _layout(z: _Sizes) -> _Layout:
    N, s, nu, r, nsh = z.N, z.s, z.nu, z.r, z.nsh
    off = {}
    k = 0
    for name, size in (
        ("X", (N + 1) * s),
        ("Xm", N * s),
        ("U", (N + 1) * nu),
        ("Um", N * nu),
        ("V", N * r),
        ("shared", nsh),
    ):
        off[name] = k
        k += size
    nz = k
    i = np.arange(N)[:, None]
    shared = off["shared"] + np.arange(nsh)
    interval_vars = np.concatenate(
        [
            off["X"] + i * s + np.arange(s),
            off["Xm"] + i * s + np.arange(s),
            off["X"] + (i + 1) * s + np.arange(s),
            off["U"] + i * nu + np.arange(nu),
            off["Um"] + i * nu + np.arange(nu),
            off["U"] + (i + 1) * nu + np.arange(nu),
            off["V"] + i * r + np.arange(r),
            np.broadcast_to(shared, (N, nsh)),
        ],
        axis=1,
    )
    boundary_vars = np.concatenate(
        [
            off["X"] + np.arange(s),
            off["X"] + N * s + np.arange(s),
            off["U"] + N * nu + np.arange(nu),
            shared,
        ]
    )[None]
    R = 2 * s + r + 2 * z.npath
    Rb = z.nterm + z.npath + z.r0
    rows_int = np.arange(N * R).reshape(N, R)
    rows_bnd = N * R + np.arange(Rb).reshape(1, Rb)
    jr, jc = [], []
    for rows, cols in ((rows_int, interval_vars), (rows_bnd, boundary_vars)):
        jr.append(np.broadcast_to(rows[:, :, None], rows.shape + cols.shape[1:]).ravel())
        jc.append(np.broadcast_to(cols[:, None, :], rows.shape + cols.shape[1:]).ravel())
    # Hessian blocks: the points (nodes, then midpoints: x, u, shared), the manifold terms
    # of nodes 1..N (x_k, u_k, nu_{k-1}, shared) and the boundary block.
    j = np.arange(N + 1)[:, None]
    point_vars = np.concatenate(
        [
            np.concatenate(
                [off["X"] + j * s + np.arange(s), off["U"] + j * nu + np.arange(nu)], axis=1
            ),
            np.concatenate(
                [off["Xm"] + i * s + np.arange(s), off["Um"] + i * nu + np.arange(nu)], axis=1
            ),
        ]
    )
    point_vars = np.concatenate([point_vars, np.broadcast_to(shared, (2 * N + 1, nsh))], axis=1)
    node_vars = np.concatenate(
        [
            off["X"] + (i + 1) * s + np.arange(s),
            off["U"] + (i + 1) * nu + np.arange(nu),
            off["V"] + i * r + np.arange(r),
            np.broadcast_to(shared, (N, nsh)),
        ],
        axis=1,
    )
    hr, hc, keep = [], [], []
    for cols in (point_vars, node_vars, boundary_vars):
        a = np.broadcast_to(cols[:, :, None], cols.shape + cols.shape[1:]).ravel()
        b = np.broadcast_to(cols[:, None, :], cols.shape + cols.shape[1:]).ravel()
        kept = np.flatnonzero(a >= b)
        keep.append(kept)
        hr.append(a[kept])
        hc.append(b[kept])
    hr, hc = np.concatenate(hr), np.concatenate(hc)
    pairs, segments = np.unique(hr.astype(np.int64) * nz + hc, return_inverse=True)
    return _Layout(
        nz=nz,
        offsets=off,
        interval_vars=interval_vars,
        boundary_vars=boundary_vars,
        point_vars=point_vars,
        node_vars=node_vars,
        interval_rows=R,
        boundary_rows=Rb,
        nc=N * R + Rb,
        jac_rows=np.concatenate(jr),
        jac_cols=np.concatenate(jc),
        hess_rows=pairs // nz,
        hess_cols=pairs % nz,
        hess_keep=tuple(keep),
        hess_segments=segments.ravel(),
    )


class CollocationNLP(eqx.Module):
    r"""The nonlinear program of a Hermite–Simpson transcription: flat decision vector
    $z$, objective, constraints $c_l \le c(z) \le c_u$, bounds $z_l \le z \le z_u$, and the
    sparse Jacobian and Hessian of the Lagrangian as values on fixed structures."""

    problem: OptimalControlProblem
    N: int = eqx.field(static=True)

    # -- sizes and layout ---------------------------------------------------------------
    @property
    def sizes(self) -> _Sizes:
        pr = self.problem
        fixed0 = pr.q0 is not None and pr.qd0 is not None
        r = pr.h + pr.m
        nsh = int(pr.optimised_parameters(pr.params).shape[0]) + int(pr.free_time)
        return _Sizes(
            self.N, pr.state_size, pr.nu, r, nsh, pr.n_path, pr.n_terminal, 0 if fixed0 else r
        )

    @property
    def layout(self) -> _Layout:
        return _layout(self.sizes)

    def taus(self) -> np.ndarray:
        """Normalised node times $\\tau_k = k/N$."""
        return np.linspace(0.0, 1.0, self.N + 1)

    def unpack(self, z: Float[Array, " nz"]) -> dict:
        """Named views of the decision vector: `X (N+1, s)`, `Xm (N, s)`, `U (N+1, nu)`,
        `Um (N, nu)`, `V (N, r)`, `shared (nsh,)`."""
        S, off = self.sizes, self.layout.offsets
        N, s, nu, r = S.N, S.s, S.nu, S.r
        take = lambda name, rows, cols: z[off[name] : off[name] + rows * cols].reshape(rows, cols)
        return dict(
            X=take("X", N + 1, s),
            Xm=take("Xm", N, s),
            U=take("U", N + 1, nu),
            Um=take("Um", N, nu),
            V=take("V", N, r),
            shared=z[off["shared"] : off["shared"] + S.nsh],
        )

    def final_time(self, shared) -> Array:
        return shared[-1] if self.problem.free_time else self.problem.t1

    def parameters(self, shared) -> Array:
        return shared[:-1] if self.problem.free_time else shared

    # -- the pieces ----------------------------------------------------------------------
    def field(self, t, x, u, shared) -> Float[Array, " s"]:
        r"""$f(t, x, u) = (\dot q, \ddot q[, \dot\mu])$ of the constrained dynamics."""
        pr = self.problem
        n = pr.n
        q, qd = x[:n], x[n : 2 * n]
        mu = x[2 * n :] if pr.prescription.multiplier_state else None
        p = pr.params_at(self.parameters(shared), u)
        step = _step(
            pr.system,
            pr.prescription,
            pr.constraint_solver,
            None,
            t,
            q,
            qd,
            mu,
            p,
            np.asarray(pr.mask, dtype=bool),
        )
        parts = [qd, step.qdd] + ([step.lam] if mu is not None else [])
        return jnp.concatenate(parts)

    def _manifold(self, t, x, u, shared):
        pr = self.problem
        n = pr.n
        p = pr.params_at(self.parameters(shared), u)
        return pr.manifold_rows(t, x[:n], x[n : 2 * n], p)

    def _path(self, t, x, u, shared):
        pr = self.problem
        if pr.path_constraint is None:
            return jnp.zeros((0,), x.dtype)
        n = pr.n
        p = pr.params_at(self.parameters(shared), u)
        return jnp.atleast_1d(pr.path_constraint(t, x[:n], x[n : 2 * n], u, p)).astype(x.dtype)

    def _split_point(self, y):
        S = self.sizes
        return jnp.split(y, np.cumsum([S.s, S.nu]))

    def _time(self, tau, shared):
        t0 = self.problem.t0
        return t0 + tau * (self.final_time(shared) - t0)

    def _step_length(self, shared):
        return (self.final_time(shared) - self.problem.t0) / self.N

    def point(self, y, tau) -> tuple[Array, Array]:
        """$(f, h)$ at one node or midpoint from its variables `y = (x, u, shared)`."""
        x, u, shared = self._split_point(y)
        t = self._time(tau, shared)
        return self.field(t, x, u, shared), self._path(t, x, u, shared)

    def running(self, y, tau) -> Array:
        r"""$\ell$ at one node or midpoint."""
        pr = self.problem
        x, u, shared = self._split_point(y)
        if pr.running_cost is None:
            return jnp.zeros((), y.dtype)
        t = self._time(tau, shared)
        p = pr.params_at(self.parameters(shared), u)
        n = pr.n
        return jnp.asarray(pr.running_cost(t, x[:n], x[n : 2 * n], u, p), y.dtype)

    def _projection(self, tau1, x1, u1, nu_k, shared):
        r"""$(H(x_{k+1}), J(x_{k+1})^\top\nu_k)$, the latter zero in the $\mu$ slots."""
        t1 = self._time(tau1, shared)
        H1, pullback = jax.vjp(lambda y: self._manifold(t1, y, u1, shared), x1)
        (proj,) = pullback(nu_k)
        return H1, proj.at[2 * self.problem.n :].set(0.0)

    def interval(self, v, tau0, tau1, f0, fm, f1, h0, hm) -> Array:
        """The constraint rows of one interval from its local variables `v` and the
        field and path values at its two nodes and its midpoint."""
        S = self.sizes
        s, nu, r = S.s, S.nu, S.r
        x0, xm, x1, _, _, u1, nu_k, shared = jnp.split(v, np.cumsum([s, s, s, nu, nu, nu, r]))
        h = self._step_length(shared)
        H1, proj = self._projection(tau1, x1, u1, nu_k, shared)
        simpson = x1 - x0 - h / 6.0 * (f0 + 4.0 * fm + f1) - proj
        hermite = xm - 0.5 * (x0 + x1) - h / 8.0 * (f0 - f1)
        return jnp.concatenate([simpson, hermite, H1, h0, hm])

    def boundary(self, v) -> tuple[Array, Array]:
        """(terminal cost, terminal rows, path rows at $t_1$, manifold rows at $t_0$)."""
        pr, S = self.problem, self.sizes
        s, nu, n = S.s, S.nu, pr.n
        x0, x1, u1, shared = jnp.split(v, np.cumsum([s, s, nu]))
        T = self.final_time(shared)
        p = pr.params_at(self.parameters(shared), u1)
        cost = jnp.zeros((), v.dtype)
        if pr.terminal_cost is not None:
            cost = jnp.asarray(pr.terminal_cost(T, x1[:n], x1[n : 2 * n], p), v.dtype)
        rows = []
        if pr.terminal_constraint is not None:
            rows.append(jnp.atleast_1d(pr.terminal_constraint(T, x1[:n], x1[n : 2 * n], p)))
        rows.append(self._path(T, x1, u1, shared))
        if S.r0:
            t0 = jnp.asarray(pr.t0, v.dtype)
            rows.append(self._manifold(t0, x0, jnp.zeros(nu, v.dtype), shared))
        return cost, jnp.concatenate([jnp.asarray(x, v.dtype) for x in rows])

    # -- the program ---------------------------------------------------------------------
    def _points(self, z):
        """Variables `(2N+1, s+nu+nsh)` and normalised times of the nodes, then midpoints."""
        taus = jnp.asarray(self.taus(), z.dtype)
        return z[self.layout.point_vars], jnp.concatenate([taus, 0.5 * (taus[:-1] + taus[1:])])

    def _simpson_weights(self, dtype):
        """Simpson's weights of the points (nodes, then midpoints), in units of $h$."""
        w = np.full(self.N + 1, 2.0 / 6.0)
        w[[0, -1]] = 1.0 / 6.0
        return jnp.asarray(np.concatenate([w, np.full(self.N, 4.0 / 6.0)]), dtype)

    def _intervals(self, z, F, P):
        """The interval rows, for all intervals, from the point values `F`, `P`."""
        N = self.N
        taus = jnp.asarray(self.taus(), z.dtype)
        Vi = z[self.layout.interval_vars]
        return jax.vmap(self.interval)(
            Vi, taus[:-1], taus[1:], F[:N], F[N + 1 :], F[1 : N + 1], P[:N], P[N + 1 :]
        )

    def objective(self, z) -> Float[Array, ""]:
        Y, taus = self._points(z)
        shared = z[self.layout.offsets["shared"] :]
        running = jax.vmap(self.running)(Y, taus)
        h = self._step_length(shared)
        cost_b, _ = self.boundary(z[self.layout.boundary_vars[0]])
        return h * (self._simpson_weights(z.dtype) @ running) + cost_b

    def constraints(self, z) -> Float[Array, " nc"]:
        Y, taus = self._points(z)
        F, P = jax.vmap(self.point)(Y, taus)
        rows = self._intervals(z, F, P)
        _, rb = self.boundary(z[self.layout.boundary_vars[0]])
        return jnp.concatenate([rows.ravel(), rb])

    def jacobian_values(self, z) -> Float[Array, " nnz"]:
        r"""Values on `layout.jac_rows`, `layout.jac_cols`.

        The dynamics are differentiated once per point (`jax.jacfwd` of $(f, h)$ in the
        point's variables, `vmap`-ed over the $2N+1$ points); the interval rows are then
        differentiated with the point values replaced by their tangent-linear model
        $f + J_f(y - \bar y)$, which has the same first derivatives."""
        L = self.layout
        N = self.N
        Y, taus = self._points(z)
        (F, P), (JF, JP) = jax.vmap(
            lambda y, tau: (self.point(y, tau), jax.jacfwd(self.point)(y, tau))
        )(Y, taus)
        taus_n = jnp.asarray(self.taus(), z.dtype)
        S = self.sizes
        s, nu, r = S.s, S.nu, S.r
        cuts = np.cumsum([s, s, s, nu, nu, nu, r])

        def rows(v, ta, tb, ybar, fbar, pbar, jf, jp):
            x0, xm, x1, u0, um, u1, _, shared = jnp.split(v, cuts)
            y = jnp.stack(
                [jnp.concatenate([x, u, shared]) for x, u in ((x0, u0), (xm, um), (x1, u1))]
            )
            dy = y - ybar
            f = fbar + jnp.einsum("pij,pj->pi", jf, dy)
            p = pbar + jnp.einsum("pij,pj->pi", jp, dy)
            return self.interval(v, ta, tb, f[0], f[1], f[2], p[0], p[1])

        pick = lambda A: jnp.stack([A[:N], A[N + 1 :], A[1 : N + 1]], axis=1)
        Ji = jax.vmap(jax.jacfwd(rows))(
            z[L.interval_vars],
            taus_n[:-1],
            taus_n[1:],
            pick(Y),
            pick(F),
            pick(P),
            pick(JF),
            pick(JP),
        )
        Jb = jax.jacfwd(lambda v: self.boundary(v)[1])(z[L.boundary_vars[0]])
        return jnp.concatenate([Ji.ravel(), Jb.ravel()])

    def hessian_values(self, z, lagrange, obj_factor) -> Float[Array, " nnzh"]:
        r"""Values of $\sigma\nabla^2 J + \sum_i\lambda_i\nabla^2 c_i$ on the unique
        lower-triangle pairs `layout.hess_rows`, `layout.hess_cols`.

        The collocation rows are linear in the states except through $h f$ at the points
        and the projection at the nodes, so the Hessian is a sum of small blocks: at each
        point, of $h(w_p\cdot f_p + \sigma c_p\ell_p) + \lambda_{h,p}\cdot h_p$ in
        $(x_p, u_p, \text{shared})$, with $w_p$ the multipliers of the collocation rows
        that read $f_p$ and $c_p$ Simpson's weight; at each node, of the manifold rows and
        the projection; and of the boundary block."""
        L, S = self.layout, self.sizes
        N, R, s, r, npath = self.N, L.interval_rows, S.s, S.r, S.npath
        li = lagrange[: N * R].reshape(N, R)
        lb = lagrange[N * R :]
        ls, lh = li[:, :s], li[:, s : 2 * s]
        lH = li[:, 2 * s : 2 * s + r]
        lp0, lpm = li[:, 2 * s + r : 2 * s + r + npath], li[:, 2 * s + r + npath :]
        zero_s = jnp.zeros((1, s), z.dtype)
        # Weights of f at the nodes (as the left and the right end of an interval) and at
        # the midpoints: simpson = ... - h/6 (f0 + 4 fm + f1), hermite = ... - h/8 (f0 - f1).
        w_left = jnp.concatenate([-ls / 6.0 - lh / 8.0, zero_s])
        w_right = jnp.concatenate([zero_s, -ls / 6.0 + lh / 8.0])
        W = jnp.concatenate([w_left + w_right, -4.0 * ls / 6.0])
        lam_path = jnp.concatenate([lp0, jnp.zeros((1, npath), z.dtype), lpm])
        Y, taus = self._points(z)
        c = self._simpson_weights(z.dtype)

        def lag_point(y, tau, w, lp, cp):
            f, path = self.point(y, tau)
            shared = self._split_point(y)[2]
            h = self._step_length(shared)
            return h * (w @ f + obj_factor * cp * self.running(y, tau)) + lp @ path

        cuts = np.cumsum([s, S.nu, r])

        def lag_node(v, tau1, lam_H, lam_s):
            x1, u1, nu_k, shared = jnp.split(v, cuts)
            H1, proj = self._projection(tau1, x1, u1, nu_k, shared)
            return lam_H @ H1 - lam_s @ proj

        def lag_boundary(v):
            cost, rows = self.boundary(v)
            return obj_factor * cost + lb @ rows

        hess = lambda fn: jax.jacfwd(jax.grad(fn))
        taus_n = jnp.asarray(self.taus(), z.dtype)
        Hp = jax.vmap(hess(lag_point))(Y, taus, W, lam_path, c).ravel()[L.hess_keep[0]]
        Hn = jax.vmap(hess(lag_node))(z[L.node_vars], taus_n[1:], lH, ls).ravel()
        Hb = hess(lag_boundary)(z[L.boundary_vars[0]]).ravel()[L.hess_keep[2]]
        values = jnp.concatenate([Hp, Hn[L.hess_keep[1]], Hb])
        return jax.ops.segment_sum(values, L.hess_segments, num_segments=L.hess_rows.shape[0])

    # -- bounds, names, guesses (numpy, outside jit) --------------------------------------
    def variable_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        pr, S, L = self.problem, self.sizes, self.layout
        N, s, n = S.N, S.s, pr.n
        lo, hi = np.full(L.nz, -np.inf), np.full(L.nz, np.inf)
        B = pr.bounds
        state_lo = np.concatenate([B["q"][0], B["qd"][0], np.full(s - 2 * n, -np.inf)])
        state_hi = np.concatenate([B["q"][1], B["qd"][1], np.full(s - 2 * n, np.inf)])
        X = slice(L.offsets["X"], L.offsets["Xm"] + N * s)  # node and midpoint states
        lo[X], hi[X] = np.tile(state_lo, 2 * N + 1), np.tile(state_hi, 2 * N + 1)
        U = slice(L.offsets["U"], L.offsets["V"])
        lo[U], hi[U] = np.tile(B["u"][0], 2 * N + 1), np.tile(B["u"][1], 2 * N + 1)
        fixed = [(0, 0, pr.q0), (0, n, pr.qd0), (N, 0, pr.q1), (N, n, pr.qd1)]
        if pr.mu0 is not None:
            fixed.append((0, 2 * n, pr.mu0))
        for node, start, value in fixed:
            if value is not None:
                i = L.offsets["X"] + node * s + start
                lo[i : i + value.shape[0]] = hi[i : i + value.shape[0]] = np.asarray(value)
        sh = L.offsets["shared"]
        if pr.parameters is not None:
            k = S.nsh - int(pr.free_time)
            lo[sh : sh + k], hi[sh : sh + k] = pr.bounds["parameters"]
        if pr.free_time:
            lo[L.nz - 1], hi[L.nz - 1] = pr.bounds["t1"]
        return lo, hi

    def constraint_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        S, L = self.sizes, self.layout
        lo, hi = np.zeros(L.nc), np.zeros(L.nc)
        path = np.zeros(L.interval_rows, bool)
        path[2 * S.s + S.r :] = True
        path = np.concatenate([np.tile(path, S.N), np.zeros(L.boundary_rows, bool)])
        path[S.N * L.interval_rows + S.nterm : S.N * L.interval_rows + S.nterm + S.npath] = True
        lo[path] = -np.inf
        return lo, hi

    def constraint_names(self) -> list[str]:
        pr, S = self.problem, self.sizes
        state = [f"q[{i}]" for i in range(pr.n)] + [f"qd[{i}]" for i in range(pr.n)]
        state += [f"mu[{i}]" for i in range(S.s - 2 * pr.n)]
        manifold = pr.manifold_names()
        names = []
        for k in range(S.N):
            names += [f"collocation (interval {k}) {x}" for x in state]
            names += [f"hermite midpoint (interval {k}) {x}" for x in state]
            names += [f"constraint {row} at node {k + 1}" for row in manifold]
            names += [f"path_constraint[{j}] at node {k}" for j in range(S.npath)]
            names += [f"path_constraint[{j}] at midpoint {k}" for j in range(S.npath)]
        names += [f"terminal_constraint[{j}]" for j in range(S.nterm)]
        names += [f"path_constraint[{j}] at node {S.N}" for j in range(S.npath)]
        if S.r0:
            names += [f"constraint {row} at node 0" for row in manifold]
        return names

    def variable_names(self) -> list[str]:
        pr, S = self.problem, self.sizes
        state = [f"q[{i}]" for i in range(pr.n)] + [f"qd[{i}]" for i in range(pr.n)]
        state += [f"mu[{i}]" for i in range(S.s - 2 * pr.n)]
        names = [f"{x} at node {k}" for k in range(S.N + 1) for x in state]
        names += [f"{x} at midpoint {k}" for k in range(S.N) for x in state]
        names += [f"u[{j}] at node {k}" for k in range(S.N + 1) for j in range(S.nu)]
        names += [f"u[{j}] at midpoint {k}" for k in range(S.N) for j in range(S.nu)]
        names += [f"projection nu[{j}] (interval {k})" for k in range(S.N) for j in range(S.r)]
        names += [f"parameter[{j}]" for j in range(S.nsh - int(pr.free_time))]
        if pr.free_time:
            names.append("t1")
        return names

    def pack(self, X, Xm, U, Um, V=None, shared=None) -> np.ndarray:
        """The decision vector from its parts (numpy); `V` defaults to zeros, `shared` to
        the problem's parameters and `t1`."""
        S = self.sizes
        pr = self.problem
        if V is None:
            V = np.zeros((S.N, S.r))
        if shared is None:
            parts = [np.asarray(pr.optimised_parameters(pr.params))]
            if pr.free_time:
                parts.append(np.asarray(pr.t1)[None])
            shared = np.concatenate(parts) if parts else np.zeros(0)
        return np.concatenate(
            [np.ravel(np.asarray(a, dtype=np.float64)) for a in (X, Xm, U, Um, V, shared)]
        )
