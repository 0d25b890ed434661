"""The verdicts of a `simulate_contacts` run: the checks of the initial state inside it
(one code per contact, `ContactTrajectory.initial_check`), the friction coefficients
checked before it where they are concrete, and the error of a status that is not ok —
a `ValueError`/`RuntimeError` eagerly, an indexed message under a trace (docs page
"Rolling or sliding")."""

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._contact_trajectory import IMPACT, INCONSISTENT, OK, ZENO, ContactTrajectory
from ._frictional_contact import ROLLING, SEPARATED, SLIDING
from ._mode_dynamics import _Model, _norm, _unit

# Per-contact codes of the initial checks (`ContactTrajectory.initial_check`).
_INIT_OK = 0
_INIT_CODES = (
    None,
    "needs a finite `static_friction` mu_s >= 0",
    "needs a finite `kinetic_friction` mu_k >= 0",
    "needs `static_friction` mu_s >= `kinetic_friction` mu_k",
    "is declared 'rolling' but its contact point slips: declare it 'sliding', or start from "
    "a state that satisfies the rolling rows",
    "is declared 'rolling' but rolling needs a friction force outside the static friction "
    "cone |lambda_t| <= mu_s N: declare it 'sliding'",
    "is declared 'sliding' but its slip velocity is zero: declare it 'rolling' (it slides "
    "at once if friction cannot hold it)",
    "has no positive normal reaction at t0 (the body is not pressed onto the plane: "
    "declare it 'separated', and it lifts off)",
    "has a shape or a surface whose size (its `radius` or `semi_axes`) is not finite and > 0",
    "needs a `restitution` e in [0, 1] and a finite `restitution_threshold` >= 0",
)
# The order in which the initial checks are made (the first failed one is reported).
_INIT_ORDER = (8, 1, 2, 3, 9, 4, 5, 6, 7)


def initial_anchors(model: _Model, t, q, qd, p) -> Array:
    """`(N, 3)`: the slip directions of the contacts at the initial state (the anchors of
    the sliding ones)."""
    return jax.vmap(_unit)(model.slips(t, q, qd, p)[0])


def _initial_codes(model: _Model, modes, t, q, qd, p, tolerance, ev) -> tuple[Array, Array]:
    """Per-contact code of the first failed initial check (0: consistent) and the scale of
    the normal reactions, from `ev`, the dynamics at the initial state in `modes` with
    `initial_anchors`."""
    slip, scale = model.slips(t, q, qd, p)
    coefficients = [c.coefficients(p) for c in model.contacts]
    mu_s = jnp.stack([m[0] for m in coefficients])
    mu_k = jnp.stack([m[1] for m in coefficients])
    impact = [c.impact_coefficients(p) for c in model.contacts]
    e = jnp.stack([x[0] for x in impact])
    threshold = jnp.stack([x[1] for x in impact])
    slipping = _norm(slip) > tolerance * (1.0 + scale)
    cone = mu_s * ev.normal - _norm(ev.tangential)
    sizes_ok = jnp.stack(
        [c.shape.sizes_valid(p, q.dtype) & c.plane.sizes_valid(p, q.dtype) for c in model.contacts]
    )
    checks = [
        ~(jnp.isfinite(mu_s) & (mu_s >= 0)),
        ~(jnp.isfinite(mu_k) & (mu_k >= 0)),
        mu_s < mu_k,
        (modes == ROLLING) & slipping,
        (modes == ROLLING) & (cone < -tolerance * (1.0 + jnp.abs(ev.normal))),
        (modes == SLIDING) & ~slipping,
        (modes != SEPARATED) & ~(ev.normal > 0),
        ~sizes_ok,
        ~((e >= 0) & (e <= 1) & jnp.isfinite(threshold) & (threshold >= 0)),
    ]
    code = jnp.zeros(len(model.contacts), jnp.int32)
    for k in reversed(_INIT_ORDER):
        code = jnp.where(checks[k - 1], k, code)
    # The scale of the normal reactions: of the contacts in contact at t0, else the weight
    # the first of them to close will carry (its order of magnitude: |W qdd| of free flight).
    return code, jnp.max(jnp.abs(ev.normal)) + jnp.finfo(q.dtype).tiny


def _messages(contacts, max_switches: int) -> list[str]:
    """The error messages under a trace, indexed `block * N + contact` (`_error_index`)."""
    out = []
    where = "cx.rigid.simulate_contacts"
    for c in contacts:
        out.append(
            f"{where}: the impact of contact {c.name!r} has no consistent impulse (the "
            "sliding impulse would push the body into the plane: a Painleve-like impact; "
            "rerun with throw=False and read `failed_time`)"
        )
    for c in contacts:
        out.append(
            f"{where}: more than max_switches={max_switches} mode switches, the last at "
            f"contact {c.name!r}: a Zeno sequence of switches? Raise `max_switches` if the "
            "switches are genuine, or a bouncing contact's `restitution_threshold` (rerun with "
            "throw=False and read `switch_times`)"
        )
    for c in contacts:
        out.append(
            f"{where}: the integration failed between switches (max_steps reached or "
            f"non-finite values; last event at contact {c.name!r})"
        )
    for text in _INIT_CODES[1:]:
        for c in contacts:
            out.append(f"{where}: contact {c.name!r} {text}")
    return out


def _error_index(out: ContactTrajectory, N: int) -> Array:
    c = jnp.maximum(out.failed_contact, 0)
    block = jnp.where(
        out.status == INCONSISTENT,
        3 + jnp.take(out.initial_check, c) - 1,
        jnp.where(out.status == IMPACT, 0, jnp.where(out.status == ZENO, 1, 2)),
    )
    return (block * N + c).astype(jnp.int32)


def _traced(*xs) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(xs))


def _raise_eager(out: ContactTrajectory, contacts, max_switches: int) -> None:
    """Raise the error of a concrete status. Under `jax.grad` the status is concrete but
    the failure time and the parameters are traced: their values are left out."""
    status = int(out.status)
    if status == OK:
        return
    c = max(int(out.failed_contact), 0)
    name = contacts[c].name
    where = "cx.rigid.simulate_contacts"
    if status == INCONSISTENT:
        code = int(out.initial_check[c])
        detail = ""
        if code in (1, 2, 3):
            mu_s, mu_k = contacts[c].coefficients(out.p)
            if not _traced(mu_s, mu_k):
                detail = f" (got mu_s = {float(mu_s)}, mu_k = {float(mu_k)})"
        raise ValueError(f"{where}: contact {name!r} {_INIT_CODES[code]}{detail}")
    if _traced(out.failed_time):
        index = int(_error_index(out, len(contacts)))
        raise RuntimeError(_messages(contacts, max_switches)[index])
    time = float(out.failed_time)
    if status == IMPACT:
        raise RuntimeError(
            f"{where}: the impact of contact {name!r} at t = {time!r} has no consistent "
            "impulse (the sliding impulse would push the body into the plane: a "
            "Painleve-like impact)"
        )
    if status == ZENO:
        raise RuntimeError(
            f"{where}: more than max_switches={max_switches} mode switches by t = {time!r}, the "
            f"last at contact {name!r}: a Zeno sequence of switches? Raise `max_switches` if "
            "the switches are genuine, or a bouncing contact's `restitution_threshold`"
        )
    raise RuntimeError(
        f"{where}: the integration failed after t = {time!r} (max_steps reached or non-finite "
        "values)"
    )


def _check_coefficients(contacts, p) -> None:
    """The friction and impact coefficients read from `p`, checked now where they are
    concrete (under a trace the run checks them, `ContactTrajectory.initial_check`)."""
    for c in contacts:
        where = f"cx.rigid.simulate_contacts: contact {c.name!r}"
        mu_s, mu_k = c.coefficients(p)
        if not _traced(mu_s, mu_k):
            mu_s, mu_k = float(mu_s), float(mu_k)
            got = f" (got mu_s = {mu_s}, mu_k = {mu_k})"
            if not (np.isfinite(mu_s) and mu_s >= 0):
                raise ValueError(f"{where} {_INIT_CODES[1]}{got}")
            if not (np.isfinite(mu_k) and mu_k >= 0):
                raise ValueError(f"{where} {_INIT_CODES[2]}{got}")
            if mu_s < mu_k:
                raise ValueError(f"{where} {_INIT_CODES[3]}{got}")
        e, threshold = c.impact_coefficients(p)
        if not _traced(e, threshold):
            e, threshold = float(e), float(threshold)
            if not (0 <= e <= 1 and np.isfinite(threshold) and threshold >= 0):
                got = f" (got e = {e}, restitution_threshold = {threshold})"
                raise ValueError(f"{where} {_INIT_CODES[9]}{got}")
