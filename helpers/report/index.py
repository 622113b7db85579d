"""The archive of runs under ``reports/``: reading runs back and writing ``reports/index.html``.

The index lists every run, the batches, the trends per workload, and links the measurement pages of the
docs (``docs/measurements/``: one dated page per measured run, with the figures the runs gave). It reads each
run's saved ``summary.json`` through ``helpers.run.reader`` and renders ``templates/pages/index.html.j2``
(autoescaped). The list of batches belongs to the tools layer, which renders it and passes it in.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from helpers.core.paths import MEASUREMENTS_DIR
from helpers.decision.tree import DecisionResult
from helpers.decision.verdict_words import evidence_line
from helpers.report.batches import batches_section
from helpers.report.pages import fragment, render
from helpers.review.trend import trend_charts
from helpers.run import reader
from helpers.run.summary import EngineSummary, RunSummary, SummaryError


def archived_runs(reports_dir: Path) -> list[RunSummary]:
    """Every run's ``summary.json`` under ``reports_dir`` (schema 1 or 2), oldest first; unreadable ones skipped.

    A summary's ``run_id`` is set to its folder's name, which is what the index links to.
    """
    runs = []
    for p in sorted(Path(reports_dir).glob("*/summary.json")):
        try:
            s = reader.run_summary(p.parent)
        except SummaryError:
            continue
        if s.recommendation.evidence is None:  # a summary written before it carried the verdict: the decision's
            decision = reader.read(p.parent, DecisionResult)
            if decision is not None and decision.verdict is not None:
                s.recommendation.evidence = evidence_line(decision.verdict.model_dump())
        runs.append(s.model_copy(update={"run_id": p.parent.name}))
    return sorted(runs, key=lambda s: (s.created_utc or "", s.run_id))


def hardware_text(h: dict[str, Any]) -> str:
    """One line for a run's hardware: GPUs by name and count, and CPU threads (from the inventory)."""
    cores = h.get("cpu_logical_cores") or h.get("cpu_cores") or "?"
    gpus = Counter(g.get("name") for g in h.get("gpus") or [])
    if gpus:
        return ", ".join(f"{n}× {name}" for name, n in gpus.items()) + f"; {cores} CPU threads"
    return f"no GPU; {cores} CPU threads"


def configuration_head(label: str, engine: str, version: str | None) -> str:
    """``label (engine version)``, leaving out what the label already says; a missing version is said so."""
    said = bool(version) and str(version) in label and engine.split("-")[0].lower() in label.lower()
    return label if said else f"{label} ({engine} {version or 'version not recorded'})"


def engine_text(e: EngineSummary) -> str:
    """One configuration of a run with its representative measurement (the one every output uses)."""
    head = configuration_head(e.label, e.engine, e.version)
    rep = e.representative
    if rep is None or rep.output_tok_s is None:
        return f"{head}: {e.status or 'not measured'}"
    if rep.source in ("grid", "fixed"):
        at = f"concurrency {rep.concurrency}"
    else:
        at = f"{rep.request_rate.mean:.2f} req/s" if rep.request_rate else "its SLA capacity"
    usd = f", ${e.usd_per_mtok_output:,.3f}/M" if e.usd_per_mtok_output is not None else ""
    sla = "" if rep.meets_sla else " (misses the SLA)"
    return f"{head}: {rep.output_tok_s.text()} out tok/s at {at}{usd}{sla}"


def measurement_pages(folder: Path = MEASUREMENTS_DIR) -> list[tuple[str, Path]]:
    """(title, path) of each measurement page: the dated ones newest first, then the others; not the index."""
    pages = [p for p in Path(folder).glob("*.md") if p.name != "index.md"]
    dated = sorted((p for p in pages if p.name[:4].isdigit()), key=lambda p: p.name, reverse=True)
    others = sorted(p for p in pages if not p.name[:4].isdigit())

    def title(p: Path) -> str:
        first = p.read_text(encoding="utf-8").lstrip().splitlines()[:1]
        return first[0].lstrip("#").strip() if first and first[0].startswith("#") else p.stem

    return [(title(p), p) for p in dated + others]


def measurements_html(reports_dir: Path, folder: Path = MEASUREMENTS_DIR) -> str:
    """The index's list of measurement pages, each linked relative to ``reports_dir``; '' when there are none."""
    pages = [(t, Path(os.path.relpath(p, reports_dir)).as_posix()) for t, p in measurement_pages(folder)]
    return str(render("measurements.html.j2", pages=pages)) if pages else ""


def _run_row(r: RunSummary) -> dict[str, Any]:
    """One archived run as the index's table shows it (values as text; the template escapes them)."""
    rec = r.recommendation
    return {
        "created": r.created_utc or "", "workload": r.workload, "model": r.model or "",
        "hardware": hardware_text(r.hardware), "engines": [engine_text(e) for e in r.engines],
        "primary": rec.primary or "–", "backup": rec.backup or "–", "link": f"{r.run_id}/report.html",
        "evidence": "one configuration: nothing compared" if len(r.engines) < 2 else rec.evidence or "",
        "run_id": r.run_id,
    }  # fmt: skip


def index_html(runs: list[RunSummary], batches: str = "", measurements: str = "") -> str:
    """The index page (``templates/pages/index.html.j2``): one row per archived run, newest first.

    Each row links to its report; then ``batches`` (the batch list, already rendered), ``measurements``
    (``measurements_html``) and the trends per workload.
    """
    page = render(
        "index.html.j2",
        runs=[_run_row(r) for r in reversed(runs)],
        heads=["date (UTC)", "workload", "model", "hardware", "engines", "primary / backup, evidence", "report"],
        batches=fragment(batches),
        measurements=fragment(measurements),
        trends=render(
            "trends_section.html.j2",
            charts=[{"workload": w, "runs": n, "src": src} for w, n, src in trend_charts(runs)],
        ),
    )
    return str(page)


def write_index(reports_dir: Path) -> Path:
    """Rewrite ``reports/index.html``: every archived run, then the batches under ``reports_dir`` (``batches``)."""
    reports_dir = Path(reports_dir)
    batches = batches_section(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    out = reports_dir / "index.html"
    out.write_text(index_html(archived_runs(reports_dir), batches, measurements_html(reports_dir)), encoding="utf-8")
    return out
