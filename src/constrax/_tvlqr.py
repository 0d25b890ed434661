r"""A time-varying LQR along a reference trajectory on the constraint manifold, and the
system it drives (docs/concepts/linearisation.md).

`tvlqr` linearises along the reference (`linearise` at each node), discretises
$z_{j+1} = T_{j+1}^\top e^{hF_j}T_j z_j + \ldots$ (no derivative of the tangent basis
$T$), and solves the discrete Riccati recursion backwards; `LQRFeedback` is the resulting
policy $u = u_\text{ref} - K T^\top(x - x_\text{ref})$, and `closed_loop` the system
whose force evaluates a policy stored in the parameters (Anderson & Moore, *Optimal
Control: Linear Quadratic Methods*, 1990).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._checks import check_system
from ._compilation import compiled
from ._custom_types import Params
from ._linearise import ControlWhere, _control_value, linearise
from ._solve import AbstractConstraintSolver, AutoSolver
from ._system import System
from .fit._controls import AbstractControl


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
