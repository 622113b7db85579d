"""``reports/index.html`` with everything in it: the archived runs (``helpers.report.index``) and the batches.

The batches are the tools layer's (``helpers.tools.batch.index``), so the page is put together here, above
both: the report layer never imports a tool.
"""

from __future__ import annotations

from pathlib import Path

from helpers.report.index import write_index
from helpers.tools.batch.index import batches_section


def write_reports_index(reports_dir: Path) -> Path:
    """Rewrite ``reports/index.html``: every archived run, then the batches under ``reports_dir``."""
    return write_index(Path(reports_dir), batches_section(Path(reports_dir)))
