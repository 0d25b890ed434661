r"""The shapes of the contact builders: a `Sphere` (centred at the centre of mass or not),
a `Disk` and an `Ellipsoid`, each the lowest point $\Delta$ of its body in the direction
$-n$ of a plane's normal, and the check of their sizes.

A shape gives `lowest_point(rotate, n, p)` (the spatial offset $\Delta$ from the centre of
mass), `lowest_height(rotate, n, p)` ($n\cdot\Delta$), and `contact_offset` /
`normal_offset` of a body at `q`; `offset_follows_orientation` says whether $\Delta$ moves
with the orientation (then `plane_contact` hands the velocity form of the height row to the
engine); `sizes_valid(p, dtype)` whether its sizes are finite and $> 0$, and `size_name`
names them in messages.
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


class _AbstractShape(eqx.Module):
    r"""What every shape derives from its `lowest_point(rotate, n, p)` and
    `lowest_height(rotate, n, p)` (`rotate`: $X\mapsto RX$): the same at a body's `q`."""

    def contact_offset(self, body, q, n, p):
        r"""Spatial offset $\Delta$ from the centre of mass to the lowest point of the body
        at `q`."""
        return self.lowest_point(lambda X: body.rotate(q, X), n.astype(q.dtype), p)

    def normal_offset(self, body, q, n, p):
        r"""$n\cdot\Delta$ (`lowest_height`) of the body at `q`."""
        return self.lowest_height(lambda X: body.rotate(q, X), n.astype(q.dtype), p)


class Sphere(_AbstractShape):
    r"""A ball of radius `radius` whose geometric centre is the body-frame point `centre`
    (default the centre of mass); lowest point $\Delta = RX_c - an$, height
    $n\cdot\Delta = n\cdot RX_c - a$.

    With the default centre $X_c = 0$ the lowest point is $-an$ whatever the orientation
    (the height row is linear in $q$). A centre offset from the centre of mass, $X_c =
    (0, 0, \alpha a)$ for an axisymmetric body with its centre of mass a distance $\alpha a$
    below the geometric centre, is the eccentric sphere that models the tippe top (Bou-Rabee,
    Marsden & Romero 2004, "Tippe top inversion as a dissipation-induced instability"); its
    lowest point moves with the orientation, and `plane_contact` hands the velocity form of
    the height row to the engine, as for `Disk`.

    `radius` is a number or a callable `p -> radius` (read from the parameters). A
    concrete radius must be finite and $> 0$ (`ValueError`); one read from the parameters
    is checked by `cx.rigid.simulate_contacts` at $t_0$. `centre` is a finite 3-vector
    (`ValueError` naming `Sphere` otherwise).

    **Example:** a tippe top of radius 0.02 with its centre of mass 0.006 below the
    sphere's centre, `Sphere(0.02, centre=(0.0, 0.0, 0.006))`.
    """

    radius: float | Callable
    centre: Array | None = eqx.field(
        converter=lambda c: None if c is None else _check_centre(c, "Sphere"), default=None
    )
    #: The name of the size checked by `sizes_valid`, in messages.
    size_name: ClassVar[str] = "radius"

    def __check_init__(self):
        check_radius(self.radius, "Sphere")

    @property
    def offset_follows_orientation(self) -> bool:
        """Whether the lowest point moves with the orientation: `False` for a sphere
        centred at the centre of mass (no `centre`, or a concrete zero one), `True`
        otherwise (a traced centre included)."""
        c = self.centre
        if c is None:
            return False
        if isinstance(c, jax.core.Tracer):
            return True
        return bool(np.any(np.asarray(c) != 0))

    def lowest_point(self, rotate, n, p):
        r"""$\Delta = RX_c - an$ (`rotate`: $X\mapsto RX$, read only with a centre)."""
        delta = -_param(self.radius, p) * n
        if self.centre is None:
            return delta
        return rotate(self.centre.astype(n.dtype)) + delta

    def lowest_height(self, rotate, n, p):
        r"""$n\cdot\Delta = n\cdot RX_c - a$."""
        h = -_param(self.radius, p) * jnp.ones((), n.dtype)
        if self.centre is None:
            return h
        return n @ rotate(self.centre.astype(n.dtype)) + h

    def sizes_valid(self, p, dtype) -> Array:
        """`True` where the radius (read from `p` where it is a callable) is finite and
        $> 0$: a boolean scalar, for the checks of `simulate_contacts`."""
        return _positive(_param(self.radius, p), dtype, (), "Sphere", "radius")


class Disk(_AbstractShape):
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
    #: The name of the size checked by `sizes_valid`, in messages.
    size_name: ClassVar[str] = "radius"

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

    def sizes_valid(self, p, dtype) -> Array:
        """`True` where the radius (read from `p` where it is a callable) is finite and
        $> 0$ (as `Sphere.sizes_valid`)."""
        return _positive(_param(self.radius, p), dtype, (), "Disk", "radius")


class Ellipsoid(_AbstractShape):
    r"""A solid ellipsoid with semi-axes $(a, b, c)$ = `semi_axes` along the body axes,
    centred at the body-frame point `centre` $X_c$ (default the centre of mass): the
    surface $\{X_c + X : X^\top A^{-2}X = 1\}$, $A = \operatorname{diag}(a, b, c)$.

    Its lowest point in the direction $-n$ is exact: with $m = R^\top n$ the normal in body
    axes, the surface point whose outward normal is $-m$ is
    $X^* = -A^2m/\sqrt{m^\top A^2m}$, so $\Delta = R(X_c + X^*)$ and
    $n\cdot\Delta = n\cdot RX_c - \sqrt{m^\top A^2m}$ (the ellipsoid's support function).
    The rattleback is such an ellipsoid, its centre of mass below the centre and its
    inertia axes turned about the vertical against the ellipsoid's (Kane & Levinson 1982,
    "Realistic mathematical modeling of the rattleback"; Garcia & Hubbard 1988, "Spin
    reversal of the rattleback: theory and experiment"). The lowest point moves with the
    orientation: `plane_contact` hands the velocity form $n\cdot(\dot r +
    \omega\times\Delta)$ of the height row to the engine ($\dot X^*$ is tangent to the
    surface at $X^*$, whose normal is $-m$, so $n\cdot R\dot X^* = 0$). The square roots
    are the safe ones (`safe_sqrt`, `safe_rsqrt`): values and derivatives stay finite.

    `semi_axes` is a 3-sequence or `(3,)` array, or a callable `p -> (3,)` (read from the
    parameters); concrete semi-axes must all be finite and $> 0$ (`ValueError`), ones read
    from the parameters are checked by `cx.rigid.simulate_contacts` at $t_0$. `centre` is a
    finite 3-vector.

    **Example:** the rattleback of Kane & Levinson 1982, its centre of mass 0.01 below the
    ellipsoid's centre, `Ellipsoid((0.2, 0.03, 0.02), centre=(0.0, 0.0, 0.01))`.
    """

    semi_axes: Array | Callable
    centre: Array = eqx.field(
        converter=lambda c: _check_centre(c, "Ellipsoid"), default=(0.0, 0.0, 0.0)
    )
    # The lowest point moves with the orientation (see `plane_contact`).
    offset_follows_orientation: ClassVar[bool] = True
    #: The name of the size checked by `sizes_valid`, in messages.
    size_name: ClassVar[str] = "semi_axes"

    def __init__(self, semi_axes, centre=(0.0, 0.0, 0.0)):
        self.semi_axes = semi_axes if callable(semi_axes) else _check_semi_axes(semi_axes)
        self.centre = centre

    def _axes(self, p, dtype) -> Array:
        axes = jnp.asarray(_param(self.semi_axes, p), dtype)
        if axes.shape != (3,):
            raise ValueError(f"Ellipsoid: `semi_axes(p)` must return shape (3,), got {axes.shape}")
        return axes

    def _lowest(self, rotate, n, p) -> tuple[Array, Array, Array]:
        r"""$(R, A^2m, m^\top A^2m)$ with $m = R^\top n$, $R$ from its columns `rotate(e_i)`."""
        eye = jnp.eye(3, dtype=n.dtype)
        R = jnp.stack([rotate(eye[i]) for i in range(3)], axis=1)
        m = R.T @ n
        a2m = self._axes(p, n.dtype) ** 2 * m
        return R, a2m, m @ a2m

    def lowest_point(self, rotate, n, p):
        r"""$\Delta = R(X_c + X^*)$, $X^* = -A^2m/\sqrt{m^\top A^2m}$, $m = R^\top n$
        (`rotate`: $X\mapsto RX$)."""
        R, a2m, s = self._lowest(rotate, n, p)
        return R @ (self.centre.astype(n.dtype) - a2m * safe_rsqrt(s))

    def lowest_height(self, rotate, n, p):
        r"""$n\cdot\Delta = n\cdot RX_c - \sqrt{m^\top A^2m}$."""
        R, _, s = self._lowest(rotate, n, p)
        return n @ (R @ self.centre.astype(n.dtype)) - safe_sqrt(s)

    def sizes_valid(self, p, dtype) -> Array:
        """`True` where every semi-axis (read from `p` where it is a callable) is finite
        and $> 0$: a boolean scalar, for the checks of `simulate_contacts`."""
        return _positive(_param(self.semi_axes, p), dtype, (3,), "Ellipsoid", "semi_axes")


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


def _check_semi_axes(value) -> Array:
    """An ellipsoid's concrete semi-axes: a `(3,)` float array, each finite and $> 0$
    (`ValueError` naming `Ellipsoid`); a traced one is checked where it is read."""
    try:
        axes = jnp.asarray(value)
    except TypeError:
        raise TypeError(
            "Ellipsoid: `semi_axes` must be a 3-sequence, a (3,) array or a callable "
            f"p -> (3,), got {type(value).__name__}"
        ) from None
    if axes.shape != (3,):
        raise ValueError(f"Ellipsoid: `semi_axes` must have shape (3,), got {axes.shape}")
    if not jnp.issubdtype(axes.dtype, jnp.inexact):
        axes = axes.astype(jnp.result_type(float))
    if not isinstance(axes, jax.core.Tracer):
        a = np.asarray(axes, dtype=float)
        if not np.all(np.isfinite(a) & (a > 0)):
            raise ValueError(f"Ellipsoid: `semi_axes` must be finite and > 0, got {a.tolist()}")
    return axes


def _check_centre(value, who: str) -> Array:
    """A shape's body-frame `centre`: a 3-vector, finite where concrete (`ValueError`
    naming `who`)."""
    c = jnp.asarray(value)
    if c.shape != (3,):
        raise ValueError(f"{who}: `centre` must be a 3-vector of shape (3,), got {c.shape}")
    c = check_point(c, "centre")
    if not isinstance(c, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(c))):
        raise ValueError(f"{who}: `centre` must be finite, got {np.asarray(c).tolist()}")
    return c


def _positive(value, dtype, shape, who: str, name: str) -> Array:
    """`True` where the size `value` (of shape `shape`) is finite and $> 0$ everywhere;
    a `ValueError` naming `who` and `name` for a wrong shape."""
    v = jnp.asarray(value, dtype)
    if v.shape != shape:
        raise ValueError(f"{who}: `{name}` must have shape {shape}, got {v.shape}")
    return jnp.all(jnp.isfinite(v) & (v > 0))


#: The shapes the contact builders accept.
SHAPES = (Sphere, Disk, Ellipsoid)


def _check_shape(shape):
    if not isinstance(shape, SHAPES):
        raise TypeError(
            "`shape` must be one of cx.rigid.Sphere, cx.rigid.Disk, cx.rigid.Ellipsoid, got "
            f"{type(shape).__name__}"
        )
