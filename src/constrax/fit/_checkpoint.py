"""Checkpoints of an optimisation: a fingerprint of the problem, then the state's leaves.

File layout (format version 2):

1. the magic line `CONSTRAX-CHECKPOINT v2`;
2. a line `sha256 <64 hex digits>`: the sha256 of everything after it;
3. an 8-byte little-endian length and a JSON header (`format_version`, the fingerprint
   and the loop's bookkeeping);
4. `eqx.tree_serialise_leaves` of the state.

A file that does not start with the magic line, a checkpoint of another format version,
one whose checksum does not match (a flipped bit anywhere, a truncated or extended file),
and one whose fingerprint differs from the problem being solved are all refused with a
`ValueError` that says which; a checkpoint is never loaded silently.
"""

import hashlib
import io
import json
import os
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jaxtyping import PyTree

_MAGIC_PREFIX = b"CONSTRAX-CHECKPOINT v"
FORMAT_VERSION = 2
_MAGIC = _MAGIC_PREFIX + b"%d\n" % FORMAT_VERSION
_DIGEST = b"sha256 "
_DIGEST_LINE = len(_DIGEST) + 64 + 1


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
    header = json.dumps({"format_version": FORMAT_VERSION, "fingerprint": fp, "meta": meta})
    header = header.encode()
    body = io.BytesIO()
    body.write(len(header).to_bytes(8, "little"))
    body.write(header)
    eqx.tree_serialise_leaves(body, state)
    payload = body.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode()
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as f:
        f.write(_MAGIC)
        f.write(_DIGEST + digest + b"\n")
        f.write(payload)
    os.replace(tmp, path)


def _refuse(path, why: str) -> ValueError:
    return ValueError(
        f"checkpoint {os.fspath(path)!r} {why}. Refusing to load it; delete it or pass "
        "another `checkpoint` path."
    )


def _read_verified(path) -> bytes:
    """The payload of a checkpoint file after checking magic line, version and checksum."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(_MAGIC_PREFIX):
        raise ValueError(
            f"{os.fspath(path)!r} is not a constrax checkpoint (it does not start with "
            f"{_MAGIC.decode().strip()!r}); refusing to load it"
        )
    line_end = data.find(b"\n")
    version = data[len(_MAGIC_PREFIX) : line_end if line_end >= 0 else len(data)]
    if version != b"%d" % FORMAT_VERSION:
        raise _refuse(
            path,
            f"has checkpoint format version {version.decode(errors='replace')!r}; this "
            f"version of constrax reads format {FORMAT_VERSION} only (format 1 had no "
            "checksum)",
        )
    rest = data[len(_MAGIC) :]
    line = rest[:_DIGEST_LINE]
    if len(line) < _DIGEST_LINE or not line.startswith(_DIGEST) or line[-1:] != b"\n":
        raise _refuse(path, "is damaged or truncated: its checksum line is missing or broken")
    payload = rest[_DIGEST_LINE:]
    if hashlib.sha256(payload).hexdigest().encode() != line[len(_DIGEST) : -1]:
        raise _refuse(
            path,
            "is damaged or truncated: its sha256 checksum does not match its contents "
            f"({len(payload)} bytes after the checksum line)",
        )
    return payload


def load_checkpoint(path: str | os.PathLike, like: PyTree, fp: dict) -> tuple[PyTree, dict]:
    """Read a checkpoint written for the problem with fingerprint `fp`.

    **Returns:** `(state, meta)`. Raises `ValueError` if the file is not a constrax
    checkpoint, has another format version, fails its checksum (damaged or truncated), or
    was written for a different problem.
    """
    payload = _read_verified(path)
    f = io.BytesIO(payload)
    size = int.from_bytes(f.read(8), "little")
    try:
        header = json.loads(f.read(size).decode())
        theirs = header["fingerprint"]
        meta = header["meta"]
    except (ValueError, KeyError, TypeError):  # checksum fine, contents not ours
        raise _refuse(path, "has a checksum but no readable header") from None
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
    try:
        state = eqx.tree_deserialise_leaves(f, like)
    except Exception as e:  # checksum fine, leaves not what the header says
        raise _refuse(path, f"has a valid checksum but unreadable leaves ({e})") from e
    if f.read(1):
        raise _refuse(path, "has bytes after the last leaf of the state")
    return state, meta


def _short(x) -> str:
    s = str(x)
    return s if len(s) <= 80 else s[:77] + "..."
