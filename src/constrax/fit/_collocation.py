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
Differential Equations and Differential-Algebraic Equations*, 1998, ch. 9–10; Bordalba,
Schoels, Ros, Porta & Diehl, "Direct collocation methods for trajectory optimization in
constrained robotic systems", IEEE Trans. Robotics 2023). At a solution $\nu_k = O(h^5)$.

The costs are integrated by Simpson's rule; path inequalities hold at nodes and
midpoints. Every constraint of interval $k$ reads only that interval's variables (and the
shared parameters and final time), so the Jacobian and the Hessian of the Lagrangian are
block sparse: each block is one `jax.jacfwd` / Hessian of a per-interval function,
evaluated for all intervals with `vmap`.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._ocp import OptimalControlProblem
from ._transcription import (
    AbstractNLP,
    AbstractTranscription,
    Layout,
    Sizes,
    build_layout,
)


class HermiteSimpson(AbstractTranscription):
    r"""Hermite–Simpson direct collocation on `intervals` equal intervals of $[t_0, t_1]$,
    with the constraint rows imposed at every node (module docstring; docs page
    "Trajectory optimisation"). Fourth order in the state; the control is piecewise
    quadratic (node and midpoint values).

    **Example:** `cx.fit.HermiteSimpson(intervals=50)`
    """

    intervals: int = eqx.field(static=True, default=50)
    exact_hessian = True

    def __check_init__(self):
        if not isinstance(self.intervals, int) or self.intervals < 1:
            raise ValueError(f"`intervals` must be a positive int, got {self.intervals!r}")

    def nlp(self, problem: OptimalControlProblem) -> "CollocationNLP":
        if not isinstance(problem, OptimalControlProblem):
            raise TypeError(
                f"expected a cx.fit.OptimalControlProblem, got {type(problem).__name__}"
            )
        return CollocationNLP(problem, self.intervals)


def _parts(z: Sizes):
    N, s, nu, r = z.N, z.s, z.nu, z.r
    return [
        ("X", (N + 1) * s),
        ("Xm", N * s),
        ("U", (N + 1) * nu),
        ("Um", N * nu),
        ("V", N * r),
        ("shared", z.nsh),
    ]


@functools.lru_cache(maxsize=32)
def _layout(z: Sizes) -> Layout:
    """Index blocks: `interval` (N, 3s + 3nu + r + nsh) the variables of each interval's
    rows; `point` (2N + 1, s + nu + nsh) the nodes then the midpoints; `node` (N,
    s + nu + r + nsh) node k+1 with nu_k, for the constraint rows and projection."""
    N, s, nu, r, nsh = z.N, z.s, z.nu, z.r, z.nsh
    i = np.arange(N)[:, None]
    j = np.arange(N + 1)[:, None]
    shared = lambda off, k: np.broadcast_to(off["shared"] + np.arange(nsh), (k, nsh))
    state = lambda off, name, k: off[name] + k * s + np.arange(s)
    control = lambda off, name, k: off[name] + k * nu + np.arange(nu)
    interval = lambda off: np.concatenate(
        [
            state(off, "X", i),
            state(off, "Xm", i),
            state(off, "X", i + 1),
            control(off, "U", i),
            control(off, "Um", i),
            control(off, "U", i + 1),
            off["V"] + i * r + np.arange(r),
            shared(off, N),
        ],
        axis=1,
    )
    point = lambda off: np.concatenate(
        [
            np.concatenate([state(off, "X", j), control(off, "U", j)], 1),
            np.concatenate([state(off, "Xm", i), control(off, "Um", i)], 1),
        ]
    )
    node = lambda off: np.concatenate(
        [state(off, "X", i + 1), control(off, "U", i + 1), off["V"] + i * r + np.arange(r),
         shared(off, N)],
        axis=1,
    )  # fmt: skip
    points = lambda off: np.concatenate([point(off), shared(off, 2 * N + 1)], axis=1)
    R = 2 * s + r + 2 * z.npath
    blocks = dict(interval=interval, point=points, node=node)
    return build_layout(z, _parts(z), R, blocks, step="interval", hessian=("point", "node"))


class CollocationNLP(AbstractNLP):
    """The nonlinear program of a Hermite–Simpson transcription (module docstring)."""

    @property
    def layout(self) -> Layout:
        return _layout(self.sizes)

    # -- the pieces ----------------------------------------------------------------------
    def _split_point(self, y):
        S = self.sizes
        return jnp.split(y, np.cumsum([S.s, S.nu]))

    def point(self, y, tau) -> tuple[Array, Array]:
        """$(f, h)$ at one node or midpoint from its variables `y = (x, u, shared)`."""
        x, u, shared = self._split_point(y)
        t = self.time(tau, shared)
        return self.field(t, x, u, shared), self.path(t, x, u, shared)

    def point_running(self, y, tau) -> Array:
        r"""$\ell$ at one node or midpoint."""
        x, u, shared = self._split_point(y)
        return self.running(self.time(tau, shared), x, u, shared)

    def interval(self, v, tau0, tau1, f0, fm, f1, h0, hm) -> Array:
        """The constraint rows of one interval from its local variables `v` and the
        field and path values at its two nodes and its midpoint."""
        S = self.sizes
        s, nu, r = S.s, S.nu, S.r
        x0, xm, x1, _, _, u1, nu_k, shared = jnp.split(v, np.cumsum([s, s, s, nu, nu, nu, r]))
        h = self.step_length(shared)
        H1, proj = self.projection(tau1, x1, u1, nu_k, shared)
        simpson = x1 - x0 - h / 6.0 * (f0 + 4.0 * fm + f1) - proj
        hermite = xm - 0.5 * (x0 + x1) - h / 8.0 * (f0 - f1)
        return jnp.concatenate([simpson, hermite, H1, h0, hm])

    # -- the program ---------------------------------------------------------------------
    def _points(self, z):
        """Variables `(2N+1, s+nu+nsh)` and normalised times of the nodes, then midpoints."""
        taus = jnp.asarray(self.taus(), z.dtype)
        return z[self.layout.vars["point"]], jnp.concatenate([taus, 0.5 * (taus[:-1] + taus[1:])])

    def _simpson_weights(self, dtype):
        """Simpson's weights of the points (nodes, then midpoints), in units of $h$."""
        w = np.full(self.N + 1, 2.0 / 6.0)
        w[[0, -1]] = 1.0 / 6.0
        return jnp.asarray(np.concatenate([w, np.full(self.N, 4.0 / 6.0)]), dtype)

    def _intervals(self, z, F, P):
        """The interval rows, for all intervals, from the point values `F`, `P`."""
        N = self.N
        taus = jnp.asarray(self.taus(), z.dtype)
        Vi = z[self.layout.vars["interval"]]
        return jax.vmap(self.interval)(
            Vi, taus[:-1], taus[1:], F[:N], F[N + 1 :], F[1 : N + 1], P[:N], P[N + 1 :]
        )

    def objective(self, z) -> Float[Array, ""]:
        Y, taus = self._points(z)
        shared = z[self.layout.offsets["shared"] :]
        running = jax.vmap(self.point_running)(Y, taus)
        h = self.step_length(shared)
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
            z[L.vars["interval"]],
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
        N, R, s, r, npath = self.N, L.step_rows, S.s, S.r, S.npath
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
            h = self.step_length(shared)
            return h * (w @ f + obj_factor * cp * self.point_running(y, tau)) + lp @ path

        cuts = np.cumsum([s, S.nu, r])

        def lag_node(v, tau1, lam_H, lam_s):
            x1, u1, nu_k, shared = jnp.split(v, cuts)
            H1, proj = self.projection(tau1, x1, u1, nu_k, shared)
            return lam_H @ H1 - lam_s @ proj

        def lag_boundary(v):
            cost, rows = self.boundary(v)
            return obj_factor * cost + lb @ rows

        hess = lambda fn: jax.jacfwd(jax.grad(fn))
        taus_n = jnp.asarray(self.taus(), z.dtype)
        Hp = jax.vmap(hess(lag_point))(Y, taus, W, lam_path, c).ravel()[L.hess_keep[0]]
        Hn = jax.vmap(hess(lag_node))(z[L.vars["node"]], taus_n[1:], lH, ls).ravel()
        Hb = hess(lag_boundary)(z[L.boundary_vars[0]]).ravel()[L.hess_keep[2]]
        values = jnp.concatenate([Hp, Hn[L.hess_keep[1]], Hb])
        return jax.ops.segment_sum(values, L.hess_segments, num_segments=L.hess_rows.shape[0])

    # -- rows, guesses and controls (numpy, outside jit) ----------------------------------
    def step_row_kinds(self):
        S = self.sizes
        return [("equality", 2 * S.s), ("manifold", S.r), ("path", 2 * S.npath)]

    def step_row_names(self, k: int) -> list[str]:
        state, S = self.state_names(), self.sizes
        return (
            [f"collocation (interval {k}) {x}" for x in state]
            + [f"hermite midpoint (interval {k}) {x}" for x in state]
            + [f"constraint {row} at node {k + 1}" for row in self.problem.manifold_names()]
            + [f"path_constraint[{j}] at node {k}" for j in range(S.npath)]
            + [f"path_constraint[{j}] at midpoint {k}" for j in range(S.npath)]
        )

    def from_samples(self, X_at, U_at) -> np.ndarray:
        S = self.sizes
        ts = self.problem.t0 + self.taus() * (float(self.problem.t1) - self.problem.t0)
        tm = 0.5 * (ts[:-1] + ts[1:])
        parts = (X_at(ts), X_at(tm), U_at(ts), U_at(tm), np.zeros((S.N, S.r)))
        return np.concatenate(
            [np.ravel(np.asarray(a, np.float64)) for a in parts] + [self.shared_guess()]
        )

    def controls(self, z):
        S = self.sizes
        return self.part(z, "U", S.N + 1, S.nu), self.part(z, "Um", S.N, S.nu)
