"""Predicted beside measured capacity in a run folder, and the prediction the capacity search starts from."""

import pytest

from helpers.core.config import load_config
from helpers.core.paths import PLAYBOOK_DIR
from helpers.environment.prediction import CalibrationFactor, CalibrationTable, predict_run
from helpers.environment.prediction_check import (
    check,
    measured_capacity,
    predicted_capacity,
    prediction_check_frame,
    prediction_vs_measured,
)
from helpers.model.gpu_specs import gpu_spec
from helpers.run.folder import RunFolder
from helpers.run.records import CapacityEstimate, CapacitySummary, EngineResult, save_engine_result

TABLE = CalibrationTable(
    as_of="2026-12-03", source="test",
    engines={"vllm": CalibrationFactor(factor=0.4, runs=2, low=0.3, high=0.5, shapes=["s"], gpus=["H200-SXM-141GB"])},
)  # fmt: skip


@pytest.fixture
def run(tmp_path):
    cfg = load_config(PLAYBOOK_DIR / "workloads" / "h200-offline" / "chat-8b.yaml")
    rec = predict_run(cfg, gpu_spec("H200"), "test", TABLE)
    RunFolder(tmp_path).save(rec)
    cap = CapacitySummary(capacity=25.0, bracket_low=25.0, bracket_high=27.5, bounded=True, converged=True)
    save_engine_result(tmp_path, EngineResult(label="vLLM 0.26.0", engine="vllm", capacity=cap))
    save_engine_result(tmp_path, EngineResult(label="SGLang 0.5.16", engine="sglang", status="failed"))
    return tmp_path, rec


def test_predicted_over_measured_with_the_search_bracket(run):
    run_dir, rec = run
    checks = {c.label: c for c in prediction_vs_measured(run_dir)}
    v = checks["vLLM 0.26.0"]
    pred = rec.of("vLLM 0.26.0")
    assert v.predicted == pytest.approx(pred.sla_requests_per_s * 0.4)
    assert v.ratio == pytest.approx(v.predicted / 25.0) and v.ratio_raw == pytest.approx(pred.sla_requests_per_s / 25)
    assert v.measured.low == 25.0 and v.measured.high == 27.5 and v.measured.interval == "search bracket"
    assert v.within_goal == (abs(v.ratio - 1) <= 0.25)
    s = checks["SGLang 0.5.16"]
    assert s.measured is None and s.ratio is None and "no measured capacity" in s.note
    frame = prediction_check_frame(list(checks.values()))
    assert list(frame["engine config"]) == ["SGLang 0.5.16", "vLLM 0.26.0"]
    assert "25.00 – 27.50 (search bracket)" in set(frame["measured interval"])


def test_a_capacity_interval_is_preferred_to_the_bracket():
    est = CapacityEstimate(status="estimated", value=10.0, low=9.0, high=11.5)
    cap = CapacitySummary(capacity=10.0, bracket_low=10.0, bracket_high=20.0, converged=True, estimate=est)
    m = measured_capacity(EngineResult(label="x", engine="vllm", capacity=cap))
    assert (m.low, m.high, m.interval) == (9.0, 11.5, "capacity interval (95%)")
    cap.estimate = None  # a record made before estimates: the search's bracket
    assert measured_capacity(EngineResult(label="x", engine="vllm", capacity=cap)).interval == "search bracket"
    unsearched = CapacitySummary(searched=False, capacity=None, trial_load=32)
    assert measured_capacity(EngineResult(label="x", engine="vllm", capacity=unsearched)) is None


def test_the_search_starts_from_the_calibrated_prediction_in_its_axis_units(run, tmp_path_factory):
    run_dir, rec = run
    pred = rec.of("vLLM 0.26.0")
    assert predicted_capacity(run_dir, "vLLM 0.26.0") == pytest.approx(pred.sla_requests_per_s * 0.4)
    assert predicted_capacity(run_dir, "vLLM 0.26.0", axis="concurrency") == pytest.approx(pred.sla_concurrency * 0.4)
    assert predicted_capacity(run_dir, "SGLang 0.5.16") == pytest.approx(pred.sla_requests_per_s)  # no factor
    assert predicted_capacity(run_dir, "no such label") is None
    assert predicted_capacity(tmp_path_factory.mktemp("empty"), "vLLM 0.26.0") is None


def test_a_cpu_engine_has_nothing_to_start_from(tmp_path):
    cfg = load_config(PLAYBOOK_DIR / "workloads" / "default.yaml")
    RunFolder(tmp_path).save(predict_run(cfg, None, "no GPU"))
    assert predicted_capacity(tmp_path, cfg.engines[0].label, axis="concurrency") is None
    c = check(None, EngineResult(label="x", engine="vllm-cpu"))
    assert "step 4 did not run" in c.note
