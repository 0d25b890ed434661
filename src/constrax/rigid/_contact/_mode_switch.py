r"""The rules of a mode switch in `simulate_contacts`: at a segment's event, which
contact's condition fired and the mode, slip direction and velocities it continues with
(Loparo & Vakalis 2002, §7.9; docs page "Rolling or sliding").

- The normal reaction $N_c$ of a contact in contact reached zero: lift-off, checked first
  (where $N$ and the cone $\mu_s N - |\lambda_t|$ vanish together, with no tangential
  load, the contact lifts off rather than slides). It separates.
- Rolling left the static friction cone: it slides, against the friction force rolling
  needed, $a_c = -\hat\lambda_{t,c}$.
- The slip of a sliding contact vanished: it rolls where rolling keeps inside the cone,
  $\mu_s N_c - |\lambda_{t,c}| \ge 0$ with every other contact in its mode; else it slides
  on against the friction rolling would need (the slip reverses). Vanished means a slip
  left of at most 100 times the run's tolerance (relative to its speed scale): a slip that
  turns as it vanishes leaves the step's error across its anchor; it is taken out by the
  sticking impulse of a plastic impact where the contact rolls on. Where the slip only
  turned by 60° without vanishing, it slides on along the current slip, $a_c = \hat s_c$
  (a boundary at which the modes stay the same).
- The gap of a separated contact closed: an impact (`_impact`). It bounces (separated)
  where it leaves with a positive normal speed; else the contact closes: it rolls where
  the impact stopped the slip and rolling keeps inside the cone, it slides otherwise
  (along the slip after the impact, or against the friction rolling would need), and it
  separates at once where even the closed contact has no positive normal reaction.

A touchdown's event is located where the gap is the run's tolerance $\delta$ (a flight
that starts at zero gap must not fire on rounding, `_mode_dynamics`); the impact is taken
where the gap is zero. From the located state the flight is carried on to the zero of the
contact's gap by its Taylor polynomial in time, $g + \dot g\,\Delta t + \tfrac12\ddot
g\,\Delta t^2 = 0$ ($\ddot g$ the derivative of the normal velocity along the segment's
field), with $q \mathrel{+}= \dot q\,\Delta t + \tfrac12\ddot q\,\Delta t^2$ and $\dot q
\mathrel{+}= \ddot q\,\Delta t$: $\Delta t \approx \delta/|\dot g|$ (5 ns for a ball
dropped 0.2 m), its error of the third order in $\Delta t$. The actual gap at the located
state enters, so the root find's own error in time is taken out with $\delta$'s; the time
and state are differentiable through $\Delta t$ like the located event.

Contacts whose events coincide — an exact tie, as in a symmetric set-up or between
identical members of a batch, or within the run's tolerance — switch together at one
boundary: every contact in contact whose normal reaction is at zero lifts off; every
separated contact whose gap is within the tolerance of closing takes part in one impact
(`_impact`: the impulses of the set solved together); every rolling contact at the edge of
its cone slides; every sliding contact whose slip vanished rolls or slides on, judged with
all of them rolling. `Switch.contacts` says which.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._kinematics._so3 import safe_sqrt
from ._frictional_contact import ROLLING, SEPARATED, SLIDING
from ._impact import contact_impact
from ._mode_dynamics import _Model, _norm, _units

# The slip left at a zero of s.a that counts as vanished, in units of the run's tolerance.
_VANISHED = 100.0


class Switch(NamedTuple):
    """What happens at a segment's event."""

    t: Array  # the time of the boundary (a touchdown's: where the gap is zero)
    q: Float[Array, " n"]  # the positions there
    # (q_dot, qdd) of the segment's field at its located event: the flight to `t`
    rate: tuple[Float[Array, " n"], Float[Array, " n"]]

    contact: Int[Array, ""]  # the contact whose condition fired
    contacts: Bool[Array, " N"]  # every contact that switches at this boundary
    switch: Bool[Array, ""]  # the event fired: a boundary at `contact`
    impact: Bool[Array, ""]  # the boundary is a touchdown (the velocities jump)
    impulses: Float[Array, "N 3"]  # the impact's impulse at each contact (zero elsewhere)
    unsolvable: Bool[Array, ""]  # an impact without a consistent impulse (an error)
    modes: Int[Array, " N"]  # the modes after it
    anchors: Float[Array, "N 3"]  # the slip directions after it
    qd: Float[Array, " n"]  # the velocities after it


def switch_at_event(
    model: _Model, modes, anchors, fired, t, q, qd, p, mu_s, tolerance: float, normal_scale, ev
) -> Switch:
    """The contacts at fault at an event `(t, q, qd)` in `modes`, and the modes, anchors
    and velocities after it (module docstring); nothing changes where `fired` is false.
    `ev` is `model.evaluate(modes, t, q, qd, p, anchors)`."""
    N = len(model.contacts)
    closed = modes != SEPARATED
    conditions = model.conditions(modes, ev, anchors, p)
    normal = jnp.where(closed, ev.normal, jnp.inf)
    lowest = jnp.argmin(normal)
    # The condition that fired is the one at zero: the smallest. A normal reaction at zero
    # to the tolerance takes precedence (where N and the cone vanish together).
    flat = jnp.argmin(conditions.ravel())
    first, column = flat // 2, flat % 2
    zero_normal = closed & (normal <= tolerance * normal_scale)
    near_zero = jnp.any(zero_normal)
    lifted = near_zero | ((column == 1) & closed[first])
    c = jnp.where(near_zero, lowest, first).astype(jnp.int32)
    is_c = jnp.arange(N) == c
    touchdown = ~lifted & (modes[c] == SEPARATED)

    # The contacts whose events coincide with c's (module docstring).
    closing = ~closed & (conditions[:, 0] <= model.gap_margin) & (ev.gap_rate < 0)
    cone_edge = (modes == ROLLING) & (conditions[:, 0] <= tolerance * normal_scale)
    # At the zero of a sliding contact's event function the slip has vanished where what
    # is left of it is below _VANISHED times the tolerance: a slip that turns as it
    # vanishes (a top's) reaches that zero with the step's error across a, not rounding.
    vanished_now = (modes == SLIDING) & (_norm(ev.slip) <= _VANISHED * tolerance * (1.0 + ev.scale))
    friction_set = jnp.where(
        modes[c] == ROLLING, cone_edge, jnp.where(vanished_now[c], vanished_now, False)
    )
    together = jnp.where(lifted, zero_normal, jnp.where(touchdown, closing, friction_set)) | is_c

    # A touchdown is taken where c's gap is zero (module docstring); the flight's
    # velocities there are what the impact acts on.
    dt = jnp.where(fired & touchdown, _to_zero_gap(model, c, t, q, qd, ev, p), 0.0)
    t = t + dt
    q = q + (ev.q_dot + 0.5 * dt * ev.qdd) * dt
    qd = qd + ev.qdd * dt
    # The velocities after the event: an impact's where the gaps closed.
    impact = contact_impact(model, modes, together, t, q, qd, p)
    qd_after = jnp.where(touchdown, impact.qd, qd)
    # The dynamics after it with the set rolling, and sliding along its slips (a contact
    # that bounced separated, the others in their modes), in one evaluation.
    slips, scales = model.slips(t, q, qd_after, p)
    trial_anchors = jnp.where(together[:, None], _units(slips), anchors)
    bounced = touchdown & impact.bounced
    trials = jnp.stack(
        [
            jnp.where(together, jnp.where(bounced, SEPARATED, mode), modes)
            for mode in (ROLLING, SLIDING)
        ]
    )
    evs = jax.vmap(lambda m: model.evaluate(m, t, q, qd_after, p, trial_anchors))(trials)
    roll = jax.tree.map(lambda x: x[0], evs)
    slide = jax.tree.map(lambda x: x[1], evs)

    # Whether the slip vanished: at the event in the current modes, or after the impact
    # (not in the rolling trial, whose velocity the projection puts on its rows).
    vanished = jnp.where(touchdown, _norm(slips) <= tolerance * (1.0 + scales), vanished_now)
    holds = (mu_s * roll.normal - _norm(roll.tangential) >= 0) & (roll.normal > 0)
    against = -_units(roll.tangential)  # sliding against the friction rolling needs
    # In contact: the friction rules (a rolling contact slides; a sliding one rolls or
    # slides on); at a touchdown: bounce, roll, slide or leave at once.
    after_friction = jnp.where(
        modes == ROLLING, SLIDING, jnp.where(vanished & holds, ROLLING, SLIDING)
    )
    anchor_friction = jnp.where(
        (modes == ROLLING)[:, None],
        -_units(ev.tangential),
        jnp.where(vanished[:, None], against, _units(ev.slip)),
    )
    after_impact = jnp.where(
        bounced,
        SEPARATED,
        jnp.where(vanished & holds, ROLLING, jnp.where(slide.normal > 0, SLIDING, SEPARATED)),
    )
    anchor_impact = jnp.where(vanished[:, None], against, _units(slips))
    new_mode = jnp.where(lifted, SEPARATED, jnp.where(touchdown, after_impact, after_friction))
    new_anchor = jnp.where(touchdown, anchor_impact, anchor_friction)
    new_anchor = jnp.where(lifted, anchors, new_anchor)

    # A slip that vanished and rolls on: the velocities with the remainder of slip taken
    # out (the sticking impulse of a plastic impact, a jump of the order of the
    # tolerance), so that the rolling segment starts on its rows.
    stuck = ~touchdown & ~lifted & (modes[c] == SLIDING) & jnp.any(together & (new_mode == ROLLING))
    here = fired & together
    return Switch(
        t=t,
        q=q,
        rate=(ev.q_dot, ev.qdd),
        contact=c,
        contacts=here,
        switch=fired,
        impact=fired & touchdown,
        impulses=jnp.where(fired & touchdown, impact.impulse, 0.0),
        unsolvable=fired & touchdown & ~impact.solvable,
        modes=jnp.where(here, new_mode, modes),
        anchors=jnp.where(here[:, None], new_anchor, anchors),
        qd=jnp.where(fired & touchdown, qd_after, jnp.where(fired & stuck, impact.qd_stuck, qd)),
    )


def _to_zero_gap(model: _Model, c, t, q, qd, ev, p) -> Array:
    r"""The time $\Delta t$ from a located touchdown `(t, q)` to the zero of contact `c`'s
    gap: the root of $g + \dot g\,\Delta t + \tfrac12\ddot g\,\Delta t^2$ next to zero,
    $2g/(-\dot g + \sqrt{\dot g^2 - 2g\ddot g})$ (free of cancellation for a closing gap,
    $\dot g < 0$); zero where the polynomial has no such root (a gap that only grazes).
    $\ddot g$ is the derivative of the normal velocity along the segment's field."""

    def rate(t, q, qd):
        return model.gap_rates(t, q, qd, p)[c]

    g, g_dot = ev.gap[c], ev.gap_rate[c]
    one = jnp.ones_like(t)
    g_ddot = jax.jvp(rate, (t, q, qd), (one, ev.q_dot, ev.qdd))[1]
    disc = g_dot**2 - 2.0 * g * g_ddot
    denominator = -g_dot + safe_sqrt(disc)
    ok = (disc >= 0) & (denominator > 0)
    return jnp.where(ok, 2.0 * g / jnp.where(ok, denominator, 1.0), 0.0)
