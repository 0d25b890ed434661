r"""The disk on a moving link of Loparo & Vakalis 2002, §7.10, with Coulomb friction: two
`cx.rigid.PlanarBody`s and one `cx.rigid.FrictionalContact` between them, which rolls or
slides as friction decides (`cx.rigid.simulate_contacts`)."""

import jax.numpy as jnp
import numpy as np

from .._constraints import Holonomic
from .._system import System
from ..rigid._contact._frictional_contact import FrictionalContact
from ..rigid._contact._shapes import Disk
from ..rigid._contact._surfaces import Plane
from ..rigid._kinematics._planar_body import PlanarBody
from ._model import Model, resolve_params
from ._rigid_models import DISK_AND_LINK_DEFAULTS

# numpy, not jnp: an array made at import would start XLA before a script sets XLA_FLAGS
_EY = np.array([0.0, 1.0, 0.0])
_EZ = np.array([0.0, 0.0, 1.0])


def _bodies() -> tuple[PlanarBody, PlanarBody]:
    """The link (coordinates 0:3) and the disk (3:6), of unit mass and inertia: the
    Lagrangian reads the real ones from the parameters (`with_parameters`)."""
    return PlanarBody(1.0, 1.0, offset=0, name="link"), PlanarBody(1.0, 1.0, offset=3, name="disk")


def disk_on_link(**overrides) -> Model:
    r"""A disk on a link that moves in a vertical plane, rolling or sliding on it with
    Coulomb friction (Loparo & Vakalis 2002, §7.10, Figure 7.5; §7.9 for the friction
    modes): the system of `disk_and_link` without its contact rows, whose contact is
    `disk_on_link_contact()`, a `cx.rigid.FrictionalContact` between two moving bodies.

    **Modelling assumptions:** as `disk_and_link`: motion in the vertical $(x, y)$ plane,
    gravity $-ge_y$; the link a thin bar whose centre slides on a frictionless horizontal
    rail ($y_2 = 0$, the only row of `model.system`) and turns about it against a torsional
    spring $k_\ell$; the disk (radius $a$) touches the link's upper face. Both are
    `cx.rigid.PlanarBody`s; the face is `Plane(e_y, body=link)`.

    **Coordinates:** $q = (y_1, y_2, \theta_2, z_1, z_2, \theta)$: link centre, link angle,
    disk centre, disk angle (Loparo & Vakalis's names; `disk_and_link`'s order).

    **Lagrangian:** $\tfrac12 m_\ell|\dot p|^2 + \tfrac12 J_\ell\dot\theta_2^2
    + \tfrac12 m_d|\dot c|^2 + \tfrac12 J_d\dot\theta^2 - m_\ell g y_2 - m_d g z_2
    - \tfrac12 k_\ell\theta_2^2$.

    **Contact** (`disk_on_link_contact`): normal $n = (-\sin\theta_2, \cos\theta_2)$,
    tangent $t = (\cos\theta_2, \sin\theta_2)$, contact point $x_c = c - an$, slip
    $s = t\cdot(v_\text{disk}(x_c) - v_\text{link}(x_c))$. Rolling: $s = 0$ is a
    constraint, its multiplier the tangential force on the disk, which must stay within
    $\mu_sN$; sliding: the force $-\mu_kN\operatorname{sign}(s)\,t$ on the disk at $x_c$ and
    its opposite on the link. In the rolling mode the dynamics are `disk_and_link`'s.

    **Parameters** (SI units): those of `disk_and_link` — `m_d` (1.0), `a` (0.2), `J_d`
    (0.02), `m_l` (2.0), `J_l` (0.6667), `k_l` (30.0), `g` (9.81), `tilt0` (0.05), `s0`
    (0.0), `vl0` (0.2), `sd0` (0.2) — and `spin0` the initial spin rate $\dot\theta$ of
    the disk (5.0 rad/s: backspin, so the initial slip is $\dot s_0 + a\dot\theta_0 =
    1.2$ m/s and the disk starts sliding; $-\dot s_0/a$ would start it rolling), `mu_s`
    (0.4), `mu_k` (0.2). The default start slides for about 0.16 s, then rolls.

    **Returns:** a `Model`; its contact is `disk_on_link_contact()`.

    **Example:**

    ```python
    model = cx.models.disk_on_link()
    contact = cx.models.disk_on_link_contact()
    out = cx.rigid.simulate_contacts(model.system, [contact], model.q0, model.qd0,
                                     model.params, modes=["sliding"], t1=0.5)
    out.switch_times[0]                      # the disk starts rolling (about 0.16 s)
    ```
    """
    defaults = dict(DISK_AND_LINK_DEFAULTS, spin0=5.0, mu_s=0.4, mu_k=0.2)
    p = resolve_params("disk_on_link", defaults, overrides)
    link0, disk0 = _bodies()

    def lagrangian(t, q, qd, p):
        link = link0.with_parameters(p["m_l"], p["J_l"])
        disk = disk0.with_parameters(p["m_d"], p["J_d"])
        T = link.kinetic_energy(q, qd) + disk.kinetic_energy(q, qd)
        V = p["g"] * (p["m_l"] * q[1] + p["m_d"] * q[4]) + 0.5 * p["k_l"] * q[2] ** 2
        return T - V

    system = System(lagrangian, [Holonomic(lambda t, q, p: q[1], name="rail")])
    th, s, a = p["tilt0"], p["s0"], p["a"]
    tl = jnp.stack([jnp.cos(th), jnp.sin(th)])
    n = jnp.stack([-jnp.sin(th), jnp.cos(th)])
    c = s * tl + a * n
    q0 = jnp.concatenate([jnp.zeros(2), th[None], c, jnp.zeros(1)])
    # link at (vl0, 0) without turning; contact point moving along the link at sd0
    cd = jnp.stack([p["vl0"], 0.0 * th]) + p["sd0"] * tl
    qd0 = jnp.concatenate([jnp.stack([p["vl0"], 0.0 * th, 0.0 * th]), cd, p["spin0"][None]])
    return Model(system, p, q0, qd0, ("y1", "y2", "theta2", "z1", "z2", "theta"))


def disk_on_link_contact() -> FrictionalContact:
    r"""The contact of `disk_on_link`: a `Disk(a, axis=e_z)` on the disk's `PlanarBody`
    (coordinates 3:6) against the upper face `Plane(e_y, body=link)` of the link's
    (coordinates 0:3), with $a$, $\mu_s$, $\mu_k$ read from the parameters (`"a"`,
    `"mu_s"`, `"mu_k"`), named `"disk"` (Loparo & Vakalis 2002, §7.10).

    **Example:** `cx.rigid.simulate_contacts(model.system, [disk_on_link_contact()], ...)`.
    """
    link, disk = _bodies()
    return FrictionalContact(
        disk,
        Disk(lambda p: p["a"], axis=_EZ),
        Plane(_EY, body=link),
        static_friction=lambda p: p["mu_s"],
        kinetic_friction=lambda p: p["mu_k"],
        name="disk",
    )
