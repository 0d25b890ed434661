r"""Particles with constraints: the nonholonomic particle (two variants) and a bead on a
rotating hoop (a rheonomic holonomic constraint)."""

import jax.numpy as jnp

from .._constraints import Holonomic, Pfaffian
from .._system import System
from ._model import Model, resolve_params

_VARIANTS = ("heisenberg", "yx")


def _yx_lagrangian(t, q, qd, p):
    return 0.5 * p["m"] * (qd @ qd)


def _yx_one_form(t, q, p):
    return jnp.stack([-p["k"] * q[1], jnp.zeros_like(q[1]), jnp.ones_like(q[1])])


def _heisenberg_lagrangian(t, q, qd, p):
    return 0.5 * p["m"] * (qd[0] ** 2 + qd[1] ** 2)


def _heisenberg_one_form(t, q, p):
    x, y, _ = q
    return jnp.stack([0.5 * p["k"] * y, -0.5 * p["k"] * x, jnp.ones_like(x)])


def nonholonomic_particle(variant: str = "heisenberg", **overrides) -> Model:
    r"""A particle in $\mathbb{R}^3$ with one non-integrable linear velocity constraint
    (Bloch, *Nonholonomic Mechanics and Control*, §1.5 and §1.8; Brockett's
    Heisenberg system).

    **Coordinates:** $q = (x, y, z)$.

    **Variants:**

    - `"yx"` (Bloch §1.5, the nonholonomic particle):
      $L = \tfrac12 m(\dot x^2 + \dot y^2 + \dot z^2)$ with $\dot z = k\,y\,\dot x$.
      Under d'Alembert $\dot y$ is constant and $\dot x\sqrt{1 + k^2y^2}$ is conserved.
    - `"heisenberg"` (sub-Riemannian, Bloch §1.8): $L = \tfrac12 m(\dot x^2 + \dot y^2)$
      with $\dot z = \tfrac{k}{2}(x\dot y - y\dot x)$. The mass matrix is singular
      (no $\dot z^2$ term) but positive definite on $\ker A$, so the saddle system is
      regular. Under d'Alembert the $z$ row forces $\lambda = 0$: straight lines in
      $(x, y)$; under `cx.Vakonomic()` the projections are circles (the
      sub-Riemannian geodesics).

    **Constraint:** one `cx.Pfaffian` named `"nonholonomic"`:
    $\omega = (-k y, 0, 1)$ (`"yx"`) or $(\tfrac{k}{2}y, -\tfrac{k}{2}x, 1)$
    (`"heisenberg"`).

    **Parameters:** `m` mass [kg] (1.0), `k` coupling coefficient of the constraint
    [1/m] (1.0, the textbook systems).

    **Initial state:** `"yx"`: $q_0 = (0, 0.5, 0)$, $\dot q_0 = (1, 0.5, k/2)$;
    `"heisenberg"`: $q_0 = (1, 0, 0)$, $\dot q_0 = (0.5, 1, k/2)$.

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.nonholonomic_particle("heisenberg")
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=3.0,
                       prescription=cx.Vakonomic())
    ```
    """
    if variant not in _VARIANTS:
        raise ValueError(
            f"nonholonomic_particle: unknown variant {variant!r}; valid variants are "
            f"{', '.join(repr(v) for v in _VARIANTS)}"
        )
    p = resolve_params("nonholonomic_particle", dict(m=1.0, k=1.0), overrides)
    one = jnp.ones_like(p["k"])
    if variant == "yx":
        lagrangian, nonholonomic = _yx_lagrangian, _yx_one_form
        q0 = jnp.array([0.0, 0.5, 0.0])
        qd0 = jnp.stack([one, 0.5 * one, 0.5 * p["k"]])
    else:
        lagrangian, nonholonomic = _heisenberg_lagrangian, _heisenberg_one_form
        q0 = jnp.array([1.0, 0.0, 0.0])
        qd0 = jnp.stack([0.5 * one, one, 0.5 * p["k"]])
    system = System(lagrangian, [Pfaffian(nonholonomic, name="nonholonomic")])
    return Model(system, p, q0, qd0.astype(q0.dtype), ("x", "y", "z"))


def _bead_lagrangian(t, q, qd, p):
    return 0.5 * p["m"] * (qd @ qd) - p["m"] * p["g"] * q[2]


def _hoop(t, q, p):
    x, y, _ = q
    c, s = jnp.cos(p["w"] * t), jnp.sin(p["w"] * t)
    return jnp.stack([q @ q - p["R"] ** 2, -s * x + c * y])


def bead_on_rotating_hoop(**overrides) -> Model:
    r"""A bead sliding without friction on a vertical hoop of radius $R$ spun about its
    vertical diameter at the prescribed rate $w$ (Goldstein, *Classical Mechanics*;
    Marsden–Ratiu §2.8), in Cartesian coordinates: a rheonomic holonomic constraint.

    **Coordinates:** $q = (x, y, z)$, $z$ up, hoop centre at the origin.

    **Lagrangian:** $L = \tfrac12 m(\dot x^2 + \dot y^2 + \dot z^2) - m g z$.

    **Constraints:** one `cx.Holonomic` named `"hoop"` with two rows,

    $x^2 + y^2 + z^2 - R^2 = 0,\quad -\sin(wt)\,x + \cos(wt)\,y = 0$

    (on the sphere, and in the plane of the hoop, which contains the $z$ axis and makes
    the angle $wt$ with the $xz$ plane).

    With $\vartheta$ the angle from the bottom of the hoop,
    $\ddot\vartheta = \sin\vartheta\,(w^2\cos\vartheta - g/R)$; for $w^2 > g/R$ the
    bead has relative equilibria at $\cos\vartheta = g/(Rw^2)$. Energy is not conserved;
    the Jacobi integral $E - w\,m(x\dot y - y\dot x)$ is.

    **Parameters** (SI units): `m` mass [kg] (1.0), `R` hoop radius [m] (1.0), `w` spin
    rate [rad/s] (4.0), `g` gravity [m/s²] (9.81).

    **Initial state:** at $t = 0$, $\vartheta_0 = 0.5$, $\dot\vartheta_0 = 0$, i.e.
    $q_0 = (R\sin\vartheta_0, 0, -R\cos\vartheta_0)$ moving with the hoop,
    $\dot q_0 = (0, wR\sin\vartheta_0, 0)$.

    **Returns:** a `Model`.

    **Example:**

    ```python
    model = cx.models.bead_on_rotating_hoop(w=2.0)
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=5.0)
    ```
    """
    defaults = dict(m=1.0, R=1.0, w=4.0, g=9.81)
    p = resolve_params("bead_on_rotating_hoop", defaults, overrides)
    system = System(_bead_lagrangian, [Holonomic(_hoop, name="hoop")])
    th0 = 0.5
    zero = jnp.zeros_like(p["R"])
    q0 = jnp.stack([p["R"] * jnp.sin(th0), zero, -p["R"] * jnp.cos(th0)])
    qd0 = jnp.stack([zero, p["w"] * p["R"] * jnp.sin(th0), zero])
    return Model(system, p, q0, qd0, ("x", "y", "z"))
