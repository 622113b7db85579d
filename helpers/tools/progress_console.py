"""The one progress bar of ``playbook run``: step 5's units and an ETA, drawn in the terminal that runs it.

The notebook kernel writes its progress events to the run folder (``helpers.run.progress``); while a
notebook runs, ``watch_progress`` reads the new lines twice a second and ``ConsoleProgress`` draws
them: in a terminal, one tqdm bar (units done / planned, the ETA and the unit running now) with the
run's notes written above it; anywhere else (CI, a log file, a batch cell) one plain line per unit
finished, kept or dropped, each with the count, the share done and the ETA, and no carriage returns.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from helpers.run.progress import Tracker, Unit, duration_text, read_events

PREFIX = "[step 5]"
BAR_FORMAT = "{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} units [{elapsed}{postfix}]"


class ConsoleProgress:
    """Draws a run's progress events on ``stream``: a bar on a terminal, else a line per unit."""

    def __init__(self, stream: TextIO, tty: bool | None = None, clock: Callable[[], float] = time.time) -> None:
        self.stream, self.clock = stream, clock
        self.tty = stream.isatty() if tty is None else tty
        self.tracker = Tracker()
        self.bar: tqdm | None = None
        self.t0: float | None = None

    def eta_text(self) -> str:
        """``ETA 3m20s`` from the tracker now."""
        return f"ETA {duration_text(self.tracker.eta_s(self.clock()))}"

    def head(self) -> str:
        """``12/40 (30%)``: units finished of those planned."""
        t = self.tracker
        share = t.finished / t.total if t.total else 1.0
        return f"{t.finished}/{t.total} ({share:.0%})"

    def handle(self, event: dict[str, Any]) -> None:
        """Apply one event and show what it changed."""
        kind = event.get("event")
        if kind == "note":
            self._say(f"{PREFIX} {event.get('text', '')}")
            return
        before = (self.tracker.finished, self.tracker.total)
        unit = self.tracker.apply(event)
        at = float(event["t"]) if event.get("t") is not None else self.clock()
        if kind == "plan":
            self.t0 = at
            self._open()
            self._line(f"planned {self.tracker.total} units; {self.eta_text()}")
        elif kind == "end":
            took = duration_text(at - (self.t0 if self.t0 is not None else at))
            self._line(f"measurements done in {took}")
            self.close()
        elif unit is not None or before != (self.tracker.finished, self.tracker.total):
            self._line(self._what(kind, event, unit, before))
        self._draw()

    def _what(self, kind: Any, event: dict[str, Any], unit: Unit | None, before: tuple[int, int]) -> str:
        t = self.tracker
        if kind == "kept" and event.get("label"):
            return f"{event['label']}: {t.finished - before[0]} units kept from an earlier attempt; {self.eta_text()}"
        if kind == "kept" and unit is not None:
            return f"{unit.label}: {unit.what} kept from an earlier attempt; {self.eta_text()}"
        parts = []
        if unit is not None:
            parts.append(f"{unit.label}: {unit.what} done in {duration_text(t.seconds.get(unit.key, 0.0))}")
        if t.total < before[1]:
            parts.append(f"{event.get('label')}: {before[1] - t.total} planned units not needed")
        return "; ".join([*parts, self.eta_text()])

    def _line(self, text: str) -> None:
        if not self.tty:
            self._say(f"{PREFIX} {self.head()} {text}")

    def _say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def _open(self) -> None:
        self.close()
        if self.tty:
            self.bar = tqdm(
                total=self.tracker.total, file=self.stream, desc=PREFIX, bar_format=BAR_FORMAT, **self._shape()
            )

    def _shape(self) -> dict[str, int]:
        """A size for a terminal that reports none (0 x 0: tqdm would draw nothing there); else tqdm's own."""
        try:
            size = os.get_terminal_size(self.stream.fileno())
        except (OSError, ValueError, AttributeError):
            return {}
        return {} if size.columns and size.lines else {"ncols": 100, "nrows": 24}

    def _draw(self) -> None:
        """Bring the bar up to date (the ETA falls while a unit runs: called on every tick too)."""
        if self.bar is None:
            return
        t = self.tracker
        self.bar.total, self.bar.n = t.total, t.finished
        now = t.current()
        self.bar.set_postfix_str(f"{self.eta_text()}" + (f", {now.label}: {now.what}" if now else ""), refresh=False)
        self.bar.refresh()

    def tick(self) -> None:
        """Redraw without an event (the bar's ETA and clock move on)."""
        self._draw()

    def close(self) -> None:
        """Leave the bar where it is and stop drawing it."""
        if self.bar is not None:
            self._draw()
            self.bar.close()
            self.bar = None


@contextmanager
def watch_progress(path: Path, stream: TextIO | None, poll_s: float = 0.5) -> Iterator[ConsoleProgress | None]:
    """Show the events appended to ``path`` while the body runs (``stream`` None: show nothing).

    Events written before the watch started (an earlier attempt at the same run folder) are skipped.
    """
    if stream is None:
        yield None
        return
    console = ConsoleProgress(stream)
    offset = path.stat().st_size if path.is_file() else 0
    stop = threading.Event()

    def drain() -> None:
        nonlocal offset
        events, offset = read_events(path, offset)
        for ev in events:
            console.handle(ev)

    def loop() -> None:
        while not stop.wait(poll_s):
            drain()
            console.tick()

    thread = threading.Thread(target=loop, name="playbook-progress", daemon=True)
    thread.start()
    try:
        yield console
    finally:
        stop.set()
        thread.join()
        drain()
        console.close()
