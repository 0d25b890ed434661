r"""Friction on rigid bodies as generalized forces — never as constraints.

Loparo & Vakalis 2002, §7.9: the reactions of ideal constraints do no work and vanish on the
constrained submanifold, while friction "in the direction of the common tangent plane" stays in the
reduced dynamics and must be modelled as a measurable force. Each builder returns a
generalized force `Q(t, q, qd, p) -> (n,)` for `cx.System(force=...)`, obtained from a
spatial force $F$ at a body point and/or a torque $\tau$ by the principle of virtual power,
$Q = (\partial v_P/\partial\dot q)^\top F + (\partial\omega/\partial\dot q)^\top\tau$, so
`cx.accelerations(...).force` reports it apart from the reactions.

Coefficients are numbers or callables `p -> value` (differentiable parameters).
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..._custom_types import ForceFn
from .._kinematics._body import AbstractRigidBody, check_point
from ._contacts import (
    Plane,
    _check_body,
    _relative_to_plane,
    contact_offset,
)
from ._shapes import _check_shape, _param


def body_force(
    body: AbstractRigidBody,
    q: Float[Array, " n"],
    *,
    force: Float[Array, " 3"] | None = None,
    offset: Float[Array, " 3"] | None = None,
    torque: Float[Array, " 3"] | None = None,
) -> Float[Array, " n"]:
    r"""Generalized force of a spatial force `force` acting at the material point at spatial
    offset `offset` from the centre of mass (default: at the centre) plus a spatial torque
    `torque`: $Q = (\partial v_P/\partial\dot q)^\top F + (\partial\omega/\partial\dot q)^\top\tau$.

    **Example:** `body_force(body, q, torque=jnp.array([0.0, 0.0, -0.1]))`.
    """
    q = jnp.asarray(q)
    loads, maps = [], []
    if force is not None:
        loads.append(check_point(force, "force").astype(q.dtype))
        if offset is None:
            maps.append(lambda v: body.velocity(q, v))
        else:
            delta = check_point(offset, "offset").astype(q.dtype)
            maps.append(lambda v: body.offset_velocity(q, v, delta))
    if torque is not None:
        loads.append(check_point(torque, "torque").astype(q.dtype))
        maps.append(lambda v: body.angular_velocity(q, v))
    if not loads:
        return jnp.zeros_like(q)
    # Q = J^T (F, tau) for the linear map J: qd -> (v_P, omega), transposed without
    # linearising it (a forward pass and its transpose only).
    (Q,) = jax.linear_transpose(lambda v: tuple(m(v) for m in maps), jnp.zeros_like(q))(
        tuple(loads)
    )
    return Q


def _velocity_load(velocity: Callable, qd, load: Callable) -> Array:
    r"""$Q = (\partial v/\partial\dot q)^\top F(v)$ for a velocity $v$ = `velocity(qd)` affine in
    $\dot q$ and a load $F$ = `load(v)` that depends on it (a friction): one `jax.vjp`
    traces the velocity map once for $v$ and for its transpose (`body_force` with $v$
    computed apart traces it twice)."""
    v, pullback = jax.vjp(velocity, qd)
    return pullback(load(v).astype(v.dtype))[0]


def _torque_load(body: AbstractRigidBody, q, qd, torque: Callable) -> Array:
    r"""$Q = (\partial\omega/\partial\dot q)^\top\tau(\omega)$: `_velocity_load` of the
    body's angular velocity."""
    return _velocity_load(lambda v: body.angular_velocity(q, v), qd, torque)


def _unit(n) -> Array:
    return check_point(n, "normal")


def viscous_spin_friction(body: AbstractRigidBody, coefficient, normal=(0.0, 0.0, 1.0)) -> ForceFn:
    r"""Viscous drilling (spin) friction about the contact normal, $\tau = -c\,(\omega\cdot n)n$.

    **Example:** `viscous_spin_friction(disk, lambda p: p["c_spin"])`.
    """
    return _viscous_friction(body, normal, spin=coefficient)


def viscous_rolling_friction(
    body: AbstractRigidBody, coefficient, normal=(0.0, 0.0, 1.0)
) -> ForceFn:
    r"""Viscous rolling resistance, a torque against the tangential angular velocity,
    $\tau = -c\,(\omega - (\omega\cdot n)n)$.

    **Example:** `viscous_rolling_friction(ball, 0.01)`.
    """
    return _viscous_friction(body, normal, rolling=coefficient)


def _viscous_friction(body: AbstractRigidBody, normal, *, rolling=None, spin=None) -> ForceFn:
    r"""$\tau = -c_r(\omega - (\omega\cdot n)n) - c_s(\omega\cdot n)n$ for the coefficients
    given (`None`: that term left out), the angular velocity traced once for both (the sum
    of `viscous_rolling_friction` and `viscous_spin_friction` through `combine_forces`
    traces it twice)."""
    _check_body(body)
    n0 = _unit(normal)

    def Q(t, q, qd, p):
        n = n0.astype(q.dtype)

        def tau(w):
            s = (w @ n) * n
            out = 0.0 if spin is None else -_param(spin, p) * s
            return out if rolling is None else out - _param(rolling, p) * (w - s)

        return _torque_load(body, q, qd, tau)

    return Q


def coulomb_spin_friction(
    body: AbstractRigidBody, torque, normal=(0.0, 0.0, 1.0), epsilon: float = 1e-3
) -> ForceFn:
    r"""Coulomb (dry) spin friction smoothed at zero spin,
    $\tau = -\tau_0\,s/\sqrt{s^2 + \epsilon^2}\;n$, $s = \omega\cdot n$.

    **Example:** `coulomb_spin_friction(disk, 1e-3, epsilon=1e-2)`.
    """
    _check_body(body)
    n0 = _unit(normal)

    def Q(t, q, qd, p):
        n = n0.astype(q.dtype)

        def tau(w):
            s = w @ n
            return -_param(torque, p) * s / jnp.sqrt(s * s + epsilon**2) * n

        return _torque_load(body, q, qd, tau)

    return Q


def coulomb_rolling_friction(
    body: AbstractRigidBody, torque, normal=(0.0, 0.0, 1.0), epsilon: float = 1e-3
) -> ForceFn:
    r"""Coulomb (dry) rolling resistance smoothed at zero rolling rate,
    $\tau = -\tau_0\,\omega_t/\sqrt{|\omega_t|^2 + \epsilon^2}$,
    $\omega_t = \omega - (\omega\cdot n)n$.

    **Example:** `coulomb_rolling_friction(ball, lambda p: p["rolling_torque"])`.
    """
    _check_body(body)
    n0 = _unit(normal)

    def Q(t, q, qd, p):
        n = n0.astype(q.dtype)

        def tau(w):
            wt = w - (w @ n) * n
            return -_param(torque, p) * wt / jnp.sqrt(wt @ wt + epsilon**2)

        return _torque_load(body, q, qd, tau)

    return Q


def sliding_friction(
    body: AbstractRigidBody,
    shape,
    plane: Plane,
    *,
    coefficient,
    normal_force,
    epsilon: float = 1e-3,
) -> ForceFn:
    r"""Smoothed Coulomb sliding friction at the contact point, in the tangent plane:
    $F = -\mu N\,s/\sqrt{|s|^2 + \epsilon^2}$, $s = (I - nn^\top)(v_\text{contact} - v_s)$
    the slip velocity. With a rolling (no-slip) constraint $s = 0$ and it vanishes; use it
    with `plane_contact` alone for a sliding body. `normal_force` $N$ is a number or
    callable `p -> N` (e.g. $mg$; a model assumption, not the reaction).

    **Example:** `sliding_friction(puck, Disk(0.1), Plane(), coefficient=0.3, normal_force=9.81)`.
    """
    _check_body(body)
    _check_shape(shape)

    def Q(t, q, qd, p):
        n = plane.frame(q)[0]
        delta = contact_offset(body, shape, plane, q, p)

        def F(v):  # v: the velocity of the contact point relative to the plane's
            s = v - (v @ n) * n
            return (
                -_param(coefficient, p) * _param(normal_force, p) * s / jnp.sqrt(s @ s + epsilon**2)
            )

        slip = lambda v: _relative_to_plane(
            body, plane, t, q, v, delta, body.offset_velocity(q, v, delta), p
        )
        return _velocity_load(slip, qd, F)

    return Q


def combine_forces(*forces: ForceFn | None) -> ForceFn:
    """The sum of several generalized forces (`None`s are skipped).

    **Example:** `cx.System(L, cons, force=combine_forces(spin, rolling))`.
    """
    fs = [f for f in forces if f is not None]
    for f in fs:
        if not callable(f):
            raise TypeError(f"every force must be callable Q(t, q, qd, p), got {f!r}")

    def Q(t, q, qd, p):
        out = jnp.zeros_like(q)
        for f in fs:
            out = out + f(t, q, qd, p)
        return out

    return Q
