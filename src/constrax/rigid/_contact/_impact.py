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
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ..._diagnostics import constraint_jacobian
from ..._terms import mass_matrix
from ._frictional_contact import ROLLING, SEPARATED
from ._mode_dynamics import _Model, _norm, _unit


class Impact(NamedTuple):
    """The velocity jump of an impact."""

    qd: Float[Array, " n"]  # the velocities after it
    impulse: Float[Array, " 3"]  # Lambda in the contact frame (normal, t1, t2)
    bounced: Bool[Array, ""]  # it leaves with a positive separation speed
    sticking: Bool[Array, ""]  # the tangential impulse stopped the slip
    solvable: Bool[Array, ""]  # a sliding impulse exists where one is needed
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


def contact_impact(model: _Model, modes, c, t, q, qd, p) -> Impact:
    """The impact of contact `c` (the others in `modes`) at the state `(t, q, qd)`
    (module docstring)."""
    N, n = len(model.contacts), q.shape[0]
    J, u_all = _contact_rows(model, t, q, qd, p)
    system = model.system  # its own rows: the contacts' are not in it
    A_own = constraint_jacobian(system, t, q, qd, p) if system.constraints else None
    A_own = jnp.zeros((0, n), q.dtype) if A_own is None else A_own.astype(q.dtype)
    # Every row that could hold, masked to those that do (fixed shapes under a traced `c`):
    # rolling contacts all three, sliding ones the normal row, never contact `c`.
    others = jnp.arange(N) != c
    closed = others & (modes != SEPARATED)
    rolling = others & (modes == ROLLING)
    held = jnp.concatenate(
        [jnp.stack([closed, rolling, rolling], axis=1).ravel(), jnp.ones(A_own.shape[0], bool)]
    )
    A = jnp.concatenate([J.reshape(3 * N, n), A_own])
    # A row that vanishes identically (the out-of-plane no-slip row of a planar body) holds
    # by itself: left out, as the rank-robust solve of the dynamics leaves it.
    norms = jnp.sqrt(jnp.sum(A * A, axis=1))
    mask = (held & (norms > jnp.finfo(q.dtype).eps * (1.0 + jnp.max(norms)))).astype(q.dtype)
    A = A * mask[:, None]
    m = A.shape[0]
    W = mass_matrix(system, t, q, qd, p)
    K = jnp.block([[W, -A.T], [A, jnp.diag(1.0 - mask)]])
    Jc, u = J[c], u_all[c]
    X = jnp.linalg.solve(K, jnp.concatenate([Jc.T, jnp.zeros((m, 3), q.dtype)]))[:n]
    G = Jc @ X

    mu_s, mu_k = (jnp.stack([k.coefficients(p)[i] for k in model.contacts])[c] for i in (0, 1))
    e, threshold = (
        jnp.stack([k.impact_coefficients(p)[i] for k in model.contacts])[c] for i in (0, 1)
    )
    v = -u[0]  # the approach speed
    e = jnp.where(v > threshold, e, 0.0).astype(q.dtype)
    # The pseudoinverse: G is singular where a tangential row vanishes (a planar body's
    # out-of-plane row); the impulse along it is then zero.
    stick = jnp.linalg.pinv(G) @ (jnp.stack([e * v, 0.0, 0.0]).astype(q.dtype) - u)
    sticking = _norm(stick[1:]) <= mu_s * stick[0]
    slip = u[1:]
    eps = jnp.finfo(q.dtype).eps
    slipping = _norm(slip) > eps * (1.0 + _norm(u))
    d = jnp.where(slipping, _unit(slip), -_unit(stick[1:]))
    k = jnp.concatenate([jnp.ones(1, q.dtype), -mu_k * d])
    denominator = (G @ k)[0]
    solvable = sticking | (denominator > 0)
    safe = jnp.where(denominator > 0, denominator, 1.0)
    slide = (1.0 + e) * v / safe * k
    impulse = jnp.where(sticking, stick, slide)
    return Impact(qd + X @ impulse, impulse, e * v > 0, sticking, solvable, qd + X @ stick)
