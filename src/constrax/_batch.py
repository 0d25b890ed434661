r"""Batched and multi-device rollouts (docs/concepts/batching.md).

`simulate` integrates one system from one initial state. Everything in it is a JAX
transformation, so a Monte-Carlo study is `jax.vmap` over initial states, parameters and
controls (controls are just parameters: coefficients of a steering law, a torque table).
`rollout_batch(system, q0s, qd0s, ps, ts=...)` is `simulate` mapped over such a batch,
sharded over every device with `shard=True` (`sharded_vmap`, in `_sharding.py`), returning
plain arrays (`Rollouts`).
"""

from typing import Any

import diffrax
import equinox as eqx
import jax.numpy as jnp
from jax.sharding import Mesh
from jaxtyping import Array, Bool, Float, Int, PyTree

from ._compilation import as_dynamic
from ._prescriptions import AbstractPrescription, DAlembert
from ._sharding import (
    BATCH_AXIS,
    apply_batched,
    batch_axes,
    check_device_batch,
    check_mesh,
    run_sharded,
)
from ._simulate import simulate
from ._state import as_float, shape_error
from ._system import System


def _check_p_axes(p_axes, ps) -> None:
    """`p_axes` must be 0, None or a pytree prefix of `ps`: name the keys that differ."""
    if p_axes is None or isinstance(p_axes, int):
        return

    def check(ax, sub, where):
        if ax is None or isinstance(ax, int):
            return
        if isinstance(ax, dict):
            if not isinstance(sub, dict):
                raise ValueError(
                    f"`p_axes`{where} is a dict but `ps`{where} is a {type(sub).__name__}; "
                    "give 0, None, or a pytree prefix of `ps`"
                )
            unknown = [k for k in ax if k not in sub]
            missing = [k for k in sub if k not in ax]
            if unknown or missing:
                parts = []
                if unknown:
                    parts.append(f"has key(s) {unknown} that `ps`{where} does not have")
                if missing:
                    parts.append(f"lacks key(s) {missing}")
                raise ValueError(
                    f"`p_axes`{where} {' and '.join(parts)}; the keys of `ps`{where} are "
                    f"{sorted(sub, key=str)}. Give one entry (0 = batched, None = shared) per "
                    "key"
                )
            for k in ax:
                check(ax[k], sub[k], f"{where}[{k!r}]")
        elif isinstance(ax, (list, tuple)):
            if not isinstance(sub, (list, tuple)) or len(sub) != len(ax):
                raise ValueError(
                    f"`p_axes`{where} has {len(ax)} entries but `ps`{where} is "
                    f"{type(sub).__name__}"
                    + (f" of length {len(sub)}" if isinstance(sub, (list, tuple)) else "")
                )
            for i, (a, s) in enumerate(zip(ax, sub, strict=True)):
                check(a, s, f"{where}[{i}]")

    check(p_axes, ps, "")


class Rollouts(eqx.Module):
    r"""Output of `rollout_batch`: a batch of trajectories as plain arrays.

    - `ts`: save times `(k,)`, shared by the batch.
    - `q`, `qd`: `(B, k, n)`; `mu`: `(B, k, m)` under `Vakonomic`, else `None`.
    - `num_steps`: accepted + rejected solver steps per member `(B,)`.
    - `success`: `(B,)` whether each member's solve finished (`diffrax.RESULTS.successful`).
    """

    ts: Float[Array, " k"]
    q: Float[Array, "B k n"]
    qd: Float[Array, "B k n"]
    mu: Float[Array, "B k m"] | None
    num_steps: Int[Array, " B"]
    success: Bool[Array, " B"]

    @property
    def batch_size(self) -> int:
        return self.q.shape[0]


class _Rollout(eqx.Module):
    """The per-member rollout, a callable pytree (so `filter_jit` caches it by system)."""

    system: System
    ts: Float[Array, " k"]
    prescription: AbstractPrescription
    kwargs: dict

    def __call__(self, q0, qd0, p, mu0):
        traj = simulate(
            self.system,
            q0,
            qd0,
            p,
            t0=self.ts[0],
            t1=self.ts[-1],
            saveat=diffrax.SaveAt(ts=self.ts),
            prescription=self.prescription,
            mu0=mu0,
            **self.kwargs,
        )
        ok = traj.result == diffrax.RESULTS.successful
        return traj.q, traj.qd, traj.mu, traj.stats["num_steps"], ok


_SIMULATE_ONLY = ("t0", "t1", "saveat")


def rollout_batch(
    system: System,
    q0s: Float[Array, "B n"],
    qd0s: Float[Array, "B n"],
    ps: PyTree = None,
    *,
    ts: Float[Array, " k"],
    p_axes: Any = 0,
    mu0s: Float[Array, "B m"] | None = None,
    prescription: AbstractPrescription = DAlembert(),  # noqa: B008 - an immutable Module
    shard: bool = False,
    mesh: Mesh | None = None,
    axis_name: str = BATCH_AXIS,
    device_batch: int | None = None,
    **simulate_kwargs,
) -> Rollouts:
    r"""Simulate a batch of initial states, parameters and controls at once.

    Every member solves the same constrained equations of motion as `simulate`
    (docs/concepts/prescriptions.md: $W\ddot q = f + A^\top\lambda$, $A\ddot q = -c_\text{bias}$,
    or the vakonomic system of Sławianowski et al. 2013) with its own adaptive steps; `vmap`
    batches them, and with `shard=True` the batch is split over all devices (`sharded_vmap`).

    **Arguments:**

    - `system`: the `System`.
    - `q0s`, `qd0s`: initial coordinates and velocities `(B, n)`.
    - `ps`: parameters. Controls are parameters too (coefficients of a steering law read
      by the `force`). `p_axes` says which leaves are batched: `0` (default: every leaf
      has a leading axis `B`), `None` (shared by the whole batch), or a pytree prefix
      of `ps`, e.g. `{"mass": None, "steer": 0}`.
    - `ts`: save times `(k,)`, `k >= 2`; the integration runs from `ts[0]` to `ts[-1]`.
    - `mu0s`: initial vakonomic multipliers `(B, m)` (default zeros) under `Vakonomic`.
    - `prescription`: `cx.DAlembert()` or `cx.Vakonomic()`.
    - `shard`: split the batch over all devices of `mesh` (default: `batch_mesh()`);
      `device_batch` as in `sharded_vmap`. After `jax.distributed.initialize()` the
      default mesh spans the devices of every process: run the same script, with the same
      inputs, on every host (process); each computes its shards and every process gets
      the whole result (docs/distributed.md; on CPU hosts set
      `jax.config.update("jax_cpu_collectives_implementation", "gloo")` first).
    - `**simulate_kwargs`: passed to `simulate` (`solver`, `stepsize_controller`,
      `constraint_solver`, `stabilisation`, `max_steps`, `throw`, ...). With
      `throw=False` inspect `Rollouts.success` instead of raising on the first failure.
      The default `cx.AutoSolver()` costs what `cx.KKT()` costs on a batch of regular
      states; its rank-robust branch runs only in steps where some member needs it.

    **Returns:** a `Rollouts` (`q`, `qd` of shape `(B, k, n)`, `num_steps`, `success`).

    **Example:**

    ```python
    # the Chaplygin sleigh of the README, four masses from the same initial state
    q0s, qd0s = jnp.tile(q0, (4, 1)), jnp.tile(qd0, (4, 1))
    ps = {**p, "m": jnp.linspace(0.5, 2.0, 4)}
    ts = jnp.linspace(0.0, 2.0, 21)
    out = cx.rollout_batch(system, q0s, qd0s, ps, ts=ts,
                           p_axes={"m": 0, "I": None, "a": None}, shard=True)
    out.q.shape    # (4, 21, 3)
    ```
    """
    if not isinstance(system, System):
        raise TypeError(f"`system` must be a cx.System, got {type(system).__name__}")
    q0s = jnp.asarray(q0s)
    qd0s = jnp.asarray(qd0s)
    if q0s.ndim != 2:
        raise shape_error("q0s", "have shape (B, n) (a batch of states)", q0s.shape)
    if qd0s.shape != q0s.shape:
        raise shape_error("qd0s", f"have the shape of `q0s` {q0s.shape}", qd0s.shape)
    q0s = as_float(q0s)
    qd0s = qd0s.astype(q0s.dtype)
    ts = jnp.asarray(ts, dtype=q0s.dtype)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"`ts` must be a 1-D array of at least 2 save times, got shape {ts.shape}")
    for name in _SIMULATE_ONLY:
        if name in simulate_kwargs:
            raise ValueError(f"`{name}` is set by `ts` in rollout_batch; drop `{name}=`")
    if mu0s is not None:
        if not prescription.multiplier_state:
            raise ValueError("`mu0s` is only used with prescription=cx.Vakonomic(); drop it")
        mu0s = jnp.asarray(mu0s, dtype=q0s.dtype)
        if mu0s.ndim != 2 or mu0s.shape[0] != q0s.shape[0]:
            raise ValueError(
                f"`mu0s` must have shape (B, m) with B={q0s.shape[0]}, got {mu0s.shape}"
            )
    _check_p_axes(p_axes, ps)
    ps = as_dynamic("params", ps)  # new parameter values are new inputs, not a new program
    fn = _Rollout(system, ts, prescription, dict(simulate_kwargs))
    args = (q0s, qd0s, ps, mu0s)
    in_axes = (0, 0, p_axes, None if mu0s is None else 0)
    axes, size = batch_axes(in_axes, args, ("q0s", "qd0s", "ps", "mu0s"))
    if shard:  # what `sharded_vmap(fn, in_axes, ...)(*args)` runs, its arguments checked once
        mesh = check_mesh(mesh, axis_name)
        device_batch = check_device_batch(device_batch)
        out = run_sharded(fn, args, axes, size, mesh, axis_name, device_batch)
    else:
        out = apply_batched(fn, args, axes, None, axis_name)
    q, qd, mu, steps, ok = out
    return Rollouts(ts=ts, q=q, qd=qd, mu=mu, num_steps=steps, success=ok)
