r"""The impact where a separated contact of `simulate_contacts` lands: Newton's restitution
law for the normal velocity with a Coulomb bound on the tangential impulse (docs page
"Rolling or sliding").

At the touchdown of contact $c$ the velocity jumps by an impulse $\Lambda$ (its components
along the contact frame $(n, t_1, t_2)$) applied at the contact point, while every other
row holds: the system's own rows, the rows of the contacts that roll and the normal rows
of those that slide (ideal, frictionless during the impact). The jump is the solution of
the saddle system with the mass matrix $W$ and those rows $A$, as in `cx.impulsive_jump`:

$$
\begin{pmatrix} W & -A^\top\\ A & 0\end{pmatrix}\begin{pmatrix}X\\ Y\end{pmatrix}
= \begin{pmatrix}J_c^\top\\ 0\end{pmatrix},\qquad
\dot q^+ = \dot q^- + X\Lambda,\qquad u^+ = u^- + G\Lambda,\quad G = J_cX,
$$

$J_c$ the Jacobian of the contact point's velocity in the contact frame,
$u = J_c\dot q + b$, and $G$ the contact's inverse inertia (its Delassus matrix). The
approach speed is $v = -u_n^-$, and Newton's law asks $u_n^+ = e\,v$ (Newton 1687;
Routh 1905, §180–184), $e$ set to zero where $v$ is below the contact's
`restitution_threshold`:

* *sticking impact*: $u_t^+ = 0$, $\Lambda = G^{-1}\big((ev, 0, 0) - u^-\big)$, if it lies
  in the static friction cone $|\Lambda_t| \le \mu_s\Lambda_n$;
* *sliding impact* otherwise: $\Lambda = \Lambda_n(1, -\mu_k d)$ with $d$ the direction
  of the tangential slip before the impact, $\Lambda_n = (1 + e)v/(Gk)_n$,
  $k = (1, -\mu_k d)$.

The sliding impulse keeps one direction through the impact. That is exact where the
slip does not stop or turn during the impact — where the contact's tangential inverse
inertia is isotropic and decoupled from the normal one, as for a ball (Routh 1905) — and
Coulomb's law at the impulse level otherwise (Brogliato 2016, *Nonsmooth Mechanics*,
§4.2). $(Gk)_n \le 0$ has no sliding impulse (the impact analogue of Painlevé's paradox):
the run stops with an error.

Where several separated contacts close at one instant (an exact tie, or gaps within the
run's tolerance of closing), their impulses are solved together: Newton's law at every
contact of the set, $u_{n,i}^+ = e_iv_i$, with each tangential impulse in its own
Coulomb cone, as one linear system in the impulses of the set, $G$ the set's Delassus
matrix (Pfeiffer & Glocker 1996, *Multibody Dynamics with Unilateral Contacts*, ch. 8:
the impact at several contacts is one problem, not a sequence). The contacts stick
first; those whose sticking impulse leaves the static cone slide
($\Lambda_i = \Lambda_{n,i}(1, -\mu_{k,i}d_i)$, Newton's law on their normal row only)
and the rest are solved again, at most once per contact (the sliding set only grows). A
contact of the set that would then need a pulling impulse, $\Lambda_{n,i}\le 0$, has no
consistent impulse under Newton's law at every contact (the complementarity problem of
Pfeiffer & Glocker would let it leave with $\Lambda_{n,i} = 0$): the run stops with the
impact error rather than give an impulse that pulls. For one contact all this is the
law above.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ..._diagnostics import constraint_jacobian
from ..._terms import mass_matrix
from ._frictional_contact import ROLLING, SEPARATED
from ._mode_dynamics import _Model, _norm, _units


class Impact(NamedTuple):
    """The velocity jump of an impact at a set of contacts."""

    qd: Float[Array, " n"]  # the velocities after it
    impulse: Float[Array, "N 3"]  # Lambda of each contact in its frame (normal, t1, t2)
    bounced: Bool[Array, " N"]  # each leaves with a positive separation speed
    solvable: Bool[Array, ""]  # no impulse of the set pulls, where one is needed
    qd_stuck: Float[Array, " n"]  # the velocities after the sticking impulse, whatever the cone


def _contact_rows(model: _Model, t, q, qd, p) -> tuple[Array, Array]:
    """`(J, u)`: per contact the Jacobian `(N, 3, n)` of the contact point's velocity in
    its frame, and that velocity `(N, 3)` at `qd`."""
    Js, us = [], []
    for contact in model.contacts:
        rows = lambda v, c=contact: c.contact_velocity(t, q, v, p)
        Js.append(jax.jacfwd(rows)(qd))
        us.append(rows(qd))
    return jnp.stack(Js), jnp.stack(us)


def _solve_rows(G, rows, columns, rhs) -> Array:
    """`P z` with `z` the least-squares solution of `R G P z = R rhs` (`R`, `P` the
    selections `rows`, `columns` `(3N, 3N)`), unused unknowns zero: the pseudoinverse,
    as `G` is singular where a tangential row vanishes (a planar body's out-of-plane
    row; the impulse along it is then zero)."""
    used = jnp.any(rows != 0, axis=1) & jnp.any(columns != 0, axis=0)
    M = rows @ G @ columns
    M = jnp.where(used[:, None] & used[None, :], M, 0.0) + jnp.diag(jnp.where(used, 0.0, 1.0))
    return columns @ (jnp.linalg.pinv(M) @ jnp.where(used, rows @ rhs, 0.0))


def contact_impact(model: _Model, modes, closing, t, q, qd, p) -> Impact:
    """The impact at the contacts `closing` `(N,)` booleans (the others in `modes`) at the
    state `(t, q, qd)` (module docstring)."""
    N, n = len(model.contacts), q.shape[0]
    dtype = q.dtype
    J, u_all = _contact_rows(model, t, q, qd, p)
    system = model.system  # its own rows: the contacts' are not in it
    A_own = constraint_jacobian(system, t, q, qd, p) if system.constraints else None
    A_own = jnp.zeros((0, n), dtype) if A_own is None else A_own.astype(dtype)
    # Every row that could hold, masked to those that do (fixed shapes): rolling contacts
    # all three, sliding ones the normal row, never a contact of the set.
    others = ~closing
    closed = others & (modes != SEPARATED)
    rolling = others & (modes == ROLLING)
    held = jnp.concatenate(
        [jnp.stack([closed, rolling, rolling], axis=1).ravel(), jnp.ones(A_own.shape[0], bool)]
    )
    A = jnp.concatenate([J.reshape(3 * N, n), A_own])
    # A row that vanishes identically (the out-of-plane no-slip row of a planar body) holds
    # by itself: left out, as the rank-robust solve of the dynamics leaves it.
    norms = jnp.sqrt(jnp.sum(A * A, axis=1))
    mask = (held & (norms > jnp.finfo(dtype).eps * (1.0 + jnp.max(norms)))).astype(dtype)
    A = A * mask[:, None]
    m = A.shape[0]
    W = mass_matrix(system, t, q, qd, p)
    K = jnp.block([[W, -A.T], [A, jnp.diag(1.0 - mask)]])
    Jc = J.reshape(3 * N, n)
    X = jnp.linalg.solve(K, jnp.concatenate([Jc.T, jnp.zeros((m, 3 * N), dtype)]))[:n]
    G = Jc @ X  # (3N, 3N): the Delassus matrix of every contact, the set's blocks used

    coefficients = [k.coefficients(p) for k in model.contacts]
    mu_s, mu_k = (jnp.stack([c[i] for c in coefficients]).astype(dtype) for i in (0, 1))
    impact = [k.impact_coefficients(p) for k in model.contacts]
    e, threshold = (jnp.stack([c[i] for c in impact]).astype(dtype) for i in (0, 1))
    v = -u_all[:, 0]  # the approach speeds
    e = jnp.where(closing & (v > threshold), e, 0.0)
    target = jnp.stack([e * v, jnp.zeros_like(v), jnp.zeros_like(v)], axis=1) - u_all
    rhs = jnp.where(closing[:, None], target, 0.0).ravel()
    in_set = jnp.repeat(closing, 3).astype(dtype)
    eye = jnp.eye(3 * N, dtype=dtype)
    stick = _solve_rows(G, eye * in_set, eye * in_set, rhs).reshape(N, 3)

    slip = u_all[:, 1:]
    eps = jnp.finfo(dtype).eps
    slipping = _norm(slip) > eps * (1.0 + _norm(u_all))

    def outside(impulse):
        return closing & (_norm(impulse[:, 1:]) > mu_s * impulse[:, 0])

    # The sliding set grows from the contacts whose sticking impulse leaves the cone, at
    # most once per contact (module docstring).
    sliding = outside(stick)
    impulse = stick
    # The slip before the impact, or where there is none, against the tangential impulse
    # sticking needed when the contact joined the sliding set.
    d = jnp.where(slipping[:, None], _units(slip), -_units(stick[:, 1:]))
    for _ in range(N):
        k = jnp.concatenate([jnp.ones((N, 1), dtype), -mu_k[:, None] * d], axis=1)
        # Columns: a sticking contact's three impulses; a sliding one's normal impulse
        # along k. Rows: a sticking contact's three velocities, a sliding one's normal.
        column_blocks = jnp.where(
            sliding[:, None, None],
            jnp.zeros((N, 3, 3), dtype).at[:, :, 0].set(k),
            jnp.eye(3, dtype=dtype)[None],
        )
        row_blocks = jnp.where(
            sliding[:, None, None],
            jnp.diag(jnp.array([1.0, 0.0, 0.0], dtype))[None],
            jnp.eye(3, dtype=dtype)[None],
        )
        columns = jax.scipy.linalg.block_diag(*column_blocks) * in_set[:, None]
        rows = jax.scipy.linalg.block_diag(*row_blocks) * in_set[:, None]
        impulse = _solve_rows(G, rows, columns, rhs).reshape(N, 3)
        joining = ~sliding & outside(impulse)
        d = jnp.where((joining & ~slipping)[:, None], -_units(impulse[:, 1:]), d)
        sliding = sliding | joining
    # No sliding impulse where a sliding contact's own block has (G k)_n <= 0 (as for one
    # contact, above), and none that pulls at a contact of the set (beyond rounding).
    blocks = G.reshape(N, 3, N, 3)[jnp.arange(N), :, jnp.arange(N), :]
    own = jnp.einsum("nij,nj->ni", blocks, k)[:, 0]
    pulls = impulse[:, 0] < -1e3 * eps * (1.0 + jnp.max(jnp.abs(impulse)))
    solvable = ~jnp.any(closing & ((sliding & ~(own > 0)) | pulls))
    impulse = jnp.where(closing[:, None], impulse, 0.0)
    return Impact(
        qd + X @ impulse.ravel(),
        impulse,
        closing & (e * v > 0),
        solvable,
        qd + X @ jnp.where(closing[:, None], stick, 0.0).ravel(),
    )
