r"""The shapes of the contact builders: a `Sphere` and a `Disk`, each the lowest point
$\Delta$ of its body in the direction $-n$ of a plane's normal, and the check of their sizes.

A shape gives `lowest_point(rotate, n, p)` (the spatial offset $\Delta$ from the centre of
mass), `lowest_height(rotate, n, p)` ($n\cdot\Delta$), and `contact_offset` /
`normal_offset` of a body at `q`; `offset_follows_orientation` says whether $\Delta$ moves
with the orientation (then `plane_contact` hands the velocity form of the height row to the
engine).
"""

from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._kinematics._body import check_point
from .._kinematics._so3 import safe_rsqrt, safe_sqrt


def _param(value, p):
    """A parameter given as a number/array or as a callable `p -> value`."""
    return value(p) if callable(value) else value


class Sphere(eqx.Module):
    r"""A ball of radius `radius` centred at the centre of mass; lowest point
    $\Delta = -a n$.

    `radius` is a number or a callable `p -> radius` (read from the parameters). A
    concrete radius must be finite and $> 0$ (`ValueError`); one read from the parameters
    is checked by `cx.rigid.simulate_contacts` at $t_0$.
    """

    radius: float | Callable
    # The lowest point is -a n whatever the orientation: the height row is linear in q.
    offset_follows_orientation: ClassVar[bool] = False

    def __check_init__(self):
        check_radius(self.radius, "Sphere")

    def lowest_point(self, rotate, n, p):
        r"""$\Delta = -an$ (the orientation, `rotate`: $X\mapsto RX$, is not read)."""
        return -_param(self.radius, p) * n

    def lowest_height(self, rotate, n, p):
        r"""$n\cdot\Delta = -a$."""
        return -_param(self.radius, p) * jnp.ones((), n.dtype)

    def contact_offset(self, body, q, n, p):
        r"""Spatial offset $\Delta$ from the centre of mass to the lowest point."""
        return self.lowest_point(None, n, p)

    def normal_offset(self, body, q, n, p):
        r"""$n\cdot\Delta = -a$ (`lowest_height`)."""
        return self.lowest_height(None, n.astype(q.dtype), p)


class Disk(eqx.Module):
    r"""A thin disk (or the rim of a wheel) of radius `radius` centred at the centre of mass,
    with body-frame symmetry axis `axis` (default $e_3$).

    The lowest rim point is $\Delta = -a\,d/|d|$, $d = n - (n\cdot e)e$, $e = R\,\text{axis}$,
    so $n\cdot\Delta = -a|d| = -a\sqrt{1 - (n\cdot e)^2}$. Singular when the disk lies flat
    ($e\parallel n$, a whole rim touches); safe square roots keep values and gradients finite
    there, but the contact is then ill-defined. A concrete radius must be finite and
    $> 0$, as for `Sphere`.
    """

    radius: float | Callable
    axis: Array = eqx.field(converter=lambda a: check_point(a, "axis"), default=(0.0, 0.0, 1.0))
    # The lowest rim point moves with the orientation (see `plane_contact`).
    offset_follows_orientation: ClassVar[bool] = True

    def __check_init__(self):
        check_radius(self.radius, "Disk")

    def lowest_point(self, rotate, n, p):
        r"""$\Delta = -a\,d/|d|$, $d = n - (n\cdot e)e$, with $e$ = `rotate(axis)` the
        spatial symmetry axis (`rotate`: $X\mapsto RX$, the body's rotation)."""
        e = rotate(self.axis.astype(n.dtype))
        d = n - (n @ e) * e
        sq = d @ d
        return -_param(self.radius, p) * safe_rsqrt(jnp.where(sq > 1e-30, sq, 0.0)) * d

    def lowest_height(self, rotate, n, p):
        r"""$n\cdot\Delta = -a\sqrt{1 - (n\cdot e)^2}$ (the height of the centre above the
        lowest rim point, negated)."""
        c = n @ rotate(self.axis.astype(n.dtype))
        sq = 1.0 - c * c
        return -_param(self.radius, p) * safe_sqrt(jnp.where(sq > 1e-30, sq, 0.0))

    def contact_offset(self, body, q, n, p):
        r"""Spatial offset $\Delta$ from the centre of mass to the lowest rim point."""
        return self.lowest_point(lambda X: body.rotate(q, X), n.astype(q.dtype), p)

    def normal_offset(self, body, q, n, p):
        r"""$n\cdot\Delta$ (`lowest_height`) of the body at `q`."""
        return self.lowest_height(lambda X: body.rotate(q, X), n.astype(q.dtype), p)


def check_radius(radius, who: str) -> None:
    """A shape's concrete `radius`: a finite scalar $> 0$ (`ValueError` naming `who`);
    callables and traced values are checked where they are read (`simulate_contacts`)."""
    if callable(radius) or isinstance(radius, jax.core.Tracer):
        return
    try:
        r = np.asarray(radius, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"{who}: `radius` must be a number, a scalar array or a callable p -> radius, "
            f"got {type(radius).__name__}"
        ) from None
    if r.shape != ():
        raise ValueError(f"{who}: `radius` must be a scalar, got shape {r.shape}")
    if not (np.isfinite(r) and r > 0):
        raise ValueError(f"{who}: `radius` must be finite and > 0, got {float(r)}")


def _check_shape(shape):
    if not isinstance(shape, (Sphere, Disk)):
        raise TypeError(
            f"`shape` must be cx.rigid.Sphere or cx.rigid.Disk, got {type(shape).__name__}"
        )
