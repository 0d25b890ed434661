"""Batched and sharded rollouts (`rollout_batch`, `sharded_vmap`, `shard_batch`, `pad_batch`).

References: single `cx.simulate` calls (the batch must not change any member), a closed
form (a controlled particle on a line), and — in a subprocess with 4 forced host
devices — the unsharded batch (sharding must not change any member).
"""

import ast
import inspect
import json
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
from constrax import _sharding
from constrax._batch import Rollouts, rollout_batch
from constrax._sharding import batch_mesh, pad_batch, shard_batch, sharded_vmap

TS = jnp.linspace(0.0, 1.0, 6)
TIGHT = diffrax.PIDController(rtol=1e-10, atol=1e-10)


def _pendulum():
    def L(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd - p["m"] * p["g"] * q[1]

    return cx.System(L, [cx.Holonomic(lambda t, q, p: q @ q - p["l"] ** 2, name="rod")])


PENDULUM = _pendulum()
P_PEND = {"m": jnp.array(1.0), "g": jnp.array(9.81), "l": jnp.array(1.0)}


def _pendulum_states(angles):
    th = jnp.asarray(angles)
    q0s = jnp.stack([jnp.sin(th), -jnp.cos(th)], axis=1)
    qd0s = jnp.stack([jnp.cos(th), jnp.sin(th)], axis=1) * 0.3  # tangent: on the manifold
    return q0s, qd0s


def _controlled_particle():
    """A particle on the line y = 0 pushed by the open-loop control u(t) = a + b t."""

    def L(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd

    def u(t, q, qd, p):
        return jnp.stack([p["ctrl"][0] + p["ctrl"][1] * t, 0.0 * t])

    return cx.System(L, [cx.Holonomic(lambda t, q, p: q[1], name="line")], force=u)


PARTICLE = _controlled_particle()


def _closed_form(x0, v0, a, b, m, t):
    return x0 + v0 * t + (a * t**2 / 2 + b * t**3 / 6) / m


def test_batch_over_initial_states_matches_individual_simulate():
    q0s, qd0s = _pendulum_states([0.1, 0.7, 1.3])
    out = rollout_batch(PENDULUM, q0s, qd0s, P_PEND, ts=TS, p_axes=None, stepsize_controller=TIGHT)
    assert isinstance(out, Rollouts)
    assert out.q.shape == (3, 6, 2) and out.qd.shape == (3, 6, 2) and out.mu is None
    assert out.batch_size == 3 and bool(jnp.all(out.success))
    for i in range(3):
        ref = cx.simulate(
            PENDULUM,
            q0s[i],
            qd0s[i],
            P_PEND,
            t1=1.0,
            saveat=diffrax.SaveAt(ts=TS),
            stepsize_controller=TIGHT,
        )
        np.testing.assert_allclose(out.q[i], ref.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(out.qd[i], ref.qd, rtol=0, atol=1e-12)
        assert int(out.num_steps[i]) == int(ref.stats["num_steps"])


def test_batch_failure_raises_under_vmap_with_throw():
    # Same system, shapes and options as above: reuses the compiled batch.
    q0s, qd0s = _pendulum_states([0.1, 0.7, 1.3])
    q0s = q0s.at[1].multiply(1.1)  # off the rod: violates g = |q|^2 - l^2 = 0
    with pytest.raises(Exception, match="violates constraint row rod"):
        rollout_batch(PENDULUM, q0s, qd0s, P_PEND, ts=TS, p_axes=None, stepsize_controller=TIGHT)


@pytest.mark.parametrize(
    "prescription", [cx.DAlembert(), cx.Vakonomic()], ids=["dalembert", "vakonomic"]
)
def test_batched_parameters_and_controls_match_closed_form(prescription):
    # Batched control coefficients; the mass batched too (vakonomic case) or shared with a
    # pytree-prefix `p_axes` (d'Alembert case). For a holonomic constraint the vakonomic
    # motion equals the d'Alembert one (docs/concepts/prescriptions.md), so both follow the
    # closed form.
    B = 4
    x0 = jnp.linspace(-1.0, 1.0, B)
    v0 = jnp.array([0.0, 0.5, -0.3, 1.0])
    ctrl = jnp.stack([jnp.array([1.0, -2.0, 0.5, 0.0]), jnp.array([0.0, 1.0, -0.7, 3.0])], 1)
    q0s = jnp.stack([x0, jnp.zeros(B)], 1)
    qd0s = jnp.stack([v0, jnp.zeros(B)], 1)
    if isinstance(prescription, cx.Vakonomic):
        m = jnp.array([1.0, 2.0, 0.5, 3.0])
        kw = {"mu0s": jnp.zeros((B, 1)), "p_axes": 0}
    else:
        m = jnp.array(2.0)
        kw = {"p_axes": {"m": None, "ctrl": 0}}
    out = rollout_batch(
        PARTICLE,
        q0s,
        qd0s,
        {"m": m, "ctrl": ctrl},
        ts=TS,
        prescription=prescription,
        stepsize_controller=TIGHT,
        **kw,
    )
    ms = jnp.broadcast_to(m, (B,))
    expect = jax.vmap(lambda x, v, c, mm: _closed_form(x, v, c[0], c[1], mm, TS))(x0, v0, ctrl, ms)
    np.testing.assert_allclose(out.q[:, :, 0], expect, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out.q[:, :, 1], 0.0, atol=1e-12)
    if isinstance(prescription, cx.Vakonomic):
        assert out.mu.shape == (B, 6, 1)
    else:
        assert out.mu is None


def test_sharded_vmap_on_one_device_equals_vmap():
    f = lambda x, y: jnp.sin(x) * y
    x = jnp.linspace(0.0, 1.0, 5)
    out = sharded_vmap(f, in_axes=(0, None))(x, jnp.array(3.0))
    np.testing.assert_allclose(out, jax.vmap(f, in_axes=(0, None))(x, 3.0), rtol=1e-15)


def test_pad_batch_repeats_last_element():
    x = {"a": jnp.arange(5.0), "b": jnp.arange(10.0).reshape(5, 2)}
    padded, size = pad_batch(x, 4)
    assert size == 5 and padded["a"].shape == (8,) and padded["b"].shape == (8, 2)
    np.testing.assert_array_equal(padded["a"][5:], 4.0)
    np.testing.assert_array_equal(padded["b"][5:], jnp.broadcast_to(x["b"][-1], (3, 2)))
    same, size = pad_batch(x, 5)
    assert size == 5 and same["a"].shape == (5,)


def test_shard_batch_places_on_mesh():
    sharded, size = shard_batch(jnp.ones((3, 2)))
    assert size == 3
    assert sharded.shape[0] % jax.device_count() == 0
    assert sharded.sharding.mesh.axis_names == ("batch",)


# --------------------------------------------------------------------------------------
# Errors (all raised at trace time, before anything compiles).


def test_error_q0s_not_a_batch():
    with pytest.raises(ValueError, match=r"`q0s` must have shape \(B, n\)"):
        rollout_batch(PENDULUM, jnp.zeros(2), jnp.zeros(2), P_PEND, ts=TS, p_axes=None)


def test_error_qd0s_shape():
    with pytest.raises(ValueError, match="`qd0s` must have the shape of `q0s`"):
        rollout_batch(PENDULUM, jnp.zeros((3, 2)), jnp.zeros((2, 2)), P_PEND, ts=TS, p_axes=None)


def test_error_batch_size_mismatch():
    with pytest.raises(ValueError, match="same batch size"):
        rollout_batch(
            PARTICLE,
            jnp.zeros((3, 2)),
            jnp.zeros((3, 2)),
            {"m": jnp.ones(2), "ctrl": jnp.zeros((3, 2))},
            ts=TS,
        )


def test_error_scalar_leaf_mapped():
    with pytest.raises(ValueError, match="scalar leaf"):
        rollout_batch(PENDULUM, jnp.zeros((3, 2)), jnp.zeros((3, 2)), P_PEND, ts=TS)


def test_error_ts():
    with pytest.raises(ValueError, match="`ts` must be a 1-D array of at least 2"):
        rollout_batch(
            PENDULUM, jnp.zeros((3, 2)), jnp.zeros((3, 2)), P_PEND, ts=jnp.array([1.0]), p_axes=None
        )


def test_error_t1_given():
    with pytest.raises(ValueError, match="`t1` is set by `ts`"):
        rollout_batch(
            PENDULUM, jnp.zeros((3, 2)), jnp.zeros((3, 2)), P_PEND, ts=TS, p_axes=None, t1=2.0
        )


def test_error_mu0s_without_vakonomic():
    with pytest.raises(ValueError, match="`mu0s` is only used with"):
        rollout_batch(
            PENDULUM,
            jnp.zeros((3, 2)),
            jnp.zeros((3, 2)),
            P_PEND,
            ts=TS,
            p_axes=None,
            mu0s=jnp.zeros((3, 1)),
        )


def test_error_mu0s_shape():
    with pytest.raises(ValueError, match=r"`mu0s` must have shape \(B, m\)"):
        rollout_batch(
            PENDULUM,
            jnp.zeros((3, 2)),
            jnp.zeros((3, 2)),
            P_PEND,
            ts=TS,
            p_axes=None,
            prescription=cx.Vakonomic(),
            mu0s=jnp.zeros((2, 1)),
        )


def test_error_system_type():
    with pytest.raises(TypeError, match="`system` must be a cx.System"):
        rollout_batch(lambda: None, jnp.zeros((3, 2)), jnp.zeros((3, 2)), ts=TS)


def test_error_in_axes():
    f = sharded_vmap(lambda x: x, in_axes=(1,))
    with pytest.raises(ValueError, match="only batch axis 0"):
        f(jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="one entry per positional argument"):
        sharded_vmap(lambda x, y: x, in_axes=(0,))(jnp.zeros(2), jnp.zeros(2))
    with pytest.raises(ValueError, match="at least one argument mapped"):
        sharded_vmap(lambda x: x, in_axes=None)(jnp.zeros(2))


def test_error_mesh_axis_name():
    with pytest.raises(ValueError, match="is not an axis of the mesh"):
        sharded_vmap(lambda x: x, mesh=batch_mesh(axis_name="data"))
    with pytest.raises(ValueError, match="`axis_name` must be a non-empty string"):
        batch_mesh(axis_name="")
    with pytest.raises(TypeError, match="`mesh` must be a jax.sharding.Mesh"):
        sharded_vmap(lambda x: x, mesh="cpu")
    with pytest.raises(TypeError, match="`fn` must be callable"):
        sharded_vmap(3)
    with pytest.raises(ValueError, match="`device_batch` must be a positive integer"):
        sharded_vmap(lambda x: x, mesh=batch_mesh(), device_batch=0)
    with pytest.raises(ValueError, match="`device_batch` must be a positive integer"):
        sharded_vmap(lambda x: x, device_batch=1.5)  # default mesh: checked when wrapped
    q0s, qd0s = _pendulum_states([0.1, 0.7])
    with pytest.raises(ValueError, match="`device_batch` must be a positive integer"):
        rollout_batch(PENDULUM, q0s, qd0s, P_PEND, ts=TS, p_axes=None, shard=True, device_batch=-1)


def test_sharding_module_imports_nothing_from_constrax():
    """`_sharding.py` is a general utility: no import of constrax, absolute or relative."""
    tree = ast.parse(inspect.getsource(_sharding))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import `from {'.' * node.level}{node.module}`"
            assert not node.module.startswith("constrax"), node.module
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("constrax") for a in node.names)


@pytest.mark.parametrize("shard", [False, True])
def test_rollout_batch_checks_its_batch_once(monkeypatch, shard):
    """The batch axes and size are checked once per call (not again by the sharding layer)."""
    calls = []
    checked = _sharding._batch_size

    def counting(*args, **kwargs):
        calls.append(kwargs.get("names", args[2] if len(args) > 2 else None))
        return checked(*args, **kwargs)

    monkeypatch.setattr(_sharding, "_batch_size", counting)
    q0s, qd0s = _pendulum_states([0.1, 0.7, 1.3])
    out = rollout_batch(PENDULUM, q0s, qd0s, P_PEND, ts=TS, p_axes=None, shard=shard)
    assert out.q.shape == (q0s.shape[0], TS.shape[0], 2)
    assert calls == [("q0s", "qd0s", "ps", "mu0s")]


def test_error_pad_multiple():
    with pytest.raises(ValueError, match="`multiple` must be a positive integer"):
        pad_batch(jnp.zeros(3), 0)


# --------------------------------------------------------------------------------------
# Several devices: 4 forced CPU devices in a fresh process.

_SHARDED_SCRIPT = textwrap.dedent(
    """
    import json, jax, jax.numpy as jnp, numpy as np, diffrax
    jax.config.update("jax_enable_x64", True)
    import constrax as cx
    from constrax._batch import rollout_batch
    from constrax._sharding import sharded_vmap
    assert jax.device_count() == 4, jax.devices()

    def L(t, q, qd, p):  # Chaplygin sleigh (Bloch §1.7), a Pfaffian system
        vx = qd[0] - p["a"] * jnp.sin(q[2]) * qd[2]
        vy = qd[1] + p["a"] * jnp.cos(q[2]) * qd[2]
        return 0.5 * (vx**2 + vy**2) + 0.5 * p["I"] * qd[2] ** 2
    knife = cx.Pfaffian(lambda t, q, p: jnp.stack([-jnp.sin(q[2]), jnp.cos(q[2]), 0.0 * q[2]]))
    system = cx.System(L, [knife])
    B = 6                                    # not a multiple of 4: padded to 8
    q0s = jnp.zeros((B, 3))
    qd0s = jnp.stack([jnp.linspace(0.5, 1.5, B), jnp.zeros(B), jnp.linspace(-1, 1, B)], 1)
    ps = {"a": jnp.linspace(0.2, 0.7, B), "I": jnp.array(0.1)}
    ts = jnp.linspace(0.0, 2.0, 5)
    kw = dict(ts=ts, p_axes={"a": 0, "I": None},
              stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10))
    plain = rollout_batch(system, q0s, qd0s, ps, **kw)
    sharded = rollout_batch(system, q0s, qd0s, ps, shard=True, **kw)
    # one member at a time per device (lax.map), as used for large per-device batches
    chunked = rollout_batch(system, q0s, qd0s, ps, shard=True, device_batch=1, **kw)
    owner = sharded_vmap(lambda x: jax.lax.axis_index("batch") + 0 * x)(jnp.arange(8.0))
    print("RESULT" + json.dumps({
        "shape": list(sharded.q.shape),
        "max_dq": float(jnp.max(jnp.abs(plain.q - sharded.q))),
        "max_dqd": float(jnp.max(jnp.abs(plain.qd - sharded.qd))),
        "max_dq_chunked": float(jnp.max(jnp.abs(plain.q - chunked.q))),
        "steps_equal": bool(jnp.all(plain.num_steps == sharded.num_steps)),
        "success": bool(jnp.all(sharded.success)),
        "owner": np.asarray(owner).tolist(),
    }))
    """
)


def test_sharded_rollouts_equal_unsharded_on_four_devices(subprocess_xla_flags):
    env = dict(os.environ)
    # 4 host devices; the quick compile of conftest (compile time dominates these short runs).
    env["XLA_FLAGS"] = f"{subprocess_xla_flags} --xla_force_host_platform_device_count=4"
    env["JAX_PLATFORMS"] = "cpu"
    if jax.config.jax_compilation_cache_dir:  # share conftest's persistent compile cache
        env["JAX_COMPILATION_CACHE_DIR"] = jax.config.jax_compilation_cache_dir
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.5"
    proc = subprocess.run(
        [sys.executable, "-c", _SHARDED_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    res = json.loads(line[len("RESULT") :])
    assert res["shape"] == [6, 5, 3]
    # Each device integrates its members with their own adaptive steps, exactly as the
    # unsharded vmap does: the results agree to round-off.
    assert res["max_dq"] <= 1e-13 and res["max_dqd"] <= 1e-13 and res["max_dq_chunked"] <= 1e-13
    assert res["steps_equal"] and res["success"]
    # The batch really is split: device k handles members 2k and 2k+1.
    assert res["owner"] == [0, 0, 1, 1, 2, 2, 3, 3]


# --------------------------------------------------------------------------------------
# Core fix found while batching: `simulate` with parameters given as Python scalars only
# (no array leaf to thread `eqx.error_if` onto) used to fail with "No arrays to thread
# error on to"; such parameters are concrete and are now checked at trace time.


def test_python_scalar_params_are_checked_at_trace_time():
    from constrax._simulate import _check_finite

    p = {"m": 1.0, "g": 9.81, "l": 1.0}
    assert _check_finite(p, "p") is p
    with pytest.raises(ValueError, match="`p` contains NaN or inf"):
        _check_finite({"m": float("nan")}, "p")
    with pytest.raises(ValueError, match="`p` contains NaN or inf"):
        q0s, qd0s = _pendulum_states([0.3])
        cx.simulate(PENDULUM, q0s[0], qd0s[0], {**p, "g": float("inf")}, t1=1.0)
