"""The archive of runs under ``reports/``: reading runs back and writing ``reports/index.html``.

The index lists every run, the batches, the trends per workload, and links the measurement pages of the
docs (``docs/measurements/``: one dated page per measured run, with the figures the runs gave).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from helpers.core.paths import MEASUREMENTS_DIR
from helpers.report.notebook import esc
from helpers.review.trend import trend_html
from helpers.run.summary import EngineSummary, RunSummary, SummaryError, read_summary
from helpers.tools.batch.index import batches_section


def archived_runs(reports_dir: Path) -> list[RunSummary]:
    """Every run's ``summary.json`` under ``reports_dir`` (schema 1 or 2), oldest first; unreadable ones skipped.

    A summary's ``run_id`` is set to its folder's name, which is what the index links to.
    """
    runs = []
    for p in sorted(Path(reports_dir).glob("*/summary.json")):
        try:
            s = read_summary(p)
        except SummaryError:
            continue
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
    pages = measurement_pages(folder)
    if not pages:
        return ""
    items = "".join(
        f"<li><a href='{esc(Path(os.path.relpath(p, reports_dir)).as_posix())}'>{esc(t)}</a></li>" for t, p in pages
    )
    return (
        "<h2>Measurements</h2><p>One page per measured run, with every figure it gave and the code it measured "
        f"(<code>docs/measurements/</code>; <code>make docs</code> builds them as a site).</p><ul>{items}</ul>"
    )


def index_html(runs: list[RunSummary], batches: str = "", measurements: str = "") -> str:
    """The index page: one row per archived run, newest first, each linking to its report; then ``batches``.

    ``measurements``: the list of measurement pages (``measurements_html``), after the batches.
    """
    rows = []
    for r in reversed(runs):
        rec = r.recommendation
        engines = "<br>".join(esc(engine_text(e)) for e in r.engines)
        link = f"{r.run_id}/report.html"
        rows.append(
            "<tr>"
            f"<td>{esc(r.created_utc)}</td><td>{esc(r.workload)}</td><td>{esc(r.model)}</td>"
            f"<td>{esc(hardware_text(r.hardware))}</td><td>{engines}</td>"
            f"<td>{esc(rec.primary or '–')} / {esc(rec.backup or '–')}</td>"
            f"<td><a href='{esc(link)}'>{esc(r.run_id)}</a></td>"
            "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("date (UTC)", "workload", "model", "hardware", "engines", "primary / backup", "report")
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Engine Playbook — archived runs</title>"
        "<style>body{font-family:sans-serif;max-width:1300px;margin:auto}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f2f2f2}</style></head><body>"
        f"<h1>Engine Playbook — archived runs</h1><p>{len(runs)} run(s).</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"{batches}"
        f"{measurements}"
        f"{trend_html(runs)}"
        "</body></html>"
    )


def write_index(reports_dir: Path) -> Path:
    """Rewrite ``reports/index.html`` from the archived runs."""
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    out = reports_dir / "index.html"
    html = index_html(archived_runs(reports_dir), batches_section(reports_dir), measurements_html(reports_dir))
    out.write_text(html, encoding="utf-8")
    return out
