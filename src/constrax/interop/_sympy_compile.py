r"""Check symbolic expressions and compile them to JAX functions of $(t, q, \dot q, p)$.

Two steps, kept apart:

1. `Namespace.plain(expr, where)`: check that every symbol and function in a sympy
   expression is one that the conversion knows (time, a coordinate, its first derivative,
   a parameter symbol, a declared input, a smooth elementary function) and rewrite it in
   plain symbols. Anything else raises an error naming the offending sub-expression and
   where it was found.
2. `compile_rows(...)`: turn a list of plain expressions into one JAX function, by sympy's
   own JAX printer (`sympy.lambdify(..., modules="jax")`, the default) or by `sympy2jax`.
   Neither is a hand-written expression walker; the choice was measured (see
   `docs/interop/sympy.md`).

sympy is imported lazily, so that `import constrax` does not import it.
"""

from collections.abc import Callable, Sequence

import jax.numpy as jnp

BACKENDS = ("lambdify", "sympy2jax")


def import_sympy():
    try:
        import sympy
        import sympy.physics.mechanics as me
    except ImportError as err:  # pragma: no cover - exercised only without sympy
        raise ImportError(
            "constrax.interop needs sympy: `pip install constrax[interop]` (or `pip install sympy`)"
        ) from err
    return sympy, me


def _function_tables():
    sp, _ = import_sympy()
    smooth = (
        sp.sin,
        sp.cos,
        sp.tan,
        sp.sec,
        sp.csc,
        sp.cot,
        sp.asin,
        sp.acos,
        sp.atan,
        sp.atan2,
        sp.acot,
        sp.sinh,
        sp.cosh,
        sp.tanh,
        sp.asinh,
        sp.acosh,
        sp.atanh,
        sp.exp,
        sp.log,
        sp.erf,
        sp.Abs,
    )
    piecewise = (
        sp.Piecewise,
        sp.Heaviside,
        sp.sign,
        sp.floor,
        sp.ceiling,
        sp.Min,
        sp.Max,
        sp.DiracDelta,
    )
    return smooth, piecewise


class ConversionError(ValueError):
    """A sympy expression that `constrax.interop` cannot turn into a JAX function.

    Raised by the converters for a function of time that is neither a coordinate nor a
    declared input, a piecewise or otherwise unsupported function, a derivative of order
    two or of something that is not a coordinate, velocities in holonomic rows, and two
    symbols that share a name. The message names the offending sub-expression, the
    expression it sits in and its role (`lagrangian`, `hol_coneqs[i]`, ...).
    """


class Namespace:
    r"""The symbols a converted system knows, and their plain stand-ins.

    - time: `sympy.physics.mechanics.dynamicsymbols._t`;
    - coordinates $q_i(t)$ and their first derivatives $\dot q_i(t)$;
    - inputs: other functions of time declared by the user (controls), read from `p`;
    - parameters: every other free `sympy.Symbol`, read from `p` under its name.
    """

    def __init__(self, coordinates: Sequence, inputs: Sequence = ()):
        sp, me = import_sympy()
        self.t = me.dynamicsymbols._t
        self.coordinates = tuple(
            self._check_function(q, f"coordinates[{i}]") for i, q in enumerate(coordinates)
        )
        if not self.coordinates:
            raise ValueError("constrax.interop: `coordinates` must not be empty")
        self.inputs = tuple(self._check_function(u, f"inputs[{i}]") for i, u in enumerate(inputs))
        seen = {}
        for label, f in [("coordinate", q) for q in self.coordinates] + [
            ("input", u) for u in self.inputs
        ]:
            name = str(f.func)
            if name in seen:
                raise ValueError(
                    f"constrax.interop: {f} is given twice (as {seen[name]} and as {label})"
                )
            seen[name] = label
        n = len(self.coordinates)
        self.t_plain = sp.Symbol("_cx_t")
        self.q_plain = sp.symbols(f"_cx_q0:{n}")
        self.qd_plain = sp.symbols(f"_cx_qd0:{n}")
        self.qdots = tuple(q.diff(self.t) for q in self.coordinates)
        self._rule = {self.t: self.t_plain}
        self._rule.update(zip(self.qdots, self.qd_plain, strict=True))
        self._rule.update(zip(self.coordinates, self.q_plain, strict=True))
        self.input_names = tuple(str(u.func) for u in self.inputs)
        self.input_plain = tuple(sp.Symbol(f"_cx_u{i}") for i in range(len(self.inputs)))
        self._rule.update(zip(self.inputs, self.input_plain, strict=True))
        self.parameters: dict = {}  # name -> user symbol, filled by `plain`

    def _check_function(self, f, label):
        sp, _ = import_sympy()
        f = sp.sympify(f)
        from sympy.core.function import AppliedUndef

        if not (isinstance(f, AppliedUndef) and f.args == (self.t,)):
            raise TypeError(
                f"constrax.interop: `{label}` must be a function of time made with "
                f"sympy.physics.mechanics.dynamicsymbols (like q(t)), got {f!r}"
            )
        return f

    # ------------------------------------------------------------------------------------
    def plain(self, expr, where: str, *, velocities: bool = True):
        """Check `expr` and return it in plain symbols; records the parameters it uses."""
        sp, _ = import_sympy()
        from sympy.core.function import AppliedUndef

        expr = sp.sympify(expr)
        if isinstance(expr, sp.MatrixBase) or not isinstance(expr, sp.Expr):
            raise ConversionError(
                f"{where}: expected a scalar sympy expression, got {type(expr).__name__} {expr}"
            )
        smooth, piecewise = _function_tables()
        coordinates = set(self.coordinates)
        inputs = set(self.inputs)
        qdots = dict(zip(self.qdots, self.coordinates, strict=True))
        for node in sp.preorder_traversal(expr):
            if isinstance(node, sp.Derivative):
                if node in qdots:
                    if not velocities:
                        raise ConversionError(
                            f"{where}: {node} appears, but these rows may depend on time and "
                            f"the coordinates only (in {expr})"
                        )
                    continue
                base = node.expr
                if base in coordinates:
                    raise ConversionError(
                        f"{where}: {node} (a derivative of order > 1) cannot appear in a "
                        f"Lagrangian, force or constraint (in {expr})"
                    )
                raise ConversionError(
                    f"{where}: {node} is a derivative of something that is not a coordinate; "
                    f"only first derivatives of the coordinates can appear (in {expr})"
                )
            if isinstance(node, AppliedUndef):
                if node in coordinates or node in inputs:
                    continue
                raise ConversionError(
                    f"{where}: {node} is a function of time that is neither a coordinate nor "
                    f"a declared input (coordinates: {', '.join(map(str, self.coordinates))}; "
                    f"pass it in `inputs=` to read it from the parameters, in {expr})"
                )
            if isinstance(node, sp.Symbol):
                if node == self.t:
                    continue
                name = node.name
                prev = self.parameters.get(name)
                if prev is not None and prev != node:
                    raise ConversionError(
                        f"{where}: two different symbols are named {name!r} ({prev!r} with "
                        f"assumptions {prev.assumptions0} and {node!r} with "
                        f"{node.assumptions0}); parameters are named by their symbol"
                    )
                if name.startswith("_cx_"):
                    raise ConversionError(
                        f"{where}: the symbol {name!r} uses the prefix '_cx_' that the "
                        "conversion reserves; rename it"
                    )
                if any(str(f.func) == name for f in self.coordinates + self.inputs):
                    raise ConversionError(
                        f"{where}: the symbol {name!r} has the name of a coordinate or input"
                    )
                self.parameters[name] = node
                continue
            if isinstance(node, piecewise):
                raise ConversionError(
                    f"{where}: {node} is piecewise / not differentiable ({type(node).__name__}); "
                    f"write it with smooth functions (e.g. tanh(v/eps) for sign(v)) (in {expr})"
                )
            if isinstance(node, (sp.Add, sp.Mul, sp.Pow)) or node in (sp.pi, sp.E):
                continue
            if isinstance(node, sp.Number):
                if not isinstance(node, (sp.Integer, sp.Rational, sp.Float)):
                    raise ConversionError(f"{where}: cannot convert the number {node} (in {expr})")
                continue
            if isinstance(node, sp.Function) and isinstance(node, smooth):
                continue
            if isinstance(node, (sp.Tuple,)):
                continue
            raise ConversionError(
                f"{where}: cannot convert {node} ({type(node).__name__}); supported are +, *, "
                f"**, numbers, pi, E and {', '.join(f.__name__ for f in smooth)} (in {expr})"
            )
        return expr.xreplace(self._rule)

    def value_names(self) -> tuple[str, ...]:
        """The entries of `p`: the parameters (sorted by name), then the inputs."""
        return tuple(sorted(self.parameters)) + self.input_names

    def value_symbols(self, names: Sequence[str]):
        """`(rule, plain)`: the replacement of the parameter symbols by plain stand-ins and
        the plain symbol of every entry of `names`, in order."""
        sp, _ = import_sympy()
        inputs = dict(zip(self.input_names, self.input_plain, strict=True))
        rule, plain = {}, []
        for i, k in enumerate(names):
            if k in inputs:
                plain.append(inputs[k])
            else:
                s = sp.Symbol(f"_cx_p{i}")
                rule[self.parameters[k]] = s
                plain.append(s)
        return rule, plain


# ----------------------------------------------------------------------------------------
# Backends: a list of plain expressions -> f(t, q, qd, pvec) -> list of scalars.


def _lambdify(exprs, t, qs, qds, ps):
    sp, _ = import_sympy()
    return sp.lambdify((t, qs, qds, ps), list(exprs), modules="jax", cse=True)


def _sympy2jax(exprs, t, qs, qds, ps):
    try:
        import sympy2jax
    except ImportError as err:
        raise ImportError(
            "constrax.interop: backend='sympy2jax' needs the sympy2jax package "
            "(`pip install sympy2jax`)"
        ) from err
    sp, _ = import_sympy()
    # Smooth functions sympy2jax does not know (checked with sympy2jax 0.0.8).
    extra = {
        sp.sec: lambda x: 1 / jnp.cos(x),
        sp.csc: lambda x: 1 / jnp.sin(x),
        sp.cot: lambda x: 1 / jnp.tan(x),
        sp.acot: lambda x: jnp.arctan(1 / x),
    }
    module = sympy2jax.SymbolicModule(list(exprs), extra_funcs=extra, make_array=False)
    names_t = t.name
    names_q = [s.name for s in qs]
    names_qd = [s.name for s in qds]
    names_p = [s.name for s in ps]

    def fn(t_, q_, qd_, p_):
        kw = {names_t: t_}
        kw.update(zip(names_q, q_, strict=True))
        kw.update(zip(names_qd, qd_, strict=True))
        kw.update(zip(names_p, p_, strict=True))
        return module(**kw)

    return fn


def compile_rows(
    exprs: Sequence, namespace: Namespace, parameter_names: Sequence[str], backend: str
) -> Callable:
    """`f(t, q, qd, pvec) -> (len(exprs),)` array of the plain expressions `exprs`."""
    if backend not in BACKENDS:
        raise ValueError(
            f"constrax.interop: unknown backend {backend!r}; valid choices are "
            f"{', '.join(repr(b) for b in BACKENDS)}"
        )
    rule, ps = namespace.value_symbols(parameter_names)
    exprs = [e.xreplace(rule) for e in exprs]
    build = _lambdify if backend == "lambdify" else _sympy2jax
    raw = build(exprs, namespace.t_plain, list(namespace.q_plain), list(namespace.qd_plain), ps)
    k = len(exprs)

    def fn(t, q, qd, pvec):
        if k == 0:
            return jnp.zeros((0,), dtype=q.dtype)
        out = raw(t, list(q), list(qd), list(pvec))
        return jnp.stack([jnp.asarray(x, dtype=q.dtype) for x in out])

    return fn


def is_affine_in(exprs, symbols) -> bool:
    """Whether every expression is affine in `symbols` (structurally, after expansion)."""
    sp, _ = import_sympy()
    for e in exprs:
        for a in symbols:
            da = sp.diff(e, a)
            for b in symbols:
                d2 = sp.diff(da, b)
                if d2 != 0 and sp.expand(d2) != 0:
                    return False
    return True
