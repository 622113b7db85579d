"""The ``local`` executor: every cell in turn on this machine, each a ``playbook run`` child process."""

from __future__ import annotations

import socket
from pathlib import Path

from helpers.tools.batch.cell import run_cell_process
from helpers.tools.batch.executors.base import BatchEvents, CellOutcome, CellTask, Executor


class LocalExecutor(Executor):
    """Runs cells sequentially, straight into the batch's reports folder; resources are not enforced."""

    kind = "local"

    def run(self, tasks: list[CellTask], reports_dir: Path, events: BatchEvents) -> None:
        """Run each task to its end before the next; a failing cell is an outcome, not an exception."""
        host = socket.gethostname()
        for task in tasks:
            events.started(task.cell, host)
            rc, reason, seconds = run_cell_process(task.config_path, task.run_id, Path(reports_dir), task.log_path)
            events.finished(CellOutcome(task.cell, rc, reason, seconds, host))
