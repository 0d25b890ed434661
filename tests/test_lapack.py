"""jaxlib 0.10's batched LAPACK kernels cannot deadlock constrax's programs (docs page
"Sharp bits", "A compiled program that never returns"): every factorisation reaches LAPACK
in chunks small enough to run on the calling thread, under `vmap`, nested `vmap`, `grad`
and `jit`, with the answers of the unchunked calls."""

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
from constrax import _lapack

pytestmark = pytest.mark.skipif(
    not _lapack.AFFECTED or jax.default_backend() != "cpu",
    reason="only jaxlib 0.10.0-0.11.0 on the CPU has the blocking LAPACK kernels",
)

_CALL = re.compile(r"custom_call_target=\"(lapack_\w+)\"")


def _lapack_batches(compiled_text: str) -> list[tuple[str, int, int]]:
    """(kernel, batch, matrix size) of every LAPACK custom call of an optimised HLO text."""
    out = []
    for line in compiled_text.splitlines():
        match = _CALL.search(line)
        if not match:
            continue
        # The operand's shape: `operand_layout_constraints={f64[5,30,30]{1,2,0}}`.
        shape = re.search(r"operand_layout_constraints=\{[a-z]+\d+\[([\d,]*)\]", line)
        dims = [int(d) for d in shape.group(1).split(",") if d] if shape else []
        if len(dims) >= 2:
            out.append((match.group(1), int(np.prod(dims[:-2], initial=1)), dims[-1]))
    return out


def _chain():
    # 10 point masses in the plane: a 30 x 30 saddle matrix (20 coordinates, 10 rods).
    model = cx.models.pendulum_chain(10)
    rng = np.random.default_rng(0)
    qs = jnp.asarray(model.q0 + 1e-3 * rng.normal(size=(64, model.q0.size)))
    qds = jnp.zeros_like(qs)
    return model, qs, qds


def _accelerations(model, solver):
    def qdd(q, qd):
        return cx.accelerations(
            model.system, 0.0, q, qd, model.params, constraint_solver=solver
        ).qdd

    return qdd


@pytest.mark.parametrize("solver", [cx.AutoSolver(), cx.KKT(), cx.UdwadiaKalaba()])
def test_batched_factorisations_reach_lapack_in_chunks_that_run_on_the_calling_thread(solver):
    model, qs, qds = _chain()
    qdd = _accelerations(model, solver)
    programs = {
        "vmap": (jax.vmap(qdd), (qs, qds)),
        "vmap(vmap)": (jax.vmap(jax.vmap(qdd)), (qs.reshape(8, 8, -1), qds.reshape(8, 8, -1))),
        "vmap(grad)": (
            jax.vmap(jax.grad(lambda q, qd: jnp.sum(qdd(q, qd) ** 2))),
            (qs, qds),
        ),
    }
    for name, (fn, args) in programs.items():
        calls = _lapack_batches(jax.jit(fn).lower(*args).compile().as_text())
        assert calls, (name, "no LAPACK call found: the HLO text's format changed")
        for kernel, batch, size in calls:
            assert batch * size**3 <= _lapack.PARALLEL_WORK, (name, kernel, batch, size)


def test_chunked_factorisations_give_the_unchunked_answers_and_gradients(monkeypatch):
    model, qs, qds = _chain()
    qdd = _accelerations(model, cx.AutoSolver())
    loss = jax.vmap(jax.grad(lambda q, qd: jnp.sum(jnp.sin(qdd(q, qd)))))
    chunked = jax.jit(jax.vmap(qdd))(qs, qds), jax.jit(loss)(qs, qds)
    monkeypatch.setattr(_lapack, "AFFECTED", False)
    jax.clear_caches()
    plain = jax.jit(jax.vmap(qdd))(qs, qds), jax.jit(loss)(qs, qds)
    jax.clear_caches()
    for a, b in zip(chunked, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_pseudoinverse_and_its_derivative_match_numpy_and_central_differences():
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.normal(size=(3, 7)))
    np.testing.assert_allclose(_lapack.pinv(a, 1e-10), np.linalg.pinv(np.asarray(a)), atol=1e-12)
    da = jnp.asarray(rng.normal(size=(3, 7)))
    _, tangent = jax.jvp(lambda x: _lapack.pinv(x, 1e-10), (a,), (da,))
    h = 1e-6
    fd = (np.linalg.pinv(np.asarray(a + h * da)) - np.linalg.pinv(np.asarray(a - h * da))) / (2 * h)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-8)
    batched = jax.jit(jax.vmap(lambda x: _lapack.pinv(x, 1e-10)))(jnp.stack([a, 2 * a]))
    np.testing.assert_allclose(batched[1], np.linalg.pinv(2 * np.asarray(a)), atol=1e-12)


@pytest.mark.slow
def test_float32_humanoid_rollout_with_the_defaults_returns_finite_states_in_time():
    # The case that hung on a 2-core machine with jaxlib 0.10.2 (B = 1 024 and 4 096
    # humanoids, 100 Euler steps, float32, the defaults): a fresh process, so that XLA's
    # thread pool is its own, stopped after 300 s.
    pytest.importorskip("mujoco")
    pytest.importorskip("gymnasium")
    script = textwrap.dedent(
        """
        import os, jax, jax.numpy as jnp, numpy as np, diffrax, mujoco, gymnasium
        import constrax as cx
        path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco",
                            "assets", "humanoid.xml")
        m = mujoco.MjModel.from_xml_path(path)
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(
            mujoco.mjtDisableBit.mjDSBL_LIMIT)
        imported = cx.rigid.from_mjcf(m)
        rng = np.random.default_rng(0)
        B = 1024
        qpos = np.tile(m.qpos0, (B, 1)) + 0.05 * rng.normal(size=(B, m.nq))
        qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
        qvel = 0.1 * rng.normal(size=(B, m.nv))
        q, qd = (jnp.asarray(x, jnp.float32) for x in imported.from_mujoco_state(qpos, qvel))
        p = dict(imported.params, ctrl=jnp.zeros(m.nu, jnp.float32))
        def rollout(q0, qd0):
            return cx.simulate(imported.system, q0, qd0, p, t1=0.1, dt0=1e-3,
                               solver=diffrax.Euler(),
                               stepsize_controller=diffrax.ConstantStepSize()).q[-1]
        out = jax.jit(jax.vmap(rollout))(q, qd)
        print("finite", bool(jnp.all(jnp.isfinite(out))), out.dtype)
        """
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_ENABLE_X64="0")
    src = pathlib.Path(__file__).resolve().parents[1] / "src"
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "finite True float32" in done.stdout
