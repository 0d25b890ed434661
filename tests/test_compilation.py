"""Compile once per system and shape: new values never recompile; the persistent cache works."""

import os
import subprocess
import sys
import textwrap

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx


class CompileCounter:
    """Counts XLA compilations (JAX's `backend_compile` monitoring event)."""

    def __init__(self):
        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            self.count += 1


_COUNTER = CompileCounter()


def _compiles(fn):
    before = _COUNTER.count
    out = fn()
    jax.block_until_ready(out)
    return _COUNTER.count - before


def _values(p, scale):
    return {k: float(v) * scale for k, v in p.items()}


def test_eager_calls_compile_once_per_system_and_shape():
    m = cx.models.chaplygin_sleigh()
    S, p, q0, qd0 = m.system, m.params, m.q0, m.qd0
    calls = {
        "accelerations": lambda p, q, t: cx.accelerations(S, t, q, qd0, p).qdd,
        "energy": lambda p, q, t: cx.energy(S, t, q, qd0, p),
        "constraint_residual": lambda p, q, t: cx.constraint_residual(S, t, q, qd0, p).velocity,
        "constraint_rank": lambda p, q, t: cx.constraint_rank(S, t, q, qd0, p).rank,
        "mass_matrix": lambda p, q, t: cx.mass_matrix(S, t, q, qd0, p),
    }
    for name, call in calls.items():
        call(p, q0, 0.0)  # first call: traces and compiles
        # New parameter values given as Python floats, a new state, a new time (Python int).
        p2, q2 = _values(p, 1.3), q0.at[0].add(0.5)
        n = _compiles(lambda call=call, p2=p2, q2=q2: call(p2, q2, 2))
        assert n == 0, f"{name} recompiled {n} time(s) for new values"


def test_simulate_does_not_recompile_for_new_values_or_horizon():
    m = cx.models.chaplygin_sleigh()
    S, p, q0, qd0 = m.system, m.params, m.q0, m.qd0
    kw = dict(dt0=0.01, stepsize_controller=diffrax.ConstantStepSize(), max_steps=512)
    jax.block_until_ready(cx.simulate(S, q0, qd0, p, t1=1.0, **kw).q)
    for scale, t1 in [(1.2, 2.0), (0.7, 3)]:
        q, pv = q0 * scale, _values(p, scale)
        n = _compiles(lambda q=q, pv=pv, t1=t1: cx.simulate(S, q, qd0, pv, t1=t1, **kw).q)
        assert n == 0, f"simulate recompiled {n} time(s) for new values"


def test_rollout_batch_and_gradient_do_not_recompile_for_new_values():
    m = cx.models.chaplygin_sleigh()
    S, p, q0, qd0 = m.system, m.params, m.q0, m.qd0
    ts = jnp.linspace(0.0, 0.5, 6)
    kw = dict(dt0=0.01, stepsize_controller=diffrax.ConstantStepSize(), max_steps=64)
    q0s, qd0s = jnp.stack([q0, q0]), jnp.stack([qd0, qd0])
    jax.block_until_ready(cx.rollout_batch(S, q0s, qd0s, p, ts=ts, p_axes=None, **kw).q)
    q1s, p1 = q0s.at[:, 0].add(0.1), _values(p, 1.1)
    n = _compiles(lambda: cx.rollout_batch(S, q1s, qd0s, p1, ts=ts, p_axes=None, **kw).q)
    assert n == 0

    grad = jax.jit(jax.grad(lambda p, q0: cx.simulate(S, q0, qd0, p, t1=0.5, **kw).q[-1, 0]))
    grad(p, q0)
    p1, q1 = jax.tree.map(lambda x: 1.1 * x, p), q0.at[0].add(0.2)
    n = _compiles(lambda: grad(p1, q1))
    assert n == 0


def test_gradient_traces_the_vector_field_once(monkeypatch):
    """A checkpointed reverse pass traces one solver step several times (equinox's fixed
    point on which loop carries have nonzero cotangents); the field is a nested `jit`, so
    every trace after the first reuses its jaxpr (three traces here without it). Counting
    traces is deterministic, unlike time."""
    from constrax import _simulate

    traces = []
    evaluate = _simulate._VectorField.evaluate

    def counting(self, t, y, p):
        traces.append(1)
        return evaluate(self, t, y, p)

    monkeypatch.setattr(_simulate._VectorField, "evaluate", counting)
    m = cx.models.tilted_rolling_disk()

    def loss(p):
        traj = cx.simulate(m.system, m.q0, m.qd0, p, t1=0.05)
        return jnp.sum(traj.q[-1] ** 2)

    jax.clear_caches()
    jax.jit(jax.grad(loss)).trace(m.params)
    assert len(traces) == 1


def test_persistent_cache_serves_a_fresh_process(tmp_path):
    """A second process with the cache on compiles nothing new for the same program."""
    script = textwrap.dedent(
        """
        import jax, sys
        jax.config.update("jax_enable_x64", True)
        import constrax as cx
        hits = []
        jax.monitoring.register_event_listener(
            lambda name, **kw: hits.append(name)
            if name == "/jax/compilation_cache/cache_hits" else None)
        m = cx.models.chaplygin_sleigh()
        print(float(cx.accelerations(m.system, 0.0, m.q0, m.qd0, m.params).qdd[0]))
        print("HITS", len(hits))
        """
    )
    env = {
        **os.environ,
        "CONSTRAX_COMPILATION_CACHE": str(tmp_path / "cache"),
        "CONSTRAX_COMPILATION_CACHE_MIN_SECS": "0",
    }
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    runs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    first, second = (r.stdout.split() for r in runs)
    assert first[0] == second[0]  # same value
    assert int(first[-1]) == 0 and int(second[-1]) >= 1, (first, second)
    assert any((tmp_path / "cache").iterdir())


def test_enable_compilation_cache_checks_its_argument(tmp_path):
    with pytest.raises(ValueError, match="min_compile_time_secs"):
        cx.enable_compilation_cache(tmp_path, min_compile_time_secs=-1)


def test_compiled_wrapper_names_the_function_on_a_bad_call():
    with pytest.raises(TypeError, match=r"accelerations\(system"):
        cx.accelerations(1, 2, 3, 4, 5, 6, 7)
    assert np.isfinite(0.0)


def test_compiled_is_told_its_data_arguments_at_decoration():
    """`@compiled` names its data arguments by kind; a missing or unknown name raises at once."""
    from constrax._compilation import compiled

    def field(t, y, p):
        return t + y * p["k"]

    with pytest.raises(TypeError, match=r"@compiled on .*field: name the arguments that are data"):
        compiled(field)
    with pytest.raises(TypeError, match=r"field\(t, y, p\) has no argument\(s\) \['q'\]"):
        compiled(times=("t",), states=("q",), params=("p",))(field)
    with pytest.raises(TypeError, match=r"arguments \['y'\] are named under more than one kind"):
        compiled(states=("y",), params=("y",))(field)
    with pytest.raises(TypeError, match=r"`states` must be a tuple of argument names"):
        compiled(states="y")
    f = compiled(times=("t",), states=("y",), params=("p",))(field)
    jax.block_until_ready(f(0.0, 1.0, {"k": 2.0}))
    assert _compiles(lambda: f(1.0, 3.0, {"k": 5.0})) == 0  # new floats: the same program


def test_eager_calls_take_the_compiler_options_and_staged_calls_xlas_defaults(monkeypatch):
    """constrax compiles a call that is not staged into a larger program with its
    `compiler_options` (XLA's LLVM IR emitters on the CPU), under `jax.jacfwd` and
    `jax.vmap` too, and leaves them out under `jax.jit`, `jax.grad` and `lax.scan`, where
    JAX refuses options on a nested program. An option XLA does not know makes the first
    kind fail and leaves the second untouched."""
    from constrax import _compilation

    assert _compilation.compiler_options("cpu") in (None, dict(_compilation._CPU_COMPILER_OPTIONS))
    assert _compilation.compiler_options("gpu") is None
    monkeypatch.setattr(
        _compilation, "compiler_options", lambda backend: {"xla_no_such_option_here": False}
    )
    m = cx.models.snake_cart()
    f = lambda qd: cx.accelerations(m.system, 0.0, m.q0, qd, m.params).qdd  # noqa: E731
    batch = jnp.stack([m.qd0, m.qd0])
    for eager, x in ((f, m.qd0), (jax.jacfwd(f), m.qd0), (jax.vmap(f), batch)):
        with pytest.raises(Exception, match="xla_no_such_option_here"):
            jax.block_until_ready(eager(x))
    for staged in (jax.jit(f), jax.grad(lambda qd: f(qd)[0])):
        assert np.all(np.isfinite(staged(m.qd0)))
    scanned = jax.lax.scan(lambda c, _: (c, f(c)), m.qd0, None, length=2)[1]
    assert np.all(np.isfinite(scanned))
