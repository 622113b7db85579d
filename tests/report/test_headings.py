"""One heading per step: the notebooks' own titles ("# Step 5: ...") stay out of the merged report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.report.html import merged_notebook

REPORTS = Path(__file__).resolve().parents[2] / "reports"


@pytest.mark.parametrize("run", ["h200-20261129-chat-8b", "h200-20261129-shared-prefix-8b"])
def test_each_step_heading_appears_once(run):
    nb = merged_notebook(REPORTS / run)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert not re.search(r"^# Steps? \d", markdown, flags=re.M)  # the notebooks' titles
    for n in range(1, 13):
        assert markdown.count(f'id="step-{n}"') == 1
