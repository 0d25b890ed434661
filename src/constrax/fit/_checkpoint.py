"""Checkpoints of an optimisation: a fingerprint of the problem, then the state's leaves.

File layout: the magic line `CONSTRAX-CHECKPOINT v1`, an 8-byte length, a JSON header
(the fingerprint and the loop's bookkeeping), then `eqx.tree_serialise_leaves` of the
state. A checkpoint whose fingerprint differs from the problem being solved is refused
with a message naming what differs; it is never loaded silently.
"""

import hashlib
import json
import os
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jaxtyping import PyTree

_MAGIC = b"CONSTRAX-CHECKPOINT v1\n"


def config_hash(*items: Any) -> str:
    """A sha256 of arrays (bytes, shapes, dtypes) and reprs of everything else."""
    h = hashlib.sha256()

    def add(x):
        if isinstance(x, (np.ndarray, jax.Array)) or eqx.is_array(x):
            a = np.asarray(x)
            h.update(str((a.shape, a.dtype.str)).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        elif isinstance(x, (list, tuple)):
            h.update(b"(")
            for y in x:
                add(y)
            h.update(b")")
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                h.update(repr(k).encode())
                add(x[k])
        else:
            h.update(repr(x).encode())

    for item in items:
        add(item)
    return h.hexdigest()


def fingerprint(state: PyTree, config: str) -> dict:
    """Tree structure, leaf shapes and dtypes of `state`, and the problem's `config` hash."""
    leaves, treedef = jax.tree.flatten(eqx.filter(state, eqx.is_array))
    return {
        "treedef": str(treedef),
        "shapes": [list(np.shape(x)) for x in leaves],
        "dtypes": [str(np.asarray(x).dtype) for x in leaves],
        "config": config,
    }


def save_checkpoint(path: str | os.PathLike, state: PyTree, fp: dict, meta: dict) -> None:
    """Write `state` with fingerprint `fp` and bookkeeping `meta` atomically to `path`."""
    header = json.dumps({"fingerprint": fp, "meta": meta}).encode()
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as f:
        f.write(_MAGIC)
        f.write(len(header).to_bytes(8, "little"))
        f.write(header)
        eqx.tree_serialise_leaves(f, state)
    os.replace(tmp, path)


def load_checkpoint(path: str | os.PathLike, like: PyTree, fp: dict) -> tuple[PyTree, dict]:
    """Read a checkpoint written for the problem with fingerprint `fp`.

    **Returns:** `(state, meta)`. Raises `ValueError` if the file is not a constrax
    checkpoint or was written for a different problem.
    """
    with open(path, "rb") as f:
        if f.read(len(_MAGIC)) != _MAGIC:
            raise ValueError(f"{os.fspath(path)!r} is not a constrax checkpoint")
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size).decode())
        theirs = header["fingerprint"]
        for key, what in (
            ("config", "the problem configuration (data, fixed parameters, settings)"),
            ("treedef", "the tree structure of the parameters/optimiser state"),
            ("shapes", "the shapes of the parameters/optimiser state"),
            ("dtypes", "the dtypes of the parameters/optimiser state"),
        ):
            if theirs.get(key) != fp[key]:
                raise ValueError(
                    f"checkpoint {os.fspath(path)!r} was written for a different problem: "
                    f"{what} differs ({key}: checkpoint {_short(theirs.get(key))}, this "
                    f"problem {_short(fp[key])}). Refusing to load it; delete it or pass "
                    "another `checkpoint` path."
                )
        state = eqx.tree_deserialise_leaves(f, like)
    return state, header["meta"]


def _short(x) -> str:
    s = str(x)
    return s if len(s) <= 80 else s[:77] + "..."
