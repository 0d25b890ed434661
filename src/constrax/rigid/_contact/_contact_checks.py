r"""The checks `simulate_contacts` makes of each `FrictionalContact` at $t_0$, before the
run: its shape's size, and its own constraint rows in its initial mode.

A contact's rows are checked with the rules of the system's own rows
(`constrax._initial_state`, docs page "Stabilisation"): the height of the lowest point
above the plane, $g = n\cdot(r + \Delta) - h$, absolutely; the velocity rows, the normal
row $n\cdot v_c$ and, for a rolling contact, the no-slip rows $t_i\cdot v_c$
($v_c = \dot r + \omega\times\Delta - v_s$), relative to $\max(1, |\dot q|_\infty)$; all
against `initial_tolerance`. A shape's sizes read from the parameters (a radius, the
semi-axes) and the radius of a `SphericalSurface` read from them must be finite and
$> 0$ (`sizes_valid`). The checks run on
`stop_gradient`-ed values: a `ValueError` eagerly, an `equinox` runtime error with the
same message under `jit`, `grad` and `vmap` (docs page "Rolling or sliding").
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._contacts import _height, contact_point_velocity
from ._frictional_contact import ROLLING, SEPARATED, FrictionalContact


def _messages(contact: FrictionalContact, mode: int, tolerance, where: str) -> list[str]:
    """The messages of `contact`'s checks, in the order of `_violations`."""
    name = contact.name
    rows = f"{name}.rolling" if mode == ROLLING else f"{name}.normal"
    tol = "skipped" if tolerance is None else f"{tolerance:g}"
    size = (
        f"{where}: contact {name!r}: the {contact.shape.size_name} of its "
        f"{type(contact.shape).__name__} must be finite and > 0"
    )
    surface = (
        f"{where}: contact {name!r}: the radius of the SphericalSurface it touches must be "
        "finite and > 0"
    )
    if mode == SEPARATED:
        return [
            size,
            surface,
            f"{where}: contact {name!r} is declared 'separated' but its shape's lowest point "
            f"is below the plane (its gap n.(r + Delta) - h < -initial_tolerance={tol})",
            f"{where}: contact {name!r} is declared 'separated' but its shape touches the "
            "plane moving into it (gap 0, n.v_c < 0): start above the plane, or in contact "
            "('rolling' or 'sliding')",
        ]
    out = [
        size,
        surface,
        f"{where}: contact {name!r}: the initial state is not on the plane: its height row "
        f"{rows}[0] (the height n.(r + Delta) - h of the shape's lowest point above the "
        f"plane) is not zero to initial_tolerance={tol}. Start the body touching the plane "
        "(a body above it has no contact, one below it is inside the plane)",
        f"{where}: contact {name!r}: the initial velocity moves the contact point off the "
        f"plane: its normal-velocity row {rows}[0] (n.v_c, relative to max(1, |qd|)) is not "
        f"zero to initial_tolerance={tol}. Start with a velocity tangent to the plane",
    ]
    if mode == ROLLING:
        out += [
            f"{where}: contact {name!r} is declared 'rolling' but its contact point slips: its "
            f"no-slip row {rows}[{i}] (t{i}.v_c, relative to max(1, |qd|)) is not zero to "
            f"initial_tolerance={tol}. Declare it 'sliding', or start from a state that "
            "satisfies the rolling rows"
            for i in (1, 2)
        ]
    return out


def _violations(contact: FrictionalContact, mode: int, t, q, qd, p, tolerance) -> jax.Array:
    """`True` where the check of the same index in `_messages` fails."""
    bad = [~contact.shape.sizes_valid(p, q.dtype), ~contact.plane.sizes_valid(p, q.dtype)]
    if tolerance is None:
        return jnp.stack(bad + [jnp.zeros((), bool)] * (2 + 2 * (mode == ROLLING)))
    scale = jnp.maximum(1.0, jnp.max(jnp.abs(qd)))
    g = _height(contact.body, contact.shape, contact.plane)(t, q, p)[0]
    _, v = contact_point_velocity(contact.body, contact.shape, contact.plane, t, q, qd, p)
    frame = contact.plane.frame(q)
    n = frame[0]
    if mode == SEPARATED:
        touching = jnp.abs(g) <= tolerance
        bad += [g < -tolerance, touching & (n @ v / scale < -tolerance)]
        return jnp.stack(bad)
    bad += [~(jnp.abs(g) <= tolerance), ~(jnp.abs(n @ v) / scale <= tolerance)]
    if mode == ROLLING:
        slip = frame[1:] @ v
        bad += list(~(jnp.abs(slip) / scale <= tolerance))
    return jnp.stack(bad)


def _all_violations(contacts, modes: tuple, t, q, qd, p, tolerance) -> jax.Array:
    """`_violations` of every contact, concatenated, on `stop_gradient`-ed values."""
    t, q, qd, p = jax.lax.stop_gradient((t, q, qd, p))
    return jnp.concatenate(
        [_violations(c, m, t, q, qd, p, tolerance) for c, m in zip(contacts, modes, strict=True)]
    )


# Eagerly, one small program: the checks' few hundred operations run one by one would
# each compile a program of their own (a second of a first call's time).
_all_violations_jit = eqx.filter_jit(_all_violations)


def check_contacts(contacts, modes, t, q, qd, p, tolerance, where: str):
    """`q`, or an error naming the first contact whose radius or initial rows fail
    (`tolerance` `None` checks the radius only): a `ValueError` where the values are
    concrete, an `equinox` runtime error under a trace."""
    msgs = [
        m for contact, mode in zip(contacts, modes, strict=True)
        for m in _messages(contact, mode, tolerance, where)
    ]  # fmt: skip
    modes = tuple(int(m) for m in modes)
    # Concrete where the call is eager, also under an eager `jax.grad` (the checks read
    # `stop_gradient`-ed values): then a ValueError, as the other checks.
    values = jax.lax.stop_gradient((t, q, qd, p))
    if not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(values)):
        bad = np.asarray(_all_violations_jit(contacts, modes, *values, tolerance))
        if np.any(bad):
            raise ValueError(msgs[int(np.argmax(bad))])
        return q
    bad = _all_violations(contacts, modes, t, q, qd, p, tolerance)
    return eqx.branched_error_if(q, jnp.any(bad), jnp.argmax(bad), msgs)
