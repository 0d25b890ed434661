r"""`sharded_vmap`: `jax.vmap` with the batch split over every visible device.

A batch of independent computations (here: many adaptive ODE solves) is `jax.vmap`; this
module adds what `vmap` alone does not give. `sharded_vmap(fn)` splits the batch axis over
every visible device with `jax.shard_map` on a 1-D `jax.sharding.Mesh`. The batch is padded
to a multiple of the device count (by repeating its last element, so padding never feeds a
degenerate state or parameter to the per-member function) and the padding is cut off
again. Each device runs its own members, so a slow member only delays its own shard. The
same script runs on a laptop (one CPU device), on a multi-GPU node, and — after
`jax.distributed.initialize()` — on many hosts: the mesh is built from `jax.devices()` (all
processes' devices), inputs are placed with `jax.make_array_from_callback` (every process
holds the same host batch and contributes its addressable shards) and results are gathered
to every process.

This module knows nothing of constrax (it imports nothing from it); `_batch.py` builds the
rollouts on it. The arguments are checked once, by the public entry points
(`sharded_vmap`, `shard_batch`, `pad_batch`) or by a caller through `batch_axes`,
`check_mesh` and `check_device_batch`; `run_sharded` and `apply_batched` trust them.

Test the multi-device path on one CPU with
`XLA_FLAGS=--xla_force_host_platform_device_count=4` (set before JAX starts).
"""

import functools
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, PyTree

BATCH_AXIS = "batch"


def batch_mesh(devices=None, axis_name: str = BATCH_AXIS) -> Mesh:
    """A 1-D device mesh over `devices` (default: every device of every process).

    **Arguments:**

    - `devices`: a sequence of devices; default `jax.devices()` (global across hosts
      after `jax.distributed.initialize()`).
    - `axis_name`: the mesh axis name the batch is split over.

    **Returns:** a `jax.sharding.Mesh` with one axis `axis_name`.

    **Example:**

    ```python
    mesh = cx.batch_mesh()                      # all devices, axis 'batch'
    run = cx.sharded_vmap(lambda x: x**2, mesh=mesh)
    run(jnp.arange(6.0))
    ```
    """
    if not isinstance(axis_name, str) or not axis_name:
        raise ValueError(f"`axis_name` must be a non-empty string, got {axis_name!r}")
    devices = jax.devices() if devices is None else list(devices)
    if len(devices) == 0:
        raise ValueError("`devices` must contain at least one device, got an empty sequence")
    return Mesh(np.asarray(devices, dtype=object), (axis_name,))


def _is_none(x) -> bool:
    return x is None


def _full_axes(in_axes, args: tuple) -> list:
    """Broadcast a vmap-style `in_axes` (an int/None, or a tuple with one pytree prefix per
    positional argument) to one prefix per argument; check every axis is 0 or None."""
    if in_axes is None or isinstance(in_axes, int):
        in_axes = (in_axes,) * len(args)
    elif isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple) or len(in_axes) != len(args):
        raise ValueError(
            f"`in_axes` must be 0, None or a tuple with one entry per positional argument "
            f"({len(args)}), got {in_axes!r}"
        )
    for i, (ax, arg) in enumerate(zip(in_axes, args, strict=True)):
        try:
            leaves = _leaf_axes(ax, arg)
        except ValueError as e:
            raise ValueError(
                f"`in_axes[{i}]` must be 0, None or a pytree prefix of argument {i}: {e}"
            ) from None
        for leaf in leaves + jax.tree_util.tree_leaves(ax, is_leaf=_is_none):
            if leaf not in (0, None) or isinstance(leaf, bool):
                raise ValueError(
                    f"`in_axes[{i}]`: only batch axis 0 (batched) or None (shared) is "
                    f"supported, got {leaf!r}"
                )
    return list(in_axes)


def _leaf_axes(ax, arg) -> list:
    """One axis (0 or None) per array leaf of `arg`, given its axes prefix `ax`."""
    if ax is None or isinstance(ax, int):
        return [ax] * len(jax.tree_util.tree_leaves(arg))
    out = []
    jax.tree_util.tree_map(
        lambda a, sub: out.extend([a] * len(jax.tree_util.tree_leaves(sub))),
        ax,
        arg,
        is_leaf=_is_none,
    )
    return out


def batch_axes(
    in_axes: Any, args: tuple, names: tuple[str, ...] | None = None
) -> tuple[tuple, int]:
    """Check a vmap-style `in_axes` against `args` and the batch size of the batched leaves.

    **Returns:** `(axes, B)`: one axes prefix per positional argument and the common batch
    size. `names` (one per argument) name the arguments in the errors (default "argument i").
    """
    axes = _full_axes(in_axes, args)
    return tuple(axes), _batch_size(args, axes, names)


def _batch_size(args: tuple, axes: list, names: tuple[str, ...] | None = None) -> int:
    sizes = {}
    for i, (ax, arg) in enumerate(zip(axes, args, strict=True)):
        arg_name = f"argument {i}" if names is None else f"`{names[i]}`"
        paths = jax.tree_util.tree_flatten_with_path(arg)[0]
        for (path, leaf), a in zip(paths, _leaf_axes(ax, arg), strict=True):
            if a == 0:
                where = arg_name + (f" leaf {jax.tree_util.keystr(path)}" if path else "")
                shape = np.shape(leaf)
                if len(shape) == 0:
                    raise ValueError(
                        f"{where} is mapped over axis 0 but is a scalar leaf; give it a "
                        "leading batch axis or mark it shared with in_axes=None (p_axes=None "
                        "for parameters)"
                    )
                sizes.setdefault(shape[0], where)
    if not sizes:
        raise ValueError("sharded_vmap needs at least one argument mapped over axis 0")
    if len(sizes) > 1:
        desc = ", ".join(f"{b} ({where})" for b, where in sizes.items())
        raise ValueError(f"every batched argument must have the same batch size, got {desc}")
    (size,) = sizes
    if size == 0:
        raise ValueError("the batch is empty (batch size 0)")
    return size


def _map_batched(fn, args: tuple, axes: list) -> tuple:
    """Apply `fn` to every batched (axis-0) array leaf of `args`."""
    out = []
    for ax, arg in zip(axes, args, strict=True):
        leaves, treedef = jax.tree_util.tree_flatten(arg)
        new = [fn(x) if a == 0 else x for x, a in zip(leaves, _leaf_axes(ax, arg), strict=True)]
        out.append(jax.tree_util.tree_unflatten(treedef, new))
    return tuple(out)


def pad_batch(x: PyTree[Array], multiple: int) -> tuple[PyTree[Array], int]:
    """Pad every leaf's leading (batch) axis to a multiple of `multiple`.

    The padding repeats the last batch element (never zeros: a zero mass or a zero
    state could make the padded members' solves fail or take forever).

    **Arguments:**

    - `x`: a pytree of arrays sharing a leading batch size `B`.
    - `multiple`: typically the device count.

    **Returns:** `(padded, B)`; take `y[:B]` of any batched result to drop the padding.

    **Example:**

    ```python
    q0s = jnp.zeros((5, 3))
    padded, B = cx.pad_batch(q0s, 4)           # padded.shape == (8, 3), B == 5
    ```
    """
    if not isinstance(multiple, int | np.integer) or multiple < 1:
        raise ValueError(f"`multiple` must be a positive integer, got {multiple!r}")
    size = _batch_size((x,), [0])
    pad = (-size) % multiple

    def _pad(leaf):
        leaf = jnp.asarray(leaf)
        if pad == 0:
            return leaf
        return jnp.concatenate([leaf, jnp.repeat(leaf[-1:], pad, axis=0)], axis=0)

    return jax.tree_util.tree_map(_pad, x), size


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _place(leaf, sharding: NamedSharding):
    """Put a host (or single-device) array onto `sharding`; works across processes."""
    if _is_traced(leaf):
        return leaf
    if jax.process_count() == 1:
        return jax.device_put(leaf, sharding)
    if isinstance(leaf, jax.Array) and leaf.sharding == sharding:
        return leaf
    host = np.asarray(leaf)
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])


def shard_batch(
    x: PyTree[Array], mesh: Mesh | None = None, axis_name: str = BATCH_AXIS
) -> tuple[PyTree[Array], int]:
    """Pad a batch to a multiple of the device count and split it over the devices.

    Each leaf's leading axis is sharded along `axis_name` with a
    `NamedSharding(mesh, PartitionSpec(axis_name))`. With several processes
    (`jax.distributed`), every process passes the same host batch and contributes its
    addressable shards.

    **Arguments:**

    - `x`: a pytree of arrays with a common leading batch size `B`.
    - `mesh`: a 1-D mesh (default `batch_mesh(axis_name=axis_name)`: all devices).
    - `axis_name`: the mesh axis to shard over.

    **Returns:** `(sharded, B)`.

    **Example:**

    ```python
    q0s = jnp.zeros((5, 3))
    sharded, B = cx.shard_batch(q0s)           # padded to a multiple of the device count
    ```
    """
    mesh = check_mesh(mesh, axis_name)
    padded, size = pad_batch(x, int(mesh.shape[axis_name]))
    sharding = NamedSharding(mesh, PartitionSpec(axis_name))
    return jax.tree_util.tree_map(lambda leaf: _place(leaf, sharding), padded), size


def check_mesh(mesh: Mesh | None, axis_name: str) -> Mesh:
    """`mesh` checked to be a `Mesh` with an axis `axis_name`; `None` gives
    `batch_mesh(axis_name=axis_name)` (every device of every process)."""
    if mesh is None:
        return batch_mesh(axis_name=axis_name)
    if not isinstance(mesh, Mesh):
        raise TypeError(f"`mesh` must be a jax.sharding.Mesh or None, got {type(mesh).__name__}")
    if axis_name not in mesh.axis_names:
        raise ValueError(
            f"`axis_name`={axis_name!r} is not an axis of the mesh, whose axes are "
            f"{mesh.axis_names}"
        )
    return mesh


def _gather(x):
    """Make a (possibly multi-process) sharded result available on every process."""
    if jax.process_count() == 1:
        return x
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(x, tiled=True)


@eqx.filter_jit
def apply_batched(fn, args, in_axes, mesh, axis_name, chunk=None):
    """`vmap(fn)(*args)`, inside `shard_map` over `mesh` when one is given; with `chunk`,
    each device runs its members `chunk` at a time (`lax.map(..., batch_size=chunk)`)."""
    fn_dyn, fn_static = eqx.partition(fn, eqx.is_array)

    def body(fn_dyn, *args):
        f = eqx.combine(fn_dyn, fn_static)
        if chunk is None:
            return jax.vmap(f, in_axes=in_axes)(*args)
        flat, treedef = jax.tree_util.tree_flatten(args)
        axes = [a for ax, arg in zip(in_axes, args, strict=True) for a in _leaf_axes(ax, arg)]
        batched = [x for x, a in zip(flat, axes, strict=True) if a == 0]

        def one(members):
            it = iter(members)
            leaves = [next(it) if a == 0 else x for x, a in zip(flat, axes, strict=True)]
            return f(*jax.tree_util.tree_unflatten(treedef, leaves))

        return jax.lax.map(one, batched, batch_size=chunk)

    if mesh is None:
        return body(fn_dyn, *args)

    def spec(ax):
        return PartitionSpec(axis_name) if ax == 0 else PartitionSpec()

    in_specs = tuple(
        spec(ax)
        if ax is None or isinstance(ax, int)
        else jax.tree_util.tree_map(spec, ax, is_leaf=_is_none)
        for ax in in_axes
    )
    sharded = jax.shard_map(
        body,
        mesh=mesh,
        in_specs=(PartitionSpec(), *in_specs),
        out_specs=PartitionSpec(axis_name),
        check_vma=False,
    )
    return sharded(fn_dyn, *args)


# Observed with jax 0.10 on XLA:CPU: a `shard_map` over several CPU devices whose devices
# each vectorise more than ~600 adaptive-ODE members hangs (one device, or fewer members
# per device, does not). On multi-device CPU meshes each device therefore runs its share
# `_CPU_DEVICE_BATCH` members at a time by default.
_CPU_DEVICE_BATCH = 512


def check_device_batch(device_batch: int | None) -> int | None:
    """`device_batch` checked to be a positive integer or `None`."""
    if device_batch is None:
        return None
    if not isinstance(device_batch, int | np.integer) or device_batch < 1:
        raise ValueError(f"`device_batch` must be a positive integer or None, got {device_batch!r}")
    return int(device_batch)


def _device_chunk(device_batch: int | None, mesh: Mesh) -> int | None:
    """How many members each device vectorises at a time: `device_batch` (checked), or by
    default all of them, except `_CPU_DEVICE_BATCH` on a multi-device CPU mesh."""
    if device_batch is not None:
        return device_batch
    devices = mesh.devices.ravel()
    if devices.size > 1 and devices[0].platform == "cpu":
        return _CPU_DEVICE_BATCH
    return None


def sharded_vmap(
    fn: Callable,
    in_axes: Any = 0,
    *,
    mesh: Mesh | None = None,
    axis_name: str = BATCH_AXIS,
    device_batch: int | None = None,
) -> Callable:
    r"""`jax.vmap(fn, in_axes)`, jitted, with the batch split over every visible device.

    Pads the batch to a multiple of the device count, shards it with
    `NamedSharding(mesh, PartitionSpec(axis_name))`, runs `vmap(fn)` on each device's
    slice with `jax.shard_map`, and returns the results (leading batch axis) without the
    padding. On one device it is `jax.jit(jax.vmap(fn))` plus no-op padding. Compiled
    once per input shape (the wrapped function is cached by `equinox.filter_jit`: pass
    the same `fn` object to reuse it; `fn` may be an `equinox.Module` holding arrays).

    **Arguments:**

    - `fn`: the per-example function; every output must be an array (or pytree of
      arrays).
    - `in_axes`: as in `jax.vmap`, but each axis must be `0` (batched) or `None`
      (shared, replicated on every device): an int/None, or a tuple with one pytree
      prefix per positional argument.
    - `mesh`: a 1-D mesh; default `batch_mesh()` over all devices (all hosts).
    - `axis_name`: its axis name.
    - `device_batch`: vectorise at most this many members at a time on each device (the
      rest in sequence with `lax.map`), bounding memory. Default: all at once, except on
      a multi-device CPU mesh (512, working around an XLA:CPU hang seen with larger
      per-device batches).

    **Returns:** the batched function.

    **Example:**

    ```python
    q0s, qd0s = jnp.tile(q0, (4, 1)), qd0 * jnp.linspace(0.5, 2.0, 4)[:, None]
    run = cx.sharded_vmap(lambda q0, qd0: cx.simulate(system, q0, qd0, p, t1=1.0).q,
                          in_axes=(0, 0))
    qs = run(q0s, qd0s)     # (4, 1, n), computed on all devices
    ```
    """
    if not callable(fn):
        raise TypeError(f"`fn` must be callable, got {fn!r}")
    device_batch = check_device_batch(device_batch)
    if mesh is not None:
        mesh = check_mesh(mesh, axis_name)

    @functools.wraps(fn)
    def wrapped(*args):
        axes, size = batch_axes(in_axes, args)
        # The default mesh is built per call: it spans the devices visible then (after a
        # later `jax.distributed.initialize()`, every process's).
        mesh_ = check_mesh(mesh, axis_name)
        return run_sharded(fn, args, axes, size, mesh_, axis_name, device_batch)

    return wrapped


def run_sharded(
    fn: Callable,
    args: tuple,
    axes: tuple,
    size: int,
    mesh: Mesh,
    axis_name: str,
    device_batch: int | None,
) -> PyTree[Array]:
    """The body of `sharded_vmap` on arguments already checked (`batch_axes`, `check_mesh`,
    `check_device_batch`): pad the batch to a multiple of the device count, place it on
    the mesh, `vmap(fn)` on each device's slice, gather and drop the padding."""
    pad = (-size) % int(mesh.shape[axis_name])
    sharding = NamedSharding(mesh, PartitionSpec(axis_name))
    replicated = NamedSharding(mesh, PartitionSpec())

    def prepare(leaf):
        leaf = jnp.asarray(leaf) if not _is_traced(leaf) else leaf
        if pad:
            leaf = jnp.concatenate([leaf, jnp.repeat(leaf[-1:], pad, axis=0)], axis=0)
        return _place(leaf, sharding)

    args = _map_batched(prepare, args, axes)
    if jax.process_count() > 1:
        args = tuple(
            _map_shared(lambda x: _place(np.asarray(x), replicated), a, ax)
            for a, ax in zip(args, axes, strict=True)
        )
    out = apply_batched(fn, args, axes, mesh, axis_name, _device_chunk(device_batch, mesh))
    return jax.tree_util.tree_map(lambda y: _gather(y)[:size], out)


def _map_shared(fn, arg, ax):
    leaves, treedef = jax.tree_util.tree_flatten(arg)
    new = [x if a == 0 else fn(x) for x, a in zip(leaves, _leaf_axes(ax, arg), strict=True)]
    return jax.tree_util.tree_unflatten(treedef, new)
