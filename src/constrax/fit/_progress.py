r"""What a running IPOPT solve prints (docs page "Trajectory optimisation", section "When a
solve fails, and while it runs"): lines on stderr once a solve has run a few seconds, a tqdm
bar on request, or nothing."""

import math
import sys
import time

# A solve's progress by default (`progress=None`): a line on stderr once the solve has run
# this long, then one every `_EVERY_S` seconds and one at the end.
_AFTER_S = 5.0
_EVERY_S = 5.0


class _Lines:
    """Progress as lines on stderr: iteration, objective, infeasibility, seconds."""

    def __init__(self, label: str, after: float):
        self.label, self.after = label, after
        self.start = self.last = time.perf_counter()
        self.printed = False
        self.state = (0, math.nan, math.nan)

    def _line(self, text: str) -> None:
        print(f"{self.label}: {text} ({time.perf_counter() - self.start:.1f} s)", file=sys.stderr,
              flush=True)  # fmt: skip

    def update(self, it: int, obj: float, inf_pr: float) -> None:
        self.state = (it, obj, inf_pr)
        now = time.perf_counter()
        if now - self.start >= self.after and (not self.printed or now - self.last >= _EVERY_S):
            self._line(f"iteration {it}, objective {obj:.6g}, infeasibility {inf_pr:.1e}")
            self.printed, self.last = True, now

    def close(self, status: str | None = None) -> None:
        if self.printed and status is not None:
            it, obj, inf_pr = self.state
            self._line(
                f"{status} after {it} iterations, objective {obj:.6g}, infeasibility {inf_pr:.1e}"
            )


class _Bar:
    """Progress as a tqdm bar."""

    def __init__(self, label: str, total: int):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=label, leave=False)

    def update(self, it: int, obj: float, inf_pr: float) -> None:
        self.bar.update(1)
        self.bar.set_postfix(objective=f"{obj:.6g}", infeasibility=f"{inf_pr:.1e}")

    def close(self, status: str | None = None) -> None:
        self.bar.close()


def progress_reporter(progress: bool | None, total: int, label: str):
    """`None`: lines once the solve has run `_AFTER_S` seconds; `True`: a tqdm bar (lines
    from the first iteration without tqdm); `False`: nothing."""
    if progress is False:
        return None
    if progress is None:
        return _Lines(label, _AFTER_S)
    try:
        return _Bar(label, total)
    except ImportError:
        return _Lines(label, 0.0)
