"""The archive of runs under ``reports/``: reading runs back and writing ``reports/index.html``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from helpers.report.notebook import esc
from helpers.review.trend import trend_html


def archived_runs(reports_dir: Path) -> list[dict[str, Any]]:
    """Every run's ``summary.json`` under ``reports_dir``, oldest first (unreadable ones skipped)."""
    runs = []
    for p in sorted(Path(reports_dir).glob("*/summary.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        data["_dir"] = p.parent.name
        runs.append(data)
    return sorted(runs, key=lambda d: (d.get("created_utc") or "", d["_dir"]))


def hardware_text(h: dict[str, Any]) -> str:
    """One line for a run's hardware: GPUs by name and count, and CPU threads (from the inventory)."""
    cores = h.get("cpu_logical_cores") or h.get("cpu_cores") or "?"
    gpus = Counter(g.get("name") for g in h.get("gpus") or [])
    if gpus:
        return ", ".join(f"{n}× {name}" for name, n in gpus.items()) + f"; {cores} CPU threads"
    return f"no GPU; {cores} CPU threads"


def index_html(runs: list[dict[str, Any]]) -> str:
    """The index page: one row per archived run, newest first, each linking to its report."""
    rows = []
    for r in reversed(runs):
        rec = r.get("recommendation") or {}
        engines = ", ".join(
            f"{e.get('label')} ({e.get('engine')} {e.get('version') or '?'})" for e in r.get("engines", [])
        )
        link = f"{r['_dir']}/report.html"
        rows.append(
            "<tr>"
            f"<td>{esc(r.get('created_utc'))}</td><td>{esc(r.get('workload'))}</td><td>{esc(r.get('model'))}</td>"
            f"<td>{esc(hardware_text(r.get('hardware') or {}))}</td><td>{esc(engines)}</td>"
            f"<td>{esc(rec.get('primary') or '–')} / {esc(rec.get('backup') or '–')}</td>"
            f"<td><a href='{esc(link)}'>{esc(r['_dir'])}</a></td>"
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
        f"{trend_html(runs)}"
        "</body></html>"
    )


def write_index(reports_dir: Path) -> Path:
    """Rewrite ``reports/index.html`` from the archived runs."""
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    out = reports_dir / "index.html"
    out.write_text(index_html(archived_runs(reports_dir)), encoding="utf-8")
    return out
