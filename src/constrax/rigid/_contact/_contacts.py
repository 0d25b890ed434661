r"""Constraint builders for rigid bodies; each returns ordinary core constraints.

* `interconnection`: two body points share a spatial point, $\Phi_1(X_1) = \Phi_2(X_2)$
  (Briggs 2016, §3.1, eq. 3.1.2): `cx.Holonomic`, 3 rows.
* `angular_velocity_constraint`: primary angular velocity constraint $g(\omega, \mu) = 0$
  (Briggs 2016, Definition 4.2): `cx.Pfaffian`, 1 row.
* `translational_velocity_constraint`: primary translational velocity constraint
  $g(v_j - v_s, u) = 0$ on the velocity $v_j = \dot r + \omega\times\Delta$ of a body point
  (Briggs 2016, Definition 4.3, map 4.2.2), with an optional support velocity $v_s$ (moving
  surfaces): `cx.Pfaffian`, 1 row. Axis and direction may depend on the configuration.
* `plane_contact` / `no_slip` / `rolling_contact`: a shape (`Sphere`, `Disk`, `Ellipsoid`,
  module `_shapes`) touching a `Plane` (holonomic height of the lowest point) and rolling
  on it without slipping (two tangential
  rows of $v_\text{contact} - v_\text{plane} = 0$; the plane may move in itself:
  rheonomic); `rolling_contact` gives all three rows as one `cx.Pfaffian` whose normal row
  is integrable (`position=`), so the contact geometry is traced once.
* `knife_edge`: no velocity of a blade point along the blade's lateral body axis.

Friction is *not* a constraint: see `cx.rigid` friction forces (Loparo & Vakalis 2002).
"""

from collections.abc import Callable, Sequence

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ..._constraints import AbstractConstraint, Holonomic, Pfaffian
from .._kinematics._body import AbstractRigidBody, check_point
from ._shapes import _check_shape
from ._surfaces import Plane, contact_surface

_FRAMES = ("body", "spatial")


def _check_body(body, name="body"):
    if not isinstance(body, AbstractRigidBody):
        raise TypeError(
            f"`{name}` must be a cx.rigid.RigidBody or a cx.rigid.TreeBody (an "
            f"AbstractRigidBody), got {type(body).__name__}"
        )


def _check_frame(frame, name):
    if frame not in _FRAMES:
        raise ValueError(
            f"`{name}` must be 'body' (fixed in the body frame) or 'spatial' (spatial axes), "
            f"got {frame!r}"
        )


def _vector_spec(value, name: str):
    """A constant 3-vector (checked now) or a callable `(t, q, p) -> (3,)` (checked at trace)."""
    if callable(value):
        return value
    return check_point(value, name)


def _evaluate(spec, name: str, t, q, p) -> Array:
    v = spec(t, q, p) if callable(spec) else spec
    v = jnp.asarray(v)
    if v.shape != (3,):
        raise ValueError(f"`{name}(t, q, p)` must return a 3-vector of shape (3,), got {v.shape}")
    return v.astype(q.dtype)


def relative_velocity(body, t, q, qd, delta, support, p, label: str) -> Array:
    r"""$\dot r + \omega\times\Delta - v_s(t, r + \Delta)$: the velocity of the material point
    at spatial offset `delta` relative to a support moving at `support(t, x, p)` (`None`:
    at rest); `label` names `support` in the shape error."""
    return _relative_to(body, t, q, delta, body.offset_velocity(q, qd, delta), support, p, label)


def _relative_to(body, t, q, delta, v, support, p, label: str) -> Array:
    """`v`, the velocity of the material point at offset `delta`, minus the support's
    velocity there (`relative_velocity`)."""
    if support is None:
        return v
    vs = jnp.asarray(support(t, body.position(q) + delta, p), dtype=q.dtype)
    if vs.shape != (3,):
        raise ValueError(f"`{label}(t, x, p)` must return shape (3,), got {vs.shape}")
    return v - vs


def interconnection(
    body1: AbstractRigidBody,
    point1: Float[ArrayLike, " 3"],
    body2: AbstractRigidBody | None = None,
    point2: Float[ArrayLike, " 3"] = (0.0, 0.0, 0.0),
    *,
    name: str | None = None,
) -> Holonomic:
    r"""Interconnect material point `point1` of `body1` with `point2` of `body2` (or with the
    fixed spatial point `point2` when `body2` is `None`): $r_1 + R_1X_1 - r_2 - R_2X_2 = 0$.

    Briggs 2016, §3.1 (the physical configuration space $\Phi_1(X_1) = \Phi_2(X_2)$; its velocity
    form is the map $\iota$ of eq. 3.1.2). A ball joint; two interconnections make a hinge.

    **Arguments:** body-frame points `(3,)` relative to each centre of mass; `point2` is in
    the spatial frame when `body2` is `None`.

    **Returns:** a `cx.Holonomic` with 3 rows.

    **Example:** a spherical pendulum hanging from the origin,
    `interconnection(bob, jnp.array([0.0, 0.0, 0.5]))`.
    """
    _check_body(body1, "body1")
    X1 = check_point(point1, "point1")
    X2 = check_point(point2, "point2")
    if body2 is not None:
        _check_body(body2, "body2")

    def g(t, q, p):
        x2 = X2.astype(q.dtype) if body2 is None else body2.point(q, X2)
        return body1.point(q, X1) - x2

    other = "ground" if body2 is None else body2.name
    return Holonomic(g, name=name or f"interconnection({body1.name},{other})")


def angular_velocity_constraint(
    body: AbstractRigidBody,
    axis: Float[ArrayLike, " 3"] | Callable,
    *,
    frame: str = "spatial",
    name: str | None = None,
) -> Pfaffian:
    r"""Primary angular velocity constraint $g(\omega, \mu) = 0$ (Briggs 2016, Definition 4.2).

    **Arguments:**

    - `axis`: $\mu$, a `(3,)` array or a callable `(t, q, p) -> (3,)` (configuration- or
      time-dependent).
    - `frame`: `"spatial"` ($\mu$ in spatial axes) or `"body"` (body-fixed, $\mu = R\mu_B$).

    **Returns:** a one-row `cx.Pfaffian` whose row is $\mu^\top\partial\omega/\partial\dot q$.

    **Example:** forbid spin about the vertical,
    `angular_velocity_constraint(body, jnp.array([0, 0, 1.0]))`.
    """
    _check_body(body)
    _check_frame(frame, "frame")
    spec = _vector_spec(axis, "axis")

    def rate(t, q, qd, p):
        mu = _evaluate(spec, "axis", t, q, p)
        if frame == "body":
            mu = body.rotate(q, mu)
        return jnp.atleast_1d(mu @ body.angular_velocity(q, qd))

    return Pfaffian(velocity=rate, name=name or f"{body.name}.angular")


def translational_velocity_constraint(
    body: AbstractRigidBody,
    point: Float[ArrayLike, " 3"] | Callable,
    direction: Float[ArrayLike, " 3"] | Callable,
    *,
    point_frame: str = "body",
    direction_frame: str = "spatial",
    support_velocity: Callable | None = None,
    name: str | None = None,
) -> Pfaffian:
    r"""Primary translational velocity constraint $g(v + \omega\times\Delta - v_s, u) = 0$
    (Briggs 2016, Definition 4.3 and map 4.2.2).

    $v + \omega\times\Delta$ is the velocity of the material point at offset $\Delta$ from the
    centre of mass, $u$ the constrained direction, $v_s(t, x, p)$ an optional velocity of
    the support at that point (a moving surface: the constraint is then affine and
    rheonomic). With $\Delta_j$ measured from the constrained point to the reference point
    as in Briggs 2016, §4.2 the row in twist coordinates $(\omega, v)$ is
    $(u\times\Delta_j, u)$ (Theorem 4.5).

    **Arguments:**

    - `point`: the material point: body-frame `(3,)` (`point_frame="body"`, $\Delta = RX$)
      or the spatial offset $\Delta$ from the centre of mass (`point_frame="spatial"`,
      e.g. a configuration-dependent contact point); array or callable `(t, q, p) -> (3,)`.
    - `direction`: $u$, `(3,)` or callable; `direction_frame="spatial"` or `"body"`.
    - `support_velocity`: optional `(t, x, p) -> (3,)`.

    **Returns:** a one-row `cx.Pfaffian`.

    **Example:** a knife edge at the body point `X` with lateral body axis `e_y`,
    `translational_velocity_constraint(body, X, jnp.array([0, 1.0, 0]), direction_frame="body")`.
    """
    _check_body(body)
    _check_frame(point_frame, "point_frame")
    _check_frame(direction_frame, "direction_frame")
    pspec = _vector_spec(point, "point")
    uspec = _vector_spec(direction, "direction")

    def offset(t, q, p):
        d = _evaluate(pspec, "point", t, q, p)
        return body.rotate(q, d) if point_frame == "body" else d

    def unit(t, q, p):
        u = _evaluate(uspec, "direction", t, q, p)
        return body.rotate(q, u) if direction_frame == "body" else u

    def rate(t, q, qd, p):
        delta = offset(t, q, p)
        v = relative_velocity(body, t, q, qd, delta, support_velocity, p, "support_velocity")
        return jnp.atleast_1d(unit(t, q, p) @ v)

    return Pfaffian(velocity=rate, name=name or f"{body.name}.translational")


def knife_edge(
    body: AbstractRigidBody,
    point: Float[ArrayLike, " 3"],
    lateral_axis: Float[ArrayLike, " 3"],
    *,
    name: str | None = None,
) -> Pfaffian:
    r"""Planar knife edge: the blade point `point` (body frame) has no velocity along the
    blade's lateral body axis, $g(\dot r + \omega\times RX, R\,n_B) = 0$ (a primary
    translational velocity constraint, Briggs 2016, Definition 4.3). For a body moving in a
    horizontal plane with heading $\theta$ and $n_B = e_y$ this is the Chaplygin sleigh's
    $-\sin\theta\,\dot x_P + \cos\theta\,\dot y_P = 0$.

    **Example:** `knife_edge(body, jnp.zeros(3), jnp.array([0.0, 1.0, 0.0]))`.
    """
    return translational_velocity_constraint(
        body,
        point,
        lateral_axis,
        point_frame="body",
        direction_frame="body",
        name=name or f"{body.name}.knife_edge",
    )


# ----------------------------------------------------------------------------------------
# Shapes (the planes: `_surfaces`).


def contact_offset(body: AbstractRigidBody, shape, plane: Plane, q, p) -> Float[Array, " 3"]:
    r"""Spatial offset $\Delta$ from the centre of mass to the lowest point of `shape` (in
    the direction $-n(q)$, the plane's normal at `q`: `Plane.frame`)."""
    plane = contact_surface(body, shape, plane)
    return shape.contact_offset(body, q, plane.frame(q)[0], p)


def contact_point_velocity(
    body: AbstractRigidBody, shape, plane: Plane, t, q, qd, p
) -> tuple[Float[Array, " 3"], Float[Array, " 3"]]:
    r"""$(\Delta, \dot r + \omega\times\Delta - v_s(t, r + \Delta))$: the offset of the lowest
    point of `shape` and the velocity of the material point there relative to `plane`,
    the body's kinematics traced once for both (`AbstractRigidBody.offset_and_velocity`).
    For a plane carried by a body, $v_s$ is the carrier's material velocity there
    (`Plane.material_velocity`)."""
    n = plane.frame(q)[0]
    delta, v = body.offset_and_velocity(q, qd, lambda rotate: shape.lowest_point(rotate, n, p))
    return delta, _relative_to_plane(body, plane, t, q, qd, delta, v, p)


def _relative_to_plane(body, plane, t, q, qd, delta, v, p) -> Array:
    """`v`, the velocity of `body`'s material point at offset `delta`, relative to the
    material point of `plane` there (its `velocity` field, or its carrier's motion)."""
    if plane.body is None:
        return _relative_to(body, t, q, delta, v, plane.velocity, p, "Plane.velocity")
    return v - plane.material_velocity(q, qd, body.position(q) + delta)


def _height(body, shape, plane):
    r"""$g(t, q, p) = n\cdot(r + \Delta) - h$: the height of the lowest point above `plane`
    ($n(q)\cdot(r + \Delta - r_B) - h$ above a plane carried by a body at $r_B$)."""

    def height(t, q, p):
        n = plane.frame(q)[0]
        r, rotate = body.placement(q)
        if plane.body is not None:
            r = r - plane.body.position(q)
        lowest = n @ r + shape.lowest_height(rotate, n, p)
        return jnp.atleast_1d(lowest - plane.level(q, p))

    return height


def _contact_velocity(body, shape, plane, first: int):
    r"""$d_i\cdot(\dot r + \omega\times\Delta - v_s(t, r + \Delta))$ for the unit vectors
    $d_i$, the rows `first:` of the plane's frame $(n, t_1, t_2)$ at $q$ (`Plane.frame`):
    the contact geometry $\Delta$ is traced once for all rows."""

    def rows(t, q, qd, p):
        _, v = contact_point_velocity(body, shape, plane, t, q, qd, p)
        # Elementwise, not `@`: XLA:CPU runs each small `dot` as its own kernel.
        return jnp.sum(plane.frame(q)[first:] * v, axis=-1)

    return rows


def plane_contact(
    body: AbstractRigidBody, shape, plane: Plane | None = None, *, name: str | None = None
) -> Holonomic:
    r"""The lowest point of `shape` lies on `plane`: $n\cdot(r + \Delta(q)) - h = 0$
    (holonomic, one row).

    For a `Disk`, an `Ellipsoid` or a `Sphere` whose centre is off the centre of mass (a
    shape whose lowest point moves with the orientation), its velocity form
    $n\cdot(\dot r + \omega\times\Delta) = 0$ is handed to the engine
    (`cx.Holonomic(..., velocity=...)`): at the lowest point the contact point slides along
    the body's surface tangentially to the plane, so $n\cdot\dot\Delta =
    n\cdot(\omega\times\Delta)$, and the rows and their bias need first derivatives of the
    contact geometry only (the plane's own in-plane motion does not move its height). On a
    plane carried by a body (`Plane(..., body=carrier)`) the row is the gap
    $n(q)\cdot(r + \Delta - r_B) - h$ and its velocity form is
    $n\cdot(v(x_c) - v_B(x_c))$, relative to the carrier's material point (`Plane`).

    **Example:** `plane_contact(ball, Sphere(0.1))` keeps a ball's centre at height 0.1.
    """
    _check_body(body)
    _check_shape(shape)
    plane = contact_surface(body, shape, plane)

    def normal_velocity(t, q, qd, p):
        n = plane.frame(q)[0]
        delta, v = body.offset_and_velocity(q, qd, lambda rotate: shape.lowest_point(rotate, n, p))
        if plane.body is not None:  # relative to the carrier (Plane: it is the gap's rate)
            v = v - plane.material_velocity(q, qd, body.position(q) + delta)
        return jnp.atleast_1d(n @ v)

    # Where the lowest point moves with the orientation (or the plane with its carrier), the
    # velocity form spares the second derivative of the contact geometry; otherwise the
    # height row is linear in q.
    carried = plane.body is not None
    velocity = normal_velocity if shape.offset_follows_orientation or carried else None
    return Holonomic(
        _height(body, shape, plane), name=name or f"{body.name}.contact", velocity=velocity
    )


def no_slip(
    body: AbstractRigidBody, shape, plane: Plane | None = None, *, name: str | None = None
) -> Pfaffian:
    r"""No slip in the tangent plane: $t_i\cdot(\dot r + \omega\times\Delta - v_s(t, r + \Delta))
    = 0$, $i = 1, 2$ — two primary translational velocity constraints at the contact point
    (Briggs 2016, Definition 4.3). Rheonomic and affine when the plane moves.

    **Example:** `no_slip(ball, Sphere(0.1), rotating_plane(2.0))`.
    """
    _check_body(body)
    _check_shape(shape)
    plane = contact_surface(body, shape, plane)
    slip = _contact_velocity(body, shape, plane, 1)
    return Pfaffian(velocity=slip, name=name or f"{body.name}.no_slip")


def rolling_contact(
    body: AbstractRigidBody, shape, plane: Plane | None = None, *, name: str | None = None
) -> list[AbstractConstraint]:
    r"""Rolling without slipping of a `Sphere`, `Disk` or `Ellipsoid` on a (possibly moving)
    `Plane`: the material contact point moves with the plane, $\dot r + \omega\times\Delta =
    v_s(t, r + \Delta)$.

    One constraint of three rows, $(n, t_1, t_2)\cdot(\dot r + \omega\times\Delta - v_s)$:
    the normal row is integrable, the time derivative of the contact height of
    `plane_contact` ($n\cdot v_s = 0$, and the lowest point slides tangentially along the
    body), and is holonomic at the position level (`cx.Pfaffian(..., position=height)`);
    the two tangential rows are the non-integrable rows of `no_slip`. The same rows as
    `[plane_contact(...), no_slip(...)]` and the same dynamics, with the contact geometry
    $\Delta(q)$ traced once for all three rows instead of once per constraint
    (docs/concepts/rigid.md gives the equation counts).

    **Returns:** a list of one constraint (3 rows, named `"<name>.rolling"`), to splice into
    `System(constraints=...)`.

    **Example:**

    ```python
    ball = cx.rigid.RigidBody(1.0, jnp.full(3, 0.004))        # radius 0.1, solid
    L = lambda t, q, qd, p: ball.kinetic_energy(q, qd) - 9.81 * q[2]
    cons = [ball.orientation_constraint(), *cx.rigid.rolling_contact(ball, cx.rigid.Sphere(0.1))]
    system = cx.System(L, cons)
    ```
    """
    _check_body(body)
    _check_shape(shape)
    plane = contact_surface(body, shape, plane)
    return [
        Pfaffian(
            velocity=_contact_velocity(body, shape, plane, 0),
            position=_height(body, shape, plane),
            name=f"{name or body.name}.rolling",
        )
    ]


def body_constraints(*items: AbstractConstraint | Sequence | None) -> list[AbstractConstraint]:
    """Flatten constraints, lists of constraints and `None`s into one list."""
    out = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, AbstractConstraint):
            out.append(item)
        else:
            out.extend(body_constraints(*item))
    return out
