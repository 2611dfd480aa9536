# SPDX-License-Identifier: MIT
"""A progress bar for long sweeps: cells done, cells per second and time left."""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO, Tuple

__all__ = ["Progress"]


class Progress:
    """Redraws one line on a terminal; on a pipe or log file prints a line every ``every``
    seconds and at the end. ``enabled=False`` prints nothing."""

    def __init__(self, total: int, *, skipped: int = 0, stream: Optional[TextIO] = None,
                 enabled: bool = True, every: float = 5.0, label: str = "sweep") -> None:
        self.total = total
        self.skipped = skipped
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.every = every
        self.label = label
        self.t0 = time.perf_counter()
        self._last = -1e9
        self._first: Optional[Tuple[float, int]] = None  # (time, cells) of the first result
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    @property
    def elapsed(self) -> float:
        """Seconds since the bar was created."""
        return time.perf_counter() - self.t0

    def line(self) -> str:
        """The current status line (without a newline)."""
        todo = self.total - self.skipped
        rate = self.done / self.elapsed if self.elapsed > 0 else 0.0
        left = float("nan")
        if self._first is not None and self.done > self._first[1]:  # the first result also paid the start-up
            since = time.perf_counter() - self._first[0]
            left = (todo - self.done) * since / (self.done - self._first[1]) if since > 0 else float("nan")
        frac = (self.skipped + self.done) / self.total if self.total else 1.0
        bar = "#" * round(24 * frac)
        eta = (f"{left:.0f} s left" if left == left else "estimating time left") + f", {self.elapsed:.0f} s elapsed"
        skipped = f" ({self.skipped} resumed)" if self.skipped else ""
        return (f"{self.label} [{bar:<24}] {self.skipped + self.done}/{self.total} cells{skipped}, "
                f"{rate:.1f} cells/s, {eta}")

    def update(self, cells: int) -> None:
        """Counts ``cells`` more cells as done and redraws when due."""
        self.done += cells
        if self._first is None:
            self._first = (time.perf_counter(), self.done)
        if not self.enabled:
            return
        now = time.perf_counter()
        if self._tty:
            self.stream.write("\r" + self.line())
            self.stream.flush()
        elif now - self._last >= self.every:
            self._last = now
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        """One line of its own (workers starting, figures being drawn), unless disabled."""
        if self.enabled:
            self.stream.write(("\n" if self._tty and self.done else "") + text + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Writes the final status line."""
        if not self.enabled:
            return
        self.stream.write(("\r" if self._tty else "") + self.line().split(", ")[0] + ", "
                          + f"{self.done / self.elapsed if self.elapsed > 0 else 0.0:.1f} cells/s, "
                          f"done in {self.elapsed:.1f} s\n")
        self.stream.flush()
