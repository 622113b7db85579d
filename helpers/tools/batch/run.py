"""``playbook batch MATRIX``: expand a matrix, decide per cell, hand the cells to an executor, index them.

Per cell the batch keeps, resumes, replaces or starts its run folder; it keeps ``reports/batch-<id>/``
(``batch.json``, ``index.html``, ``cells/``, ``logs/``) and ``reports/index.html`` up to date as cells finish.

Everything that can be checked is checked before anything starts (the matrix, every cell's config, the
executor's kind); a cell that fails becomes a row with its reason and the other cells go on.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import yaml

from helpers.core.errors import ConfigError
from helpers.core.paths import REPORTS_DIR
from helpers.core.text import unknown_choice
from helpers.report.batches import BatchRecord, CellRow, read_record, write_batch_index
from helpers.report.index import write_index
from helpers.tools.batch.executors import EXECUTORS
from helpers.tools.batch.executors.base import CellOutcome, CellTask, ExecutorSpec
from helpers.tools.batch.figures import cell_figures
from helpers.tools.batch.matrix import AXES, Batch, Cell, load_batch
from helpers.tools.batch.progress import Progress
from helpers.tools.batch.resume import Decision, decide, move_aside, wait_for_previous_run


def executor_spec(batch: Batch, kind: str | None = None, address: str | None = None) -> ExecutorSpec:
    """The matrix's executor section with the command line's ``--executor`` / ``--address`` over it."""
    spec = batch.matrix.executor
    if kind:
        spec = spec.model_copy(update={"kind": kind})
    if address:
        spec = spec.model_copy(update={"address": address})
    if spec.kind not in EXECUTORS:
        raise ConfigError(f"{batch.source}: executor.kind: {unknown_choice('executor', spec.kind, EXECUTORS)}")
    return spec


def plan(batch: Batch, reports_dir: Path) -> dict[str, Decision]:
    """The decision for every cell, by cell slug (nothing is changed on disk)."""
    return {c.cell: decide(Path(reports_dir) / c.run_id, c.config) for c in batch.cells}


def finished_row(row: CellRow, run_dir: Path, outcome: CellOutcome | None = None) -> CellRow:
    """``row`` filled from the cell's run folder (and its outcome when it ran now)."""
    if outcome is not None:
        row = row.model_copy(update={"seconds": round(outcome.seconds, 1), "where": outcome.where or None})
    if outcome is not None and outcome.rc != 0:
        return row.model_copy(update={"status": "failed", "reason": outcome.reason})
    fig = cell_figures(run_dir)
    report = f"../{run_dir.name}/report.html" if (run_dir / "report.html").is_file() else None
    return row.model_copy(
        update={
            "status": "ok" if fig.primary else "failed",
            "reason": fig.problem,
            "primary": fig.primary,
            "primary_engine": fig.primary_engine,
            "primary_version": fig.primary_version,
            "usd_per_mtok": fig.usd_per_mtok,
            "output_tok_s": fig.output_tok_s,
            "report": report,
        }
    )


class _Book:
    """The batch's bookkeeping while it runs: rows, progress, and the batch page rewritten on every change."""

    def __init__(self, batch: Batch, spec: ExecutorSpec, reports_dir: Path, progress: Progress) -> None:
        self.batch, self.spec, self.reports_dir, self.progress = batch, spec, Path(reports_dir), progress
        self.rows = {c.cell: CellRow(cell=c.cell, run_id=c.run_id, values=c.values) for c in batch.cells}

    def record(self) -> BatchRecord:
        axes = [a for a in AXES if any(a in c.values for c in self.batch.cells)] or ["cell"]
        return BatchRecord(
            batch=self.batch.batch_id,
            name=self.batch.matrix.name,
            description=self.batch.matrix.description,
            source=str(self.batch.source),
            executor=self.spec.kind,
            address=self.spec.address or (os.environ.get("RAY_ADDRESS") if self.spec.kind == "ray" else None),
            updated_utc=datetime.now(UTC).isoformat(timespec="seconds"),
            axes=axes,
            cells=list(self.rows.values()),
        )

    def write(self) -> Path:
        return write_batch_index(self.batch.folder(self.reports_dir), self.record())

    def started(self, cell: str, where: str) -> None:
        self.rows[cell] = self.rows[cell].model_copy(update={"status": "running", "where": where or None})
        self.progress.started(cell, where)
        self.write()

    def finished(self, outcome: CellOutcome) -> None:
        row = self.rows[outcome.cell]
        row = finished_row(row, self.reports_dir / row.run_id, outcome)
        self.rows[outcome.cell] = row
        self.progress.finished(outcome.cell, row.status == "ok", outcome.seconds, row.reason)
        self.write()


def _write_cell_config(cell: Cell, cells_dir: Path) -> Path:
    """The cell's full config as YAML (owner-only: it may carry launcher env values), what its run reads."""
    cells_dir.mkdir(parents=True, exist_ok=True)
    p = cells_dir / f"{cell.cell}.yaml"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(cell.data, f, sort_keys=False)
    return p


def run_batch(
    matrix: str | Path,
    executor: str | None = None,
    address: str | None = None,
    reports_dir: Path = REPORTS_DIR,
    batch_id: str | None = None,
    stream: TextIO | None = None,
) -> tuple[Path, BatchRecord]:
    """Run (or resume) a batch; return its page and final record. Validation errors raise before anything starts."""
    batch = load_batch(matrix, batch_id)
    spec = executor_spec(batch, executor, address)
    reports_dir = Path(reports_dir).resolve()
    folder = batch.folder(reports_dir)
    decisions = plan(batch, reports_dir)
    kept = [c for c in batch.cells if decisions[c.cell].action == "keep"]
    progress = Progress([c.cell for c in batch.cells], [c.cell for c in kept], stream=stream)
    book = _Book(batch, spec, reports_dir, progress)
    previous = read_record(folder)
    before = {r.run_id: r for r in previous.cells} if previous else {}
    tasks = []
    for c in batch.cells:
        d = decisions[c.cell]
        run_dir = reports_dir / c.run_id
        if d.action == "keep":
            earlier = before.get(c.run_id)  # its wall time and host, from the batch run that made it
            ran = {"seconds": earlier.seconds, "where": earlier.where} if earlier else {}
            book.rows[c.cell] = finished_row(book.rows[c.cell].model_copy(update={"kept": True, **ran}), run_dir)
            progress.note(f"cell {c.cell}: kept ({d.why}): {run_dir}")
            continue
        if d.action == "replace":
            progress.note(f"cell {c.cell}: {d.why}; old folder moved to {move_aside(run_dir, folder / 'replaced')}")
        elif d.action == "resume":
            progress.note(f"cell {c.cell}: resuming {run_dir} ({d.why})")
            wait_for_previous_run(run_dir, say=progress.note)
        config = _write_cell_config(c, folder / "cells")
        tasks.append(CellTask(c.cell, c.run_id, config, folder / "logs" / f"{c.cell}.log", c.resources))
    book.write()
    write_index(reports_dir)
    progress.note(f"{len(batch.cells)} cell(s), {len(kept)} kept, {len(tasks)} to run with the {spec.kind} executor")
    progress.note(progress.line()[len("[batch] ") :])
    try:
        if tasks:
            EXECUTORS[spec.kind](spec).run(tasks, reports_dir, book)
    finally:
        page = book.write()
        write_index(reports_dir)
    return page, book.record()


def add_batch_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of ``playbook batch``."""
    p.add_argument("matrix", help="batch matrix YAML (e.g. playbook/batches/cpu-two-models.yaml)")
    p.add_argument("--executor", help=f"override the matrix's executor.kind ({', '.join(EXECUTORS.names())})")
    p.add_argument("--address", help="Ray cluster address (ray://HOST:10001, HOST:6379, auto); default RAY_ADDRESS")
    p.add_argument("--reports-dir", type=Path, default=REPORTS_DIR, help="reports folder (default: reports/)")
    p.add_argument("--batch-id", help="batch id (default: the slug of the matrix's name); same id = resume")
    p.add_argument("--dry-run", action="store_true", help="validate and print what each cell would do; run nothing")
    return p


def batch_command(args: argparse.Namespace) -> int:
    """``playbook batch``: 0 when every cell is ok, 1 when some failed (their rows say why)."""
    if args.dry_run:
        batch = load_batch(args.matrix, args.batch_id)
        spec = executor_spec(batch, args.executor, args.address)
        for c, d in zip(batch.cells, plan(batch, args.reports_dir).values(), strict=True):
            res = c.resources
            print(f"{c.run_id}: {d.action} ({d.why}); cpus={res.num_cpus:g} gpus={res.num_gpus:g}")
        print(f"{len(batch.cells)} cell(s); executor {spec.kind}")
        return 0
    page, record = run_batch(args.matrix, args.executor, args.address, args.reports_dir, args.batch_id, sys.stderr)
    print(page)
    return 1 if any(c.status != "ok" for c in record.cells) else 0
