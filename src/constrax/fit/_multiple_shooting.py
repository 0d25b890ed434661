r"""Direct multiple shooting on the constraint manifold (docs page "Trajectory
optimisation").

The horizon is split into $N$ equal segments; on segment $k$ the control is linear
between its node values $u_k$, $u_{k+1}$, and the constrained dynamics are integrated by
diffrax from the free node state $x_k$ (Bock & Plitt, "A multiple shooting algorithm for
direct solution of optimal control problems", IFAC 1984):
$$x_{k+1} - \Phi_k(x_k, u_k, u_{k+1}) - J(x_{k+1})^\top\nu_k = 0,\qquad
H(t_{k+1}, x_{k+1}) = 0,$$
with the running cost integrated along with the state. The constraint rows $H = (g, c)$
hold at every node and the free $\nu_k$ project the continuity equations along their
normals (`_transcription.py`). The integration is a fixed number of steps of a diffrax
solver, its steps taken in a `lax.scan`, so the objective's gradient, the Jacobian and the Hessian
are the exact derivatives of the discrete map: each block one `jax.jacfwd` / Hessian of a
per-segment function, evaluated for all segments with `vmap`. Path
inequalities hold at the nodes.
"""

import functools
from collections.abc import Callable

import diffrax
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


class DirectMultipleShooting(AbstractTranscription):
    r"""Direct multiple shooting on `segments` equal segments of $[t_0, t_1]$, each
    integrated by `steps` fixed steps of the diffrax `solver`, with the constraint rows
    imposed at every node (module docstring; docs page "Trajectory optimisation"). The
    control is piecewise linear between the node values.

    **Arguments:**

    - `segments`: number of segments $N$ (default 20).
    - `steps`: integrator steps per segment (default 8).
    - `solver`: a diffrax solver (default `diffrax.Tsit5(scan_kind="bounded")`: a Runge–Kutta
      solver's stages in a plain `lax` loop, which forward mode differentiates).
    - `velocity_basis`: optional `(t, q, p) -> S (n, k)` spanning the kernel of the
      velocity rows: the node states and the integrated state are then $(q, v)$ with
      $\dot q = S v$ ($(q, v, \mu)$ under the vakonomic prescription), moved by Maggi's
      equations, and only the position rows are imposed at the nodes (as for
      `cx.fit.HermiteSimpson`; docs page "Trajectory optimisation", section
      "Quasi-velocities").

    **Example:** `cx.fit.DirectMultipleShooting(segments=25, steps=10)`
    """

    segments: int = eqx.field(static=True, default=20)
    steps: int = eqx.field(static=True, default=8)
    solver: diffrax.AbstractSolver = diffrax.Tsit5(scan_kind="bounded")
    velocity_basis: Callable | None = eqx.field(static=True, default=None)
    exact_hessian = True
    size_name = "segments"

    def __check_init__(self):
        for name in ("segments", "steps"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"`{name}` must be a positive int, got {v!r}")
        if not isinstance(self.solver, diffrax.AbstractSolver):
            raise TypeError(f"`solver` must be a diffrax solver, got {self.solver!r}")
        check_velocity_basis(self.velocity_basis)

    def nlp(self, problem: OptimalControlProblem) -> "ShootingNLP":
        if not isinstance(problem, OptimalControlProblem):
            raise TypeError(
                f"expected a cx.fit.OptimalControlProblem, got {type(problem).__name__}"
            )
        coordinates = node_coordinates(self.velocity_basis, problem)
        return ShootingNLP(problem, self.segments, self.steps, self.solver, coordinates)


def _parts(z: Sizes):
    N, s, nu, r = z.N, z.s, z.nu, z.r
    return [("X", (N + 1) * s), ("U", (N + 1) * nu), ("V", N * r), ("shared", z.nsh)]


@functools.lru_cache(maxsize=32)
def _layout(z: Sizes, x64: bool) -> Layout:
    """Index block `segment` (N, 2s + 2nu + r + nsh): the variables of each segment."""
    N, s, nu, r, nsh = z.N, z.s, z.nu, z.r, z.nsh
    i = np.arange(N)[:, None]
    segment = lambda off: np.concatenate(
        [
            off["X"] + i * s + np.arange(s),
            off["X"] + (i + 1) * s + np.arange(s),
            off["U"] + i * nu + np.arange(nu),
            off["U"] + (i + 1) * nu + np.arange(nu),
            off["V"] + i * r + np.arange(r),
            np.broadcast_to(off["shared"] + np.arange(nsh), (N, nsh)),
        ],
        axis=1,
    )
    R = s + r + z.npath
    return build_layout(
        z, _parts(z), R, dict(segment=segment), step="segment", hessian=("segment",)
    )


class ShootingNLP(AbstractNLP):
    """The nonlinear program of a direct multiple-shooting transcription."""

    steps: int = eqx.field(static=True)
    solver: diffrax.AbstractSolver
    coordinates: AbstractStateCoordinates = Velocities()

    @functools.cached_property
    def layout(self) -> Layout:
        return _layout(self.sizes, x64_enabled())

    def flow(self, tau0, tau1, x0, u0, u1, shared) -> tuple[Array, Array]:
        r"""$(\Phi_k(x_0), \int\ell\,dt)$ over one segment: `steps` fixed steps of the
        solver with the control linear from `u0` to `u1`."""
        ta, tb = self.time(tau0, shared), self.time(tau1, shared)

        def rhs(t, y, args):
            x, _ = y
            u = u0 + (u1 - u0) * (t - ta) / (tb - ta)
            return self.field(t, x, u, shared), self.running(t, x, u, shared)

        # The solver's own steps (`AbstractSolver.step`) in a `lax.scan`: a fixed grid
        # needs none of diffeqsolve's adaptive loop, and compiles in a fraction of it.
        terms = diffrax.ODETerm(rhs)
        dt = (tb - ta) / self.steps
        y0 = (x0, jnp.zeros((), x0.dtype))
        state0 = self.solver.init(terms, ta, ta + dt, y0, None)

        def step(carry, i):
            y, state = carry
            t = ta + i * dt
            y, _, _, state, _ = self.solver.step(terms, t, t + dt, y, None, state, False)
            return (y, state), None

        (y, _), _ = jax.lax.scan(step, (y0, state0), jnp.arange(self.steps, dtype=x0.dtype))
        return y

    def segment(self, v, tau0, tau1) -> tuple[Array, Array]:
        """(running cost, rows) of one segment from its local variables `v`."""
        S = self.sizes
        s, nu, r = S.s, S.nu, S.r
        x0, x1, u0, u1, nu_k, shared = jnp.split(v, np.cumsum([s, s, nu, nu, r]))
        x_end, cost = self.flow(tau0, tau1, x0, u0, u1, shared)
        H1, proj = self.projection(tau1, x1, u1, nu_k, shared)
        path = self.path(self.time(tau0, shared), x0, u0, shared)
        return cost, jnp.concatenate([x1 - x_end - proj, H1, path])

    def _all(self, z):
        L = self.layout
        taus = jnp.asarray(self.taus(), z.dtype)
        costs, rows = jax.vmap(self.segment)(z[L.vars["segment"]], taus[:-1], taus[1:])
        cost_b, rows_b = self.boundary(z[L.boundary_vars[0]])
        return jnp.sum(costs) + cost_b, jnp.concatenate([rows.ravel(), rows_b])

    def objective(self, z) -> Float[Array, ""]:
        return self._all(z)[0]

    def constraints(self, z) -> Float[Array, " nc"]:
        return self._all(z)[1]

    def jacobian_values(self, z) -> Float[Array, " nnz"]:
        L = self.layout
        taus = jnp.asarray(self.taus(), z.dtype)
        rows = lambda v, a, b: self.segment(v, a, b)[1]
        Js = jax.vmap(jax.jacfwd(rows))(z[L.vars["segment"]], taus[:-1], taus[1:])
        Jb = jax.jacfwd(lambda v: self.boundary(v)[1])(z[L.boundary_vars[0]])
        return jnp.concatenate([Js.ravel(), Jb.ravel()])

    def hessian_values(self, z, lagrange, obj_factor) -> Float[Array, " nnzh"]:
        L = self.layout
        N, R = self.N, L.step_rows
        taus = jnp.asarray(self.taus(), z.dtype)
        ls = lagrange[: N * R].reshape(N, R)
        lb = lagrange[N * R :]

        def lag_segment(v, a, b, lam):
            cost, rows = self.segment(v, a, b)
            return obj_factor * cost + lam @ rows

        def lag_boundary(v):
            cost, rows = self.boundary(v)
            return obj_factor * cost + lb @ rows

        hess = lambda fn: jax.jacfwd(jax.grad(fn))
        Hs = jax.vmap(hess(lag_segment))(z[L.vars["segment"]], taus[:-1], taus[1:], ls)
        Hb = hess(lag_boundary)(z[L.boundary_vars[0]])
        values = jnp.concatenate([Hs.ravel()[L.hess_keep[0]], Hb.ravel()[L.hess_keep[1]]])
        return jax.ops.segment_sum(values, L.hess_segments, num_segments=L.hess_rows.shape[0])

    # -- rows, guesses and controls (numpy, outside jit) ----------------------------------
    def step_row_kinds(self):
        S = self.sizes
        return [("equality", S.s), ("manifold", S.r), ("path", S.npath)]

    def step_row_names(self, k: int) -> list[str]:
        state, S = self.state_names(), self.sizes
        return (
            [f"continuity (segment {k}) {x}" for x in state]
            + [f"constraint {row} at node {k + 1}" for row in self.manifold_names()]
            + [f"path_constraint[{j}] at node {k}" for j in range(S.npath)]
        )

    def from_samples(self, X_at, U_at) -> np.ndarray:
        S = self.sizes
        ts = self.problem.t0 + self.taus() * (float(self.problem.t1) - self.problem.t0)
        X = self.coordinates.pack(self.problem, ts, X_at(ts), self.problem.params)
        parts = (X, U_at(ts), np.zeros((S.N, S.r)))
        arrays = [np.ravel(np.asarray(a, np.float64)) for a in parts]
        return np.concatenate(arrays + [self.shared_guess()])

    def controls(self, z):
        S = self.sizes
        U = self.part(z, "U", S.N + 1, S.nu)
        return U, 0.5 * (U[:-1] + U[1:])  # linear on each segment
