"""Measure the two sympy -> JAX backends of `constrax.interop` on the systems of
`tests/interop/test_sympy_bridge.py` (plus an n-link pendulum in joint angles):

* conversion time (sympy objects -> `cx.System`),
* jaxpr equation count of `cx.accelerations` (sub-jaxprs included) and of the Lagrangian,
* trace + lower + XLA compile time of `jax.jit(jax.vmap(cx.accelerations))` over 20
  states (minimum of 3 fresh compiles),
* run time of that compiled function (minimum of 20 calls),
* max relative error of the accelerations against sympy's own equations (20 states).

Times are CPU seconds of this process (`time.process_time`, all threads), which a busy
machine disturbs less than wall-clock time. Run: `python benchmarks/sympy_backends.py`
(CPU; float64). Backends: `lambdify`
(sympy's JAX printer with `cse=True`, the default), `lambdify-nocse` (the same without
common-subexpression elimination, for reference) and `sympy2jax`.
"""

import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "standard")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import sympy as sp  # noqa: E402
import sympy.physics.mechanics as me  # noqa: E402

import constrax as cx  # noqa: E402
import constrax.interop as ci  # noqa: E402
from constrax.interop import _sympy_compile  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "interop"))
import test_sympy_bridge as bridge  # noqa: E402

_t = me.dynamicsymbols._t


def count_eqns(jaxpr) -> int:
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for v in eqn.params.values():
            subs = v if isinstance(v, (list, tuple)) else [v]
            for s in subs:
                inner = getattr(s, "jaxpr", None)
                if inner is not None and hasattr(inner, "eqns"):
                    total += count_eqns(inner)
                elif hasattr(s, "eqns"):
                    total += count_eqns(s)
    return total


def n_link_pendulum(n: int):
    ths = me.dynamicsymbols(f"theta1:{n + 1}")
    ms, ls = sp.symbols(f"m1:{n + 1}"), sp.symbols(f"l1:{n + 1}")
    g = sp.Symbol("g")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    prev, bodies = O, []
    for i in range(n):
        P = prev.locatenew(f"P{i}", ls[i] * (sp.sin(ths[i]) * N.x - sp.cos(ths[i]) * N.y))
        P.set_vel(N, P.pos_from(O).dt(N))
        b = me.Particle(f"b{i}", P, ms[i])
        b.potential_energy = ms[i] * g * P.pos_from(O).dot(N.y)
        bodies.append(b)
        prev = P
    Lag = me.Lagrangian(N, *bodies)
    params = (*ms, *ls, g)
    ref = bridge._lagrange_reference(me.LagrangesMethod(Lag, ths), ths, params)
    return Lag, ths, params, ref


def sampled(name, backend):
    """(convert() -> SympySystem, symbols, values, qs, qds, reference qdd)."""
    rng = np.random.default_rng(0)
    if name.startswith("pendulum"):
        n = int(name[len("pendulum") :])
        Lag, ths, params, ref = n_link_pendulum(n)
        pv = tuple(np.linspace(0.7, 1.3, 2 * n)) + (9.81,)
        qs = rng.uniform(-np.pi, np.pi, (20, n))
        qds = rng.normal(size=(20, n))
        refs = np.array([ref(q, qd, pv) for q, qd in zip(qs, qds, strict=True)])
        return lambda: ci.from_lagrangian(Lag, ths, backend=backend), params, pv, qs, qds, refs
    _, _, qs, qds, refs = bridge.sample(name, rng)
    builder = getattr(bridge, name)
    obj, syms = builder()[:2]
    if isinstance(obj, me.KanesMethod):
        convert = lambda: ci.from_kanes_method(obj, backend=backend)
    else:
        convert = lambda: ci.from_lagranges_method(obj, backend=backend)
    return convert, syms, bridge.PARAMS[name], qs, qds, refs


def measure(name, backend):
    real_lambdify = _sympy_compile._lambdify
    if backend == "lambdify-nocse":

        def nocse(exprs, t, qs, qds, ps):
            return sp.lambdify((t, qs, qds, ps), list(exprs), modules="jax", cse=False)

        _sympy_compile._lambdify = nocse
    try:
        convert, syms, pv, qs, qds, refs = sampled(name, backend.split("-")[0])
        t0 = time.process_time()
        conv = convert()
        t_convert = time.process_time() - t0
    finally:
        _sympy_compile._lambdify = real_lambdify
    p = conv.make_params(dict(zip(syms, pv, strict=True)))
    system = conv.system
    q0, qd0 = jnp.asarray(qs[0]), jnp.asarray(qds[0])
    eq_acc = count_eqns(
        jax.make_jaxpr(lambda q, qd: cx.accelerations(system, 0.0, q, qd, p).qdd)(q0, qd0).jaxpr
    )
    eq_L = count_eqns(jax.make_jaxpr(lambda q, qd: system.lagrangian(0.0, q, qd, p))(q0, qd0).jaxpr)
    Q, QD = jnp.asarray(qs), jnp.asarray(qds)
    compile_times = []
    for _ in range(3):  # a fresh jit each time: trace, lower and compile again
        fn = jax.jit(jax.vmap(lambda q, qd: cx.accelerations(system, 0.0, q, qd, p).qdd))
        t0 = time.process_time()
        compiled = fn.lower(Q, QD).compile()
        compile_times.append(time.process_time() - t0)
    t_compile = min(compile_times)
    out = np.asarray(compiled(Q, QD))
    times = []
    for _ in range(20):
        t0 = time.process_time()
        compiled(Q, QD).block_until_ready()
        times.append(time.process_time() - t0)
    err = np.max(bridge._relerr(out, refs))
    return dict(
        convert_s=t_convert,
        eqns_accelerations=eq_acc,
        eqns_lagrangian=eq_L,
        compile_s=t_compile,
        run_us=1e6 * float(np.min(times)),
        max_rel_err=err,
    )


def main():
    jax.config.update("jax_compilation_cache_dir", None)
    systems = [
        "rolling_disc_lagrange",
        "rolling_disc_kane",
        "double_pendulum",
        "rolling_disk",
        "nonminimal_pendulum_kane",
        "pendulum4",
    ]
    backends = ["lambdify", "lambdify-nocse", "sympy2jax"]
    print(
        "| system | backend | convert [s] | jaxpr eqns accelerations | jaxpr eqns L | "
        "compile CPU [s] | run 20 states CPU [us] | max rel err |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in systems:
        for backend in backends:
            r = measure(name, backend)
            print(
                f"| {name} | {backend} | {r['convert_s']:.2f} | {r['eqns_accelerations']} | "
                f"{r['eqns_lagrangian']} | {r['compile_s']:.2f} | {r['run_us']:.0f} | "
                f"{r['max_rel_err']:.1e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
