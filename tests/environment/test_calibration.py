"""The calibration against the archived H200 runs: the committed factors and docs page are what the archives give."""

import pytest

from helpers.core.paths import REPO_ROOT
from helpers.environment.calibration import archived_runs, calibrate, calibration_yaml, markdown
from helpers.environment.prediction import CALIBRATION_FILE

DOCS_PAGE = REPO_ROOT / "docs" / "measurements" / "prediction-vs-measured.md"


@pytest.fixture(scope="module")
def calibrated():
    return calibrate(archived_runs())


def test_every_archived_measured_capacity_is_a_row(calibrated):
    rows, _ = calibrated
    got = {(r.run, r.engine, r.shape.split()[0]) for r in rows}
    assert {
        ("h200-20261201-chat-8b-capacity", "vllm", "llama-3.1-8b"),
        ("h200-20261201-chat-8b-capacity", "sglang", "llama-3.1-8b"),
        ("h200-20261201-chat-8b-lmdeploy", "lmdeploy", "llama-3.1-8b"),
        ("h200-20261203-chat-70b-fp8", "vllm", "llama-3.3-70b-fp8"),
        ("h200-20261203-chat-70b-fp8", "sglang", "llama-3.3-70b-fp8"),
    } <= got
    copies = {(r.run, r.engine): r.duplicate_of for r in rows if r.duplicate_of}
    assert copies == {
        ("h200-20261201-chat-8b-lmdeploy", "vllm"): "h200-20261201-chat-8b-capacity",
        ("h200-20261201-chat-8b-lmdeploy", "sglang"): "h200-20261201-chat-8b-capacity",
    }
    assert all(r.axis == "rate" and r.gpu == "H200-SXM-141GB" and r.ratio > 1 for r in rows)  # peaks are optimistic


def test_leave_one_out_uses_only_the_other_measurements(calibrated):
    rows, table = calibrated
    lm = next(r for r in rows if r.engine == "lmdeploy")
    assert lm.loo_ratio is None and table.engines["lmdeploy"].runs == 1
    v70 = next(r for r in rows if r.engine == "vllm" and "70b" in r.shape)
    others = sorted(1 / r.ratio for r in rows if r.engine == "vllm" and r.duplicate_of is None and r is not v70)
    assert len(others) == 3 and v70.loo_ratio == pytest.approx(v70.ratio * others[1])


def test_the_committed_files_are_not_stale(calibrated):
    rows, table = calibrated
    assert CALIBRATION_FILE.read_text(encoding="utf-8") == calibration_yaml(table), (
        "run scripts/calibrate_predictions.py"
    )
    assert DOCS_PAGE.read_text(encoding="utf-8") == markdown(rows, table), "run scripts/calibrate_predictions.py"
