r"""`rollout_batch(..., shard=True)` across two processes, as it runs on several hosts.

Two local processes (CPU, loopback only) call `jax.distributed.initialize` with
`coordinator_address="127.0.0.1:<free port>"`, `num_processes=2`, `process_id=0/1`, and
two CPU devices each, so the batch is split over a four-device mesh spanning both
processes; cross-process collectives use gloo. Each process runs this file as a script,
gathers the result (`rollout_batch` returns it on every process) and saves it; the test
compares both with the single-process `rollout_batch` of the same batch.

The pendulum's length is batched with `p_axes`, and the batch size (7) is not a
multiple of the device count (4), so padding across processes is exercised too.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

B = 7
TS = np.linspace(0.0, 1.0, 6)


def _problem():
    import jax.numpy as jnp

    import constrax as cx

    def L(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd - p["m"] * 9.81 * q[1]

    def rod(t, q, p):
        return q @ q - p["l"] ** 2

    system = cx.System(L, [cx.Holonomic(rod)])
    angle = jnp.linspace(0.2, 1.4, B)
    length = jnp.linspace(0.5, 2.0, B)
    q0s = jnp.stack([length * jnp.sin(angle), -length * jnp.cos(angle)], axis=1)
    qd0s = jnp.zeros((B, 2))
    ps = {"m": jnp.asarray(1.3), "l": length}
    return system, q0s, qd0s, ps


def _rollout(shard: bool):
    import jax.numpy as jnp

    import constrax as cx

    system, q0s, qd0s, ps = _problem()
    out = cx.rollout_batch(
        system,
        q0s,
        qd0s,
        ps,
        ts=jnp.asarray(TS),
        p_axes={"m": None, "l": 0},
        shard=shard,
        constraint_solver=cx.KKT(),
    )
    return np.asarray(out.q), np.asarray(out.qd), np.asarray(out.num_steps)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_process_sharded_rollout_equals_single_process(tmp_path):
    port = _free_port()
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), env.get("PYTHONPATH", "")]
    )
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, str(pid), str(port), str(tmp_path / f"out{pid}.npz")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for pid in (0, 1)
    ]
    logs = []
    try:
        for proc in procs:
            logs.append(proc.communicate(timeout=540)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for pid, (proc, log) in enumerate(zip(procs, logs, strict=True)):
        assert proc.returncode == 0, f"process {pid} failed:\n{log[-4000:]}"
        assert "process_count=2 global_devices=4 local_devices=2" in log, log[-2000:]

    q, qd, steps = _rollout(shard=False)
    assert np.all(np.isfinite(q)) and q.shape == (B, len(TS), 2)
    for pid in (0, 1):
        got = np.load(tmp_path / f"out{pid}.npz")
        np.testing.assert_allclose(got["q"], q, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["qd"], qd, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(got["num_steps"], steps)


def _worker(pid: int, port: int, out: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid
    )
    print(
        f"process_count={jax.process_count()} global_devices={jax.device_count()} "
        f"local_devices={jax.local_device_count()}",
        flush=True,
    )
    q, qd, steps = _rollout(shard=True)
    np.savez(out, q=q, qd=qd, num_steps=steps)
    jax.distributed.shutdown()


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
