r"""Rigid bodies in 3-D built from `constrax.rigid`: the free rigid body, the tilted rolling
disk (Euler's disk without slipping), a ball on a rotating turntable, and the disk and link
of Loparo & Vakalis 2002, §7.10. Constraints are the builders of `constrax.rigid` (ordinary core
constraints); friction, where present, is a generalized force, never a constraint."""

import jax
import jax.numpy as jnp
import numpy as np

from .._constraints import Holonomic, Pfaffian
from .._system import System
from ..rigid._contact._contacts import (
    body_constraints,
    rolling_contact,
)
from ..rigid._contact._friction import _viscous_friction
from ..rigid._contact._shapes import Disk, Sphere
from ..rigid._contact._surfaces import Plane, rotating_plane
from ..rigid._kinematics._body import RigidBody
from ..rigid._kinematics._orientation import AbstractOrientation, Quaternion, RotationMatrix
from ..rigid._kinematics._so3 import cross, euler_zxz_to_rotation, rotation_from_axis_angle
from ._model import Model, resolve_params

# numpy, not jnp: an array made at import would start XLA before a script sets XLA_FLAGS
_Z = np.array([0.0, 0.0, 1.0])
_MATRIX = RotationMatrix()
_QUATERNION = Quaternion()


def _check_orientation(orientation, model):
    if not isinstance(orientation, AbstractOrientation):
        raise TypeError(
            f"{model}: `orientation` must be cx.rigid.RotationMatrix(), Quaternion() or "
            f"EulerZXZ(), got {orientation!r}"
        )


def _gravity_lagrangian(template: RigidBody, inertia_of):
    r"""$L = T - mg\,r_z$ of `template` with mass `p["mass"]`, inertia `inertia_of(p)` and
    gravity `p["g"]` read from the parameters (unchecked under trace: `with_parameters`)."""

    def lagrangian(t, q, qd, p):
        body = template.with_parameters(p["mass"], inertia_of(p))
        return body.kinetic_energy(q, qd) - p["mass"] * p["g"] * body.position(q)[2]

    return lagrangian


# ----------------------------------------------------------------------------------------
# Free rigid body.


def free_rigid_body(*, orientation: AbstractOrientation = _MATRIX, **overrides) -> Model:
    r"""A free rigid body in 3-D (no forces): Euler's equations
    $I\dot\Omega = I\Omega\times\Omega$, with constant energy, spatial angular momentum
    $\pi = RI\Omega$ and linear momentum.

    **Coordinates:** centre of mass $r$ and the orientation coordinates of `orientation`:
    by default `RotationMatrix()`, the 9 entries of $R$ with the 6 orthonormality rows
    $R^\top R = I$ as `cx.Holonomic` (the gyroscopic affine body of Sławianowski et al. 2013,
    kinetic energy $\tfrac12 M|\dot r|^2 + \tfrac12\operatorname{tr}(\dot RJ\dot R^\top)$,
    $J = \tfrac12\operatorname{tr}(I) - I$); or `Quaternion()` (norm row).
    Use `stabilisation=cx.Projection(...)` to hold orthonormality over long runs.

    **Lagrangian:** $L = T$. **Constraints:** the orientation rows (named `"body.orientation"`).

    **Parameters** (SI units): `mass` [kg] (1.0), `inertia` principal moments [kg m²]
    ((1.0, 2.0, 3.0)), `omega0` initial *body* angular velocity [rad/s] ((0.4, 1.0, 0.3):
    near the unstable intermediate axis), `v0` initial velocity [m/s] ((0.1, 0.0, 0.0)).

    **Initial state:** $r_0 = 0$, $R_0 = \exp(\widehat{(0.3, -0.2, 0.5)})$.

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.free_rigid_body()
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=5.0,
                       stabilisation=cx.Projection(10.0, 10.0))
    ```
    """
    _check_orientation(orientation, "free_rigid_body")
    defaults = dict(mass=1.0, inertia=(1.0, 2.0, 3.0), omega0=(0.4, 1.0, 0.3), v0=(0.1, 0.0, 0.0))
    p = resolve_params("free_rigid_body", defaults, overrides)
    template = RigidBody(p["mass"], p["inertia"], orientation)

    def lagrangian(t, q, qd, p):
        return template.with_parameters(p["mass"], p["inertia"]).kinetic_energy(q, qd)

    system = System(lagrangian, body_constraints(template.orientation_constraint()))
    R0 = rotation_from_axis_angle(jnp.array([0.3, -0.2, 0.5]))
    q0, qd0 = template.state(jnp.zeros(3), R0, p["v0"], p["omega0"], frame="body")
    return Model(system, p, q0, qd0, template.coordinate_names())


# ----------------------------------------------------------------------------------------
# Tilted rolling disk.


def rolling_disk_spin_rate(tilt, precession, p):
    r"""Spin rate $\dot\varphi$ of a steady precession of the rolling disk (literature
    relation, e.g. O'Reilly 1996; Kessler & O'Reilly 2002), with $\theta$ the angle of the
    symmetry axis from the vertical and $\omega_3 = \Omega\cos\theta + \dot\varphi$:

    $\Omega\sin\theta\left[(I_3 + ma^2)\,\omega_3 - I_1\Omega\cos\theta\right]
    + mga\cos\theta = 0.$
    """
    m, a, g, I1, I3 = p["mass"], p["radius"], p["g"], p["I1"], p["I3"]
    s, c = jnp.sin(tilt), jnp.cos(tilt)
    w3 = (I1 * precession**2 * s * c - m * g * a * c) / ((I3 + m * a**2) * precession * s)
    return w3 - precession * c


def tilted_rolling_disk(*, orientation: AbstractOrientation = _QUATERNION, **overrides) -> Model:
    r"""A disk rolling without slipping on a horizontal plane in 3-D (Euler's disk without
    slipping), under gravity, with optional viscous rolling and spin friction.

    **Coordinates:** centre of mass $r$ and the orientation coordinates (default unit
    quaternion, no singularity; the contact itself is singular when the disk lies flat).

    **Lagrangian:** $L = \tfrac12 m|\dot r|^2 + \tfrac12\Omega^\top\mathrm{diag}(I_1, I_1,
    I_3)\Omega - mg\,r_z$ (symmetry axis $e_3$ of the body frame).

    **Constraints:** the orientation row, then `cx.rigid.rolling_contact(disk, Disk(a),
    Plane())`: the three rows of $\dot r + \omega\times\Delta = 0$ (`disk.rolling`), the
    vertical one integrable, the derivative of the contact height
    $r_z - a|e_z - (e_z\cdot e_3)e_3| = 0$ (holonomic at the position level), the two
    horizontal ones Pfaffian.

    **Force:** viscous rolling friction $\tau = -c_r(\omega - \omega_z e_z)$ and spin
    friction $\tau = -c_s\omega_z e_z$ (zero by default); generalized forces, reported in
    `out.force`, not in the reactions (Loparo & Vakalis 2002).

    **Steady precession:** with $\theta$ the tilt of the axis from the vertical, $\Omega$
    the precession rate and $\omega_3 = \Omega\cos\theta + \dot\varphi$,
    $\Omega\sin\theta[(I_3 + ma^2)\omega_3 - I_1\Omega\cos\theta] + mga\cos\theta = 0$
    (`rolling_disk_spin_rate`). The initial state is on it, for `tilt` and `precession`.

    **Parameters** (SI units): `mass` (1.0), `radius` $a$ (0.1), `I1` diametral moment
    (0.0025 $= ma^2/4$), `I3` axial moment (0.005 $= ma^2/2$), `g` (9.81), `tilt` $\theta_0$
    [rad] (1.2), `precession` $\Omega$ [rad/s] (2.0), `c_roll`, `c_spin` [N m s] (0.0).

    **Initial state:** contact point at the origin, Euler angles $(0, \theta_0, 0)$
    (ZXZ), $\omega = \Omega e_z + \dot\varphi e_3$, centre velocity from rolling.

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.tilted_rolling_disk(tilt=1.0, precession=3.0)
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=2.0)
    ```
    """
    _check_orientation(orientation, "tilted_rolling_disk")
    defaults = dict(
        mass=1.0,
        radius=0.1,
        I1=0.0025,
        I3=0.005,
        g=9.81,
        tilt=1.2,
        precession=2.0,
        c_roll=0.0,
        c_spin=0.0,
    )
    p = resolve_params("tilted_rolling_disk", defaults, overrides)

    def inertia_of(p):
        return jnp.stack([p["I1"], p["I1"], p["I3"]])

    template = RigidBody(p["mass"], inertia_of(p), orientation, name="disk")

    shape = Disk(lambda p: p["radius"])
    # both frictions in one torque: the angular velocity traced once
    force = _viscous_friction(
        template, _Z, rolling=lambda p: p["c_roll"], spin=lambda p: p["c_spin"]
    )
    cons = body_constraints(
        template.orientation_constraint(), rolling_contact(template, shape, Plane())
    )
    system = System(_gravity_lagrangian(template, inertia_of), cons, force=force)

    th, Om, a = p["tilt"], p["precession"], p["radius"]
    R0 = euler_zxz_to_rotation(jnp.stack([0.0 * th, th, 0.0 * th]))
    a2, e3 = R0[:, 1], R0[:, 2]
    centre = a * a2  # contact point at the origin
    w0 = Om * _Z + rolling_disk_spin_rate(th, Om, p) * e3
    v0 = cross(w0, centre)  # rolling: v = omega x (r - r_contact)
    q0, qd0 = template.state(centre, R0, v0, w0)
    return Model(system, p, q0, qd0, template.coordinate_names())


# ----------------------------------------------------------------------------------------
# Ball on a rotating turntable.


def ball_on_turntable(*, orientation: AbstractOrientation = _QUATERNION, **overrides) -> Model:
    r"""A ball of radius $a$ and inertia $kma^2$ rolling without slipping on a horizontal
    turntable spinning at the constant rate $\Omega$ about the vertical through the origin.

    **Constraints:** the orientation row and `cx.rigid.rolling_contact(ball, Sphere(a),
    rotating_plane(Omega))` (`ball.rolling`): $\dot r + \omega\times(-a e_z) = \Omega
    e_z\times(r - a e_z)$, whose vertical row is the derivative of $r_z = a$ (holonomic at the
    position level) and whose horizontal rows are affine, rheonomic Pfaffian rows.

    **Closed form:** $\dot v = \nu\,e_z\times v$ with $\nu = \frac{k}{1+k}\Omega$ ($\tfrac27\Omega$
    for a homogeneous ball): the centre runs on a circle with centre
    $c = r_0 + e_z\times v_0/\nu$ and radius $|v_0|/\nu$ at angular rate $\nu$; the spin
    $\omega_z$ is constant.

    **Parameters** (SI units): `mass` (1.0), `radius` $a$ (0.1), `k` inertia factor (0.4,
    homogeneous), `Omega` [rad/s] (7.0), `g` (9.81), `r0` initial centre in the plane
    ((0.3, 0.0)), `v0` initial centre velocity ((0.0, 0.2)), `spin0` initial $\omega_z$ (1.0).

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.ball_on_turntable(k=2 / 3)  # hollow ball: nu = 0.4 Omega
    ```
    """
    _check_orientation(orientation, "ball_on_turntable")
    defaults = dict(
        mass=1.0, radius=0.1, k=0.4, Omega=7.0, g=9.81, r0=(0.3, 0.0), v0=(0.0, 0.2), spin0=1.0
    )
    p = resolve_params("ball_on_turntable", defaults, overrides)

    def inertia_of(p):
        return p["k"] * p["mass"] * p["radius"] ** 2 * jnp.ones(3)

    template = RigidBody(p["mass"], inertia_of(p), orientation, name="ball")

    table = rotating_plane(lambda t, p: p["Omega"])
    cons = body_constraints(
        template.orientation_constraint(),
        rolling_contact(template, Sphere(lambda p: p["radius"]), table),
    )
    system = System(_gravity_lagrangian(template, inertia_of), cons)

    a = p["radius"]
    r0 = jnp.concatenate([p["r0"], a[None]])
    v0 = jnp.concatenate([p["v0"], jnp.zeros(1)])
    s = (p["Omega"] * cross(_Z, r0 - a * _Z) - v0) / a
    w0 = cross(s, _Z) + p["spin0"] * _Z
    q0, qd0 = template.state(r0, jnp.eye(3), v0, w0)
    return Model(system, p, q0, qd0, template.coordinate_names())


def turntable_orbit(params) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Closed-form orbit of `ball_on_turntable`: `(centre (2,), radius, rate)` with
    $\nu = k\Omega/(1+k)$, $c = r_0 + e_z\times v_0/\nu$, radius $|v_0|/\nu$."""
    nu = params["k"] * params["Omega"] / (1 + params["k"])
    v0 = params["v0"]
    c = params["r0"] + jnp.stack([-v0[1], v0[0]]) / nu
    return c, jnp.linalg.norm(v0) / nu, nu


# ----------------------------------------------------------------------------------------
# Disk and link (Loparo & Vakalis 2002, §7.10).


def _frame(th):
    t = jnp.stack([jnp.cos(th), jnp.sin(th)])
    n = jnp.stack([-jnp.sin(th), jnp.cos(th)])
    return t, n


def _cross2(a, b):
    return a[0] * b[1] - a[1] * b[0]


def _perp(w, x):  # (w e_z) x x for a planar vector x
    return w * jnp.stack([-x[1], x[0]])


#: The parameters of `disk_and_link` (and of `disk_on_link`, which adds its friction).
DISK_AND_LINK_DEFAULTS = dict(
    m_d=1.0,
    a=0.2,
    J_d=0.02,
    m_l=2.0,
    J_l=2.0 * 2.0**2 / 12,
    k_l=30.0,
    g=9.81,
    tilt0=0.05,
    s0=0.0,
    vl0=0.2,
    sd0=0.2,
)


def disk_and_link(**overrides) -> Model:
    r"""A disk rolling without slipping on a link that moves in a vertical plane (Loparo & Vakalis
    2002 §7.10, Figure 7.5), modelled as two interconnected planar rigid bodies with the
    contact force as a reaction.

    **Modelling assumptions:** motion in the vertical $(x, y)$ plane, gravity $-g e_y$.
    The link is a thin straight bar (zero thickness) whose centre slides on a frictionless
    horizontal rail (holonomic $y_2 = 0$) and which turns about that centre against a
    torsional spring $k_\ell$ (so the motion stays bounded). The disk (radius $a$) stays
    in contact with the upper side of the link and rolls on it without slipping. The contact
    parameters of the paper ($\varphi$ on the disk, $\tau_1$ on the link) are eliminated:
    $\tau_1 = t\cdot(c - p)$. No friction beyond the rolling constraint.

    **Coordinates:** $q = (y_1, y_2, \theta_2, z_1, z_2, \theta)$: link centre $p$, link
    angle, disk centre $c$, disk rotation angle (Loparo & Vakalis's names).

    **Lagrangian:** $\tfrac12 m_\ell|\dot p|^2 + \tfrac12 J_\ell\dot\theta_2^2
    + \tfrac12 m_d|\dot c|^2 + \tfrac12 J_d\dot\theta^2 - m_\ell g y_2 - m_d g z_2
    - \tfrac12 k_\ell\theta_2^2$.

    **Constraints** (rows in this order, scaled so that the multipliers are forces):
    `"rail"`: $y_2 = 0$ (the rail's vertical force on the link); `"contact"`:
    $n\cdot(c - p) - a = 0$, $n = (-\sin\theta_2, \cos\theta_2)$ (normal contact force
    on the disk); `"rolling"`: $t\cdot(v_\text{disk}(x_c) - v_\text{link}(x_c)) = 0$ at the
    contact point $x_c = c - a n$, $t = (\cos\theta_2, \sin\theta_2)$ (tangential contact
    force on the disk). The contact force on the disk is $F = \lambda_N n + \lambda_T t$
    (`disk_and_link_contact_force`); the link feels $-F$ at $x_c$.

    **Parameters** (SI units): `m_d` (1.0), `a` (0.2), `J_d` (0.02 $= m_da^2/2$), `m_l`
    (2.0), `J_l` (0.6667 $= m_\ell\ell^2/12$, $\ell = 2$), `k_l` torsional spring [N m/rad]
    (30.0), `g` (9.81), `tilt0` initial link angle (0.05), `s0` initial contact position
    along the link (0.0), `vl0` initial rail speed of the link (0.2), `sd0` initial rate of
    the contact position along the link (0.2). The link is treated as a line: its length
    $\ell$ only enters $J_\ell$; keep the horizon short enough that $|\tau_1| < \ell/2$.

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.disk_and_link()
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=1.0,
                       saveat=diffrax.SaveAt(ts=jnp.linspace(0, 1, 11)))
    F = cx.models.disk_and_link_contact_force(traj.q, traj.multipliers())
    ```
    """
    p = resolve_params("disk_and_link", dict(DISK_AND_LINK_DEFAULTS), overrides)

    def lagrangian(t, q, qd, p):
        T = 0.5 * p["m_l"] * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * p["J_l"] * qd[2] ** 2
        T = T + 0.5 * p["m_d"] * (qd[3] ** 2 + qd[4] ** 2) + 0.5 * p["J_d"] * qd[5] ** 2
        V = p["g"] * (p["m_l"] * q[1] + p["m_d"] * q[4]) + 0.5 * p["k_l"] * q[2] ** 2
        return T - V

    def rail(t, q, p):
        return q[1]

    def contact(t, q, p):
        _, n = _frame(q[2])
        return n @ (q[3:5] - q[0:2]) - p["a"]

    def slip(q, qd, p):
        tl, n = _frame(q[2])
        xc = q[3:5] - p["a"] * n
        v_disk = qd[3:5] + _perp(qd[5], xc - q[3:5])
        v_link = qd[0:2] + _perp(qd[2], xc - q[0:2])
        return tl @ (v_disk - v_link)

    def rolling(t, q, qd, p):
        return jnp.atleast_1d(slip(q, qd, p))

    system = System(
        lagrangian,
        [
            Holonomic(rail, name="rail"),
            Holonomic(contact, name="contact"),
            Pfaffian(velocity=rolling, name="rolling"),
        ],
    )
    th, s, a = p["tilt0"], p["s0"], p["a"]
    tl, n = _frame(th)
    c = s * tl + a * n
    q0 = jnp.concatenate([jnp.zeros(2), th[None], c, jnp.zeros(1)])
    # link velocity (vl0, 0, thd2 = 0), contact sliding along the link at sd0, rolling gives thd.
    thd2 = 0.0 * th
    cd = jnp.stack([p["vl0"], 0.0 * th]) + p["sd0"] * tl + s * thd2 * n - a * thd2 * tl
    thd = thd2 - p["sd0"] / a
    qd0 = jnp.concatenate([jnp.stack([p["vl0"], 0.0 * th, thd2]), cd, thd[None]])
    return Model(system, p, q0, qd0, ("y1", "y2", "theta2", "z1", "z2", "theta"))


def disk_and_link_contact_force(q: jax.Array, multipliers: jax.Array) -> jax.Array:
    r"""Contact force on the disk of `disk_and_link`, $F = \lambda_N n + \lambda_T t$, from
    states `q` `(..., 6)` and d'Alembert multipliers `(..., 3)` (rows rail, contact,
    rolling), in the spatial $(x, y)$ frame, shape `(..., 2)`.

    **Example:** `disk_and_link_contact_force(traj.q, traj.multipliers())`.
    """
    q, lam = jnp.asarray(q), jnp.asarray(multipliers)
    if q.shape[-1] != 6 or lam.shape[-1] != 3 or q.shape[:-1] != lam.shape[:-1]:
        raise ValueError(
            f"`q` must have shape (..., 6) and `multipliers` (..., 3) with the same leading "
            f"shape, got {q.shape} and {lam.shape}"
        )
    th = q[..., 2]
    t = jnp.stack([jnp.cos(th), jnp.sin(th)], -1)
    n = jnp.stack([-jnp.sin(th), jnp.cos(th)], -1)
    return lam[..., 1:2] * n + lam[..., 2:3] * t
