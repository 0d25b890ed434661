r"""Direct collocation on the constraint manifold: an `OptimalControlProblem` as a sparse
nonlinear program (docs page "Trajectory optimisation").

On $N$ intervals of length $h = (t_1 - t_0)/N$ the unknowns are the node states $x_k$ and
controls $u_k$ (Hermite–Simpson also the midpoint states $x_{k+1/2}$ and controls
$u_{k+1/2}$), and one projection multiplier vector $\nu_k$ per interval. Each interval
contributes its collocation equations, with $f = (\dot q, \ddot q, \dot\mu)$ the library's
exact constrained dynamics (`cx.accelerations`: either prescription, any constraint kind, the
rank-robust solvers),

- Hermite–Simpson in separated form (Kelly, "An introduction to trajectory optimization",
  SIAM Review 2017, §4; Betts, *Practical Methods for Optimal Control*, 2010, §4.6):
  $$x_{k+1} - x_k - \tfrac h6(f_k + 4f_{k+1/2} + f_{k+1}) - J_{k+1}^\top\nu_k = 0,\qquad
  x_{k+1/2} - \tfrac12(x_k + x_{k+1}) - \tfrac h8(f_k - f_{k+1}) = 0;$$
- the trapezoidal rule (Kelly 2017, §3; Betts 2010, §4.5):
  $$x_{k+1} - x_k - \tfrac h2(f_k + f_{k+1}) - J_{k+1}^\top\nu_k = 0;$$

and the constraint rows at its right node, $H(t_{k+1}, x_{k+1}) = 0$, where $H = (g, c)$ are
the position- and velocity-level rows and $J = \partial H/\partial x$. The rows $H = 0$ at
every node keep the solution on the constraint manifold (the collocation equations alone
drift by the local error per interval); the free $\nu_k$ (one per row) project each
collocation step onto it along the normal directions, which keeps the equations and
unknowns in balance (Ascher & Petzold, *Computer Methods for Ordinary Differential Equations
and Differential-Algebraic Equations*, 1998, ch. 9–10; Bordalba, Schoels, Ros, Porta &
Diehl, "Direct collocation methods for trajectory optimization in constrained robotic
systems", IEEE Trans. Robotics 2023). At a solution $\nu_k$ is of the order of the local
error.

The costs are integrated by the scheme's own quadrature (Simpson's rule, the trapezoidal
rule); path inequalities hold at the collocation points. Every constraint of interval $k$
reads only that interval's variables (and the shared parameters and final time), so the
Jacobian and the Hessian of the Lagrangian are block sparse: each block is one
`jax.jacfwd` / Hessian of a per-interval or per-point function, evaluated for all
intervals or points with `vmap`. A scheme is data on its class (`AbstractCollocationNLP`): whether
it has midpoints, its quadrature weights, its collocation equations as a function of the
states and of $h f$ at the interval's points.
"""

import abc
import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._coordinates import (
    AbstractStateCoordinates,
    Velocities,
    check_velocity_basis,
    node_coordinates,
)
from ._ocp import OptimalControlProblem
from ._transcription import (
    AbstractNLP,
    AbstractTranscription,
    Layout,
    Sizes,
    build_layout,
    x64_enabled,
)


class _AbstractCollocation(AbstractTranscription):
    r"""Direct collocation on `intervals` equal intervals of $[t_0, t_1]$ (module
    docstring): the scheme is the NLP class's.

    `velocity_basis` (optional) is a basis $S(t, q, p)$ `(n, k)` of the kernel of the
    velocity rows (e.g. the knife edge's $[[\cos\theta, 0], [\sin\theta, 0], [0, 1]]$):
    the node state is then $(q, v)$ with $\dot q = S v$ (Maggi's quasi-velocities, moved by
    Maggi's equations; $(q, v, \mu)$ under the vakonomic prescription), only the position
    rows are imposed at the nodes, and the program has the size of a hand-reduced model
    (`QuasiVelocities`; docs page "Trajectory optimisation", section "Quasi-velocities").
    Checked at the nodes of the guess and of the solution."""

    intervals: eqx.AbstractVar[int]
    velocity_basis: eqx.AbstractVar[Callable | None]
    exact_hessian = True
    size_name = "intervals"
    _nlp_class: eqx.AbstractClassVar[type]

    def __check_init__(self):
        if not isinstance(self.intervals, int) or self.intervals < 1:
            raise ValueError(f"`intervals` must be a positive int, got {self.intervals!r}")
        check_velocity_basis(self.velocity_basis)

    def nlp(self, problem: OptimalControlProblem) -> "AbstractCollocationNLP":
        if not isinstance(problem, OptimalControlProblem):
            raise TypeError(
                f"expected a cx.fit.OptimalControlProblem, got {type(problem).__name__}"
            )
        coordinates = node_coordinates(self.velocity_basis, problem)
        return self._nlp_class(problem, self.intervals, coordinates)


def _parts(z: Sizes, midpoints: bool):
    N, s, nu, r = z.N, z.s, z.nu, z.r
    return [
        ("X", (N + 1) * s),
        *([("Xm", N * s)] if midpoints else []),
        ("U", (N + 1) * nu),
        *([("Um", N * nu)] if midpoints else []),
        ("V", N * r),
        ("shared", z.nsh),
    ]


@functools.lru_cache(maxsize=32)
def _layout(z: Sizes, midpoints: bool, defect_rows: int, x64: bool) -> Layout:
    """Index blocks: `interval` (N, P(s + nu) + r + nsh) the variables of each interval's
    rows (the states of its P points, their controls, nu_k, shared); `point` (N + 1 [+ N],
    s + nu + nsh) the nodes then the midpoints; `node` (N, s + nu + r + nsh) node k+1 with
    nu_k, for the constraint rows and the projection."""
    N, s, nu, r, nsh = z.N, z.s, z.nu, z.r, z.nsh
    i = np.arange(N)[:, None]
    j = np.arange(N + 1)[:, None]
    shared = lambda off, k: np.broadcast_to(off["shared"] + np.arange(nsh), (k, nsh))
    state = lambda off, name, k: off[name] + k * s + np.arange(s)
    control = lambda off, name, k: off[name] + k * nu + np.arange(nu)
    # The interval's points in order: left node, [midpoint], right node.
    points = [("X", "U", i), *([("Xm", "Um", i)] if midpoints else []), ("X", "U", i + 1)]
    interval = lambda off: np.concatenate(
        [state(off, x, k) for x, _, k in points]
        + [control(off, u, k) for _, u, k in points]
        + [off["V"] + i * r + np.arange(r), shared(off, N)],
        axis=1,
    )
    point = lambda off: np.concatenate(
        [np.concatenate([state(off, "X", j), control(off, "U", j)], 1)]
        + ([np.concatenate([state(off, "Xm", i), control(off, "Um", i)], 1)] if midpoints else [])
    )
    node = lambda off: np.concatenate(
        [state(off, "X", i + 1), control(off, "U", i + 1), off["V"] + i * r + np.arange(r),
         shared(off, N)],
        axis=1,
    )  # fmt: skip
    P = len(points)
    n_points = N + 1 + (N if midpoints else 0)
    all_points = lambda off: np.concatenate([point(off), shared(off, n_points)], 1)
    R = defect_rows + r + (P - 1) * z.npath
    blocks = dict(interval=interval, point=all_points, node=node)
    return build_layout(
        z, _parts(z, midpoints), R, blocks, step="interval", hessian=("point", "node")
    )


class AbstractCollocationNLP(AbstractNLP):
    """The nonlinear program of a collocation scheme (module docstring). The scheme is
    class data: `midpoints` (whether each interval has a midpoint state and control),
    `quadrature` (the weights of the interval's points, left node, [midpoint], right node,
    in units of $h$), `defect_names` (one group of $s$ rows each) and `defects`."""

    coordinates: AbstractStateCoordinates = Velocities()
    midpoints: eqx.AbstractClassVar[bool]
    quadrature: eqx.AbstractClassVar[tuple[float, ...]]
    defect_names: eqx.AbstractClassVar[tuple[str, ...]]

    @abc.abstractmethod
    def defects(self, xs: Array, hfs: Array) -> Array:
        r"""The collocation equations of one interval (`len(defect_names)` groups of $s$
        rows; the first is the continuity equation, to which the projection is added) from
        the states `xs (P, s)` at its points and $h f$ at them, `hfs (P, s)`: affine in
        `hfs`."""

    @functools.cached_property
    def layout(self) -> Layout:
        return _layout(
            self.sizes, self.midpoints, len(self.defect_names) * self.sizes.s, x64_enabled()
        )

    @property
    def _n_points(self) -> int:
        return 3 if self.midpoints else 2

    def _interval_points(self) -> np.ndarray:
        """`(N, P)`: the indices (in the nodes-then-midpoints order of `_points`) of each
        interval's points, left node, [midpoint], right node."""
        N = self.N
        k = np.arange(N)
        cols = [k] + ([N + 1 + k] if self.midpoints else []) + [k + 1]
        return np.stack(cols, axis=1)

    def _point_weights(self, dtype):
        """The quadrature weights of the points (nodes, then midpoints), in units of $h$."""
        ipts = self._interval_points()
        # Summed with explicit repeats: numpy 2.4's `np.add.at` reads past the end of
        # values broadcast against the indices.
        w = np.bincount(ipts.ravel(), np.tile(self.quadrature, ipts.shape[0]))
        return jnp.asarray(w, dtype)

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

    def _split_interval(self, v):
        """`(xs (P, s), us (P, nu), nu_k, shared)` from an interval's variables."""
        S, P = self.sizes, self._n_points
        parts = jnp.split(v, np.cumsum([S.s] * P + [S.nu] * P + [S.r]))
        return jnp.stack(parts[:P]), jnp.stack(parts[P : 2 * P]), parts[2 * P], parts[2 * P + 1]

    def interval(self, v, tau1, fs, ps) -> Array:
        """The constraint rows of one interval from its local variables `v` and the field
        and path values `fs (P, s)`, `ps (P, npath)` at its points."""
        s = self.sizes.s
        xs, us, nu_k, shared = self._split_interval(v)
        h = self.step_length(shared)
        H1, proj = self.projection(tau1, xs[-1], us[-1], nu_k, shared)
        d = self.defects(xs, h * fs)
        d = jnp.concatenate([d[:s] - proj, d[s:]])
        return jnp.concatenate([d, H1, ps[:-1].ravel()])

    # -- the program ---------------------------------------------------------------------
    def _points(self, z):
        """Variables `(N+1 [+N], s+nu+nsh)` and normalised times of the nodes, then the
        midpoints."""
        taus = jnp.asarray(self.taus(), z.dtype)
        if self.midpoints:
            taus = jnp.concatenate([taus, 0.5 * (taus[:-1] + taus[1:])])
        return z[self.layout.vars["point"]], taus

    def objective(self, z) -> Float[Array, ""]:
        Y, taus = self._points(z)
        shared = z[self.layout.offsets["shared"] :]
        running = jax.vmap(self.point_running)(Y, taus)
        h = self.step_length(shared)
        cost_b, _ = self.boundary(z[self.layout.boundary_vars[0]])
        return h * (self._point_weights(z.dtype) @ running) + cost_b

    def constraints(self, z) -> Float[Array, " nc"]:
        Y, taus = self._points(z)
        F, P = jax.vmap(self.point)(Y, taus)
        ipts = self._interval_points()
        taus_n = jnp.asarray(self.taus(), z.dtype)
        Vi = z[self.layout.vars["interval"]]
        rows = jax.vmap(self.interval)(Vi, taus_n[1:], F[ipts], P[ipts])
        _, rb = self.boundary(z[self.layout.boundary_vars[0]])
        return jnp.concatenate([rows.ravel(), rb])

    def jacobian_values(self, z) -> Float[Array, " nnz"]:
        r"""Values on `layout.jac_rows`, `layout.jac_cols`.

        The dynamics are differentiated once per point (`jax.jacfwd` of $(f, h)$ in the
        point's variables, `vmap`-ed over the points); the interval rows are then
        differentiated with the point values replaced by their tangent-linear model
        $f + J_f(y - \bar y)$, which has the same first derivatives."""
        L = self.layout
        Y, taus = self._points(z)
        (F, P), (JF, JP) = jax.vmap(
            lambda y, tau: (self.point(y, tau), jax.jacfwd(self.point)(y, tau))
        )(Y, taus)
        taus_n = jnp.asarray(self.taus(), z.dtype)

        def rows(v, tb, ybar, fbar, pbar, jf, jp):
            xs, us, _, shared = self._split_interval(v)
            y = jnp.concatenate(
                [xs, us, jnp.broadcast_to(shared, (xs.shape[0], shared.shape[0]))], axis=1
            )
            dy = y - ybar
            f = fbar + jnp.einsum("pij,pj->pi", jf, dy)
            p = pbar + jnp.einsum("pij,pj->pi", jp, dy)
            return self.interval(v, tb, f, p)

        ipts = self._interval_points()
        Ji = jax.vmap(jax.jacfwd(rows))(
            z[L.vars["interval"]], taus_n[1:], Y[ipts], F[ipts], P[ipts], JF[ipts], JP[ipts]
        )
        Jb = jax.jacfwd(lambda v: self.boundary(v)[1])(z[L.boundary_vars[0]])
        return jnp.concatenate([Ji.ravel(), Jb.ravel()])

    def hessian_values(self, z, lagrange, obj_factor) -> Float[Array, " nnzh"]:
        r"""Values of $\sigma\nabla^2 J + \sum_i\lambda_i\nabla^2 c_i$ on the unique
        lower-triangle pairs `layout.hess_rows`, `layout.hess_cols`.

        The collocation rows are affine in the states and in $h f$ at the points, except
        for the projection at the nodes, so the Hessian is a sum of small blocks: at each
        point, of $h(w_p\cdot f_p + \sigma c_p\ell_p) + \lambda_{h,p}\cdot h_p$ in
        $(x_p, u_p, \text{shared})$, with $w_p$ the multipliers of the collocation rows
        pulled back through their (linear) dependence on $h f_p$, summed over the intervals
        that read point $p$, and $c_p$ its quadrature weight; at each node, of the
        manifold rows and the projection; and of the boundary block."""
        L, S = self.layout, self.sizes
        N, R, s, r, npath = self.N, L.step_rows, S.s, S.r, S.npath
        D = len(self.defect_names) * s
        P = self._n_points
        li = lagrange[: N * R].reshape(N, R)
        lb = lagrange[N * R :]
        ld, lH = li[:, :D], li[:, D : D + r]
        lp = li[:, D + r :].reshape(N, P - 1, npath)
        ipts = self._interval_points()
        n_points = ipts.max() + 1
        # The weights of f at the points: the collocation rows pulled back through h f
        # (exact for any primal point: the rows are affine in h f).
        zeros = jnp.zeros((P, s), z.dtype)
        pull = lambda l: jax.vjp(lambda g: self.defects(zeros, g), zeros)[1](l)[0]  # noqa: E731
        W = jnp.zeros((n_points, s), z.dtype).at[ipts].add(jax.vmap(pull)(ld))
        lam_path = jnp.zeros((n_points, npath), z.dtype).at[ipts[:, :-1]].add(lp)
        Y, taus = self._points(z)
        c = self._point_weights(z.dtype)

        def lag_point(y, tau, w, lpath, cp):
            f, path = self.point(y, tau)
            shared = self._split_point(y)[2]
            h = self.step_length(shared)
            return h * (w @ f + obj_factor * cp * self.point_running(y, tau)) + lpath @ path

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
        Hn = jax.vmap(hess(lag_node))(z[L.vars["node"]], taus_n[1:], lH, ld[:, :s]).ravel()
        Hb = hess(lag_boundary)(z[L.boundary_vars[0]]).ravel()[L.hess_keep[2]]
        values = jnp.concatenate([Hp, Hn[L.hess_keep[1]], Hb])
        return jax.ops.segment_sum(values, L.hess_segments, num_segments=L.hess_rows.shape[0])

    # -- rows, guesses and controls (numpy, outside jit) ----------------------------------
    def step_row_kinds(self):
        S = self.sizes
        return [
            ("equality", len(self.defect_names) * S.s),
            ("manifold", S.r),
            ("path", (self._n_points - 1) * S.npath),
        ]

    def step_row_names(self, k: int) -> list[str]:
        state, S = self.state_names(), self.sizes
        at = [f"node {k}"] + ([f"midpoint {k}"] if self.midpoints else [])
        return (
            [f"{name} (interval {k}) {x}" for name in self.defect_names for x in state]
            + [f"constraint {row} at node {k + 1}" for row in self.manifold_names()]
            + [f"path_constraint[{j}] at {where}" for where in at for j in range(S.npath)]
        )

    def from_samples(self, X_at, U_at) -> np.ndarray:
        S = self.sizes
        ts = self.problem.t0 + self.taus() * (float(self.problem.t1) - self.problem.t0)
        tm = 0.5 * (ts[:-1] + ts[1:])
        pack = lambda t: self.coordinates.pack(self.problem, t, X_at(t), self.problem.params)  # noqa: E731
        if self.midpoints:
            parts = (pack(ts), pack(tm), U_at(ts), U_at(tm))
        else:
            parts = (pack(ts), U_at(ts))
        parts += (np.zeros((S.N, S.r)),)
        return np.concatenate(
            [np.ravel(np.asarray(a, np.float64)) for a in parts] + [self.shared_guess()]
        )

    def controls(self, z):
        S = self.sizes
        U = self.part(z, "U", S.N + 1, S.nu)
        if self.midpoints:
            return U, self.part(z, "Um", S.N, S.nu)
        return U, 0.5 * (U[:-1] + U[1:])  # linear on each interval


class HermiteSimpsonNLP(AbstractCollocationNLP):
    """The nonlinear program of a Hermite–Simpson transcription (module docstring)."""

    midpoints = True
    quadrature = (1.0 / 6.0, 4.0 / 6.0, 1.0 / 6.0)  # Simpson's rule
    defect_names = ("collocation", "hermite midpoint")

    def defects(self, xs, hfs):
        (x0, xm, x1), (g0, gm, g1) = xs, hfs
        simpson = x1 - x0 - (g0 + 4.0 * gm + g1) / 6.0
        hermite = xm - 0.5 * (x0 + x1) - (g0 - g1) / 8.0
        return jnp.concatenate([simpson, hermite])


class TrapezoidalNLP(AbstractCollocationNLP):
    """The nonlinear program of a trapezoidal transcription (module docstring)."""

    midpoints = False
    quadrature = (0.5, 0.5)  # the trapezoidal rule
    defect_names = ("collocation",)

    def defects(self, xs, hfs):
        (x0, x1), (g0, g1) = xs, hfs
        return x1 - x0 - 0.5 * (g0 + g1)


class HermiteSimpson(_AbstractCollocation):
    r"""Hermite–Simpson direct collocation on `intervals` equal intervals of $[t_0, t_1]$,
    with the constraint rows imposed at every node (module docstring; docs page
    "Trajectory optimisation"). Fourth order in the state; the control is piecewise
    quadratic (node and midpoint values).

    **Arguments:**

    - `intervals`: number of equal intervals $N$ (default 50).
    - `velocity_basis`: optional `(t, q, p) -> S (n, k)` spanning the kernel of the
      velocity rows: node states $(q, v)$, $\dot q = S v$, checked at the nodes (docs
      page "Trajectory optimisation", section "Quasi-velocities").

    **Example:** `cx.fit.HermiteSimpson(intervals=50)`
    """

    intervals: int = eqx.field(static=True, default=50)
    velocity_basis: Callable | None = eqx.field(static=True, default=None)
    _nlp_class = HermiteSimpsonNLP


class Trapezoidal(_AbstractCollocation):
    r"""Trapezoidal direct collocation on `intervals` equal intervals of $[t_0, t_1]$,
    $x_{k+1} - x_k - \tfrac h2(f_k + f_{k+1}) - J_{k+1}^\top\nu_k = 0$, with the constraint
    rows imposed at every node (module docstring; docs page "Trajectory optimisation").
    Second order in the state; the control is piecewise linear (node values). About half
    the unknowns of `HermiteSimpson` on the same grid (no midpoints) and a third of its
    derivative entries: cheaper per iteration, less accurate per interval (the
    transcription of CasADi's and opty's classic examples, Kelly 2017, §3).

    **Arguments:**

    - `intervals`: number of equal intervals $N$ (default 50).
    - `velocity_basis`: optional `(t, q, p) -> S (n, k)` spanning the kernel of the
      velocity rows: node states $(q, v)$, $\dot q = S v$, checked at the nodes (docs
      page "Trajectory optimisation", section "Quasi-velocities").

    **Example:** `cx.fit.Trapezoidal(intervals=100)`
    """

    intervals: int = eqx.field(static=True, default=50)
    velocity_basis: Callable | None = eqx.field(static=True, default=None)
    _nlp_class = TrapezoidalNLP
