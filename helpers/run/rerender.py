"""A re-render from points (``playbook run --from-points``) that cannot spoil the archive it re-renders.

A re-render runs the notebooks again on an archived run folder and rewrites its notebooks, ``run.json``,
``summary.json`` and report. When the folder holds a healthy archive (its ``run.json`` records no
failures), ``RerenderGuard`` first copies the folder (``Snapshot``: a hidden folder beside it,
``.<run id>.rerender-*/<run id>``, a few MB); if a notebook fails, or anything else stops the re-render
(an error, Ctrl-C), the folder is put back exactly as it was (what the re-render wrote is removed):
``RerenderError`` names the failed notebooks, their errors and the temporary folder that keeps the failed
re-render's notebooks and logs; any other error or Ctrl-C is passed on after a line on stderr saying the
folder was put back. On success the copy is removed. A folder that already recorded failures,
and a measuring run, are not guarded: a failed notebook is written and the next one runs, as always.

``run.json``'s ``notebook_seconds`` is the wall time of the measuring run's notebooks (step 5 measured
then); a re-render keeps it and writes its own under ``rerender_seconds`` (``run_info``), and so does a
resume that measured nothing (``earlier_of_a_resume``: every point was kept).

What the notebooks' kernels are told about the attempt (``helpers.tools.runner`` sets it): a re-render
(``FROM_POINTS_ENV``, ``re_rendering``) measures and probes nothing; an attempt with ``--engines``
(``MEASURE_ONLY_ENV``, ``measured_here``) measures those configurations and rebuilds the folder's others.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from helpers.core.errors import PlaybookError
from helpers.run.lock import LOCK_NAME
from helpers.run.processes import PIDS_NAME

RUN_FILE = "run.json"
"""The runner's own notes in the run folder: run id, failures, notebook timings."""

FROM_POINTS_ENV = "PLAYBOOK_FROM_POINTS"
"""Set (by ``playbook run --from-points``) to re-render a run from its stored points without launching."""


MEASURE_ONLY_ENV = "PLAYBOOK_MEASURE_ONLY"
"""Set (by ``playbook run --engines``) to the JSON list of the configurations this attempt measures; the run
folder's other configurations, archived by earlier attempts, are rebuilt from what they stored."""


def re_rendering() -> bool:
    """Whether this kernel re-renders a run from its stored points (``FROM_POINTS_ENV``): probe no machine."""
    return bool(os.environ.get(FROM_POINTS_ENV))


def measured_here(label: str) -> bool:
    """Whether this attempt measures configuration ``label`` (not a re-render, and ``--engines`` names it)."""
    if re_rendering():
        return False
    only = os.environ.get(MEASURE_ONLY_ENV)
    return only is None or label in json.loads(only)


RERENDER_KEY = "rerender_seconds"
"""``run.json``'s key for the notebook timings of the latest re-render from points."""

_OWN = frozenset({LOCK_NAME, PIDS_NAME})
"""The running re-render's own lock and process records: neither copied nor put back."""


class RerenderError(PlaybookError):
    """A re-render from points failed; the archived run folder was put back as it was."""


def run_notes(run_dir: str | Path) -> dict[str, Any]:
    """The run folder's ``run.json`` (the runner's own notes: failures, timings); {} when there is none.

    A malformed file raises (``ValueError``), as the report's readers always did.
    """
    path = Path(run_dir) / RUN_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def read_run_info(run_dir: str | Path) -> dict[str, Any] | None:
    """The run folder's ``run.json`` as a mapping; None when it is missing, unreadable or not a mapping."""
    if not (Path(run_dir) / RUN_FILE).is_file():
        return None
    try:
        data = run_notes(run_dir)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def healthy(info: dict[str, Any] | None) -> bool:
    """Whether ``run.json``'s content ``info`` records a run without failures (a run.json of its own)."""
    return info is not None and isinstance(info.get("failures", {}), dict) and not info.get("failures")


def run_info(
    run_id: str, failures: dict[str, str], timings: dict[str, float], earlier: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What ``run.json`` holds after a run: a fresh record, or (``earlier``: a re-render) the earlier one updated.

    A measuring run (``earlier`` None) writes its notebooks' timings as ``notebook_seconds``. A re-render
    keeps every key of the earlier ``run.json`` (``notebook_seconds``: the measuring run's) and writes its
    failures and its own timings (``rerender_seconds``).
    """
    if earlier is None:
        return {"run_id": run_id, "failures": failures, "notebook_seconds": timings}
    return {**earlier, "run_id": run_id, "failures": failures, RERENDER_KEY: timings}


MEASUREMENTS = ("points", "crosscheck", "quality")
"""The run folder's folders of step 5's measurements: probes and grid points, the engines' own clients, answers."""


def measured_since(run_dir: str | Path, started: float) -> bool:
    """Whether step 5 wrote a measurement (a file under ``MEASUREMENTS``) into ``run_dir`` since ``started``."""
    files = (p for folder in MEASUREMENTS for p in (Path(run_dir) / folder).rglob("*") if p.is_file())
    return any(p.stat().st_mtime >= started for p in files)


def earlier_of_a_resume(run_dir: str | Path, started: float) -> dict[str, Any] | None:
    """The earlier ``run.json`` when a resume since ``started`` measured nothing (its timings are not step 5's).

    A resume whose every point was kept (``--run-id`` of a finished run) took seconds, not the measuring run's
    minutes: it is recorded as a re-render (``run_info``), keeping the measuring run's ``notebook_seconds``.
    None when something was measured, or there is no earlier record with timings.
    """
    info = read_run_info(Path(run_dir))
    if not info or "notebook_seconds" not in info or measured_since(run_dir, started):
        return None
    return info


class Snapshot:
    """A copy of a run folder, beside it on the same filesystem, to put back if a re-render fails."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.holder = Path(tempfile.mkdtemp(prefix=f".{self.run_dir.name}.rerender-", dir=self.run_dir.parent))
        self.copy = self.holder / self.run_dir.name  # one level down: no ``reports/*/summary.json`` of its own
        top = os.fspath(self.run_dir)
        try:
            shutil.copytree(
                self.run_dir, self.copy, symlinks=True, ignore=lambda d, names: _OWN & set(names) if d == top else ()
            )
        except BaseException:
            self.discard()
            raise

    def restore(self) -> None:
        """Put the folder back as it was: what the re-render wrote or changed goes, the copy's entries return."""
        for entry in self.run_dir.iterdir():
            if entry.name in _OWN:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        for entry in self.copy.iterdir():
            os.replace(entry, self.run_dir / entry.name)  # a rename: the copy is on the same filesystem
        shutil.copystat(self.copy, self.run_dir)
        self.discard()

    def discard(self) -> None:
        """Remove the copy."""
        shutil.rmtree(self.holder, ignore_errors=True)


def rerender_log_name(stem: str) -> str:
    """The file a re-render from points writes notebook ``stem``'s kernel lines to (in ``logs/notebooks/``)."""
    return f"{stem}.rerender.log"


def keep_notebooks(run_dir: Path, names: list[str]) -> Path:
    """Copy the notebooks ``names`` of ``run_dir`` and the re-render's logs of them into a new temporary folder.

    The folder (returned) holds ``notebooks/<name>.ipynb`` and ``logs/<name>.log``, from the run folder's
    ``logs/notebooks/<name>.rerender.log`` (``helpers.tools.runner.notebook_log``).
    """
    kept = Path(tempfile.mkdtemp(prefix=f"playbook-rerender-{run_dir.name}-"))
    for name in names:
        stem = Path(name).stem
        for src, dst in (
            (run_dir / "notebooks" / name, kept / "notebooks" / name),
            (run_dir / "logs" / "notebooks" / rerender_log_name(stem), kept / "logs" / f"{stem}.log"),
        ):
            if src.is_file():
                dst.parent.mkdir(exist_ok=True)
                shutil.copy2(src, dst)
    return kept


class RerenderGuard:
    """Context manager around a run's notebooks and records: a guarded re-render fails without a trace.

    ``from_points`` and a healthy ``run.json`` (``healthy``) take a ``Snapshot`` on entry. ``check`` raises
    ``RerenderError`` when a notebook failed; leaving with any exception puts the folder back, leaving
    without one removes the copy. Unguarded (a measuring run, a folder with failures), it does nothing.
    ``earlier``: the earlier ``run.json`` of a re-render (for ``run_info``), else None.
    """

    def __init__(self, run_dir: str | Path, from_points: bool):
        self.run_dir = Path(run_dir)
        info = read_run_info(self.run_dir) if from_points else None
        self.earlier = (info or {}) if from_points else None
        self.snapshot = Snapshot(self.run_dir) if from_points and healthy(info) else None

    @property
    def guarded(self) -> bool:
        """Whether a failure puts the folder back."""
        return self.snapshot is not None

    def check(self, failures: dict[str, str], ran: list[str]) -> None:
        """Raise ``RerenderError`` if guarded and a notebook failed; ``ran``: the notebooks this re-render ran."""
        if self.snapshot is None or not failures:
            return
        kept = keep_notebooks(self.run_dir, ran)
        errors = "; ".join(f"{name}: {err.removeprefix(f'{name}: ')}" for name, err in failures.items())
        raise RerenderError(
            f"the re-render from points of {self.run_dir} failed in {errors}; the archive was left as it was "
            f"(its report, run.json and summary.json are the archived ones); the failed re-render's notebooks "
            f"and logs are in {kept}"
        )

    def __enter__(self) -> RerenderGuard:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self.snapshot is None:
            return
        if kind is None:
            self.snapshot.discard()
            return
        try:
            self.snapshot.restore()
        except OSError as err:  # the copy stays where it is, for the hand that puts it back
            raise RerenderError(
                f"the re-render from points of {self.run_dir} failed and the archive could not be put back "
                f"({err.strerror or err}): its copy from before the re-render is {self.snapshot.copy}"
            ) from err
        if not issubclass(kind, RerenderError):  # its message says so; any other error or Ctrl-C does not
            print(
                f"playbook: the re-render from points stopped; {self.run_dir} was put back as it was", file=sys.stderr
            )
