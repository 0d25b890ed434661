r"""Independent reference dynamics derived with `sympy.physics.mechanics`.

Each oracle builds its system from points, particles and rigid bodies (kinetic energy,
constraints and applied loads come from the geometry, never from a typed-in formula),
forms Lagrange's equations with `LagrangesMethod` (holonomic and nonholonomic constraint
equations, multipliers), and lambdifies the augmented mass matrix and forcing vector.
The returned numeric function solves that linear system with numpy:

    qdd, reactions = oracle(t, q, qd, params)

`reactions` is the generalized constraint force $R$ in
$\frac{d}{dt}\partial L/\partial\dot q - \partial L/\partial q = Q + R$; it does not depend
on how the constraint rows are scaled, so it can be compared with `cx.accelerations(...)
.reactions` even where the rows here differ from the ones the tests pass to constrax.

Systems (the names of the builder functions):

* `snake_cart`: Briggs 2016, §1.2, two wheel assemblies at $\pm\ell/2$ steered at
  $\theta\pm\phi$, a steering torque $\tau$ on $\phi$; rows (1.2.1) up to sign.
* `rolling_disk`: a vertical disk rolling without slipping, pushed by a horizontal force.
* `chaplygin_sleigh`: knife edge at the contact point, centre of mass a distance $a$ ahead.
* `double_pendulum`: Cartesian coordinates, two rigid rods (holonomic), gravity.
* `rotating_hoop`: a bead on a hoop spun at a prescribed rate $w$ (rheonomic holonomic).

The derivations are cached (`functools.lru_cache`), so each runs once per session.
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import sympy as sp
import sympy.physics.mechanics as me

_t = me.dynamicsymbols._t


@dataclass(frozen=True)
class Oracle:
    """Numeric reference: `fn(t, q, qd, params) -> (qdd, reactions)`."""

    name: str
    n: int
    m: int
    params: tuple[str, ...]
    fn: Callable

    def __call__(self, t, q, qd, params: dict):
        return self.fn(t, q, qd, params)


def _numeric(name: str, lm: me.LagrangesMethod, qs, params: tuple[sp.Symbol, ...]) -> Oracle:
    """Lambdify `lm`'s augmented system $M_\\text{full}\\,[\\dot q, \\ddot q, \\lambda] = F$."""
    lm.form_lagranges_equations()
    n, m = len(qs), len(lm.lam_vec)
    qd = [q.diff(_t) for q in qs]
    qdd = [q.diff(_t, 2) for q in qs]
    qs_s = sp.symbols(f"q0:{n}")
    qd_s = sp.symbols(f"qd0:{n}")
    tt = sp.Symbol("t")
    # Replace second derivatives, then first, then the coordinates themselves.
    subs = dict(zip(qdd, [0] * n, strict=True))
    subs.update(zip(qd, qd_s, strict=True))
    subs_q = dict(zip(qs, qs_s, strict=True))

    def plain(expr):
        return me.msubs(me.msubs(expr, subs), subs_q).subs(_t, tt)

    M_full = plain(lm.mass_matrix_full)
    F_full = plain(lm.forcing_full)
    # The dynamic equations alone, m_d qdd - f_d = (reaction forces), read off without any
    # convention for the sign of the multipliers.
    M_d = plain(lm.mass_matrix[:, :n])
    F_d = plain(lm.forcing)
    args = (tt, qs_s, qd_s, params)
    M_fn = sp.lambdify(args, M_full, "numpy")
    F_fn = sp.lambdify(args, F_full, "numpy")
    Md_fn = sp.lambdify(args, M_d, "numpy")
    Fd_fn = sp.lambdify(args, F_d, "numpy")
    names = tuple(str(s) for s in params)

    def fn(t, q, qd, p):
        pv = [float(p[k]) for k in names]
        q = [float(v) for v in q]
        qd = [float(v) for v in qd]
        M = np.asarray(M_fn(float(t), q, qd, pv), dtype=float)
        F = np.asarray(F_fn(float(t), q, qd, pv), dtype=float).reshape(-1)
        sol = np.linalg.solve(M, F)
        acc = sol[n : 2 * n]
        Md = np.asarray(Md_fn(float(t), q, qd, pv), dtype=float).reshape(n, n)
        Fd = np.asarray(Fd_fn(float(t), q, qd, pv), dtype=float).reshape(n)
        return acc, Md @ acc - Fd

    return Oracle(name, n, m, names, fn)


@functools.cache
def snake_cart() -> Oracle:
    r"""The snake cart of Briggs 2016, §1.2, with a steering torque $\tau$ on $\phi$.

    Coordinates $(x, y, \theta, \phi)$ of the body's centre of mass, heading and steering
    angle. Body: mass $m_b$, inertia $J_b$ at the centre. Wheel assemblies: mass $m_w$,
    inertia $J_w$, at $\pm\ell/2$ on the body axis, headings $\theta\pm\phi$, no lateral
    slip (rows (1.2.1) up to sign). The torque acts as $\pm\tau/2$ on the two wheels,
    reacted by the body, so its generalized force is $Q_\phi = \tau$, $Q_\theta = 0$.
    Parameters: `mb, mw, Jb, Jw, l, tau`.
    """
    x, y, th, ph = me.dynamicsymbols("x y theta phi")
    mb, mw, Jb, Jw, l, tau = sp.symbols("mb mw Jb Jw l tau")
    N = me.ReferenceFrame("N")
    B = N.orientnew("B", "Axis", [th, N.z])
    W1 = N.orientnew("W1", "Axis", [th + ph, N.z])
    W2 = N.orientnew("W2", "Axis", [th - ph, N.z])
    O = me.Point("O")
    O.set_vel(N, 0)
    G = O.locatenew("G", x * N.x + y * N.y)
    G.set_vel(N, G.pos_from(O).dt(N))
    P1 = G.locatenew("P1", l / 2 * B.x)
    P2 = G.locatenew("P2", -l / 2 * B.x)
    P1.v2pt_theory(G, N, B)
    P2.v2pt_theory(G, N, B)
    body = me.RigidBody("body", G, B, mb, (me.inertia(B, 0, 0, Jb), G))
    wheel1 = me.RigidBody("wheel1", P1, W1, mw, (me.inertia(W1, 0, 0, Jw), P1))
    wheel2 = me.RigidBody("wheel2", P2, W2, mw, (me.inertia(W2, 0, 0, Jw), P2))
    L = me.Lagrangian(N, body, wheel1, wheel2)
    nonhol = [P1.vel(N).dot(W1.y), P2.vel(N).dot(W2.y)]
    loads = [(W1, tau / 2 * N.z), (W2, -tau / 2 * N.z)]
    lm = me.LagrangesMethod(L, [x, y, th, ph], nonhol_coneqs=nonhol, forcelist=loads, frame=N)
    return _numeric("snake_cart", lm, [x, y, th, ph], (mb, mw, Jb, Jw, l, tau))


@functools.cache
def rolling_disk() -> Oracle:
    r"""A vertical disk (mass $m$, radius $R$) rolling without slipping on a plane.

    Coordinates $(x, y, \theta, \varphi)$: contact-point position, heading, spin angle.
    Disk inertia $\mathrm{diag}(mR^2/4, mR^2/2, mR^2/4)$ in its frame (axle along $y$).
    Constraint: the contact point has zero velocity, i.e. $\dot x = R\cos\theta\,\dot\varphi$,
    $\dot y = R\sin\theta\,\dot\varphi$. Load: a horizontal force $F_x$ along the spatial
    $x$ axis at the disk centre. Parameters: `m, R, Fx`.
    """
    x, y, th, ph = me.dynamicsymbols("x y theta varphi")
    m, R, Fx = sp.symbols("m R Fx")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [th, N.z])
    D = A.orientnew("D", "Axis", [ph, A.y])
    O = me.Point("O")
    O.set_vel(N, 0)
    C = O.locatenew("C", x * N.x + y * N.y + R * N.z)
    C.set_vel(N, C.pos_from(O).dt(N))
    contact = C.locatenew("contact", -R * N.z)
    contact.v2pt_theory(C, N, D)
    disk = me.RigidBody(
        "disk", C, D, m, (me.inertia(D, m * R**2 / 4, m * R**2 / 2, m * R**2 / 4), C)
    )
    L = me.Lagrangian(N, disk)
    nonhol = [contact.vel(N).dot(N.x), contact.vel(N).dot(N.y)]
    loads = [(C, Fx * N.x)]
    lm = me.LagrangesMethod(L, [x, y, th, ph], nonhol_coneqs=nonhol, forcelist=loads, frame=N)
    return _numeric("rolling_disk", lm, [x, y, th, ph], (m, R, Fx))


@functools.cache
def chaplygin_sleigh() -> Oracle:
    r"""The Chaplygin sleigh: a rigid body on a knife edge.

    Coordinates $(x, y, \theta)$ of the knife-edge contact point and the heading. Mass $m$,
    inertia $I$ about the centre of mass, which sits a distance $a$ ahead of the contact
    point on the body axis. Constraint: no side slip at the contact point. Parameters:
    `m, I, a`.
    """
    x, y, th = me.dynamicsymbols("x y theta")
    m, I, a = sp.symbols("m I a")
    N = me.ReferenceFrame("N")
    B = N.orientnew("B", "Axis", [th, N.z])
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y)
    P.set_vel(N, P.pos_from(O).dt(N))
    G = P.locatenew("G", a * B.x)
    G.v2pt_theory(P, N, B)
    sleigh = me.RigidBody("sleigh", G, B, m, (me.inertia(B, 0, 0, I), G))
    L = me.Lagrangian(N, sleigh)
    nonhol = [P.vel(N).dot(B.y)]
    lm = me.LagrangesMethod(L, [x, y, th], nonhol_coneqs=nonhol, frame=N)
    return _numeric("chaplygin_sleigh", lm, [x, y, th], (m, I, a))


@functools.cache
def double_pendulum() -> Oracle:
    r"""A planar double pendulum in Cartesian coordinates $(x_1, y_1, x_2, y_2)$.

    Point masses $m_1$, $m_2$; rigid massless rods of lengths $l_1$ (pivot–bob 1) and
    $l_2$ (bob 1–bob 2) as holonomic constraints; gravity $-g\,\hat y$ applied as forces
    (not as a potential). Parameters: `m1, m2, l1, l2, g`.
    """
    x1, y1, x2, y2 = me.dynamicsymbols("x1 y1 x2 y2")
    m1, m2, l1, l2, g = sp.symbols("m1 m2 l1 l2 g")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    P1 = O.locatenew("P1", x1 * N.x + y1 * N.y)
    P2 = O.locatenew("P2", x2 * N.x + y2 * N.y)
    P1.set_vel(N, P1.pos_from(O).dt(N))
    P2.set_vel(N, P2.pos_from(O).dt(N))
    L = me.Lagrangian(N, me.Particle("b1", P1, m1), me.Particle("b2", P2, m2))
    r1, r12 = P1.pos_from(O), P2.pos_from(P1)
    hol = [r1.dot(r1) - l1**2, r12.dot(r12) - l2**2]
    loads = [(P1, -m1 * g * N.y), (P2, -m2 * g * N.y)]
    lm = me.LagrangesMethod(L, [x1, y1, x2, y2], hol_coneqs=hol, forcelist=loads, frame=N)
    return _numeric("double_pendulum", lm, [x1, y1, x2, y2], (m1, m2, l1, l2, g))


@functools.cache
def rotating_hoop() -> Oracle:
    r"""A bead (mass $m$) on a hoop of radius $R$ spun about the vertical at rate $w$.

    Cartesian coordinates $(x, y, z)$; time-dependent holonomic constraints
    $|r|^2 = R^2$ and $-\sin(wt)\,x + \cos(wt)\,y = 0$ (the hoop's plane); gravity
    $-g\,\hat z$ as a force. Parameters: `m, R, w, g`.
    """
    x, y, z = me.dynamicsymbols("x y z")
    m, R, w, g = sp.symbols("m R w g")
    N = me.ReferenceFrame("N")
    H = N.orientnew("H", "Axis", [w * _t, N.z])  # the hoop's frame; its plane is H.x-H.z
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y + z * N.z)
    P.set_vel(N, P.pos_from(O).dt(N))
    L = me.Lagrangian(N, me.Particle("bead", P, m))
    r = P.pos_from(O)
    hol = [r.dot(r) - R**2, r.dot(H.y)]
    loads = [(P, -m * g * N.z)]
    lm = me.LagrangesMethod(L, [x, y, z], hol_coneqs=hol, forcelist=loads, frame=N)
    return _numeric("rotating_hoop", lm, [x, y, z], (m, R, w, g))


ALL = {
    "snake_cart": snake_cart,
    "rolling_disk": rolling_disk,
    "chaplygin_sleigh": chaplygin_sleigh,
    "double_pendulum": double_pendulum,
    "rotating_hoop": rotating_hoop,
}
