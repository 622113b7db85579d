"""A run rendered again from its points keeps the date it was made (the review orders runs by it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.core.config import load_config
from helpers.report.run_summary import build_summary

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "cpu-flat-rate"


def test_a_second_summary_keeps_the_first_ones_date(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    cfg = load_config(run / "config.yaml")
    first = build_summary(run, cfg)
    assert first.created_utc and first.created_utc.startswith("20")  # a new run: now
    (run / "summary.json").write_text(json.dumps({"created_utc": "2026-12-01T22:55:08+00:00"}), encoding="utf-8")
    assert build_summary(run, cfg).created_utc == "2026-12-01T22:55:08+00:00"
