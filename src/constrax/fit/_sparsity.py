r"""The structural nonzeros of a transcription's derivative blocks, and the check that keeps
them sound.

A transcription gives the constraint Jacobian and the Hessian of the Lagrangian as dense
blocks (every row of an interval by every variable it reads), but many entries of a block
vanish identically: $\dot q$ does not depend on the controls, a Lagrangian is quadratic in
the velocities, a holonomic row reads no velocity. Which ones is a property of the user's
functions, not of the interval structure, so it is found the way sparsity detectors of
automatic differentiation find it by evaluation (Griewank & Walther, *Evaluating
Derivatives*, 2nd ed. 2008, ch. 7; Gebremedhin, Manne & Pothen, "What color is your
Jacobian? Graph coloring for computing derivatives", SIAM Review 2005): the blocks are
evaluated at a few random points (and random multipliers and objective factor for the
Hessian), and an entry nonzero (or not finite) at any of them is kept. "Nonzero" means above
the round-off of the evaluation, `ROUND_OFF` times the largest entry: an entry that vanishes
mathematically may come out of autodiff as $10^{-21}$ (a derivative through the solve of the
mass matrix), and dropping it changes the matrix by less than its own rounding errors.

Sampling alone cannot prove that an entry is zero everywhere (a derivative behind a
`jnp.where`, a `max(0, ·)` or an `abs` vanishes on part of the space only), so every
evaluation during a solve checks that the dropped entries are zero to that round-off; the
first one that is not raises `StructureViolation`, and the solver goes back to the dense blocks
(`IPOPT.minimise`). The derivatives IPOPT reads are therefore always the exact ones.
"""

from typing import NamedTuple

import numpy as np

# Random points at which the blocks are evaluated: an entry that vanishes on a region of
# probability 1/2 (a `where` on the sign of one variable) is dropped with probability
# 2^-SAMPLES, and then caught by the runtime check.
SAMPLES = 6

# An entry at most this times the largest entry of its matrix (Jacobian or Hessian) at the
# same point counts as zero: 1024 units of float64 round-off.
ROUND_OFF = 1024 * np.finfo(np.float64).eps


def _nonzero(values: np.ndarray) -> np.ndarray:
    """Entries above `ROUND_OFF` times the largest finite one (NaN and inf: nonzero)."""
    finite = np.isfinite(values)
    scale = np.abs(values[finite]).max(initial=0.0)
    return ~(np.abs(values) <= ROUND_OFF * scale)


class Structure(NamedTuple):
    """The entries of the block values given to IPOPT (`jac_kept`, `hess_kept`: positions
    in the values of `jacobian_values` / `hessian_values`), their `(row, col)`, and the
    positions dropped (checked to be zero to round-off at every evaluation)."""

    jac_rows: np.ndarray
    jac_cols: np.ndarray
    jac_kept: np.ndarray
    jac_dropped: np.ndarray
    hess_rows: np.ndarray
    hess_cols: np.ndarray
    hess_kept: np.ndarray
    hess_dropped: np.ndarray
    samples: int  # points sampled (0: the dense blocks)


def block_structure(layout) -> Structure:
    """Every entry of the dense blocks of `layout`."""
    nj, nh = layout.jac_rows.shape[0], layout.hess_rows.shape[0]
    none = np.zeros(0, np.int64)
    return Structure(
        layout.jac_rows,
        layout.jac_cols,
        np.arange(nj),
        none,
        layout.hess_rows,
        layout.hess_cols,
        np.arange(nh),
        none,
        0,
    )


def sample_points(lo: np.ndarray, hi: np.ndarray, m: int, samples: int, seed: int = 0):
    """`samples` random `(z, multipliers, objective factor)`: each variable uniform within
    finite bounds, else a standard normal moved inside a one-sided bound (a fixed variable
    too: its value at the solve does not make an entry structurally zero); multipliers
    standard normal; objective factor uniform in $[1/2, 3/2]$."""
    rng = np.random.default_rng(seed)
    nz = lo.shape[0]
    has_lo, has_hi = np.isfinite(lo), np.isfinite(hi)
    lo0, hi0 = np.where(has_lo, lo, 0.0), np.where(has_hi, hi, 0.0)  # no inf arithmetic
    out = []
    for _ in range(samples):
        z = rng.standard_normal(nz)
        inside = rng.uniform(size=nz)
        z = np.where(has_lo & has_hi & (lo < hi), lo0 + (hi0 - lo0) * inside, z)
        z = np.where(has_lo & ~has_hi, lo0 + np.abs(z) * np.maximum(1.0, np.abs(lo0)), z)
        z = np.where(~has_lo & has_hi, hi0 - np.abs(z) * np.maximum(1.0, np.abs(hi0)), z)
        out.append((z, rng.standard_normal(m), rng.uniform(0.5, 1.5)))
    return out


def sampled_structure(layout, jacobian, hessian, lo, hi, samples: int = SAMPLES) -> Structure:
    """The entries of the blocks nonzero (or not finite) at any of `samples` random points
    (`sample_points`), from `jacobian(z)` and `hessian(z, multipliers, objective factor)`,
    the values on `layout`'s dense blocks."""
    nzj = np.zeros(layout.jac_rows.shape[0], bool)
    nzh = np.zeros(layout.hess_rows.shape[0], bool)
    for z, lam, sigma in sample_points(lo, hi, layout.nc, samples):
        nzj |= _nonzero(np.asarray(jacobian(z)))
        nzh |= _nonzero(np.asarray(hessian(z, lam, sigma)))
    jk, hk = np.flatnonzero(nzj), np.flatnonzero(nzh)
    return Structure(
        layout.jac_rows[jk],
        layout.jac_cols[jk],
        jk,
        np.flatnonzero(~nzj),
        layout.hess_rows[hk],
        layout.hess_cols[hk],
        hk,
        np.flatnonzero(~nzh),
        samples,
    )


class StructureViolation(Exception):
    """A dropped entry of a derivative block is not zero at a point of the solve."""

    def __init__(self, kind: str, row: int, col: int, value: float, evaluation: int):
        self.kind, self.row, self.col, self.value = kind, row, col, value
        self.evaluation = evaluation
        super().__init__(f"{kind} entry ({row}, {col}) = {value!r} at evaluation {evaluation}")


def check_dropped(kind: str, values: np.ndarray, dropped: np.ndarray, rows, cols, count: int):
    """Raise `StructureViolation` naming the first entry of `values[dropped]` that is not
    zero to round-off (`ROUND_OFF` times the largest entry; NaN included)."""
    if dropped.size == 0:
        return
    bad = _nonzero(values)[dropped]
    if not bad.any():
        return
    i = dropped[np.flatnonzero(bad)[0]]
    raise StructureViolation(kind, int(rows[i]), int(cols[i]), float(values[i]), count)
