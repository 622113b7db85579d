"""Progress of a whole batch on stderr, one plain line per change: cells done, running, failed, pending, ETA.

The ETA is the mean wall time of the cells finished in this invocation times the cells left, divided by how
many ran at once at most (Ray runs several); until one cell has finished it is unknown.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from helpers.run.progress import duration_text


class Progress:
    """Counts of the batch's cells by state, printed as a line on every change."""

    def __init__(
        self,
        cells: list[str],
        kept: list[str],
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = len(cells)
        self.kept = set(kept)
        self.done: set[str] = set(kept)
        self.failed: set[str] = set()
        self.running: dict[str, float] = {}
        self.seconds: list[float] = []
        self.most_at_once = 1
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock

    @property
    def pending(self) -> int:
        """Cells neither finished nor running."""
        return self.total - len(self.done) - len(self.failed) - len(self.running)

    def eta_s(self) -> float | None:
        """Seconds until the batch is done, estimated; None before any cell has finished here."""
        if not self.seconds:
            return None
        mean = sum(self.seconds) / len(self.seconds)
        now = self.clock()
        left = sum(max(mean - (now - t0), 0.0) for t0 in self.running.values()) + self.pending * mean
        return left / self.most_at_once

    def line(self) -> str:
        """The current state in one line."""
        eta = self.eta_s()
        kept = f" ({len(self.kept)} kept)" if self.kept else ""
        return (
            f"[batch] {len(self.done)}/{self.total} done{kept}, {len(self.running)} running, "
            f"{len(self.failed)} failed, {self.pending} pending; ETA {duration_text(eta) if eta is not None else '?'}"
        )

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def started(self, cell: str, where: str = "") -> None:
        """A cell began (a late notice for a cell already finished is ignored)."""
        if cell in self.done or cell in self.failed or cell in self.running:
            return
        self.running[cell] = self.clock()
        self.most_at_once = max(self.most_at_once, len(self.running))
        self._say(f"[batch] cell {cell}: started{f' on {where}' if where else ''}")
        self._say(self.line())

    def finished(self, cell: str, ok: bool, seconds: float, reason: str | None = None) -> None:
        """A cell ended, well or not."""
        self.running.pop(cell, None)
        (self.done if ok else self.failed).add(cell)
        if seconds > 0:
            self.seconds.append(seconds)
        state = "done" if ok else f"failed: {reason}"
        self._say(f"[batch] cell {cell}: {state} ({duration_text(seconds)})")
        self._say(self.line())

    def note(self, text: str) -> None:
        """Any other line of the batch's story (kept cells, replaced folders)."""
        self._say(f"[batch] {text}")
