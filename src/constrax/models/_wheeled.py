r"""Planar wheeled and bladed vehicles: snake cart, vertical rolling disk, Chaplygin sleigh,
knife edge, dynamic car-like model. Every constraint is Pfaffian (ideal rolling or no side
slip), treated with the Lagrange–d'Alembert prescription by default."""

from collections.abc import Callable

import jax.numpy as jnp

from .._constraints import Pfaffian
from .._system import System
from ._model import Model, resolve_params


def _stack(*xs):
    """Stack scalars of possibly different provenance into one float vector."""
    return jnp.stack([jnp.asarray(x) for x in xs])


# ----------------------------------------------------------------------------------------
# Snake cart (Briggs 2016, §1.2).


def _snake_lagrangian(t, q, qd, p):
    xd, yd, thd, phd = qd
    m = p["m_b"] + 2 * p["m_w"]
    J = p["J_b"] + 2 * p["J_w"] + 0.5 * p["l"] ** 2 * p["m_w"]
    return 0.5 * m * (xd**2 + yd**2) + 0.5 * J * thd**2 + p["J_w"] * phd**2


def _snake_wheels(t, q, p):
    _, _, th, ph = q
    h = 0.5 * p["l"] * jnp.cos(ph)
    zero = jnp.zeros_like(th)
    front = _stack(-jnp.sin(th + ph), jnp.cos(th + ph), h, zero)
    rear = _stack(jnp.sin(th - ph), -jnp.cos(th - ph), h, zero)
    return jnp.stack([front, rear])


def _snake_steering_torque(t, q, qd, p):
    tau = p["tau_amp"] * jnp.sin(p["tau_freq"] * t)
    return jnp.zeros_like(q).at[3].set(tau)


def snake_cart(**overrides) -> Model:
    r"""The snake cart of Briggs 2016, §1.2: a body with two steered wheel assemblies whose
    steering angles are slaved to each other; its constraint distribution drops rank at
    $\phi = \pm\pi/2$.

    **Coordinates:** $q = (x, y, \theta, \phi)$: centre of mass (half way between the
    wheel assemblies), body heading, steering angle of the wheels relative to the body
    (front wheel heading $\theta + \phi$, rear wheel heading $\theta - \phi$).

    **Lagrangian** (kinetic energy, derived from the bodies; wheel assemblies of mass
    $m_w$ at $\pm\ell/2$ on the body axis, turning at $\dot\theta \pm \dot\phi$):

    $L = \tfrac12(m_b + 2m_w)(\dot x^2 + \dot y^2)
    + \tfrac12\left(J_b + 2J_w + \tfrac12\ell^2 m_w\right)\dot\theta^2 + J_w\dot\phi^2.$

    This agrees with the $\ddot x, \ddot y, \ddot\theta$ rows of the published equations of
    motion (1.2.3). The printed $L$ has $\ell^2 m_w$ (not
    $\tfrac14\ell^2 m_w$) in the $\dot\theta^2$ coefficient, inconsistent with its own
    (1.2.3), and its $\ddot\phi$ row drops the factor $2J_w$; we use the $T$ above
    (from $\tfrac12 J_w(\dot\theta+\dot\phi)^2 + \tfrac12 J_w(\dot\theta-\dot\phi)^2$
    and $2\cdot\tfrac12 m_w(\ell/2)^2\dot\theta^2$), whose $\ddot\phi$ row reads
    $2J_w\ddot\phi = \tau(t)$.

    **Constraints:** no side slip of either wheel, Briggs 2016, eq. (1.2.1), as one
    `cx.Pfaffian` named `"wheels"` with two rows:

    $\tfrac{\ell}{2}\cos\phi\,\dot\theta + \cos(\theta+\phi)\,\dot y
    - \sin(\theta+\phi)\,\dot x = 0,\quad
    \tfrac{\ell}{2}\cos\phi\,\dot\theta - \cos(\theta-\phi)\,\dot y
    + \sin(\theta-\phi)\,\dot x = 0.$

    The rows are independent except at $\phi = \pm\pi/2$, where they coincide (rank 1).

    **Force:** a steering torque $Q = (0, 0, 0, \tau(t))$,
    $\tau(t) = \tau_\text{amp}\sin(\omega_\tau t)$.

    **Parameters** (SI units): `m_b` body mass [kg] (1.0), `m_w` mass of one wheel
    assembly [kg] (0.5), `J_b` body inertia about the centre of mass [kg m²] (0.5),
    `J_w` inertia of one wheel assembly about its vertical axis [kg m²] (0.1), `l`
    distance between the wheel assemblies [m] (1.0), `tau_amp` steering torque amplitude
    [N m] (0.3), `tau_freq` its angular frequency [rad/s] (1.0).

    **Initial state:** at the origin heading along $x$ with forward speed
    $v_0 = 0.5$ m/s, $\phi_0 = 1.2$, $\dot\phi_0 = 0.5$ and
    $\dot\theta_0 = 2v_0\tan\phi_0/\ell$ (the rotation about the instantaneous centre
    the wheels allow).

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.snake_cart(tau_amp=0.0)
    cx.constraint_rank(model.system, 0.0, model.q0, model.qd0, model.params).rank  # 2
    ```
    """
    defaults = dict(m_b=1.0, m_w=0.5, J_b=0.5, J_w=0.1, l=1.0, tau_amp=0.3, tau_freq=1.0)
    p = resolve_params("snake_cart", defaults, overrides)

    system = System(
        _snake_lagrangian, [Pfaffian(_snake_wheels, name="wheels")], force=_snake_steering_torque
    )
    phi0, phid0, v0 = 1.2, 0.5, 0.5
    q0 = jnp.array([0.0, 0.0, 0.0, phi0])
    qd0 = _stack(v0, 0.0, 2 * v0 * jnp.tan(phi0) / p["l"], phid0).astype(q0.dtype)
    return Model(system, p, q0, qd0, ("x", "y", "theta", "phi"))


# ----------------------------------------------------------------------------------------
# Vertical rolling disk (Bloch, Nonholonomic Mechanics and Control, §1.4).


def _disk_lagrangian(t, q, qd, p):
    xd, yd, thd, phd = qd
    return 0.5 * p["m"] * (xd**2 + yd**2) + 0.5 * p["I"] * phd**2 + 0.5 * p["J"] * thd**2


def _disk_rolling(t, q, p):
    th = q[2]
    one, zero = jnp.ones_like(th), jnp.zeros_like(th)
    return jnp.stack(
        [
            _stack(one, zero, zero, -p["R"] * jnp.cos(th)),
            _stack(zero, one, zero, -p["R"] * jnp.sin(th)),
        ]
    )


def vertical_rolling_disk(**overrides) -> Model:
    r"""A disk rolling upright without slipping on a horizontal plane (Bloch,
    *Nonholonomic Mechanics and Control*, §1.4; Neimark–Fufaev).

    **Coordinates:** $q = (x, y, \theta, \phi)$: contact point, heading of the disk
    (angle of its plane with the $x$ axis), spin angle about its axle.

    **Lagrangian:** $L = \tfrac12 m(\dot x^2 + \dot y^2) + \tfrac12 I\dot\phi^2
    + \tfrac12 J\dot\theta^2$.

    **Constraints:** rolling without slipping, one `cx.Pfaffian` named `"rolling"`:
    $\dot x = R\cos\theta\,\dot\phi$, $\dot y = R\sin\theta\,\dot\phi$.

    The motion has $\dot\theta$ and $\dot\phi$ constant; for $\dot\theta\ne 0$ the
    contact point runs on a circle of radius $R|\dot\phi/\dot\theta|$.

    **Parameters** (SI units): `m` mass [kg] (1.0), `R` radius [m] (0.5), `I` moment of
    inertia about the axle [kg m²] (0.125, a uniform disk $\tfrac12 mR^2$), `J` moment
    of inertia about a vertical diameter [kg m²] (0.0625, $\tfrac14 mR^2$).

    **Initial state:** at the origin, $\theta_0 = 0$, $\dot\theta_0 = 1$ rad/s,
    $\dot\phi_0 = 2$ rad/s, $(\dot x, \dot y)$ from the rolling condition.

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.vertical_rolling_disk(R=0.3)
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=6.0)
    ```
    """
    defaults = dict(m=1.0, R=0.5, I=0.125, J=0.0625)
    p = resolve_params("vertical_rolling_disk", defaults, overrides)

    system = System(_disk_lagrangian, [Pfaffian(_disk_rolling, name="rolling")])
    thd0, phd0 = 1.0, 2.0
    q0 = jnp.zeros(4)
    qd0 = _stack(p["R"] * phd0, 0.0 * p["R"], thd0, phd0).astype(q0.dtype)
    return Model(system, p, q0, qd0, ("x", "y", "theta", "phi"))


# ----------------------------------------------------------------------------------------
# Chaplygin sleigh and knife edge (Bloch §1.7, §1.6).


def _no_side_slip(t, q, p):
    th = q[2]
    return _stack(-jnp.sin(th), jnp.cos(th), jnp.zeros_like(th))


def _sleigh_lagrangian(t, q, qd, p):
    th = q[2]
    xd, yd, thd = qd
    vx = xd - p["a"] * jnp.sin(th) * thd
    vy = yd + p["a"] * jnp.cos(th) * thd
    return 0.5 * p["m"] * (vx**2 + vy**2) + 0.5 * p["I"] * thd**2


def chaplygin_sleigh(**overrides) -> Model:
    r"""The Chaplygin sleigh: a planar rigid body on a knife edge that cannot slip
    sideways, with the centre of mass a distance $a$ ahead of the blade (Bloch,
    *Nonholonomic Mechanics and Control*, §1.7; Neimark–Fufaev, *Dynamics of
    Nonholonomic Systems*).

    **Coordinates:** $q = (x, y, \theta)$: the contact point of the knife edge (origin of
    the body frame) and the heading of the body axis.

    **Lagrangian:** with the centre of mass at $(x + a\cos\theta, y + a\sin\theta)$,

    $L = \tfrac12 m\left[(\dot x - a\sin\theta\,\dot\theta)^2
    + (\dot y + a\cos\theta\,\dot\theta)^2\right] + \tfrac12 I\dot\theta^2.$

    **Constraint:** no side slip at the blade, `cx.Pfaffian` named `"no_side_slip"`:
    $-\sin\theta\,\dot x + \cos\theta\,\dot y = 0$.

    With forward speed $v$ and $\omega = \dot\theta$: $\dot v = a\omega^2$,
    $(I + ma^2)\dot\omega = -mav\omega$; energy is conserved and the sleigh tends to
    straight-line motion with $v_\infty = \sqrt{2E/m}$.

    **Parameters** (SI units): `m` mass [kg] (1.0), `I` moment of inertia about the
    centre of mass [kg m²] (0.1), `a` distance from the blade to the centre of mass
    along the body axis [m] (0.5).

    **Initial state:** at the origin heading along $x$, $v_0 = 1$ m/s,
    $\dot\theta_0 = 1$ rad/s.

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.chaplygin_sleigh(a=0.3)
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=10.0)
    ```
    """
    defaults = dict(m=1.0, I=0.1, a=0.5)
    p = resolve_params("chaplygin_sleigh", defaults, overrides)

    system = System(_sleigh_lagrangian, [Pfaffian(_no_side_slip, name="no_side_slip")])
    q0 = jnp.zeros(3)
    qd0 = jnp.array([1.0, 0.0, 1.0])
    return Model(system, p, q0, qd0, ("x", "y", "theta"))


def _knife_lagrangian(t, q, qd, p):
    xd, yd, thd = qd
    kinetic = 0.5 * p["m"] * (xd**2 + yd**2) + 0.5 * p["I"] * thd**2
    return kinetic + p["m"] * p["g_incline"] * q[0]


def knife_edge(**overrides) -> Model:
    r"""A knife edge (equivalently a unicycle) on a plane, possibly inclined: a planar
    body that cannot slip sideways at its centre of mass (Bloch, *Nonholonomic Mechanics
    and Control*, §1.6).

    **Coordinates:** $q = (x, y, \theta)$: centre of mass/contact point, heading. On an
    inclined plane $x$ points downhill.

    **Lagrangian:** $L = \tfrac12 m(\dot x^2 + \dot y^2) + \tfrac12 I\dot\theta^2
    + m g_\text{incline} x$, with $g_\text{incline} = g\sin\alpha$ for a plane inclined
    at angle $\alpha$.

    **Constraint:** no side slip, `cx.Pfaffian` named `"no_side_slip"`:
    $-\sin\theta\,\dot x + \cos\theta\,\dot y = 0$.

    Then $\ddot\theta = 0$ and the forward speed obeys $\dot v = g_\text{incline}\cos\theta$;
    from rest at $\theta_0 = 0$ with $\dot\theta = \omega$,
    $x = \tfrac{g_\text{incline}}{2\omega^2}\sin^2\omega t$,
    $y = \tfrac{g_\text{incline}}{2\omega^2}(\omega t - \tfrac12\sin 2\omega t)$.

    **Parameters** (SI units): `m` mass [kg] (1.0), `I` moment of inertia about the
    vertical axis [kg m²] (0.1), `g_incline` downhill component of gravity
    $g\sin\alpha$ [m/s²] (0.0: a horizontal plane).

    **Initial state:** at the origin heading along $x$, $v_0 = 1$ m/s,
    $\dot\theta_0 = 0.5$ rad/s.

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.knife_edge(g_incline=9.81 * jnp.sin(0.2))
    ```
    """
    defaults = dict(m=1.0, I=0.1, g_incline=0.0)
    p = resolve_params("knife_edge", defaults, overrides)

    system = System(_knife_lagrangian, [Pfaffian(_no_side_slip, name="no_side_slip")])
    q0 = jnp.zeros(3)
    qd0 = jnp.array([1.0, 0.0, 0.5])
    return Model(system, p, q0, qd0, ("x", "y", "theta"))


# ----------------------------------------------------------------------------------------
# Dynamic car-like model.


def _car_lagrangian(t, q, qd, p):
    xd, yd, thd, psd = qd
    return (
        0.5 * p["m"] * (xd**2 + yd**2) + 0.5 * p["I"] * thd**2 + 0.5 * p["J_s"] * (thd + psd) ** 2
    )


def _car_no_side_slip(t, q, p):
    _, _, th, ps = q
    zero = jnp.zeros_like(th)
    rear = _stack(-jnp.sin(th), jnp.cos(th), zero, zero)
    front = _stack(-jnp.sin(th + ps), jnp.cos(th + ps), p["L_wb"] * jnp.cos(ps), zero)
    return jnp.stack([rear, front])


def _car_drive_and_steer(t, q, qd, p):
    th = q[2]
    F = p["F_drive"]
    return _stack(F * jnp.cos(th), F * jnp.sin(th), jnp.zeros_like(th), p["tau_steer"])


def kinematic_car(*, force: Callable | None = None, **overrides) -> Model:
    r"""A dynamic car-like vehicle (the "kinematic car" of Murray–Sastry / Bloch §1.9 with
    inertia): rear axle and steered front wheel that cannot slip sideways, driven by a
    force along the heading and a steering torque.

    **Coordinates:** $q = (x, y, \theta, \psi)$: midpoint of the rear axle, heading,
    steering angle of the front wheel relative to the body (front wheel at
    $(x + L_{wb}\cos\theta, y + L_{wb}\sin\theta)$, heading $\theta + \psi$).

    **Lagrangian:** body of mass $m$ with its centre of mass at the rear-axle midpoint and
    yaw inertia $I$ there; steering assembly of inertia $J_s$ turning at
    $\dot\theta + \dot\psi$:

    $L = \tfrac12 m(\dot x^2 + \dot y^2) + \tfrac12 I\dot\theta^2
    + \tfrac12 J_s(\dot\theta + \dot\psi)^2.$

    **Constraints:** one `cx.Pfaffian` named `"no_side_slip"` with two rows (rear, front):

    $-\sin\theta\,\dot x + \cos\theta\,\dot y = 0,\quad
    -\sin(\theta+\psi)\,\dot x + \cos(\theta+\psi)\,\dot y
    + L_{wb}\cos\psi\,\dot\theta = 0.$

    The rows are independent for every $\psi$.

    **Force (controls):** by default
    $Q = (F\cos\theta, F\sin\theta, 0, \tau_s)$ with constant drive force $F$ =
    `F_drive` and steering torque $\tau_s$ = `tau_steer` (both 0). Pass
    `force=Q(t, q, qd, p)` to inject other controls (e.g. from a trajectory optimiser
    reading its control parameters from `p`); it replaces the default.

    **Parameters** (SI units): `m` mass [kg] (1.0), `I` yaw inertia about the rear-axle
    midpoint [kg m²] (0.2), `L_wb` wheelbase [m] (1.0), `J_s` steering inertia
    [kg m²] (0.05), `F_drive` drive force [N] (0.0), `tau_steer` steering torque
    [N m] (0.0).

    **Initial state:** at the origin heading along $x$, speed $v_0 = 1$ m/s, steering
    angle $\psi_0 = 0.2$, $\dot\psi_0 = 0$, $\dot\theta_0 = v_0\tan\psi_0/L_{wb}$.

    **Returns:** a `Model`.

    **Example:**

    ```python
    def controls(t, q, qd, p):
        th = q[2]
        return jnp.stack([p["F"] * jnp.cos(th), p["F"] * jnp.sin(th), 0.0 * th,
                          p["tau"] * jnp.sin(t)])
    model = cx.models.kinematic_car(force=controls)
    params = {**model.params, "F": jnp.array(0.5), "tau": jnp.array(0.1)}
    traj = cx.simulate(model.system, model.q0, model.qd0, params, t1=2.0)
    ```
    """
    defaults = dict(m=1.0, I=0.2, L_wb=1.0, J_s=0.05, F_drive=0.0, tau_steer=0.0)
    p = resolve_params("kinematic_car", defaults, overrides)

    system = System(
        _car_lagrangian,
        [Pfaffian(_car_no_side_slip, name="no_side_slip")],
        force=_car_drive_and_steer if force is None else force,
    )
    v0, psi0 = 1.0, 0.2
    q0 = jnp.array([0.0, 0.0, 0.0, psi0])
    qd0 = _stack(v0, 0.0, v0 * jnp.tan(psi0) / p["L_wb"], 0.0).astype(q0.dtype)
    return Model(system, p, q0, qd0, ("x", "y", "theta", "psi"))
