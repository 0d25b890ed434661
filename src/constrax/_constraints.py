r"""Constraint kinds. Every constraint is brought to velocity level $c(t, q, \dot q) = 0$.

docs/concepts/constraints.md; Neimark & Fufaev 1972;
("d'Alembert prescription", "Linear vakonomic constraints", "Nonlinear vakonomic
constraints").
"""

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._custom_types import (
    AffineTermFn,
    HolonomicFn,
    OneFormFn,
    Params,
    Time,
    VelocityConstraintFn,
)
from ._traced import row_count, traced_shape


def row_jacobian(fn, x: Array, k: int) -> Array:
    """`(k, n)` Jacobian of `fn: (n,) -> (k,)` at `x`: `k` reverse passes when `k < n`,
    else `n` forward passes (both batched by `vmap`)."""
    if k < x.shape[0]:
        _, vjp = jax.vjp(fn, x)
        return jax.vmap(lambda ct: vjp(ct)[0])(jnp.eye(k, dtype=x.dtype))
    return jax.jacfwd(fn)(x)


def _name_of(fn, default: str) -> str:
    name = getattr(fn, "__name__", None)
    if name is None or name == "<lambda>":
        return default
    return name


def _label(con: "AbstractConstraint") -> str:
    return f"constraint {con.name!r} ({type(con).__name__})"


def _no_position_level(con: "AbstractConstraint") -> TypeError:
    return TypeError(f"constraint {con.name!r} has no position-level residual")


RowTerms = tuple[Float[Array, "k n"], Float[Array, " k"], Float[Array, " k"] | None]
r"""$(A, c, c_\text{bias})$ of a constraint's rows (`AbstractConstraint.terms`)."""


def velocity_level_terms(residual, t, q, qd, p, bias: bool) -> RowTerms:
    r"""$(A, c, c_\text{bias})$ of rows given at velocity level, `residual(t, q, qd, p)`.

    $c$ and $A = \partial c/\partial\dot q$ come from one trace of the rows (their
    $q$-dependent part, e.g. a contact geometry, is traced once for both): `jax.vjp` in
    $\dot q$, one pullback per row, or forward mode when there are at least as many rows as
    coordinates. $c_\text{bias}$ is the tangent of that pair along $(1, \dot q)$ in
    $(t, q)$ (one `jax.jvp`); with `bias=False`, `None` without the jvp.
    """

    def rows_and_jacobian(t_, q_):
        rows = lambda v: jnp.atleast_1d(residual(t_, q_, v, p)).astype(q.dtype)
        c, pullback = jax.vjp(rows, qd)
        k, n = c.shape[0], qd.shape[0]
        if k < n:  # reverse mode: k pullbacks of the one trace
            return c, jax.vmap(lambda ct: pullback(ct)[0])(jnp.eye(k, dtype=q.dtype))
        basis = jnp.eye(n, dtype=q.dtype)
        return c, jax.vmap(lambda e: jax.jvp(rows, (qd,), (e,))[1], out_axes=1)(basis)

    if not bias:
        c, A = rows_and_jacobian(t, q)
        return A, c, None
    (c, A), (c_bias, _) = jax.jvp(rows_and_jacobian, (t, q), (jnp.ones_like(t), qd))
    return A, c, c_bias


class AbstractConstraint(eqx.Module):
    r"""A set of `k` constraint rows written at velocity level, $c(t, q, \dot q) = 0$.

    Each kind says whether its rows come from positions (`holonomic`) and whether they
    are linear in the velocities (`linear_in_velocity`), and carries what the engine needs
    of it: its rows (`velocity_residual`), their number and position-level part from the
    trace-time shape checks (`count_rows`), the Jacobian $A = \partial c / \partial \dot q$
    and the bias $\dot c - A \ddot q$ by autodiff (`terms`), and the position level
    (`has_position_rows`, `position_residual`).
    """

    name: eqx.AbstractVar[str]
    holonomic: eqx.AbstractClassVar[bool]
    linear_in_velocity: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def velocity_residual(
        self, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], p: Params
    ) -> Float[Array, " k"]:
        """The rows $c(t, q, \\dot q)$."""

    @abc.abstractmethod
    def count_rows(
        self, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], p: Params
    ) -> tuple[int, int]:
        """`(k, h)`: the constraint's `k` rows, of which the first `h` have a position
        level, from the shapes of its functions traced abstractly (`jax.eval_shape`).
        Raises `ValueError` naming the function and the shapes at fault."""

    @abc.abstractmethod
    def terms(
        self, t: Time, q: Float[Array, " n"], qd: Float[Array, " n"], p: Params, bias: bool
    ) -> RowTerms:
        r"""$(A, c, c_\text{bias})$: the Jacobian $A = \partial c/\partial\dot q$, the rows
        $c$ and the bias
        $c_\text{bias} = \partial c/\partial t + (\partial c/\partial q)\dot q$, so that
        $\dot c = A\ddot q + c_\text{bias}$; with `bias=False`, $c_\text{bias}$ is not
        computed (`None`)."""

    @property
    @abc.abstractmethod
    def has_position_rows(self) -> bool:
        """Whether `position_residual` gives $g(t, q)$ for (some of) the rows: all rows of a
        holonomic constraint, the leading integrable rows of a `Pfaffian` with `position=`."""

    @abc.abstractmethod
    def position_residual(self, t: Time, q: Float[Array, " n"], p: Params) -> Float[Array, " h"]:
        """The rows $g(t, q)$ of the holonomic rows; raises for velocity constraints."""


class Holonomic(AbstractConstraint):
    r"""Holonomic (position) constraint $g(t, q, p) = 0$, possibly rheonomic.

    See docs/concepts/constraints.md. At velocity level
    $c = \frac{\partial g}{\partial q}\dot q + \frac{\partial g}{\partial t}$, computed as
    one `jax.jvp` of `g` along the tangent $(1, \dot q)$.

    **Arguments:**

    - `g`: `g(t, q, p) -> (k,)` (a scalar is read as one row).
    - `name`: used in error messages and diagnostics; defaults to `g.__name__`.
    - `velocity` (keyword, optional): `velocity(t, q, qd, p) -> (k,)`, the same rows
      $c = \dot g$ written directly, for rows whose time derivative has a first-order form
      (a contact point's normal velocity $n\cdot(\dot r + \omega\times\Delta)$ instead of
      the derivative of its height through the contact geometry). The dynamics then take
      $A = \partial c/\partial\dot q$ and the bias from one derivative of `velocity`
      instead of first and second derivatives of `g`; `g` still serves the position level
      (stabilisation, initial-state checks and projection, the holonomic mask). That it is
      $\dot g$ is the caller's promise: a wrong one changes the dynamics (the builders of
      `cx.rigid` that use it are tested against the derivative of their `g`).

    **Example:** a bead on a hoop of radius `R` spun about the vertical at rate `w`,
    in Cartesian coordinates:

    ```python
    def hoop(t, q, p):
        x, y, z = q
        c, s = jnp.cos(p["w"] * t), jnp.sin(p["w"] * t)
        return jnp.stack([x**2 + y**2 + z**2 - p["R"] ** 2, -s * x + c * y])
    cx.Holonomic(hoop)
    ```
    """

    g: HolonomicFn
    velocity: VelocityConstraintFn | None
    name: str = eqx.field(static=True)
    holonomic: ClassVar[bool] = True
    linear_in_velocity: ClassVar[bool] = True

    def __init__(
        self,
        g: HolonomicFn,
        name: str | None = None,
        *,
        velocity: VelocityConstraintFn | None = None,
    ):
        for arg, fn in (("g", g), ("velocity", velocity)):
            if fn is not None and not callable(fn):
                raise TypeError(f"cx.Holonomic: `{arg}` must be callable, got {fn!r}")
        self.g = g
        self.velocity = velocity
        self.name = name if name is not None else _name_of(g, "holonomic")

    @property
    def has_position_rows(self) -> bool:
        return True

    def position_residual(self, t, q, p):
        return jnp.atleast_1d(self.g(t, q, p))

    def velocity_residual(self, t, q, qd, p):
        if self.velocity is not None:
            return jnp.atleast_1d(self.velocity(t, q, qd, p))
        fn = lambda t_, q_: jnp.atleast_1d(self.g(t_, q_, p))
        _, c = jax.jvp(fn, (t, q), (jnp.ones_like(t), qd))
        return c

    def count_rows(self, t, q, qd, p):
        label = _label(self)
        k = row_count(label, "g(t, q, p)", traced_shape(f"{label}: g(t, q, p)", self.g, t, q, p))
        if self.velocity is not None:
            vlabel = f"{label}: velocity(t, q, qd, p)"
            kv = row_count(
                label, "velocity(t, q, qd, p)", traced_shape(vlabel, self.velocity, t, q, qd, p)
            )
            if kv != k:
                raise ValueError(
                    f"{label}: velocity(t, q, qd, p) must return one row per row of "
                    f"g(t, q, p): expected ({k},), got ({kv},)"
                )
        return k, k

    def terms(self, t, q, qd, p, bias):
        r"""Given by `g` alone: $c$ and $c_\text{bias}$ from one `jax.jvp` of
        $(t, q)\mapsto c(t, q, \dot q)$ along $(1, \dot q)$ with $\dot q$ held fixed, and
        $A = \partial g/\partial q$ read off directly; given with `velocity=`, from the
        rows at velocity level (`velocity_level_terms`)."""
        if self.velocity is not None:
            return velocity_level_terms(self.velocity_residual, t, q, qd, p, bias)
        fn = lambda t_, q_: jnp.atleast_1d(self.velocity_residual(t_, q_, qd, p)).astype(q.dtype)
        if bias:
            c, c_bias = jax.jvp(fn, (t, q), (jnp.ones_like(t), qd))
        else:
            c, c_bias = fn(t, q), None
        g = lambda q_: jnp.atleast_1d(self.g(t, q_, p)).astype(q.dtype)
        return row_jacobian(g, q, c.shape[0]), c, c_bias


class UnitQuaternion(AbstractConstraint):
    r"""The unit norm of a quaternion among the coordinates, $x\cdot x - 1 = 0$ with
    $x = q_{s:s+4}$: one holonomic row, its terms in closed form,
    $A = 2x^\top$ (in the quaternion's four columns), $c = 2x\cdot\dot x$,
    $c_\text{bias} = 2\dot x\cdot\dot x$ (the same values as `cx.Holonomic` of the norm).

    Such a row never vanishes where it holds and reads only its quaternion's radial
    direction, so the rows of distinct quaternions are independent. A system whose rows are
    all `UnitQuaternion`s of distinct quaternions (a free rigid body, an imported MJCF tree
    without equality constraints: `cx.rigid.from_mjcf` builds them so) can therefore not
    lose rank, and `cx.AutoSolver()` runs it as `cx.KKT()`: the same results, without the
    rank-robust branch in the traced program (docs/concepts/solve.md). Its saddle matrix
    is singular only where the mass matrix is (on $\ker A$); there, or where its pivots
    fall below `KKT`'s test ($100\epsilon$ relative), `KKT`'s error is raised (the
    imported humanoid's smallest pivot ratio over 512 random states: $5.5\times10^{-4}$).

    **Arguments:**

    - `start`: the index of the quaternion's first (scalar) coordinate in $q$.
    - `name`: used in error messages; defaults to `"unit quaternion at <start>"`.

    **Example:** `cx.UnitQuaternion(3)` keeps $q_{3:7}$ on the unit sphere.
    """

    start: int = eqx.field(static=True)
    name: str = eqx.field(static=True)
    holonomic: ClassVar[bool] = True
    linear_in_velocity: ClassVar[bool] = True

    def __init__(self, start: int, name: str | None = None):
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < 0:
            raise TypeError(f"cx.UnitQuaternion: `start` must be a non-negative int, got {start!r}")
        self.start = int(start)
        self.name = name if name is not None else f"unit quaternion at {self.start}"

    def _x(self, q):
        return q[self.start : self.start + 4]

    @property
    def has_position_rows(self) -> bool:
        return True

    def position_residual(self, t, q, p):
        x = self._x(q)
        return jnp.atleast_1d(x @ x - 1.0)

    def velocity_residual(self, t, q, qd, p):
        return jnp.atleast_1d(2.0 * self._x(q) @ self._x(qd))

    def count_rows(self, t, q, qd, p):
        n = jnp.shape(q)[0]
        if self.start + 4 > n:
            raise ValueError(
                f"{_label(self)}: the quaternion q[{self.start}:{self.start + 4}] does not fit "
                f"in the {n} coordinates"
            )
        return 1, 1

    def terms(self, t, q, qd, p, bias):
        x, xd = self._x(q), self._x(qd).astype(q.dtype)
        A = jnp.zeros((1, q.shape[0]), q.dtype).at[0, self.start : self.start + 4].set(2.0 * x)
        c_bias = jnp.atleast_1d(2.0 * xd @ xd) if bias else None
        return A, jnp.atleast_1d(2.0 * x @ xd), c_bias


def distinct_unit_quaternions(constraints) -> bool:
    """Whether `constraints` are one or more `UnitQuaternion`s of quaternions that share no
    coordinate (rows that can never lose rank)."""
    if not constraints or not all(isinstance(c, UnitQuaternion) for c in constraints):
        return False
    starts = sorted(c.start for c in constraints)
    return all(b - a >= 4 for a, b in zip(starts[:-1], starts[1:], strict=True))


class Pfaffian(AbstractConstraint):
    r"""Pfaffian (affine one-form) constraint $\omega(t, q, p)\,\dot q + b(t, q, p) = 0$.

    See docs/concepts/constraints.md. A non-zero `b`
    describes moving supports (a turntable, a conveyor).

    Give either the one-form (`omega`, optional `b`) or, with `velocity=`, the map
    $v(t, q, \dot q, p) = \omega\dot q + b$ itself. The second form suits rows that are a
    velocity by construction (the velocity of a contact point along a direction): the engine
    then differentiates $v$ once instead of building $\omega$ by autodiff and
    differentiating that again, and $\omega = \partial v/\partial\dot q$ (one reverse pass
    per row) wherever the one-form itself is needed (`one_form`, geometry tools).

    **Arguments:**

    - `omega`: `omega(t, q, p) -> (k, n)` one-form rows (an `(n,)` vector is one row).
    - `b`: optional `b(t, q, p) -> (k,)`; `None` means zero.
    - `name`: used in error messages and diagnostics; defaults to the function's name.
    - `velocity` (keyword, instead of `omega` and `b`): `velocity(t, q, qd, p) -> (k,)`,
      affine in `qd`. Affinity is the caller's promise: the dynamics use $\partial v/\partial
      \dot q$ at the current $\dot q$ (so they stay those of the rows $v = 0$, under
      Chetaev's rule, even if it is broken), but the geometry tools read the distribution
      at $\dot q = 0$.
    - `position` (keyword, optional): `position(t, q, p) -> (h,)`, $h \le k$, for a system
      whose first $h$ rows are integrable: they are the time derivative $\dot g$ of these
      holonomic rows $g(t, q) = 0$. The rows keep their one-form (or velocity) form in the
      dynamics, and $g$ serves the position level exactly as for `Holonomic` (stabilisation,
      initial-state checks and projection, the holonomic mask). It lets rows that share a
      computation be one constraint: the velocity of a rolling contact point, whose normal
      component is the derivative of the contact height and whose tangential components
      are the no-slip rows (`cx.rigid.rolling_contact`). That the rows are $\dot g$ is the
      caller's promise, as for `Holonomic`'s `velocity=`.

    **Example:** the knife edge / Chaplygin sleigh no-side-slip constraint, as a one-form
    and as the lateral velocity of the blade:

    ```python
    def no_slip(t, q, p):
        x, y, th = q
        return jnp.array([-jnp.sin(th), jnp.cos(th), 0.0])
    cx.Pfaffian(no_slip)
    cx.Pfaffian(velocity=lambda t, q, qd, p: -jnp.sin(q[2]) * qd[0] + jnp.cos(q[2]) * qd[1])
    ```
    """

    omega: OneFormFn | None
    b: AffineTermFn | None
    velocity: VelocityConstraintFn | None
    position: HolonomicFn | None
    name: str = eqx.field(static=True)
    holonomic: ClassVar[bool] = False
    linear_in_velocity: ClassVar[bool] = True

    def __init__(
        self,
        omega: OneFormFn | None = None,
        b: AffineTermFn | None = None,
        name: str | None = None,
        *,
        velocity: VelocityConstraintFn | None = None,
        position: HolonomicFn | None = None,
    ):
        if (omega is None) == (velocity is None):
            raise TypeError(
                "cx.Pfaffian: give exactly one of `omega` (the one-form omega(t, q, p), with "
                "optional `b`) or `velocity=` (the affine map v(t, q, qd, p))"
            )
        if velocity is not None and b is not None:
            raise TypeError(
                "cx.Pfaffian: `b` goes with `omega`; with `velocity=` the affine term is part "
                "of velocity(t, q, qd, p)"
            )
        for arg, fn in (("omega", omega), ("b", b), ("velocity", velocity), ("position", position)):
            if fn is not None and not callable(fn):
                raise TypeError(f"cx.Pfaffian: `{arg}` must be callable, got {fn!r}")
        self.omega = omega
        self.b = b
        self.velocity = velocity
        self.position = position
        default = _name_of(omega if velocity is None else velocity, "pfaffian")
        self.name = name if name is not None else default

    @property
    def has_position_rows(self) -> bool:
        return self.position is not None

    def position_residual(self, t, q, p):
        if self.position is None:
            raise _no_position_level(self)
        return jnp.atleast_1d(self.position(t, q, p))

    def _velocity_rows(self, t, q, qd, p):
        return jnp.atleast_1d(self.velocity(t, q, qd, p))

    def one_form(self, t: Time, q: Float[Array, " n"], p: Params) -> Float[Array, "k n"]:
        r"""The rows $\omega(t, q)$ as a `(k, n)` matrix."""
        if self.omega is None:
            fn = lambda v: self._velocity_rows(t, q, v, p).astype(q.dtype)
            zero = jnp.zeros_like(q)
            return row_jacobian(fn, zero, jax.eval_shape(fn, zero).shape[0])
        w = self.omega(t, q, p)
        return w[None, :] if jnp.ndim(w) == 1 else w

    def affine_term(self, t: Time, q: Float[Array, " n"], p: Params) -> Float[Array, " k"]:
        r"""The affine term $b(t, q)$ (zeros when `b` is `None`)."""
        if self.velocity is not None:
            return self._velocity_rows(t, q, jnp.zeros_like(q), p)
        if self.b is None:
            return jnp.zeros(self.one_form(t, q, p).shape[0], dtype=q.dtype)
        return jnp.atleast_1d(self.b(t, q, p))

    def velocity_residual(self, t, q, qd, p):
        if self.velocity is not None:
            return self._velocity_rows(t, q, qd, p)
        return self.one_form(t, q, p) @ qd + self.affine_term(t, q, p)

    def count_rows(self, t, q, qd, p):
        label = _label(self)
        if self.omega is not None:
            n = q.shape[0]
            shape = traced_shape(f"{label}: omega(t, q, p)", self.omega, t, q, p)
            if not (shape == (n,) or (len(shape) == 2 and shape[1] == n)):
                raise ValueError(
                    f"{label}: omega(t, q, p) must return shape (k, n) = (k, {n}) or ({n},), "
                    f"got {shape}"
                )
            k = 1 if len(shape) == 1 else shape[0]
            if self.b is not None:
                bshape = traced_shape(f"{label}: b(t, q, p)", self.b, t, q, p)
                if bshape not in ((k,), ()) or (bshape == () and k != 1):
                    raise ValueError(
                        f"{label}: b(t, q, p) must return shape (k,) = ({k},) to match omega's "
                        f"{k} rows, got {bshape}"
                    )
        else:
            shape = traced_shape(f"{label}: velocity(t, q, qd, p)", self.velocity, t, q, qd, p)
            k = row_count(label, "velocity(t, q, qd, p)", shape)
        if self.position is None:
            return k, 0
        shape = traced_shape(f"{label}: position(t, q, p)", self.position, t, q, p)
        h = row_count(label, "position(t, q, p)", shape)
        if h > k:
            raise ValueError(
                f"{label}: position(t, q, p) gives the first rows' holonomic form, so it "
                f"must return at most the constraint's {k} rows, got ({h},)"
            )
        return k, h

    def terms(self, t, q, qd, p, bias):
        r"""Given by its one-form: one `jax.jvp` of $(\omega, b)$ along $(1, \dot q)$ gives
        $A = \omega$, $c = \omega\dot q + b$ and $c_\text{bias} = \dot\omega\dot q + \dot b$
        ($\omega$ traced once); given with `velocity=`, from the rows at velocity level
        (`velocity_level_terms`)."""
        if self.omega is None:
            return velocity_level_terms(self.velocity_residual, t, q, qd, p, bias)

        def one_form_and_term(t_, q_):
            w = self.one_form(t_, q_, p).astype(q.dtype)
            b = jnp.zeros(w.shape[0], q.dtype) if self.b is None else self.affine_term(t_, q_, p)
            return w, jnp.asarray(b, q.dtype)

        if not bias:
            A, b = one_form_and_term(t, q)
            return A, A @ qd + b, None
        (A, b), (A_dot, b_dot) = jax.jvp(one_form_and_term, (t, q), (jnp.ones_like(t), qd))
        return A, A @ qd + b, A_dot @ qd + b_dot


class VelocityConstraint(AbstractConstraint):
    r"""Nonlinear velocity constraint $F(t, q, \dot q, p) = 0$.

    Sławianowski et al. 2013. Under `DAlembert` the reactions follow
    Chetaev's rule $R = (\partial F/\partial \dot q)^\top \lambda$; under `Vakonomic`
    (with $\Lambda = L - \mu\cdot F$) they carry the acceleration terms
    $+\mu^a \partial^2 F_a/\partial\dot q^2\,\ddot q$ (the paper writes $L + \mu F$, so its
    $\mu$ is minus ours).

    **Arguments:**

    - `F`: `F(t, q, qd, p) -> (k,)` (a scalar is read as one row).
    - `name`: used in error messages and diagnostics; defaults to `F.__name__`.

    **Example:** a particle moving at constant speed `v`:

    ```python
    cx.VelocityConstraint(lambda t, q, qd, p: 0.5 * (qd @ qd - p["v"] ** 2))
    ```
    """

    F: VelocityConstraintFn
    name: str = eqx.field(static=True)
    holonomic: ClassVar[bool] = False
    linear_in_velocity: ClassVar[bool] = False

    def __init__(self, F: VelocityConstraintFn, name: str | None = None):
        if not callable(F):
            raise TypeError(
                f"cx.VelocityConstraint: `F` must be callable F(t, q, qd, p) -> (k,), got {F!r}"
            )
        self.F = F
        self.name = name if name is not None else _name_of(F, "velocity_constraint")

    @property
    def has_position_rows(self) -> bool:
        return False

    def position_residual(self, t, q, p):
        raise _no_position_level(self)

    def velocity_residual(self, t, q, qd, p):
        return jnp.atleast_1d(self.F(t, q, qd, p))

    def count_rows(self, t, q, qd, p):
        label = _label(self)
        shape = traced_shape(f"{label}: F(t, q, qd, p)", self.F, t, q, qd, p)
        return row_count(label, "F(t, q, qd, p)", shape), 0

    def terms(self, t, q, qd, p, bias):
        """From the rows at velocity level (`velocity_level_terms`)."""
        return velocity_level_terms(self.velocity_residual, t, q, qd, p, bias)
