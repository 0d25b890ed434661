r"""Converters from `sympy.physics.mechanics` to `cx.System` (see `docs/interop/sympy.md`):
`SympySystem`, the common builder and `from_lagrangian`; the converters of a
`LagrangesMethod` and a `KanesMethod` build on them in `_sympy_methods.py`.

sympy is imported inside the functions, so that `import constrax` does not import it.
"""

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._constraints import Holonomic, Pfaffian, VelocityConstraint
from .._system import System
from .._terms import euler_lagrange_rhs
from ._sympy_compile import (
    BACKENDS,
    ConversionError,
    Namespace,
    compile_rows,
    import_sympy,
    is_affine_in,
)


class SympySystem(eqx.Module):
    r"""A `cx.System` converted from sympy, with the names that go with it.

    **Fields:**

    - `system`: the `cx.System`. Its functions read every parameter from `p[name]`.
    - `coordinates`: the names of the entries of `q` (the dynamicsymbols, in the order
      given); `qd` follows the same order.
    - `parameters`: the keys of `p` the system reads: the free `sympy.Symbol`s of the
      expressions, sorted by name, then the `inputs`.
    - `inputs`: the names of the declared inputs (functions of time such as a control
      torque); each is read from `p[name]` (one of `parameters`) as a value held fixed
      during one evaluation, or, with `input_vector`, from `p[input_vector][i]`.
    - `input_vector`: the key of `p` that holds every input as one vector `(len(inputs),)`
      in the order of `inputs` (the `control` of a `cx.fit.OptimalControlProblem`), or
      `None`: one scalar entry per input.
    - `constraint_rows`: for every constraint of `system`, in order, the sympy rows it was
      made from, as strings.

    **Example:**

    ```python
    import sympy as sp
    import sympy.physics.mechanics as me
    import constrax.interop

    th = me.dynamicsymbols("theta")
    m, l, g = sp.symbols("m l g")
    L = m * l**2 * th.diff() ** 2 / 2 + m * g * l * sp.cos(th)
    converted = constrax.interop.from_lagrangian(L, [th])
    converted.coordinates, converted.parameters  # ('theta',), ('g', 'l', 'm')
    p = converted.make_params({m: 1.0, l: 0.5, "g": 9.81})
    ```
    """

    system: System
    coordinates: tuple[str, ...] = eqx.field(static=True)
    parameters: tuple[str, ...] = eqx.field(static=True)
    inputs: tuple[str, ...] = eqx.field(static=True)
    constraint_rows: tuple[tuple[str, ...], ...] = eqx.field(static=True)
    input_vector: str | None = eqx.field(static=True, default=None)

    def make_params(self, values: Mapping[Any, Any]) -> dict[str, Float[Array, ""]]:
        r"""The parameter dict `p` from a mapping `{symbol or name: value}`.

        Keys may be the sympy symbols themselves, the declared input dynamicsymbols, or
        their names. Every parameter must be given, and nothing else. With `input_vector`,
        the inputs may be given one by one (each a scalar: they are stacked in the order
        of `inputs`) or as the vector under its key.

        **Arguments:**

        - `values`: a mapping from symbols (or their names) to scalars.

        **Returns:** `dict[str, Array]` of float scalars (float64 under `jax_enable_x64`),
        keyed by `parameters`.

        **Example:** `p = converted.make_params({m: 1.0, l: 0.5, "g": 9.81})` (see
        `SympySystem`).
        """
        if not isinstance(values, Mapping):
            raise TypeError(
                f"make_params: `values` must be a mapping {{symbol: value}}, got "
                f"{type(values).__name__}"
            )
        given: dict[str, Any] = {}
        for key, value in values.items():
            name = _key_name(key)
            if name in given:
                raise ValueError(f"make_params: parameter {name!r} is given twice")
            given[name] = value
        vector = self.input_vector
        by_name = [k for k in self.inputs if k in given] if vector is not None else []
        if by_name:
            if vector in given or len(by_name) != len(self.inputs):
                raise ValueError(
                    f"make_params: give the inputs {', '.join(map(repr, self.inputs))} either "
                    f"all by name or as the vector {vector!r}, not {by_name}"
                    + (f" and {vector!r}" if vector in given else "")
                )
            given[vector] = [given.pop(k) for k in self.inputs]
        missing = [k for k in self.parameters if k not in given]
        if missing:
            raise ValueError(
                f"make_params: missing value for parameter(s) {', '.join(map(repr, missing))}; "
                f"the system's parameters are {', '.join(map(repr, self.parameters))}"
            )
        extra = [k for k in given if k not in self.parameters]
        if extra:
            raise ValueError(
                f"make_params: unknown parameter(s) {', '.join(map(repr, extra))}; the "
                f"system's parameters are {', '.join(map(repr, self.parameters)) or 'none'}"
            )
        dtype = jnp.result_type(float)
        out = {}
        for name in self.parameters:
            value = given[name]
            if name == vector:
                out[name] = _input_vector(value, len(self.inputs), dtype, name)
                continue
            try:
                value = float(value) if _is_sympy_number(value) else value
                arr = jnp.asarray(value, dtype=dtype)
            except (TypeError, ValueError) as err:
                raise TypeError(
                    f"make_params: parameter {name!r} must be a real number, got {value!r}"
                ) from err
            if arr.shape != ():
                raise ValueError(
                    f"make_params: parameter {name!r} must be a scalar, got shape {arr.shape}"
                )
            out[name] = arr
        return out


def _input_vector(value, k: int, dtype, name: str) -> Float[Array, " k"]:
    """The inputs' vector `(k,)` from a sequence or array of real numbers."""
    try:
        arr = jnp.asarray(
            [float(v) if _is_sympy_number(v) else v for v in value]
            if isinstance(value, list | tuple)
            else value,
            dtype=dtype,
        )
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"make_params: {name!r} must be a vector of real numbers, got {value!r}"
        ) from err
    if arr.shape != (k,):
        raise ValueError(
            f"make_params: the input vector {name!r} must have shape ({k},) (one entry per "
            f"input), got {arr.shape}"
        )
    return arr


def _is_sympy_number(value) -> bool:
    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(value, sympy.Basic)


def _key_name(key) -> str:
    if isinstance(key, str):
        return key
    sympy = sys.modules.get("sympy")
    if sympy is not None and isinstance(key, sympy.Basic):
        from sympy.core.function import AppliedUndef

        if isinstance(key, AppliedUndef):
            return str(key.func)
        name = getattr(key, "name", None)
        if isinstance(name, str):
            return name
    raise TypeError(
        f"make_params: keys must be sympy symbols, input dynamicsymbols or names, got {key!r}"
    )


# ----------------------------------------------------------------------------------------
# Generalized forces from (Point/ReferenceFrame, Vector) pairs.


def forcelist_forces(forcelist, frame, coordinates) -> list:
    r"""$Q_i = \sum_k F_k\cdot\partial v_k/\partial\dot q_i$ (torques with angular
    velocities), the rule `LagrangesMethod` uses for its `forcelist`."""
    sp, me = import_sympy()
    t = me.dynamicsymbols._t
    qdots = [q.diff(t) for q in coordinates]
    Q = [sp.S.Zero] * len(qdots)
    forcelist = list(forcelist or ())
    if forcelist and not isinstance(frame, me.ReferenceFrame):
        raise ValueError(
            "constrax.interop: `forcelist` needs the inertial `frame` (a ReferenceFrame) to "
            f"take velocities in, got frame={frame!r}"
        )
    for i, pair in enumerate(forcelist):
        try:
            obj, vec = pair
        except (TypeError, ValueError):
            raise TypeError(
                f"constrax.interop: forcelist[{i}] must be a (Point, Vector) or "
                f"(ReferenceFrame, Vector) pair, got {pair!r}"
            ) from None
        if not isinstance(vec, me.Vector):
            if sp.sympify(vec) == 0:
                continue
            raise TypeError(
                f"constrax.interop: forcelist[{i}]: the load must be a sympy Vector, got {vec!r}"
            )
        try:
            if isinstance(obj, me.Point):
                v = obj.vel(frame)
            elif isinstance(obj, me.ReferenceFrame):
                v = obj.ang_vel_in(frame)
            else:
                raise TypeError(
                    f"constrax.interop: forcelist[{i}] must start with a Point or a "
                    f"ReferenceFrame, got {obj!r}"
                )
        except ValueError as err:
            raise ValueError(f"constrax.interop: forcelist[{i}] ({obj}): {err}") from err
        for j, qd in enumerate(qdots):
            Q[j] += v.diff(qd, frame).dot(vec)
    return Q


# ----------------------------------------------------------------------------------------
# The common builder.


def _scalar(expr, where):
    sp, _ = import_sympy()
    expr = sp.sympify(expr)
    if isinstance(expr, sp.MatrixBase):
        if expr.shape != (1, 1):
            raise ConversionError(f"{where}: expected a scalar, got a matrix of shape {expr.shape}")
        expr = expr[0, 0]
    return expr


def _rows(exprs, where):
    sp, _ = import_sympy()
    if exprs is None:
        return []
    if isinstance(exprs, sp.MatrixBase):
        return list(exprs)
    if isinstance(exprs, sp.Basic):
        return [exprs]
    return [_scalar(e, f"{where}[{i}]") for i, e in enumerate(exprs)]


class _Values(eqx.Module):
    """`p -> [p[name] for name in names]`, with a clear error for a missing key; with
    `vector`, the `inputs` among the names read from `p[vector][i]`."""

    names: tuple[str, ...] = eqx.field(static=True)
    vector: str | None = eqx.field(static=True, default=None)
    inputs: tuple[str, ...] = eqx.field(static=True, default=())

    def keys(self) -> tuple[str, ...]:
        """The keys of `p` read."""
        if self.vector is None:
            return self.names
        return tuple(k for k in self.names if k not in self.inputs) + (self.vector,)

    def __call__(self, p):
        if not isinstance(p, Mapping):
            raise TypeError(
                "a system converted from sympy reads its parameters from a dict "
                f"{{name: value}} (see `make_params`), got {type(p).__name__}"
            )
        keys = self.keys()
        missing = [k for k in keys if k not in p]
        if missing:
            raise KeyError(
                f"the parameter dict has no value for {', '.join(map(repr, missing))}; the "
                f"system's parameters are {', '.join(map(repr, keys))}"
            )
        if self.vector is None:
            return [p[k] for k in self.names]
        u = p[self.vector]
        if jnp.shape(u) != (len(self.inputs),):
            raise ValueError(
                f"the input vector p[{self.vector!r}] must have shape ({len(self.inputs)},) "
                f"(the inputs {', '.join(map(repr, self.inputs))}), got {jnp.shape(u)}"
            )
        return [u[self.inputs.index(k)] if k in self.inputs else p[k] for k in self.names]


def _build(
    ns: Namespace,
    lagrangian,
    forces: Sequence,
    hol: Sequence,
    nonhol: Sequence,
    backend: str,
    *,
    subtract_lagrangian_bias: bool = False,
    input_vector: str | None = None,
) -> SympySystem:
    sp, _ = import_sympy()
    if backend not in BACKENDS:
        raise ValueError(
            f"constrax.interop: unknown backend {backend!r}; valid choices are "
            f"{', '.join(repr(b) for b in BACKENDS)}"
        )
    n = len(ns.coordinates)
    L = ns.plain(_scalar(lagrangian, "lagrangian"), "lagrangian")
    if len(forces) != n:
        raise ValueError(
            f"constrax.interop: `generalized_forces` must have one entry per coordinate "
            f"({n}), got {len(forces)}"
        )
    Q = [ns.plain(f, f"generalized force [{i}]") for i, f in enumerate(forces)]
    g = [ns.plain(e, f"hol_coneqs[{i}]", velocities=False) for i, e in enumerate(hol)]
    c = [ns.plain(e, f"nonhol_coneqs[{i}]") for i, e in enumerate(nonhol)]
    if any(ns.input_names):
        used = {s for e in g for s in e.free_symbols}
        for name, sym in zip(ns.input_names, ns.input_plain, strict=True):
            if sym in used:
                raise ConversionError(
                    f"hol_coneqs: the input {name}(t) appears in a holonomic constraint; its "
                    "time derivative is unknown, so the rows cannot be differentiated"
                )
    names = ns.value_names()
    if input_vector is not None:
        if not ns.input_names:
            raise ValueError("constrax.interop: `input_vector` needs `inputs` to collect")
        if not isinstance(input_vector, str) or input_vector in names:
            raise ValueError(
                f"constrax.interop: `input_vector` must be a new key of p (a str that is not a "
                f"parameter's name: {', '.join(map(repr, names))}), got {input_vector!r}"
            )
    values = _Values(names, input_vector, ns.input_names)

    L_fn = compile_rows([L], ns, names, backend)

    def lagrangian_fn(t, q, qd, p):
        return L_fn(t, q, qd, values(p))[0]

    force_fn = None
    if subtract_lagrangian_bias:
        # Q = f - f_L: with it, W qdd = f_L + Q + A^T lam is W qdd = f + A^T lam.
        Q_fn = compile_rows(Q, ns, names, backend)

        def force_fn(t, q, qd, p):
            L_p = lambda t_, q_, qd_: lagrangian_fn(t_, q_, qd_, p)
            return Q_fn(t, q, qd, values(p)) - euler_lagrange_rhs(L_p, t, q, qd)

    elif any(e != 0 for e in Q):
        Q_fn = compile_rows(Q, ns, names, backend)

        def force_fn(t, q, qd, p):
            return Q_fn(t, q, qd, values(p))

    constraints = []
    rows = []
    if g:
        g_fn = compile_rows(g, ns, names, backend)

        def hol_coneqs(t, q, p):
            return g_fn(t, q, jnp.zeros_like(q), values(p))

        constraints.append(Holonomic(hol_coneqs, name="hol_coneqs"))
        rows.append(tuple(map(str, _rows(hol, "hol_coneqs"))))
    if c:
        qd_syms = list(ns.qd_plain)
        if is_affine_in(c, qd_syms):
            zero = dict.fromkeys(qd_syms, 0)
            omega = sp.Matrix(c).jacobian(qd_syms)
            b = [e.xreplace(zero) for e in c]
            k = len(c)
            w_fn = compile_rows(list(omega), ns, names, backend)
            b_fn = compile_rows(b, ns, names, backend)

            def nonhol_omega(t, q, p):
                return w_fn(t, q, jnp.zeros_like(q), values(p)).reshape(k, n)

            if all(e == 0 for e in b):
                constraints.append(Pfaffian(nonhol_omega, name="nonhol_coneqs"))
            else:

                def nonhol_b(t, q, p):
                    return b_fn(t, q, jnp.zeros_like(q), values(p))

                constraints.append(Pfaffian(nonhol_omega, nonhol_b, name="nonhol_coneqs"))
        else:
            c_fn = compile_rows(c, ns, names, backend)

            def nonhol_rows(t, q, qd, p):
                return c_fn(t, q, qd, values(p))

            constraints.append(VelocityConstraint(nonhol_rows, name="nonhol_coneqs"))
        rows.append(tuple(map(str, _rows(nonhol, "nonhol_coneqs"))))
    system = System(lagrangian_fn, constraints, force=force_fn)
    return SympySystem(
        system=system,
        coordinates=tuple(str(q.func) for q in ns.coordinates),
        parameters=values.keys(),
        inputs=ns.input_names,
        constraint_rows=tuple(rows),
        input_vector=input_vector,
    )


# ----------------------------------------------------------------------------------------
# Public converters.


def from_lagrangian(
    lagrangian,
    coordinates: Sequence,
    *,
    hol_coneqs: Sequence = (),
    nonhol_coneqs: Sequence = (),
    forcelist: Sequence = (),
    frame=None,
    generalized_forces: Sequence | None = None,
    inputs: Sequence = (),
    input_vector: str | None = None,
    backend: str = "lambdify",
) -> SympySystem:
    r"""Convert a symbolic Lagrangian and its constraints into a `cx.System`.

    The equations of motion of the result are Lagrange's equations with multipliers,
    $\frac{d}{dt}\frac{\partial L}{\partial\dot q} - \frac{\partial L}{\partial q}
    = Q + A^\top\lambda$, with $A$ the rows of $\dot g$ for `hol_coneqs` $g(t, q) = 0$
    and $\partial c/\partial\dot q$ for `nonhol_coneqs` $c(t, q, \dot q) = 0$: the same
    equations `sympy.physics.mechanics.LagrangesMethod` forms from the same input.

    - $L$ becomes the system's Lagrangian, evaluated (and differentiated) by JAX.
    - `hol_coneqs` become one `cx.Holonomic` named `"hol_coneqs"`.
    - `nonhol_coneqs` become one `cx.Pfaffian` named `"nonhol_coneqs"` (one-form
      $\partial c/\partial\dot q$ and affine term $c|_{\dot q = 0}$) when every row is
      affine in $\dot q$, else one `cx.VelocityConstraint`.
    - `forcelist` pairs (Point, force Vector) and (ReferenceFrame, torque Vector) become the
      generalized force $Q_i = \sum F\cdot\partial v/\partial\dot q_i$ (angular velocities
      for torques), velocities taken in `frame`; `generalized_forces` (one expression per
      coordinate) is added to it.

    Every free `sympy.Symbol` other than time becomes an entry `p[name]` of the parameter
    dict (so `jax.grad` with respect to it works); a function of time that is neither a
    coordinate nor listed in `inputs` is an error naming it.

    **Arguments:**

    - `lagrangian`: a sympy expression in time, the coordinates, their first derivatives
      and parameter symbols.
    - `coordinates`: the generalized coordinates, `dynamicsymbols` $q_i(t)$, in the order of
      `q`.
    - `hol_coneqs`, `nonhol_coneqs`: constraint expressions, as for `LagrangesMethod`.
    - `forcelist`, `frame`: loads and the inertial frame, as for `LagrangesMethod`.
    - `generalized_forces`: optional, one expression $Q_i(t, q, \dot q)$ per coordinate.
    - `inputs`: functions of time (dynamicsymbols, e.g. a control torque) that may appear;
      each is read from `p[name]`, held fixed during one evaluation.
    - `input_vector`: a key of `p` (e.g. `"u"`) under which every input is read, as one
      vector in the order of `inputs`, instead of one scalar each: the `control` of a
      `cx.fit.OptimalControlProblem`, `control=lambda p: p["u"]`.
    - `backend`: `"lambdify"` (sympy's JAX printer with common-subexpression elimination,
      the default) or `"sympy2jax"`.

    **Returns:** a `SympySystem` (`system`, `coordinates`, `parameters`, `make_params`).

    **Example:**

    ```python
    import sympy as sp
    import sympy.physics.mechanics as me
    import constrax as cx
    import constrax.interop

    th = me.dynamicsymbols("theta")
    m, l, g = sp.symbols("m l g")
    L = m * l**2 * th.diff() ** 2 / 2 + m * g * l * sp.cos(th)
    pendulum = constrax.interop.from_lagrangian(L, [th])
    p = pendulum.make_params({m: 1.0, l: 0.5, g: 9.81})
    cx.accelerations(pendulum.system, 0.0, jnp.array([0.3]), jnp.array([0.0]), p).qdd
    ```
    """
    ns = Namespace(_rows(coordinates, "coordinates"), _rows(inputs, "inputs"))
    Q = forcelist_forces(forcelist, frame, ns.coordinates)
    if generalized_forces is not None:
        extra = _rows(generalized_forces, "generalized_forces")
        if len(extra) != len(Q):
            raise ValueError(
                f"constrax.interop: `generalized_forces` must have one entry per coordinate "
                f"({len(Q)}), got {len(extra)}"
            )
        Q = [a + b for a, b in zip(Q, extra, strict=True)]
    return _build(
        ns,
        lagrangian,
        Q,
        _rows(hol_coneqs, "hol_coneqs"),
        _rows(nonhol_coneqs, "nonhol_coneqs"),
        backend,
        input_vector=input_vector,
    )
