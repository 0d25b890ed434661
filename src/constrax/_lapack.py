r"""LAPACK factorisations that cannot deadlock jaxlib 0.10's CPU thread pool.

jaxlib 0.10.0 to 0.11.0 run a batched LAPACK call (an LU, a Cholesky factor, an SVD) whose
estimated work exceeds $2\times10^5$ floating-point operations as tasks on XLA's CPU thread
pool, and wait for them on a thread of that same pool: a program that runs as many such
calls at once as the pool has threads waits for ever (docs page "Sharp bits", "A compiled
program that never returns"). A call below that estimate runs on the calling thread and
cannot wait for the pool.

`inline_batches(fn, core_ndim)` is `fn` (a factorisation of one matrix, its operand's last
`core_ndim` axes) whose batches, under any number of `jax.vmap`s, are handed to LAPACK in
chunks below that estimate, one chunk after the other (`jax.lax.map`). The chunks give up
the pool's parallelism within one call (on two cores the batched LU of 256 saddle
matrices of 25 x 25 took 1.5x as long, in one measurement), never its correctness. Where
jaxlib is not one of those versions, or the program runs on another backend, it is `fn`
itself. Forward only: the engine differentiates its factors implicitly
(`_solve.py`), never through the factorisation.
"""

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jaxlib
from jax import custom_batching

from ._precision import full_precision

# jaxlib's estimate above which a LAPACK batch is split over the thread pool, with a margin.
PARALLEL_WORK = 1.5e5


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


AFFECTED = (0, 10, 0) <= _version(jaxlib.__version__) <= (0, 11, 0)
"""Whether the installed jaxlib has the blocking batched LAPACK kernels."""


def chunk_size(matrix_size: int) -> int:
    """How many factorisations of `matrix_size` x `matrix_size` matrices one LAPACK call may
    take without being split over the thread pool (jaxlib estimates $n^3$ each)."""
    return max(1, int(PARALLEL_WORK // max(matrix_size, 1) ** 3))


def _chunked(fn: Callable, x, core_ndim: int):
    """`fn` over the leading axes of `x` in chunks of `chunk_size` matrices, one after the
    other."""
    lead = x.shape[: x.ndim - core_ndim]
    if not lead:
        return fn(x)
    count = math.prod(lead)
    flat = x.reshape((count,) + x.shape[len(lead) :])
    size = chunk_size(x.shape[-1])
    if count <= size:
        out = jax.vmap(fn)(flat)
    else:
        out = jax.lax.map(fn, flat, batch_size=size)
    return jax.tree.map(lambda o: o.reshape(lead + o.shape[1:]), out)


def inline_batches(fn: Callable, core_ndim: int = 2) -> Callable:
    """`fn` of one matrix, its batches under `jax.vmap` handed to LAPACK in chunks that
    run on the calling thread (module docstring); `fn` itself where jaxlib is not
    affected or the default backend is not the CPU (checked when the program is traced)."""

    @custom_batching.custom_vmap
    def chunked(x):
        return _chunked(fn, x, core_ndim)

    @chunked.def_vmap
    def _rule(axis_size, in_batched, x):
        (batched,) = in_batched
        if not batched:
            x = jnp.broadcast_to(x, (axis_size,) + x.shape)
        out = chunked(x)  # one leading axis more: an outer `vmap` lands here again
        return out, jax.tree.map(lambda _: True, out)

    @functools.wraps(fn)
    def call(x):
        if not AFFECTED or jax.default_backend() != "cpu":
            return fn(x)
        return chunked(jax.lax.stop_gradient(x))

    return call


lu = inline_batches(jax.lax.linalg.lu)
"""`jax.lax.linalg.lu`: `(lu, pivots, permutation)` of a square matrix (`inline_batches`)."""

cholesky = inline_batches(jnp.linalg.cholesky)
"""`jnp.linalg.cholesky`: the lower Cholesky factor, NaN where the matrix is not positive
definite (`inline_batches`)."""

_svd = inline_batches(lambda a: jnp.linalg.svd(a, full_matrices=False))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def pinv(a, rtol):
    r"""The pseudoinverse $a^+$ of a real matrix by its SVD (`inline_batches`), singular
    values below `rtol` times the largest taken as zero, differentiated by the formula of
    Golub & Pereyra ("The differentiation of pseudo-inverses and nonlinear least squares
    problems whose variables separate", 1973), as `jnp.linalg.pinv` is:
    $\dot a^+ = -a^+\dot a\,a^+ + a^+a^{+\top}\dot a^\top(I - aa^+)
    + (I - a^+a)\dot a^\top a^{+\top}a^+$."""
    u, s, vt = _svd(a)
    cutoff = rtol * jnp.max(s, initial=0.0)
    s_inv = jnp.where(s > cutoff, 1.0 / jnp.where(s > cutoff, s, 1.0), 0.0).astype(a.dtype)
    return (vt.T * s_inv) @ u.T


@pinv.defjvp
@full_precision  # traced when differentiated, perhaps outside `full_precision` callers
def _pinv_jvp(rtol, primals, tangents):
    (a,), (da,) = primals, tangents
    p = pinv(a, rtol)
    m, n = a.shape
    dp = -p @ da @ p
    dp = dp + p @ p.T @ da.T @ (jnp.eye(m, dtype=a.dtype) - a @ p)
    dp = dp + (jnp.eye(n, dtype=a.dtype) - p @ a) @ da.T @ p.T @ p
    return p, dp
