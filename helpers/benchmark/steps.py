"""Step 5's side of the progress events: the planned units, and each one as it begins, ends or is not needed.

``StepProgress`` is handed the plan (``helpers.benchmark.plan.step_progress`` asks the phases for it) and is
what the session (``helpers.benchmark.session.EngineSession``) and the phases call as units begin, finish,
are kept from an earlier attempt (resume) or turn out not to be needed (the search converged, an engine
failed). The runner draws the events as one bar (``helpers.tools.progress_console``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from helpers.benchmark.priors import probe_seconds
from helpers.core.config import PlaybookConfig
from helpers.run.progress import PROGRESS_FILE, ProgressEvents, Unit
from helpers.run.rerender import re_rendering


def unit_key(label: str, kind: str, ident: object) -> str:
    """The key of one unit: engine label, kind and what tells it apart (concurrency, probe number, tag)."""
    return f"{label}|{kind}|{ident}"


def unit(label: str, kind: str, ident: object, what: str, seconds: float) -> Unit:
    """One planned unit of configuration ``label`` (what a phase's ``planned`` returns)."""
    return Unit(key=unit_key(label, kind, ident), label=label, kind=kind, what=what, expected_s=seconds)


class StepProgress:
    """Step 5's progress events: the plan written once, then each unit as it begins, ends or is not needed.

    Without ``run_dir`` nothing is written (a session made outside ``run_benchmarks``), nor in a re-render from
    points: it measures nothing, and the archived progress stays the story of the attempts that measured.
    """

    def __init__(self, cfg: PlaybookConfig, run_dir: Path | None = None, units: Iterable[Unit] = ()) -> None:
        self.cfg = cfg
        run_dir = None if re_rendering() else run_dir
        self.events = ProgressEvents(Path(run_dir) / PROGRESS_FILE if run_dir is not None else None)
        self.units = {u.key: u for u in units} if run_dir is not None else {}
        if run_dir is not None:
            self.events.plan(list(self.units.values()))

    def begin(self, label: str, kind: str, ident: object, what: str | None = None) -> None:
        """The unit begins now; one the plan did not foresee (a trial after a step down) joins it."""
        if self.events.path is None:
            return
        key = unit_key(label, kind, ident)
        found = self.units.get(key)
        if found is None:
            seconds = probe_seconds(self.cfg) if kind in ("probe", "trial") else 0.0
            found = Unit(key=key, label=label, kind=kind, what=what or f"{kind} {ident}", expected_s=seconds)
        self.events.start(found)

    def end(self, label: str, kind: str, ident: object) -> None:
        """The unit ended (its time was spent, whatever came of it)."""
        self.events.done(unit_key(label, kind, ident))

    def kept(self, label: str, kind: str | None = None, ident: object = None) -> None:
        """Measured in an earlier attempt: the unit (or, without ``kind``, every open unit of ``label``)."""
        if kind is None:
            self.events.kept_label(label)
        else:
            self.events.kept(unit_key(label, kind, ident))

    def drop(self, label: str, *kinds: str, idents: list[object] | None = None) -> None:
        """Open units of ``label`` (of ``kinds``; with ``idents`` only those) will not run."""
        keys = [unit_key(label, k, i) for k in kinds for i in idents] if idents and kinds else None
        self.events.drop(label, kinds or None, keys)

    def note(self, text: str) -> None:
        """A line of the run's story, for the console."""
        self.events.note(text)

    def telling(self, progress: Callable[[str], None] | None) -> Callable[[str], None]:
        """``progress`` (may be None) that also notes each line for the console."""

        def say(text: str) -> None:
            self.note(text)
            if progress is not None:
                progress(text)

        return say

    def finish(self) -> None:
        """Step 5 is over."""
        self.events.end()
