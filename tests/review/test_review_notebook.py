"""Step 11 as people read it: ``07_review`` through papermill on a copy of an archived H200 run.

The archived ``h200-20261201-chat-8b-poisson`` run is copied beside an earlier run of the same workload
made from its own summary: vLLM served 1.5x more with a tight interval (a real drop, to be flagged with
its interval), SGLang 1.3x more with an interval from two trials (noise, to be said as such). The
executed notebook's output and ``review.json`` are read back (nothing is launched; ~10 s).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.core.config import load_config
from helpers.core.paths import PLAYBOOK_DIR
from helpers.report.run_summary import build_summary
from helpers.review.records import ReviewRecord
from helpers.run.folder import RunFolder
from helpers.run.records import Figure
from helpers.tools.runner import execute

ARCHIVED = Path(__file__).resolve().parents[2] / "reports" / "h200-20261201-chat-8b-poisson"


def _scaled(f: Figure, factor: float, low: float, high: float, n: int) -> Figure:
    """``f`` times ``factor``, with the interval ``[low, high] × f.mean`` and ``n`` samples."""
    return Figure(mean=f.mean * factor, low=f.mean * low, high=f.mean * high, n=n)


def _earlier_run(reports: Path, run: Path) -> None:
    """An earlier run of the workload: this run's summary with vLLM 1.5x faster (tight), SGLang 1.3x (wide)."""
    s = build_summary(run, load_config(run / "config.yaml"))
    s.run_id, s.created_utc = "earlier", "2026-11-01T00:00:00+00:00"
    for e, (factor, low, high, n) in zip(
        s.engines, [(1.5, 1.47, 1.53, 12) if e.engine == "vllm" else (1.3, 0.3, 2.3, 2) for e in s.engines], strict=True
    ):
        e.representative.output_tok_s = _scaled(e.representative.output_tok_s, factor, low, high, n)
        e.usd_per_mtok_output = e.usd_per_mtok_output / factor
    (reports / "earlier").mkdir()
    (reports / "earlier" / "summary.json").write_text(s.model_dump_json(indent=1, by_alias=True), encoding="utf-8")


def _outputs(notebook: Path) -> str:
    """Every code cell's output text (HTML and plain) in the executed notebook."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for kind in ("text/html", "text/plain"):
                parts.append("".join(data.get(kind, "")))
            parts.append("".join(out.get("text", "")))
    return "\n".join(parts)


def test_07_review_flags_the_real_drop_with_its_interval_and_says_the_noise(tmp_path):
    reports = tmp_path / "reports"
    run = reports / ARCHIVED.name
    skip = shutil.ignore_patterns("logs", "notebooks", "report.html", "review.json", "tables", "rollout")
    shutil.copytree(ARCHIVED, run, ignore=skip)
    _earlier_run(reports, run)
    (run / "notebooks").mkdir()
    err = execute(PLAYBOOK_DIR / "07_review.ipynb", run / "notebooks" / "07_review.ipynb", run / "config.yaml", run)
    assert err is None, err
    rec = RunFolder(run).load(ReviewRecord)
    regressions = [f for f in rec.flags if f.startswith("Regression")]
    assert any(f.startswith("Regression: vLLM 0.26.0 output throughput") and "(-33%, 95% interval -" in f
               for f in regressions), rec.flags  # fmt: skip
    assert any(f.startswith("Regression: vLLM 0.26.0 $/M output tokens") for f in regressions)
    assert not any("SGLang" in f for f in regressions), regressions
    noise = [n for n in rec.notes if n.startswith("SGLang 0.5.16 output throughput")]
    assert len(noise) == 1 and "(-23%) since run earlier (2026-11-01): within noise (±" in noise[0], rec.notes
    assert noise[0].endswith("), not a regression.")
    shown = _outputs(run / "notebooks" / "07_review.ipynb")
    assert "Regression: vLLM 0.26.0 output throughput" in shown and "95% interval" in shown
    assert "within noise (±" in shown and "not a regression" in shown
    assert "output throughput verdict" in shown and "(95%: -" in shown  # the changes table, with intervals
    assert "output tok/s 95% interval" in shown  # the history table
