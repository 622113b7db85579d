"""What a capacity search cost until its estimate was conclusive, read back from an archived run folder.

The search's probes are replayed in the order they were measured (``logs/progress.jsonl``: each probe's
start and end, and the note naming its stream), each judged again with today's rules and the run's own
config as a re-render judges it (``evidence.rejudged_capacity``), and the capacity is estimated again after
each one from the probes so far (``boundary.estimate_capacity``). The first step whose interval is within the
half-width asked for is where the search could have stopped: its probe count and the engine-seconds spent on
probes until then (cold starts and the grid left out, so that two runs on hosts that start engines at
different speeds compare on the search alone). ``scripts/search_path.py`` prints it for runs side by side.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.boundary import estimate_capacity, readings_of
from helpers.benchmark.judged import rejudged
from helpers.benchmark.probe import Probe
from helpers.core.config import load_config
from helpers.core.errors import PlaybookError
from helpers.run.records import load_point, point_path

_PROBE_NOTE = re.compile(r": capacity probe [\d.,]+ \((?P<stream>[^)]+)\) → ")
"""The note step 5 writes when a probe ends (``evidence.search``): '<label>: capacity probe 37.44 (e2-hi) → pass: …'."""


class PathStep(BaseModel):
    """The estimate after one more probe of the search."""

    model_config = ConfigDict(extra="forbid")

    number: int = Field(
        ge=1, description="Probes measured so far, this one included (one measured again on its stream counts again)."
    )
    stream: str = Field(description="The probe's stream (p0, p1, … coarse; eN-lo / eN-hi edge round N).")
    load: float = Field(gt=0, description="Its offered rate (req/s) or streams.")
    seconds: float = Field(ge=0, description="Engine-seconds the probe took, start to end.")
    cumulative_s: float = Field(ge=0, description="Engine-seconds of the search's probes so far.")
    status: str = Field(description="The estimate's status after it (estimated, at_least, below, not_measured).")
    value: float | None = None
    rel_half_width: float | None = None
    conclusive: bool = False


def _timed_streams(progress: Path, label: str) -> list[tuple[str, float]]:
    """(stream, seconds) of each probe of ``label`` that ended, in the order measured."""
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    last: str | None = None
    out: list[tuple[str, float]] = []
    for line in progress.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        kind = e.get("event")
        if kind == "start" and e["unit"]["label"] == label and e["unit"]["kind"] == "probe":
            last = e["unit"]["key"]
            started[last] = e["t"]
        elif kind == "done" and e.get("key") == last and last in started:
            ended[last] = e["t"] - started[last]
        elif kind == "note" and last in ended and e["text"].startswith(f"{label}:"):
            m = _PROBE_NOTE.search(e["text"])
            if m:
                out.append((m["stream"], ended.pop(last)))
                last = None
    return out


def _judged(run_dir: Path, points: Path) -> dict[str, Probe]:
    """The kept probes in ``points``, by stream, each judged again under the run's config (``config.yaml``)."""
    files = sorted(points.glob("search-*.json"))
    if not files:
        return {}
    cfg = load_config(run_dir / "config.yaml")
    probes: dict[str, Probe] = {}
    for f in files:
        point = load_point(f)
        if point is None or not point.probe:
            continue
        probe = rejudged(point, cfg)
        if probe.stream and not probe.superseded:
            probes[probe.stream] = probe
    return probes


def search_path(run_dir: Path, label: str, target_rel: float = 0.05) -> list[PathStep]:
    """The estimate after each probe of ``label``'s search in ``run_dir`` (module docstring).

    A probe cut by a device call's time limit and measured again on resume counts once, at its full measurement.

    Raises ``PlaybookError`` naming the file when the run folder has no progress log or no probe of ``label``.
    """
    progress = run_dir / "logs" / "progress.jsonl"
    points = point_path(run_dir, label, "search", 0).parent
    if not progress.is_file():
        raise PlaybookError(f"{progress}: no progress log, so the order of the probes is unknown")
    probes = _judged(run_dir, points)
    if not probes:
        raise PlaybookError(f"{points}: no capacity probe of {label!r} in this run folder")
    steps: list[PathStep] = []
    seen: dict[str, Probe] = {}
    total = 0.0
    for stream, seconds in _timed_streams(progress, label):
        if stream not in probes:
            continue  # its point was not kept (nothing to estimate from)
        total += seconds  # a probe measured again after interference costs both times, and counts its kept reading
        seen[stream] = probes[stream]
        est = estimate_capacity(readings_of(list(seen.values())), target_rel=target_rel)
        steps.append(
            PathStep(
                number=len(steps) + 1,
                stream=stream,
                load=probes[stream].load,
                seconds=seconds,
                cumulative_s=total,
                status=est.status,
                value=est.value,
                rel_half_width=est.rel_half_width,
                conclusive=est.conclusive,
            )
        )
    return steps


def first_conclusive(steps: list[PathStep]) -> PathStep | None:
    """The first step whose estimate was conclusive, or None."""
    return next((s for s in steps if s.conclusive), None)
