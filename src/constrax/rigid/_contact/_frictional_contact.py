r"""`FrictionalContact`: a `Sphere`, `Disk` or `Ellipsoid` on a `Plane` with Coulomb
friction and Newton's restitution, in one of three modes.

Loparo & Vakalis 2002, §7.9: the reaction of an ideal constraint does no work and vanishes
from the reduced dynamics, while friction in the common tangent plane stays as a force and
decides when the motion changes type. The contact has three modes, each an exact system:

* *rolling*: the three rows of `rolling_contact`,
  $(n, t_1, t_2)\cdot(\dot r + \omega\times\Delta - v_s) = 0$, are constraints; their
  multipliers are the normal reaction $N = \lambda_n$ and the tangential (friction)
  reaction $\lambda_t = \lambda_{t_1}t_1 + \lambda_{t_2}t_2$, which must stay in the
  static friction cone $|\lambda_t| \le \mu_s N$;
* *sliding*: only the normal row (`plane_contact`) is a constraint; kinetic Coulomb
  friction $F = -\mu_k N\,\hat s$ acts at the contact point, $\hat s$ the direction of the
  slip velocity $s = (I - nn^\top)(\dot r + \omega\times\Delta - v_s)$, and enters the
  equations as the generalized force $Q = (\partial v_c/\partial\dot q)^\top F$;
* *separated*: no rows and no force; where the gap closes an impact follows (`_impact`).

The plane may be carried by a second moving body (`Plane(..., body=carrier)`, Loparo &
Vakalis 2002, §7.10: a disk on a moving link). Then $n$, $t_i$ are the plane's frame at
$q$ (`Plane.frame`), $v_s$ is the carrier's material velocity at the contact point, and
the contact force acts on both bodies, equal and opposite at $x_c$: the rows are rows of
the relative velocity, so $A^\top\lambda$ does it, and kinetic friction enters as
$Q = (\partial v_A(x_c)/\partial\dot q - \partial v_B(x_c)/\partial\dot q)^\top F$.

`simulate_contacts` integrates a system with such contacts, switching each contact's mode
where friction decides.
"""

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..._constraints import AbstractConstraint
from .._kinematics._body import AbstractRigidBody
from .._kinematics._so3 import safe_sqrt
from ._contacts import (
    _check_body,
    _height,
    _relative_to_plane,
    plane_contact,
    rolling_contact,
)
from ._friction import body_force
from ._shapes import Disk, Ellipsoid, Sphere, _check_shape, _param
from ._surfaces import Plane, SphericalSurface, contact_surface

#: The modes of a `FrictionalContact`, in the order of their integer codes.
MODES = ("rolling", "sliding", "separated")
ROLLING, SLIDING, SEPARATED = 0, 1, 2


def mode_code(mode, where: str) -> int:
    """The integer code of a mode name (`"rolling"`, `"sliding"` or `"separated"`);
    ValueError otherwise."""
    if mode not in MODES:
        raise ValueError(
            f"{where}: a mode must be 'rolling', 'sliding' or 'separated', got {mode!r}"
        )
    return MODES.index(mode)


def _coefficient(value, parameter: str, contact: str, upper: float = np.inf):
    """A coefficient: a callable `p -> value` (checked when `simulate_contacts` reads it)
    or a number/array, checked now if concrete (a finite scalar in `[0, upper]`)."""
    if callable(value):
        return value
    try:
        arr = jnp.asarray(value)
    except TypeError:
        raise TypeError(
            f"FrictionalContact {contact!r}: `{parameter}` must be a number, a scalar array or "
            f"a callable p -> value, got {type(value).__name__}"
        ) from None
    if arr.shape != ():
        raise ValueError(
            f"FrictionalContact {contact!r}: `{parameter}` must be a scalar, got shape {arr.shape}"
        )
    if not jnp.issubdtype(arr.dtype, jnp.inexact):
        arr = arr.astype(jnp.result_type(float))
    if _is_concrete(arr):
        v = float(np.asarray(arr))
        if not np.isfinite(v) or v < 0 or v > upper:
            bound = "finite and >= 0" if upper == np.inf else f"in [0, {upper:g}]"
            raise ValueError(
                f"FrictionalContact {contact!r}: `{parameter}` must be {bound}, got {v}"
            )
    return arr


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


class FrictionalContact(eqx.Module):
    r"""A `Sphere`, `Disk` or `Ellipsoid` body on a (possibly moving) `Plane` with Coulomb
    friction: static coefficient $\mu_s$, kinetic coefficient $\mu_k \le \mu_s$, and
    Newton's restitution coefficient $e$ for the impacts where it lands.

    In the *rolling* mode the contact is the constraint of `rolling_contact` (normal row
    and two no-slip rows); in the *sliding* mode it is the normal row of `plane_contact`
    and the kinetic friction force $F = -\mu_k N\hat s$ at the contact point, $N$ the
    normal reaction (Loparo & Vakalis 2002, §7.9: friction is a force in the common
    tangent plane, not a constraint); in the *separated* mode it has no rows and the body
    flies freely until the gap closes, where an impact (Newton's restitution law with a
    Coulomb bound on the tangential impulse) decides whether it bounces, rolls or slides.
    `simulate_contacts` switches between the modes.

    **Arguments:**

    - `body`, `shape`, `plane`: as for `rolling_contact` (`plane` defaults to the
      horizontal plane through the origin). A plane carried by another body
      (`Plane(normal, height, body=carrier)`) makes it a contact between two moving bodies;
      the carrier must not be `body` itself (`ValueError`).
    - `static_friction` ($\mu_s$), `kinetic_friction` ($\mu_k$): finite, non-negative,
      $\mu_s \ge \mu_k$; numbers, scalar arrays (differentiable leaves of the contact) or
      callables `p -> value` (differentiable parameters). Concrete values are checked
      here; callables when `simulate_contacts` reads them.
    - `restitution` ($e$, default 0: plastic impacts): the ratio of the normal separation
      speed after an impact to the approach speed before it, in $[0, 1]$; a number, a
      scalar array or a callable, as the friction coefficients.
    - `restitution_threshold` ($v_\text{rest}$, default `1e-2`, in the model's units of
      velocity): impacts approaching slower than this are plastic ($e = 0$): the contact
      closes instead of bouncing on. It ends a Zeno sequence of bounces ($e < 1$ on a flat
      floor) after finitely many (docs page "Rolling or sliding").
    - `name`: the contact's name in errors and results (default: the body's name).

    **Example:**

    ```python
    ball = cx.rigid.RigidBody(1.0, jnp.full(3, 0.004), name="ball")
    contact = cx.rigid.FrictionalContact(
        ball, cx.rigid.Sphere(0.1), static_friction=0.3, kinetic_friction=lambda p: p["mu"],
        restitution=0.8,
    )
    ```
    """

    body: AbstractRigidBody
    shape: Sphere | Disk | Ellipsoid
    plane: Plane  # or a SphericalSurface's tangent plane (`contact_surface`)
    static_friction: Float[Array, ""] | Callable
    kinetic_friction: Float[Array, ""] | Callable
    restitution: Float[Array, ""] | Callable
    restitution_threshold: Float[Array, ""] | Callable
    name: str = eqx.field(static=True)

    def __init__(
        self,
        body: AbstractRigidBody,
        shape: Sphere | Disk | Ellipsoid,
        plane: Plane | SphericalSurface | None = None,
        *,
        static_friction: Float[ArrayLike, ""] | Callable,
        kinetic_friction: Float[ArrayLike, ""] | Callable,
        restitution: Float[ArrayLike, ""] | Callable = 0.0,
        restitution_threshold: Float[ArrayLike, ""] | Callable = 1e-2,
        name: str | None = None,
    ):
        _check_body(body)
        _check_shape(shape)
        plane = contact_surface(body, shape, plane)
        name = body.name if name is None else name
        if not isinstance(name, str):
            raise TypeError(f"FrictionalContact: `name` must be a string, got {name!r}")
        if plane is not None and plane.body is not None and same_body(plane.body, body):
            raise ValueError(
                f"FrictionalContact {name!r}: the plane is carried by the contact's own body "
                f"{body.name!r}; a contact is between a body and another body's plane"
            )
        self.body = body
        self.shape = shape
        self.plane = plane
        self.name = name
        self.static_friction = _coefficient(static_friction, "static_friction", name)
        self.kinetic_friction = _coefficient(kinetic_friction, "kinetic_friction", name)
        self.restitution = _coefficient(restitution, "restitution", name, upper=1.0)
        self.restitution_threshold = _coefficient(
            restitution_threshold, "restitution_threshold", name
        )
        mu_s, mu_k = self.static_friction, self.kinetic_friction
        if not callable(mu_s) and not callable(mu_k) and _is_concrete(mu_s) and _is_concrete(mu_k):
            if float(mu_s) < float(mu_k):
                raise ValueError(
                    f"FrictionalContact {name!r}: `static_friction` mu_s = {float(mu_s)} must be "
                    f">= `kinetic_friction` mu_k = {float(mu_k)}"
                )

    # -- parameters ------------------------------------------------------------------------

    def coefficients(self, p) -> tuple[Float[Array, ""], Float[Array, ""]]:
        r"""$(\mu_s, \mu_k)$ as scalar arrays, read from `p` where they are callables."""
        return self._read(
            p,
            ("static_friction", self.static_friction),
            ("kinetic_friction", self.kinetic_friction),
        )

    def impact_coefficients(self, p) -> tuple[Float[Array, ""], Float[Array, ""]]:
        r"""$(e, v_\text{rest})$ as scalar arrays, read from `p` where they are callables."""
        return self._read(
            p,
            ("restitution", self.restitution),
            ("restitution_threshold", self.restitution_threshold),
        )

    def _read(self, p, *items) -> tuple:
        out = []
        for label, value in items:
            v = jnp.asarray(_param(value, p))
            if v.shape != ():
                raise ValueError(
                    f"FrictionalContact {self.name!r}: `{label}(p)` must return a scalar, "
                    f"got shape {v.shape}"
                )
            out.append(v)
        return tuple(out)

    # -- the rows of each mode -------------------------------------------------------------

    def constraints(self, mode: str) -> list[AbstractConstraint]:
        r"""The constraint rows of `mode`: rolling, one `cx.Pfaffian` of three rows
        (normal, $t_1$, $t_2$, named `"<name>.rolling"`); sliding, the one normal row
        (`"<name>.normal"`); separated, none. The normal row comes first."""
        code = mode_code(mode, f"FrictionalContact {self.name!r}")
        if code == ROLLING:
            return rolling_contact(self.body, self.shape, self.plane, name=self.name)
        if code == SLIDING:
            return [plane_contact(self.body, self.shape, self.plane, name=f"{self.name}.normal")]
        return []

    def num_rows(self, mode: str) -> int:
        """Rows of `mode` (3 rolling, 1 sliding, 0 separated)."""
        return (3, 1, 0)[mode_code(mode, f"FrictionalContact {self.name!r}")]

    def gap(self, t, q, p) -> Float[Array, ""]:
        r"""The height $g = n\cdot(r + \Delta) - h$ of the shape's lowest point above the
        plane: zero in contact, positive while separated."""
        return _height(self.body, self.shape, self.plane)(t, q, p)[0]

    def contact_velocity(self, t, q, qd, p) -> Float[Array, " 3"]:
        r"""$(n, t_1, t_2)\cdot v_c$: the velocity of the material contact point relative to
        the plane in the contact frame (the rows of `rolling_contact`; its normal
        component is $\dot g$)."""
        kin = self.kinematics(t, q, qd, p)
        return kin.frame @ kin.v

    # -- kinematics at the contact point ---------------------------------------------------

    def kinematics(self, t, q, qd, p) -> "ContactKinematics":
        """The contact frame, the lowest point, its velocity relative to the plane, the
        slip and its speed scale at `(t, q, qd)`, from one pass of the contact geometry
        (`ContactKinematics`)."""
        frame = self.plane.frame(q)
        n = frame[0]
        delta, vc = self.body.offset_and_velocity(
            q, qd, lambda rotate: self.shape.lowest_point(rotate, n, p)
        )
        v = _relative_to_plane(self.body, self.plane, t, q, qd, delta, vc, p)
        vr = self.body.velocity(q, qd)
        scale = _norm(vr) + _norm(vc - vr) + _norm(vc - v)
        return ContactKinematics(frame, delta, v, v - (v @ n) * n, scale)

    def slip_velocity(self, t, q, qd, p) -> Float[Array, " 3"]:
        r"""The slip velocity $s = (I - nn^\top)(\dot r + \omega\times\Delta - v_s)$ of the
        material contact point relative to the plane (zero while rolling), spatial; $n$
        the plane's normal at `q` (`Plane.frame`)."""
        return self.kinematics(t, q, qd, p).slip

    def speed_scale(self, t, q, qd, p) -> Float[Array, ""]:
        r"""$|\dot r| + |\omega\times\Delta| + |v_c - v_s|$: the scale of the slip velocity,
        for relative tolerances."""
        return self.kinematics(t, q, qd, p).scale

    def slip_direction(self, t, q, qd, p, anchor) -> Float[Array, " 3"]:
        r"""The direction $\hat s$ of kinetic friction's opposition while sliding, given the
        unit `anchor` $a$ (the slip direction at the start of the sliding segment):
        $\hat s = u/|u|$, $u = (|\sigma| + \eta)a + s_\perp$, $\sigma = s\cdot a$,
        $s_\perp = s - \sigma a$.

        Equal to $s/|s|$ wherever $\sigma > 0$ up to an angle $\eta/|s|$, with
        $\eta = \sqrt\epsilon$ times `speed_scale` (which keeps the direction defined, as $a$,
        where the slip starts from zero); exactly $a$ when the slip stays along $a$ — so the
        sliding vector field continues smoothly past the zero of the slip, where the
        switch to rolling is located."""
        return _slip_direction(self.kinematics(t, q, qd, p), anchor, q.dtype)

    def kinetic_friction_force(self, t, q, qd, p, anchor, normal_force=1.0) -> Float[Array, " n"]:
        r"""The generalized force of kinetic friction $F = -\mu_k N\hat s$ at the contact
        point, $Q = (\partial v_c/\partial\dot q)^\top F$ (per unit normal force by
        default: `simulate_contacts` scales it by the normal reaction). On a plane carried
        by a body, $v_c = v_A(x_c) - v_B(x_c)$ is the relative velocity and
        $Q = (\partial v_A(x_c)/\partial\dot q - \partial v_B(x_c)/\partial\dot q)^\top F$:
        $F$ on the body, $-F$ on the carrier, at the same point."""
        return self.friction_force(self.kinematics(t, q, qd, p), q, p, anchor, normal_force)

    def friction_force(self, kin: "ContactKinematics", q, p, anchor, normal_force=1.0) -> Array:
        """`kinetic_friction_force` from the contact's `kinematics` at `q`."""
        _, mu_k = self.coefficients(p)
        s_hat = _slip_direction(kin, anchor, q.dtype)
        F = (-(mu_k * normal_force) * s_hat).astype(q.dtype)
        Q = body_force(self.body, q, force=F, offset=kin.delta)
        carrier = self.plane.body
        if carrier is None:
            return Q
        x_c = self.body.position(q) + kin.delta
        return Q - body_force(carrier, q, force=F, offset=x_c - carrier.position(q))

    def same_pair(self, other: "FrictionalContact") -> bool:
        """Whether `other` is a contact between the same two bodies (either way round);
        contacts on planes not carried by a body are never a pair."""
        a, b = self.plane.body, other.plane.body
        if a is None or b is None:
            return False
        return (same_body(self.body, other.body) and same_body(a, b)) or (
            same_body(self.body, b) and same_body(a, other.body)
        )


def same_body(a: AbstractRigidBody, b: AbstractRigidBody) -> bool:
    """Whether `a` and `b` are the same body: the same object, or equal bodies (the same
    type, coordinates and arrays; `False` where the arrays are traced)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(eqx.tree_equal(a, b))
    except jax.errors.ConcretizationTypeError:
        return False


class ContactKinematics(NamedTuple):
    """A contact's kinematics at one state (`FrictionalContact.kinematics`)."""

    frame: Array  # (3, 3) the rows (n, t1, t2) of the contact frame
    delta: Array  # (3,) the lowest point's offset from the centre of mass
    v: Array  # (3,) the velocity of the material point there relative to the plane
    slip: Array  # (3,) its tangential part
    scale: Array  # () the slip's speed scale (`FrictionalContact.speed_scale`)


def _slip_direction(kin: ContactKinematics, anchor, dtype) -> Array:
    """`FrictionalContact.slip_direction` from the kinematics."""
    s = kin.slip
    # An anchor not yet set (zero: a contact that has not slid) is the plane's first
    # tangent: the direction is then defined, and finite, in every mode (each evaluates it).
    a = anchor.astype(dtype)
    a = jnp.where(a @ a > 0.25, a, kin.frame[1])
    sigma = s @ a
    s_perp = s - sigma * a
    eta = jnp.sqrt(jnp.finfo(dtype).eps) * kin.scale
    u = (jnp.abs(sigma) + eta) * a + s_perp
    # At rest (u = 0, or |u|^2 below the smallest normal number) the direction is a;
    # the division is guarded so that its derivative is finite there too (every
    # mode's dynamics evaluate this force, `jnp.where` selecting it while sliding).
    size = _norm(u)
    moving = size > 0
    return jnp.where(moving, u / jnp.where(moving, size, 1.0), a)


def _norm(v) -> Array:
    return safe_sqrt(v @ v)
