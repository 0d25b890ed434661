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
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._frictional_contact import ROLLING, SEPARATED, SLIDING
from ._impact import contact_impact
from ._mode_dynamics import _Model, _norm, _unit

# The slip left at a zero of s.a that counts as vanished, in units of the run's tolerance.
_VANISHED = 100.0


class Switch(NamedTuple):
    """What happens at a segment's event."""

    contact: Int[Array, ""]  # the contact whose condition fired
    switch: Bool[Array, ""]  # the event fired: a boundary at `contact`
    impact: Bool[Array, ""]  # the boundary is a touchdown (the velocities jump)
    unsolvable: Bool[Array, ""]  # an impact without a sliding impulse (an error)
    modes: Int[Array, " N"]  # the modes after it
    anchors: Float[Array, "N 3"]  # the slip directions after it
    qd: Float[Array, " n"]  # the velocities after it


def switch_at_event(
    model: _Model, modes, anchors, fired, t, q, qd, p, mu_s, tolerance: float, normal_scale
) -> Switch:
    """The contact at fault at an event `(t, q, qd)` in `modes`, and the modes, anchors
    and velocities after it (module docstring); nothing changes where `fired` is false."""
    N = len(model.contacts)
    ev = model.evaluate(modes, t, q, qd, p, anchors)
    closed = modes != SEPARATED
    normal = jnp.where(closed, ev.normal, jnp.inf)
    lowest = jnp.argmin(normal)
    # The condition that fired is the one at zero: the smallest. A normal reaction at zero
    # to the tolerance takes precedence (where N and the cone vanish together).
    flat = jnp.argmin(model.conditions(modes, ev, anchors, p).ravel())
    first, column = flat // 2, flat % 2
    near_zero = normal[lowest] <= tolerance * normal_scale
    lifted = near_zero | ((column == 1) & closed[first])
    c = jnp.where(near_zero, lowest, first).astype(jnp.int32)
    is_c = jnp.arange(N) == c
    touchdown = ~lifted & (modes[c] == SEPARATED)

    # The velocities after the event: an impact's where the gap closed.
    impact = contact_impact(model, modes, c, t, q, qd, p)
    qd_after = jnp.where(touchdown, impact.qd, qd)
    # The dynamics after it with contact c rolling, and sliding along its slip (the
    # others in their modes), in one evaluation.
    slips, scales = model.slips(t, q, qd_after, p)
    slip_after, scale_after = slips[c], scales[c]
    trial_anchors = jnp.where(is_c[:, None], _unit(slip_after)[None], anchors)
    trials = jnp.stack([jnp.where(is_c, ROLLING, modes), jnp.where(is_c, SLIDING, modes)])
    evs = jax.vmap(lambda m: model.evaluate(m, t, q, qd_after, p, trial_anchors))(trials)
    roll = jax.tree.map(lambda x: x[0], evs)
    slide = jax.tree.map(lambda x: x[1], evs)

    # Whether the slip vanished: at the event in the current modes, or after the impact
    # (not in the rolling trial, whose velocity the projection puts on its rows).
    # At the zero of a sliding contact's event function the slip has vanished where what
    # is left of it is below _VANISHED times the tolerance: a slip that turns as it
    # vanishes (a top's) reaches that zero with the step's error across a, not rounding.
    vanished = jnp.where(
        touchdown,
        _norm(slip_after) <= tolerance * (1.0 + scale_after),
        _norm(ev.slip[c]) <= _VANISHED * tolerance * (1.0 + ev.scale[c]),
    )
    holds = (mu_s[c] * roll.normal[c] - _norm(roll.tangential[c]) >= 0) & (roll.normal[c] > 0)
    against = -_unit(roll.tangential[c])  # sliding against the friction rolling needs
    # In contact: the friction rules (a rolling contact slides; a sliding one rolls or
    # slides on); at a touchdown: bounce, roll, slide or leave at once.
    after_friction = jnp.where(
        modes[c] == ROLLING, SLIDING, jnp.where(vanished & holds, ROLLING, SLIDING)
    )
    anchor_friction = jnp.where(
        modes[c] == ROLLING,
        -_unit(ev.tangential[c]),
        jnp.where(vanished, against, _unit(ev.slip[c])),
    )
    after_impact = jnp.where(
        impact.bounced,
        SEPARATED,
        jnp.where(
            vanished & holds,
            ROLLING,
            jnp.where(slide.normal[c] > 0, SLIDING, SEPARATED),
        ),
    )
    anchor_impact = jnp.where(vanished, against, _unit(slip_after))
    new_mode = jnp.where(lifted, SEPARATED, jnp.where(touchdown, after_impact, after_friction))
    new_anchor = jnp.where(touchdown, anchor_impact, anchor_friction)
    new_anchor = jnp.where(lifted, anchors[c], new_anchor)

    # A slip that vanished and rolls on: the velocities with the contact's remainder of
    # slip taken out (the sticking impulse of a plastic impact, a jump of the order of
    # the tolerance), so that the rolling segment starts on its rows.
    stuck = ~touchdown & ~lifted & (modes[c] == SLIDING) & (new_mode == ROLLING)
    here = fired & is_c
    return Switch(
        contact=c,
        switch=fired,
        impact=fired & touchdown,
        unsolvable=fired & touchdown & ~impact.solvable,
        modes=jnp.where(here, new_mode, modes),
        anchors=jnp.where(here[:, None], new_anchor[None], anchors),
        qd=jnp.where(fired & touchdown, qd_after, jnp.where(fired & stuck, impact.qd_stuck, qd)),
    )
