r"""The rules of a mode switch in `simulate_contacts`: at a segment's event, which
contact's condition fired and the mode and slip direction it continues in (Loparo &
Vakalis 2002, §7.9; docs page "Rolling or sliding").

- The normal reaction $N_c$ reached zero: lift-off, checked first (where $N$ and the cone
  $\mu_s N - |\lambda_t|$ vanish together, with no tangential load, the contact lifts off
  rather than slides).
- Rolling left the static friction cone: it slides, against the friction force rolling
  needed, $a_c = -\hat\lambda_{t,c}$.
- The slip of a sliding contact vanished: it rolls where rolling keeps inside the cone,
  $\mu_s N_c - |\lambda_{t,c}| \ge 0$ with every other contact in its mode; else it slides
  on against the friction rolling would need (the slip reverses). Where the slip only
  turned by 90° without vanishing, it slides on along the current slip, $a_c = \hat s_c$
  (a boundary at which the modes stay the same).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._frictional_contact import ROLLING, SLIDING
from ._mode_dynamics import _Model, _norm, _unit


class Switch(NamedTuple):
    """What happens at a segment's event."""

    contact: Int[Array, ""]  # the contact whose condition fired
    lift: Bool[Array, ""]  # the event fired, and it is a lift-off
    switch: Bool[Array, ""]  # the event fired, and it is a switch of `contact`
    modes: Int[Array, " N"]  # the modes after it
    anchors: Float[Array, "N 3"]  # the slip directions after it


def switch_at_event(
    model: _Model, modes, anchors, fired, t, q, qd, p, mu_s, tolerance: float, normal_scale
) -> Switch:
    """The contact at fault at an event `(t, q, qd)` in `modes`, and the modes and slip
    anchors after it (module docstring); nothing changes where `fired` is false."""
    N = len(model.contacts)
    # Which event fired: the condition closest to zero at the event. The dynamics at the
    # event in the current modes, and with each contact rolling, in one evaluation.
    trial = jnp.concatenate([modes[None], jnp.where(jnp.eye(N, dtype=bool), ROLLING, modes)])
    evs = jax.vmap(lambda m: model.evaluate(m, t, q, qd, p, anchors))(trial)
    ev = jax.tree.map(lambda x: x[0], evs)
    lowest = jnp.argmin(ev.normal)
    lifted = ev.normal[lowest] <= tolerance * normal_scale
    first = jnp.argmin(model.conditions(modes, ev, anchors, p)[:, 0])
    c = jnp.where(lifted, lowest, first).astype(jnp.int32)
    is_c = jnp.arange(N) == c
    lift = fired & lifted
    switch = fired & ~lifted
    ev_roll = jax.tree.map(lambda x: x[1 + c], evs)

    was_rolling = modes[c] == ROLLING
    slip_c = ev.slip[c]
    vanished = _norm(slip_c) <= tolerance * (1.0 + ev.scale[c])
    holds = mu_s[c] * ev_roll.normal[c] - _norm(ev_roll.tangential[c]) >= 0
    new_mode = jnp.where(was_rolling | ~(vanished & holds), SLIDING, ROLLING)
    new_anchor = jnp.where(
        was_rolling,
        -_unit(ev.tangential[c]),
        jnp.where(vanished, -_unit(ev_roll.tangential[c]), _unit(slip_c)),
    )
    here = switch & is_c
    modes = jnp.where(here, new_mode, modes)
    anchors = jnp.where(here[:, None], new_anchor[None], anchors)
    return Switch(c, lift, switch, modes, anchors)
