"""The precision of the engine's matrix products (docs page "Precision")."""

import functools

import jax


def full_precision(fn):
    r"""`fn` traced with every matrix product at full precision of its dtype
    (`jax.default_matmul_precision("highest")`), whatever the user's default: on GPUs a
    float32 product may otherwise run in reduced precision (TF32 or bfloat16 passes), which
    the saddle-point solve amplifies by its condition number (docs page "Precision"). On
    CPUs every product is full precision already: the program is the same."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    return wrapped
