"""Small helpers shared by the showcase sections: output folders, figures, progress."""

import os
import time
from contextlib import contextmanager

import diffrax
import jax

from .._simulate import simulate


def enable_x64() -> None:
    """The showcase's accuracy claims are float64 claims."""
    jax.config.update("jax_enable_x64", True)


def outpath(outdir, name: str) -> str:
    os.makedirs(outdir, exist_ok=True)
    return os.path.join(os.fspath(outdir), name)


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def progress(iterable, desc: str, total: int | None = None, enabled: bool = True):
    """`tqdm` over `iterable` on a terminal; plain iteration when tqdm is missing, the bar
    is disabled, or the output is not a terminal (a log or a pipe would keep the bar's
    fragments and cursor moves)."""
    if not enabled or os.environ.get("CONSTRAX_NO_PROGRESS"):
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the [examples] extra
        return iterable
    return tqdm(iterable, desc=desc, total=total, leave=False, disable=None)


@contextmanager
def stopwatch():
    """`with stopwatch() as sw: ...` then `sw()` is the elapsed wall time in seconds."""
    t0 = time.perf_counter()
    box = [None]
    yield lambda: (time.perf_counter() - t0) if box[0] is None else box[0]
    box[0] = time.perf_counter() - t0


def block(x):
    """Wait for every array in `x` (honest wall-clock timings)."""
    return jax.block_until_ready(x)


def simulate_model(model, ts, params=None, *, t1=None, tol: float = 1e-10, **kwargs):
    """`cx.simulate` of a zoo `model` from its initial state, saved at `ts`, up to `t1`
    (default `ts[-1]`), with `PIDController(rtol=tol, atol=tol)`; `params` default to the
    model's; other keywords go to `simulate`."""
    return simulate(
        model.system,
        model.q0,
        model.qd0,
        model.params if params is None else params,
        t1=ts[-1] if t1 is None else t1,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol),
        **kwargs,
    )


def log_axis_with_zeros(ax, *arrays, decades_below: int = 1) -> None:
    """A logarithmic y-axis on which exact zeros are drawn at 0, not at a fake floor.

    Sets a symmetric-log scale whose linear part ends a decade (`decades_below`) under the
    smallest non-zero value in `arrays`: every positive value is on the log scale and a
    value that is exactly 0 sits on the tick labelled 0. When the non-zero values span
    less than two decades, the axis stays linear (from 0).
    """
    import numpy as np

    vals = np.concatenate([np.abs(np.ravel(np.asarray(a, dtype=float))) for a in arrays])
    pos = vals[vals > 0]
    if pos.size and pos.max() < 100 * pos.min():  # under two decades: a linear axis says it
        ax.set_ylim(-0.03 * pos.max(), 1.1 * pos.max())
        return
    smallest = pos.min() if pos.size else 1e-16
    linthresh = 10.0 ** (np.floor(np.log10(smallest)) - decades_below)
    ax.set_yscale("symlog", linthresh=linthresh, linscale=0.3)
    lo = int(np.log10(linthresh))
    hi = int(np.ceil(np.log10(pos.max()))) if pos.size else lo + 1
    step = max(1, int(np.ceil((hi - lo) / 6)))
    ax.set_yticks([0.0] + [10.0**k for k in range(hi, lo, -step)][::-1])
    ax.set_ylim(-0.5 * linthresh, 10.0**hi)  # a zero line stays visible above the frame


def zero_note(label: str, values) -> str:
    """`label`, with " (exactly 0)" appended when every value is exactly zero."""
    import numpy as np

    return f"{label} (exactly 0)" if not np.any(np.asarray(values)) else label
