r"""The dynamics of one assignment of modes to the contacts of `simulate_contacts`, and
the event functions of a segment (docs page "Rolling or sliding").

With every contact in a fixed mode the system is an ordinary constrained system: the rows
of the rolling contacts, the normal rows of the sliding ones and the system's own
constraints, with the kinetic friction forces of the sliding contacts. That force depends
on the normal reaction, $Q = N\,d(q, \dot q)$ with
$d = -\mu_k(\partial v_c/\partial\dot q)^\top\hat s$, and the reaction depends on the
force. The saddle system with the force is linear in $N$: with $(\ddot q_0, \lambda_0)$
the solution without friction and $(X, Y)$ that of $W X - A^\top Y = D$, $A X = 0$ (the
columns of $D$ the $d$ of the sliding contacts), the normal reactions are the solution of
$N = \lambda_{0,n} + Y_n N$, and then $\ddot q = \ddot q_0 + XN$ — exact, no iteration
(a singular $I - Y_n$ is Painlevé's paradox, where Coulomb friction has no consistent
solution).

A separated contact has no rows and no force: the body flies freely over it.

Every mode assignment is one program: the system with every contact's three rolling rows,
the rows a mode does not hold switched off at run time (a unit row of the saddle matrix,
multiplier zero: `AbstractConstraintSolver.factor`'s `inactive`), and the friction force
of every contact computed, zero where it does not slide (and skipped at run time where no
contact slides). The terms of the Lagrangian and the rows, the expensive part, are traced
once for all $3^N$ assignments: one evaluation for one ball is 2394 jaxpr equations, where
a branch per assignment, each with a system of its own, made 7153.

A segment lasts while, for every contact $i$, its event function

$$
\phi_i = \begin{cases}
\mu_{s,i}N_i - |\lambda_{t,i}| & \text{rolling (inside the static friction cone)}\\
s_i\cdot a_i - \cot 60^\circ\,|s_{i,\perp}| & \text{sliding (the slip has neither
vanished nor turned by } 60^\circ \text{ from its initial direction } a_i)\\
g_i & \text{separated (the gap has not closed)}
\end{cases}
$$

and, in contact, its normal reaction $N_i$ stay positive: the segment's event is the first
sign change of $\min_i\min(\phi_i, N_i)$ from positive to non-positive. A separated
contact watches $\phi_i = g_i - \delta + \tau\max(\dot g_i, 0)$, $\delta$ the run's
`tolerance` in units of length and $\tau$ = 1 time unit. Its root is where the gap
closes to $\delta$ ($\dot g < 0$ there: the touchdown); a flight that starts at zero gap
is positive from its start after a bounce ($\dot g = ev > 0$), so that a step over the
whole flight still sees the sign change, and after a lift-off once the gap opens beyond
rounding ($\delta$), not on the rounding of a grazing start.

A sliding contact's $s_{i,\perp} = s_i - (s_i\cdot a_i)a_i$ is its slip across the anchor:
for a slip along a fixed line (a ball) it is zero and $\phi_i = s_i\cdot a_i$, whose root
is the exact zero of the slip. A slip that turns as it vanishes (a top's) approaches zero
along a direction of its own; keeping it within 60° of its anchor keeps
$s_i\cdot a_i \ge |s_i|/2$, so that the regularised friction direction
(`FrictionalContact.slip_direction`) follows $\hat s$ down to the zero, where a slip
across the anchor of the order of the step's error is left (`_mode_switch`).
"""

from typing import NamedTuple

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ..._constraints import distinct_unit_quaternions
from ..._dynamics import _step
from ..._layout import row_layout
from ..._prescriptions import DAlembert
from ..._solve import KKT, AutoSolver, for_rows
from ..._system import System
from .._kinematics._body import RigidBody
from .._kinematics._so3 import safe_rsqrt, safe_sqrt
from ._frictional_contact import ROLLING, SEPARATED, SLIDING, FrictionalContact

# cot of the angle through which a sliding contact's slip may turn before its anchor is
# reset: 60 degrees (module docstring).
_COT_TURN = float(1.0 / np.tan(np.pi / 3))

# The time over which an opening gap's rate counts as gap in a separated contact's event
# function (any positive time: the function's root, where the gap closes, does not move).
_OPENING_TIME = 1.0


def _normal_rates(kins) -> Array:
    """`(N,)`: the normal velocity of each contact point (its gap's rate)."""
    return jnp.stack([kin.frame[0] @ kin.v for kin in kins])


def _unit(v) -> Array:
    """`v/|v|`, the zero vector at zero (finite derivatives)."""
    return v * safe_rsqrt(v @ v)


_units = jax.vmap(_unit)  # the unit vectors of the rows of an (N, 3) array


def _norm(v) -> Array:
    return safe_sqrt(jnp.sum(v * v, axis=-1))


def _smallest(x: Array) -> Array:
    """The smallest entry of `x`, differentiated through the entry that attains it.

    Not `jnp.min`: its derivative averages the tangents of the entries equal to the minimum,
    an equality XLA may test on values it recomputed in two fusions, differently rounded;
    where the two tests disagree it divides by a zero count, and the event's Newton root
    find, given an infinite derivative, stops at the end of the step instead of at the
    switch (seen at XLA's optimisation level 0 on CPU). An index has no such test.
    """
    x = jnp.ravel(x)
    return x[jnp.argmin(x)]


def _slips_of(kins) -> tuple[Array, Array]:
    """The slips `(N, 3)` and their speed scales `(N,)` of the contacts' kinematics."""
    return jnp.stack([k.slip for k in kins]), jnp.stack([k.scale for k in kins])


class _Eval(NamedTuple):
    """The dynamics of one mode assignment at one state."""

    q_dot: Array  # (n,) time derivative of q (the projected velocity under Projection)
    qdd: Array  # (n,)
    normal: Array  # (N,) normal reactions
    tangential: Array  # (N, 3) tangential reaction (spatial; zero while sliding)
    slip: Array  # (N, 3) slip velocities
    scale: Array  # (N,) slip speed scales
    gap: Array  # (N,) heights of the lowest points above the planes
    gap_rate: Array  # (N,) their rates, the normal velocities of the contact points


def _keep_rank(contacts, own) -> bool:
    r"""Whether the rows of every mode assignment are independent: each contact between a
    `RigidBody` and a surface no body carries, on bodies whose coordinates do not overlap,
    and the system's own rows `cx.UnitQuaternion`s of distinct quaternions outside the
    bodies' positions. A contact's rows are the velocity of its contact point along its
    frame, $F(\dot r + \omega\times\Delta)$: in its body's position rates $\dot r$,
    which no other row reads, they are the orthonormal $F$; the quaternions' rows read only
    their own quaternions."""
    if own and not distinct_unit_quaternions(own):
        return False
    spans = []
    for c in contacts:
        if type(c.body) is not RigidBody or getattr(c.plane, "body", None) is not None:
            return False
        spans.append((c.body.offset, c.body.offset + 3 + c.body.orientation.size))
    spans.sort()
    if any(a[1] > b[0] for a, b in zip(spans[:-1], spans[1:], strict=True)):
        return False
    positions = [range(a, a + 3) for a, _ in spans]
    return not any(c.start + k in r for c in own for k in range(4) for r in positions)


class _Model(eqx.Module):
    """The system, its contacts and the stabilisation: evaluates any mode assignment."""

    system: System = eqx.field(static=True)
    contacts: tuple[FrictionalContact, ...]
    stabilisation: object
    # A separated contact's event is its gap less this margin: a gap that starts at zero
    # (a lift-off, a bounce) fires only once it has opened beyond rounding.
    gap_margin: float = eqx.field(static=True, default=0.0)

    def full_system(self) -> System:
        """The system with every contact's rolling rows (normal row first) before its own
        rows: every mode assignment is this system with some rows switched off
        (`active_rows`)."""
        rows = [row for contact in self.contacts for row in contact.constraints("rolling")]
        return System(
            self.system.lagrangian,
            [*rows, *self.system.constraints],
            self.system.force,
            dynamics=self.system.dynamics,
        )

    def solver(self):
        """The saddle-point solver of every mode: `cx.KKT` where no assignment of modes can
        lose rank (`_keep_rank`), the LU `cx.AutoSolver` would take there, without its
        rank-robust branch in the program (a tenth of a contact program's compile); else
        `cx.AutoSolver`. Neither raises inside the run: a state that makes the saddle matrix
        singular (a non-finite trial step) is a failed step, which the run reports."""
        if _keep_rank(self.contacts, self.system.constraints):
            return KKT(throw=False)
        return for_rows(AutoSolver(), self.full_system().constraints)

    def normal_rows(self) -> np.ndarray:
        """`(N,)`: the index of each contact's normal row in `full_system`."""
        counts = [contact.num_rows("rolling") for contact in self.contacts]
        return np.cumsum([0, *counts])[:-1]

    def active_rows(self, modes, m: int) -> Array:
        """`(m,)` booleans: the rows of `full_system` that hold in `modes` (a rolling
        contact's every row, a sliding contact's normal row, none of a separated
        contact's; the system's own rows always)."""
        on = []
        for contact, mode in zip(self.contacts, modes, strict=True):
            rows = contact.num_rows("rolling")
            on.append(
                jnp.concatenate([(mode != SEPARATED)[None], jnp.full(rows - 1, mode == ROLLING)])
            )
        own = m - sum(x.shape[0] for x in on)
        return jnp.concatenate([*on, jnp.ones(own, bool)])

    def evaluate(self, modes, t, q, qd, p, anchors) -> _Eval:
        """The dynamics in the mode assignment `modes` `(N,)` (traced) at `(t, q, qd)`: one
        saddle system with every contact's rows, those of its mode switched on, and the
        kinetic friction of the sliding contacts solved for with it (module docstring).

        A nested `jit`: a run evaluates the dynamics in a dozen places (the segment's
        field and event, the switch, its trial modes, the initial checks), and JAX traces
        the body once for all of them and caches its derivatives per jaxpr; XLA inlines
        the calls, so run time is unchanged."""
        return _evaluate(self, modes, t, q, qd, p, anchors)

    def _evaluate(self, modes, t, q, qd, p, anchors) -> _Eval:
        system = self.full_system()
        mask = row_layout(system, t, q, qd, p).mask
        active = self.active_rows(modes, mask.shape[0])
        solver = self.solver()
        step = _step(
            system,
            DAlembert(),
            solver,
            self.stabilisation,
            t,
            q,
            qd,
            None,
            p,
            mask,
            active=active,
        )
        qd_u, qdd, lam = step.qd_used, step.qdd, step.lam
        # Kinetic friction Q = sum_i N_i d_i over the sliding contacts, N_i their normal
        # multipliers: the saddle system is linear in N (module docstring). A contact
        # that does not slide has d_i = 0, so its N_i enters nothing.
        sliding = modes == SLIDING
        rows = self.normal_rows()
        kins = [c.kinematics(t, q, qd_u, p) for c in self.contacts]

        def friction():
            D = jnp.stack(
                [
                    jnp.where(sliding[i], c.friction_force(kin, q, p, anchors[i]), 0.0)
                    for i, (c, kin) in enumerate(zip(self.contacts, kins, strict=True))
                ],
                axis=1,
            )
            zero = jnp.zeros_like(lam)
            X, Y = jax.vmap(lambda d: solver.solve(step.state, d, zero), in_axes=1, out_axes=1)(D)
            eye = jnp.eye(len(self.contacts), dtype=qdd.dtype)
            N = jnp.linalg.solve(eye - Y[rows], lam[rows])
            return qdd + X @ N, lam + Y @ N

        # Skipped (at run time) where no contact slides; under `jax.vmap`, where none
        # slides in any member of the batch (a member without a sliding contact has D = 0,
        # X = Y = 0: the friction leaves its accelerations and multipliers as they are).
        qdd, lam = jax.lax.cond(eqxi.unvmap_any(jnp.any(sliding)), friction, lambda: (qdd, lam))
        rolling = modes == ROLLING
        tangential = jnp.stack(
            [
                jnp.where(rolling[i], lam[r + 1 : r + 3] @ kin.frame[1:], 0.0)
                for i, (kin, r) in enumerate(zip(kins, rows, strict=True))
            ]
        )
        normal = jnp.where(modes == SEPARATED, 0.0, lam[rows])
        slip, scale = _slips_of(kins)
        gap = jnp.stack([c.gap(t, q, p) for c in self.contacts])
        return _Eval(step.q_dot, qdd, normal, tangential, slip, scale, gap, _normal_rates(kins))

    def event_value(self, modes, t, q, qd, p, anchors) -> Array:
        r"""The event function of a segment, $\min_i\min(\phi_i, N_i)$ (module docstring);
        its time derivative is what the root find's Newton steps divide by."""
        ev = self.evaluate(modes, t, q, qd, p, anchors)
        return _smallest(self.conditions(modes, ev, anchors, p))

    def gap_rates(self, t, q, qd, p) -> Array:
        """`(N,)`: the normal velocities of the contact points, the gaps' rates."""
        return _normal_rates([c.kinematics(t, q, qd, p) for c in self.contacts])

    def slips(self, t, q, qd, p) -> tuple[Array, Array]:
        """The slip velocities `(N, 3)` and their speed scales `(N,)` at `(t, q, qd)`."""
        return _slips_of([c.kinematics(t, q, qd, p) for c in self.contacts])

    def static_friction(self, p) -> Array:
        return jnp.stack([c.coefficients(p)[0] for c in self.contacts])

    def conditions(self, modes, ev: _Eval, anchors, p) -> Array:
        r"""`(N, 2)`: per contact the mode's event function $\phi_i$ and the normal
        reaction $N_i$ (the gap $g_i$ less `gap_margin`, twice, while separated); each
        positive while the mode holds."""
        cone = self.static_friction(p) * ev.normal - _norm(ev.tangential)
        # The slip along its anchor less cot(60 deg) times its part across: zero where the
        # slip vanishes or has turned by 60 degrees (module docstring).
        along = jnp.sum(ev.slip * anchors, axis=-1)
        across = _norm(ev.slip - along[:, None] * anchors)
        along = along - _COT_TURN * across
        separated = modes == SEPARATED
        # The gap, lifted while it opens: positive from the start of a flight that
        # starts at zero gap (a bounce), whatever the step; equal to g - delta where it
        # closes, so the touchdown is its root (module docstring).
        gap = ev.gap - self.gap_margin + jnp.maximum(ev.gap_rate, 0.0) * _OPENING_TIME
        phi = jnp.where(modes == ROLLING, cone, jnp.where(separated, gap, along))
        return jnp.stack([phi, jnp.where(separated, gap, ev.normal)], axis=1)


@eqx.filter_jit
def _evaluate(model: _Model, modes, t, q, qd, p, anchors) -> _Eval:
    return model._evaluate(modes, t, q, qd, p, anchors)
