"""The one reader of saved records: a record or None, and a missing one named with the step that writes it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.core.errors import PlaybookError
from helpers.cost.records import CostAnalysis
from helpers.decision.tree import DecisionResult
from helpers.run import reader

RUN = Path(__file__).resolve().parents[2] / "reports" / "h200-20261203-chat-70b-fp8"


def test_read_gives_the_typed_record_and_need_names_the_notebook_when_it_is_missing(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("report.html", "notebooks", "logs", "points"))
    cost = reader.need(run, CostAnalysis)
    assert isinstance(cost, CostAnalysis) and {b.label for b in cost.best} == {"vLLM 0.26.0", "SGLang 0.5.16"}
    assert all(b.output_tok_s_per_gpu == pytest.approx(b.output_tok_s / b.gpus_per_replica) for b in cost.best)
    (run / "decision.json").unlink()
    assert reader.read(run, DecisionResult) is None
    with pytest.raises(
        reader.MissingRecordError, match=r"decision.json is missing \(the rollout reads it\): run step 7"
    ):
        reader.need(run, DecisionResult, "the rollout")
    assert issubclass(reader.MissingRecordError, PlaybookError)
    assert reader.run_summary(run).run_id == RUN.name


def test_a_record_held_inside_another_is_read_typed_or_not_at_all():
    assert reader.embedded({"demand": {"output_tokens_mean": 1.0, "basis": "b"}}, CostAnalysis) is not None
    assert reader.embedded({"fleet": "not a list"}, CostAnalysis) is None  # another shape: not recorded
    assert reader.embedded(None, CostAnalysis) is None
