"""Every measured point as a flat row: step 5's tables and CSV exports, and ``summary.json``'s ``points``.

Kept apart from ``report.run_summary`` (which reads every step's record) so that step 5's view can use it
without importing the later steps.
"""

from __future__ import annotations

from typing import Any

from helpers.benchmark.roofline import ratio_text
from helpers.core.text import knob_text
from helpers.run.records import EngineResult


def points_table(results: list[EngineResult]) -> list[dict[str, Any]]:
    """Flat rows of every measured point, for tables, CSV exports and ``summary.json``."""
    rows = []
    for r in results:
        for p in r.points:
            row = p.model_dump(
                mode="json", exclude={"server", "gpu", "roofline", "knobs", "structure", "request_times"}
            )
            row.update({f"server_{k}": v for k, v in p.server.model_dump().items()})
            row.update({f"gpu_{k}": v for k, v in p.gpu.model_dump().items()})
            row["knobs"] = knob_text(p.knobs)
            row["roofline"] = ratio_text(p.roofline) if p.roofline else ""
            if p.structure is not None:  # a structured replay: its predicted prefix-cache hit rates, flat
                row["predicted_hit_rate_unbounded"] = p.structure.predicted_unbounded
                row["predicted_hit_rate_finite"] = p.structure.predicted_finite
            rows.append(row)
    return rows
