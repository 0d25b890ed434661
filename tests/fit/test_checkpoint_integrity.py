"""Checkpoint integrity: every damaged, truncated, foreign or old-format checkpoint is
refused with a message saying which, never loaded into a different result.

The state is what `cx.fit.solve` writes (decision variables, an optax state, the best
iterate) with the fingerprint and bookkeeping of the loop.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from constrax.fit import load_checkpoint, save_checkpoint
from constrax.fit._checkpoint import fingerprint

optax = pytest.importorskip("optax")

Z = {"k": jnp.array([1.5, -0.25]), "c": jnp.asarray(0.125)}
OPT = optax.adam(1e-2)
STATE = (Z, OPT.init(Z), Z)
FP = fingerprint(STATE, "config-hash")
META = {"step": 3, "losses": [3.0, 2.0, 1.0], "best_loss": 1.0, "stall": 0, "stopped": False}


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "fit.ckpt"
    save_checkpoint(path, STATE, FP, META)
    return path


def _leaves_equal(a, b):
    return all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def test_round_trip(good):
    state, meta = load_checkpoint(good, STATE, FP)
    assert meta == META
    assert _leaves_equal(state, STATE)


def test_a_flipped_bit_in_every_byte_is_refused(good, tmp_path):
    data = good.read_bytes()
    bad = tmp_path / "bad.ckpt"
    for i in range(len(data)):
        for bit in (i % 8,):  # one bit per byte, cycling through the bit positions
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            bad.write_bytes(bytes(flipped))
            with pytest.raises(ValueError, match=r"not a constrax checkpoint|damaged|version"):
                load_checkpoint(bad, STATE, FP)
    assert len(data) > 500


def test_flipped_step_count_and_iterate_are_refused_as_damaged(good, tmp_path):
    data = good.read_bytes()
    # "step": 3 -> "step": 2 is one bit (0x33 -> 0x32) in the header.
    i = data.index(b'"step": 3') + len(b'"step": ')
    flipped = bytearray(data)
    flipped[i] ^= 1
    assert bytes(flipped[i : i + 1]) == b"2"
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match=r"is damaged or truncated: its sha256 checksum"):
        load_checkpoint(bad, STATE, FP)
    # The low bit of the last byte of the stored best iterate (the state's last leaf).
    flipped = bytearray(data)
    flipped[-1] ^= 1
    bad.write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match=r"is damaged or truncated: its sha256 checksum"):
        load_checkpoint(bad, STATE, FP)


@pytest.mark.parametrize("keep", [0, 5, 23, 30, 95, 96, 200, -9, -1])
def test_truncated_checkpoints_are_refused(good, tmp_path, keep):
    data = good.read_bytes()
    bad = tmp_path / "short.ckpt"
    bad.write_bytes(data[:keep])
    with pytest.raises(
        ValueError, match=r"is not a constrax checkpoint|is damaged or truncated|format version"
    ):
        load_checkpoint(bad, STATE, FP)


def test_appended_bytes_are_refused(good):
    good.write_bytes(good.read_bytes() + b"\0")
    with pytest.raises(ValueError, match=r"is damaged or truncated"):
        load_checkpoint(good, STATE, FP)


def test_foreign_and_old_format_files_are_refused(tmp_path):
    path = tmp_path / "x.ckpt"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(ValueError, match=r"is not a constrax checkpoint"):
        load_checkpoint(path, STATE, FP)
    header = json.dumps({"fingerprint": FP, "meta": META}).encode()
    path.write_bytes(b"CONSTRAX-CHECKPOINT v1\n" + len(header).to_bytes(8, "little") + header)
    with pytest.raises(
        ValueError, match=r"has checkpoint format version '1'; this version of constrax reads"
    ):
        load_checkpoint(path, STATE, FP)


def test_checkpoint_for_another_state_layout_is_refused(good):
    other = (Z, optax.sgd(1e-3).init(Z), Z)
    with pytest.raises(ValueError, match=r"written for a different problem: the tree structure"):
        load_checkpoint(good, other, fingerprint(other, "config-hash"))
