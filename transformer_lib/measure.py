"""Measurements, for the chapters, the demos and the benchmarks alike: the one stopwatch
(wall-clock and CPU time, read together) and the allocator's peak memory of a call."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator


def _now() -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds of this process), from arbitrary origins."""
    return time.perf_counter(), time.process_time()


class Stopwatch:
    """Wall-clock and CPU seconds since it started.

    On a machine shared with other jobs, wall-clock time also counts the time spent
    waiting for a core; CPU time (of this process, all its threads) counts only the
    work done, so it is the steadier measure there.

    ``with Stopwatch() as clock: work()`` then ``clock.wall``, ``clock.cpu``: the
    seconds of ``work()``, frozen when the block ends. ``lap()`` returns (wall, cpu)
    since the start or the last lap, and starts the next lap.
    """

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        """Start again from zero."""
        self._start, self._stop = _now(), None

    def _elapsed(self) -> tuple[float, float]:
        end = self._stop or _now()
        return end[0] - self._start[0], end[1] - self._start[1]

    @property
    def wall(self) -> float:
        """Wall-clock seconds since the start (up to the end of a ``with`` block)."""
        return self._elapsed()[0]

    @property
    def cpu(self) -> float:
        """CPU seconds of this process since the start (up to the end of a ``with``
        block)."""
        return self._elapsed()[1]

    def lap(self) -> tuple[float, float]:
        """(wall, cpu) seconds since the start or the last lap; the next lap starts
        now."""
        end = _now()
        wall, cpu = end[0] - self._start[0], end[1] - self._start[1]
        self._start, self._stop = end, None
        return wall, cpu

    def __enter__(self) -> Stopwatch:
        self.restart()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = _now()


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null: the profiler's C++ side prints a line at
    every start and stop, which a notebook would otherwise show under the cell."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def peak_allocated_bytes(fn: Callable[..., object], *args, **kwargs) -> int:
    """The largest number of bytes that tensors created while ``fn(*args, **kwargs)``
    runs hold at one time, outputs included, as PyTorch's CPU allocator reports it.

    Measured, not computed: ``torch.profiler`` with ``profile_memory=True`` records
    every allocation and free; their running sum, in time order, peaks here. Tensors
    that exist before the call (the inputs) are not counted.
    """
    from torch.profiler import ProfilerActivity, profile

    with (
        _quiet_stderr(),
        profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        result = fn(*args, **kwargs)
    del result
    # the raw allocator events: (time, +bytes allocated or -bytes freed)
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]"
    )
    held = peak = 0
    for _, nbytes in events:
        held += nbytes
        peak = max(peak, held)
    return peak
