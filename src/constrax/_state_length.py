r"""Which of two state arrays of different lengths is wrong: the one whose length the
system's functions refuse (`cx.rigid.simulate_contacts`, `cx.fit.OptimalControlProblem`).

A `System` does not store its number of coordinates $n$: its Lagrangian, force and
constraints fix it. A length is the system's where every one of them traces with
coordinates and velocities of that length (`row_layout`, shapes only, nothing runs).
"""

import jax.numpy as jnp

from ._layout import row_layout


def _accepts(system, t, n: int, dtype, p) -> bool:
    zeros = jnp.zeros(n, dtype)
    try:
        row_layout(system, jnp.asarray(t, dtype), zeros, zeros, p)
    except Exception:  # noqa: BLE001 - any failure means: not this length
        return False
    return True


def length_mismatch_error(system, t, named: dict, p, where: str) -> ValueError:
    """The error for state arrays `named` (`{"q0": array, "qd0": array, ...}`, in order of
    preference) whose lengths differ: it names each array whose length the system refuses
    where exactly one of the lengths is the system's number of coordinates, and else every
    array with its shape."""
    dtype = next(iter(named.values())).dtype
    lengths = sorted({int(x.shape[0]) for x in named.values()})
    fits = [n for n in lengths if _accepts(system, t, n, dtype, p)]
    shapes = ", ".join(f"`{k}` {tuple(x.shape)}" for k, x in named.items())
    if len(fits) == 1:
        n = fits[0]
        wrong = [k for k, x in named.items() if x.shape[0] != n]
        right = [k for k, x in named.items() if x.shape[0] == n]
        verb = "has" if len(right) == 1 else "have"
        return ValueError(
            f"{where}: {' and '.join(f'`{k}`' for k in wrong)} must have shape (n,) = ({n},), "
            f"the system's number of coordinates (its Lagrangian, force and constraints trace "
            f"with {n}, as {', '.join(f'`{k}`' for k in right)} {verb}); "
            f"got {shapes}"
        )
    return ValueError(
        f"{where}: the states must all have shape (n,), n the system's number of "
        f"coordinates, got {shapes}"
    )
