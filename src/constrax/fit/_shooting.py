r"""Single and multiple shooting.

Single shooting integrates the whole horizon from the known initial state. Multiple
shooting splits the observation times into `S` segments; segment $i$ starts from a free
node state $s_i = (q_i, \dot q_i)$ (node 0 is the known initial state) projected onto
the constraint manifold, and the continuity defects
$w\,(\phi_{\tau_i \to \tau_{i+1}}(s_i) - s_{i+1})$ join the residuals. Long or chaotic
horizons then never have to be integrated in one piece with wrong parameters; at a
solution with zero defects the fit equals the single-shooting one.
"""

import equinox as eqx
import numpy as np


class AbstractShooting(eqx.Module):
    """How the horizon is split into integrated segments."""

    num_segments: eqx.AbstractVar[int]


class SingleShooting(AbstractShooting):
    """One segment from the known initial state over the whole horizon.

    **Example:** `cx.fit.SingleShooting()`
    """

    num_segments: int = eqx.field(default=1, static=True, init=False)


class MultipleShooting(AbstractShooting):
    r"""`num_segments` segments with free node states and continuity defects.

    **Arguments:**

    - `num_segments`: number of segments `S >= 2`; the `k` observation times are split
      into `S` nearly equal consecutive groups (`k >= 2 S` is required).
    - `defect_weight`: the weight $w$ of the continuity defects relative to the
      whitened data residuals.

    **Example:** `cx.fit.MultipleShooting(num_segments=4, defect_weight=100.0)`
    """

    num_segments: int = eqx.field(static=True)
    defect_weight: float = eqx.field(default=100.0, static=True)

    def __check_init__(self):
        if not isinstance(self.num_segments, int) or self.num_segments < 2:
            raise ValueError(
                f"MultipleShooting: `num_segments` must be an int >= 2, got {self.num_segments!r} "
                "(use SingleShooting() for one segment)"
            )
        if not self.defect_weight > 0:
            raise ValueError(
                f"MultipleShooting: `defect_weight` must be positive, got {self.defect_weight}"
            )


class SegmentLayout(eqx.Module):
    """Static layout of the segments over the observation times (built with numpy)."""

    starts: np.ndarray  # (S,) segment start times
    ends: np.ndarray  # (S,) segment end times
    save_ts: np.ndarray  # (S, L + 1): observation times (padded) then the end time
    index: np.ndarray  # (S, L): observation row of each saved time
    valid: np.ndarray  # (S, L): False on padding


def segment_layout(ts: np.ndarray, t0: float, num_segments: int) -> SegmentLayout:
    """Split the observation times `ts` into `num_segments` consecutive segments."""
    k = ts.shape[0]
    S = num_segments
    if S > 1 and k < 2 * S:
        raise ValueError(
            f"MultipleShooting(num_segments={S}) needs at least 2 observation times per "
            f"segment (k >= {2 * S}), got k = {k}"
        )
    if not ts[-1] > t0:
        raise ValueError(f"the last observation time {ts[-1]} must be after t0 = {t0}")
    groups = np.array_split(np.arange(k), S)
    L = max(len(g) for g in groups)
    starts = np.array([t0] + [ts[g[0]] for g in groups[1:]])
    ends = np.array([ts[g[0]] for g in groups[1:]] + [ts[-1]])
    index = np.stack([np.pad(g, (0, L - len(g)), mode="edge") for g in groups])
    valid = np.stack([np.arange(L) < len(g) for g in groups])
    save_ts = np.concatenate([np.where(valid, ts[index], ends[:, None]), ends[:, None]], axis=1)
    return SegmentLayout(starts, ends, save_ts, index, valid)
