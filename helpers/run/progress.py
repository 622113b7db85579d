"""Progress of a run's measurements: planned units of work, the events a notebook kernel emits, and the ETA.

Step 5 runs inside a notebook kernel while ``playbook run`` waits in its own process, so the kernel
appends one JSON line per event to ``logs/progress.jsonl`` in the run folder (``ProgressEvents``) and
the parent reads them back (``Tracker``) to draw one bar (``helpers.tools.progress_console``).

A **unit** is one thing that takes time: an engine's cold start, one sweep point, the replay, one
capacity probe, one trial, one tuning point. The plan lists every unit with a duration expected from
the config; some are only possible (the capacity search stops when its bracket is narrow, the trials
once their interval is tight), so the plan can *drop* units, and the bar completes with fewer than
planned. Events, one per line: ``plan`` (a fresh list of units: a resumed run plans again), ``start``
(carries the unit, so a unit the plan did not foresee joins it), ``done``, ``kept`` (measured in an
earlier attempt: done at once), ``drop`` (units that will not run, by engine label and kind), ``note``
(a line of the run's story) and ``end``. Only one unit runs at a time: a ``start`` closes the one before.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PROGRESS_FILE = Path("logs") / "progress.jsonl"
"""Where the events of a run go, relative to its run folder."""

State = Literal["pending", "running", "done", "kept", "dropped"]


class Unit(BaseModel):
    """One planned unit of work and the seconds the config lets us expect for it."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="Unique within the run, e.g. 'vllm|sweep|8'.")
    label: str = Field(description="The engine configuration it belongs to.")
    kind: str = Field(description="cold, sweep, replay, probe, trial or tune.")
    what: str = Field(description="What a person reads, e.g. 'sweep c=8'.")
    expected_s: float = Field(ge=0, description="Expected seconds, from the config (refined while running).")


def _now() -> float:
    return time.time()


class ProgressEvents:
    """The kernel's side: append events to the run folder's progress file (best effort, never raises).

    ``path`` None writes nothing (a unit test, or an interactive notebook without a watcher).
    """

    def __init__(self, path: Path | None, clock: Callable[[], float] = _now) -> None:
        self.path, self.clock = path, clock
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            self.path = None

    def emit(self, event: str, **data: Any) -> None:
        """Append one event; a full disk or a read-only folder only stops the progress, not the run."""
        if self.path is None:
            return
        line = json.dumps({"event": event, "t": round(self.clock(), 3), **data})
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            self.path = None

    def plan(self, units: list[Unit]) -> None:
        """The whole plan (replaces any earlier one)."""
        self.emit("plan", units=[u.model_dump() for u in units])

    def start(self, unit: Unit) -> None:
        """``unit`` begins now."""
        self.emit("start", unit=unit.model_dump())

    def done(self, key: str) -> None:
        """The running unit ``key`` finished (well or not: the time was spent)."""
        self.emit("done", key=key)

    def kept(self, key: str) -> None:
        """``key`` was measured in an earlier attempt at this run folder: done at once."""
        self.emit("kept", key=key)

    def kept_label(self, label: str) -> None:
        """Every open unit of ``label`` was measured earlier (the whole configuration is resumed)."""
        self.emit("kept", label=label)

    def drop(self, label: str, kinds: Iterable[str] | None = None, keys: Iterable[str] | None = None) -> None:
        """Open units of ``label`` (of ``kinds``, or just ``keys``) will not run; a running one among them is done."""
        self.emit("drop", label=label, kinds=list(kinds) if kinds else None, keys=list(keys) if keys else None)

    def note(self, text: str) -> None:
        """A line of the run's story (launches, figures, failures)."""
        self.emit("note", text=text)

    def end(self) -> None:
        """The measurements are over: whatever is still open will not run."""
        self.emit("end")


class Tracker:
    """The parent's side: the units' states from the events, and the ETA.

    The ETA sums each open unit's expected seconds, refined by what this run measured so far: a cold
    start takes the mean of the cold starts measured, a load unit its expected seconds times the ratio
    measured / expected of the last ``RECENT`` finished units of its group (closed loop: sweep and
    tuning; open loop: probes and trials; the replay; the engine's own client), else of the last finished
    load units of any group. Kept units (resumed) are done at once and teach nothing. The running unit
    counts with what is left of its estimate.
    """

    GROUPS = {
        "sweep": "closed",
        "tune": "closed",
        "probe": "open",
        "trial": "open",
        "replay": "replay",
        "crosscheck": "client",  # the engine's own client: its start-up is its own
    }
    RECENT = 4
    """Load units the ratio looks back on: the machine's pace changes (the first load also imports guidellm)."""

    def __init__(self) -> None:
        self.units: dict[str, Unit] = {}
        self.state: dict[str, State] = {}
        self.started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.order: list[str] = []  # units done here (not kept), in the order they finished
        self.running: str | None = None
        self.ended = False

    # --- events ---------------------------------------------------------------------------------
    def apply(self, event: dict[str, Any]) -> Unit | None:
        """Apply one event; returns the unit it finished, if any (for a line per unit)."""
        kind, t = event.get("event"), float(event.get("t") or 0.0)
        if kind == "plan":
            self.__init__()
            for raw in event.get("units") or []:
                u = Unit.model_validate(raw)
                self.units[u.key], self.state[u.key] = u, "pending"
            return None
        if kind == "start":
            closed = self._close(t)
            u = Unit.model_validate(event["unit"])
            self.units.setdefault(u.key, u)
            self.state[u.key], self.started[u.key], self.running = "running", t, u.key
            return closed
        if kind == "done":
            return self._close(t) if event.get("key") == self.running else None
        if kind == "kept":
            return self._kept(event)
        if kind == "drop":
            return self._drop(event, t)
        if kind == "end":
            closed = self._close(t)
            for key, s in self.state.items():
                if s == "pending":
                    self.state[key] = "dropped"
            self.ended = True
            return closed
        return None

    def _close(self, t: float) -> Unit | None:
        key, self.running = self.running, None
        if key is None:
            return None
        self.state[key] = "done"
        self.seconds[key] = max(0.0, t - self.started.get(key, t))
        self.order.append(key)
        return self.units[key]

    def _kept(self, event: dict[str, Any]) -> Unit | None:
        keys = (
            [event["key"]] if event.get("key") else [k for k, u in self.units.items() if u.label == event.get("label")]
        )
        last = None
        for key in keys:
            if key in self.units and self.state.get(key) in ("pending", "dropped"):
                self.state[key], last = "kept", self.units[key]
        return last

    def _drop(self, event: dict[str, Any], t: float) -> Unit | None:
        label, kinds, keys = event.get("label"), event.get("kinds"), event.get("keys")
        closed = None
        for key, u in self.units.items():
            if u.label != label or (kinds and u.kind not in kinds) or (keys and key not in keys):
                continue
            if key == self.running:
                closed = self._close(t)
            elif self.state[key] == "pending":
                self.state[key] = "dropped"
        return closed

    # --- counts and the ETA -------------------------------------------------------------------------
    @property
    def total(self) -> int:
        """Units that ran, run or will run (dropped ones no longer count)."""
        return sum(1 for s in self.state.values() if s != "dropped")

    @property
    def finished(self) -> int:
        """Units done or kept."""
        return sum(1 for s in self.state.values() if s in ("done", "kept"))

    def _measured(self, kinds: set[str] | None) -> tuple[float, float]:
        """Seconds spent and expected over the last ``RECENT`` load units done (of ``kinds``)."""
        spent = expected = 0.0
        picked = [k for k in self.order if self.units[k].kind != "cold" and self.units[k].expected_s > 0]
        for key in [k for k in picked if kinds is None or self.units[k].kind in kinds][-self.RECENT :]:
            spent, expected = spent + self.seconds[key], expected + self.units[key].expected_s
        return spent, expected

    def estimate_s(self, unit: Unit) -> float:
        """Seconds ``unit`` should take, from its expected seconds and what this run measured."""
        if unit.kind == "cold":
            colds = [self.seconds[k] for k, s in self.state.items() if s == "done" and self.units[k].kind == "cold"]
            return sum(colds) / len(colds) if colds else unit.expected_s
        group = self.GROUPS.get(unit.kind)
        spent, expected = self._measured({k for k, g in self.GROUPS.items() if g == group})
        if expected <= 0:
            spent, expected = self._measured(None)
        return unit.expected_s * (spent / expected if expected > 0 else 1.0)

    def eta_s(self, now: float) -> float:
        """Seconds until every open unit is done, estimated at wall-clock time ``now``."""
        left = sum(self.estimate_s(self.units[k]) for k, s in self.state.items() if s == "pending")
        if self.running is not None:
            u = self.units[self.running]
            left += max(0.0, self.estimate_s(u) - (now - self.started[self.running]))
        return left

    def current(self) -> Unit | None:
        """The unit running now."""
        return self.units.get(self.running) if self.running else None


def read_events(path: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Complete event lines of ``path`` from byte ``offset`` on, and the offset after the last one read.

    A line still being written (no newline yet) is left for the next read; a line that is not JSON is skipped.
    """
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    events = []
    for raw in data[:end].splitlines():
        try:
            ev = json.loads(raw)
        except ValueError:
            continue
        if isinstance(ev, dict):
            events.append(ev)
    return events, offset + end


def cut_starts(run_dir: Path, label: str) -> list[str]:
    """The starts of ``label``'s engine that the run's progress shows begun and never done (the run was cut).

    One entry per such start: its last progress note before the next event of the run (e.g. the random
    weights' last shard line), or "" when it left none.
    """
    events, _ = read_events(run_dir / PROGRESS_FILE)
    cut: list[str] = []
    open_key, last_note = None, ""
    for ev in events + [{"event": "end"}]:
        unit = ev.get("unit") or {}
        if open_key is not None and (ev["event"] in ("start", "plan", "end", "kept") or ev.get("key") == open_key):
            if ev.get("key") != open_key or ev["event"] != "done":
                cut.append(last_note)
            open_key = None
        if ev["event"] == "start" and unit.get("label") == label and unit.get("kind") == "cold":
            open_key, last_note = unit.get("key"), ""
        elif ev["event"] == "note" and open_key is not None:
            last_note = str(ev.get("text", ""))
    return cut


def started_note(label: str, ready_s: float, cold_start_s: float) -> str:
    """The note an engine's completed start leaves in the progress file (``started_times`` reads it back)."""
    return f"{label}: healthy after {ready_s:.0f} s, first request done at {cold_start_s:.0f} s"


def started_times(run_dir: Path, label: str) -> list[tuple[float, float]]:
    """(ready s, first request s) of each completed start of ``label``'s engine, from the run's progress.

    A run cut before its engine result was saved keeps these here, so a re-render from points can still
    report the cold start.
    """
    events, _ = read_events(run_dir / PROGRESS_FILE)
    pattern = re.compile(re.escape(label) + r": healthy after ([\d.]+) s, first request done at ([\d.]+) s")
    found = (pattern.fullmatch(str(ev.get("text", ""))) for ev in events if ev.get("event") == "note")
    return [(float(m.group(1)), float(m.group(2))) for m in found if m]


def duration_text(seconds: float) -> str:
    """``95`` → ``1m35s``; ``4000`` → ``1h06m``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
