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
    """`tqdm` over `iterable` (plain iteration when tqdm is missing or disabled)."""
    if not enabled or os.environ.get("CONSTRAX_NO_PROGRESS"):
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the [examples] extra
        return iterable
    return tqdm(iterable, desc=desc, total=total, leave=False)


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
