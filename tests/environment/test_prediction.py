"""Step 4's capacity prediction: the stated batching model on the shipped configs, its bounds and its calibration."""

import math

import pytest

from helpers.core.config import load_config
from helpers.core.paths import PLAYBOOK_DIR
from helpers.environment.prediction import (
    CalibrationFactor,
    CalibrationTable,
    load_calibration,
    predict_config,
    predict_run,
)
from helpers.model.gpu_specs import gpu_spec

H200, H100 = gpu_spec("H200"), gpu_spec("H100-SXM-80GB")


def cfg_of(name: str, **workload):
    cfg = load_config(PLAYBOOK_DIR / "workloads" / f"{name}.yaml")
    if workload:
        cfg = cfg.model_copy(update={"workload": cfg.workload.model_copy(update=workload)})
    return cfg


def with_knobs(cfg, **knobs):
    spec = cfg.engines[0]
    return spec.model_copy(update={"knobs": spec.knobs.model_copy(update=knobs)})


def test_8b_on_h200_is_bounded_by_max_num_seqs_and_its_capacity_sits_at_the_ttft_limit():
    cfg = cfg_of("h200-offline/chat-8b")
    p = predict_config(cfg, cfg.engines[0], H200)
    assert p.available and p.weight_precision == "bf16"
    assert p.max_batch == 1024 and p.batch_limit == "max_num_seqs default"
    assert 3.3 < p.decode_step_ms_batch1 < 3.4
    assert p.sla_requests_per_s < p.peak_requests_per_s
    assert p.ttft_p95_ms_at_capacity == pytest.approx(2000, rel=1e-3)
    assert p.peak_output_tok_s == pytest.approx(p.peak_requests_per_s * 256)
    assert p.calibration_factor is None and p.capacity_requests_per_s == p.sla_requests_per_s


def test_the_kv_cache_bounds_the_70b_on_an_80_gb_gpu():
    cfg = cfg_of("h200-offline/chat-70b-fp8")
    h200, h100 = (predict_config(cfg, cfg.engines[0], g) for g in (H200, H100))
    assert h100.batch_limit == "KV cache" and h100.max_batch == h100.kv_tokens // (512 + 256)
    assert h100.max_batch < 20 < h200.max_batch
    assert h100.sla_requests_per_s < h200.sla_requests_per_s / 5


def test_a_knob_an_sla_and_a_shared_prefix_move_the_prediction():
    cfg = cfg_of("h200-offline/chat-8b")
    base = predict_config(cfg, cfg.engines[0], H200)
    small = predict_config(cfg, with_knobs(cfg, max_num_seqs=32), H200)
    assert small.max_batch == 32 and small.batch_limit == "knob max_num_seqs"
    assert small.peak_requests_per_s < base.peak_requests_per_s
    tight = cfg.model_copy(update={"sla": cfg.sla.model_copy(update={"ttft_p95_ms": 100.0})})
    assert predict_config(tight, cfg.engines[0], H200).sla_requests_per_s < base.sla_requests_per_s
    itl = cfg.model_copy(update={"sla": cfg.sla.model_copy(update={"itl_p95_ms": 8.0})})
    capped = predict_config(itl, cfg.engines[0], H200)
    assert capped.batch_limit == "ITL p95 limit" and capped.decode_step_ms_at_peak <= 8.0
    shared = cfg_of("h200-offline/chat-8b", shared_prefix_tokens=256)
    on = predict_config(shared, shared.engines[0], H200)
    off = predict_config(shared, with_knobs(shared, prefix_caching=False), H200)
    assert on.cached_share == 0.5 and off.cached_share == 0.0
    assert on.prefill_ms < off.prefill_ms and on.sla_requests_per_s > off.sla_requests_per_s


def test_cpu_engines_and_models_that_do_not_fit_say_why():
    cpu = cfg_of("default")
    p = predict_config(cpu, cpu.engines[0], H200)
    assert not p.available and "no GPU model for a CPU engine" in p.reason and p.capacity_requests_per_s is None
    big = cfg_of("h200-offline/chat-70b-fp8")
    nofit = predict_config(big, big.engines[0], gpu_spec("L40S"))
    assert not nofit.available and "does not fit" in nofit.reason
    assert not predict_config(big, big.engines[0], None).available


def test_a_calibration_factor_is_applied_per_engine_and_said():
    cfg = cfg_of("h200-offline/chat-8b")
    factor = CalibrationFactor(factor=0.5, runs=2, low=0.4, high=0.6, shapes=["s"], gpus=["H200-SXM-141GB"])
    table = CalibrationTable(as_of="2026-12-03", source="test", engines={"vllm": factor})
    rec = predict_run(cfg, H100, "test", table)
    v, s = rec.of("vLLM 0.26.0"), rec.of("SGLang 0.5.16")
    assert v.calibration_factor == 0.5 and v.capacity_requests_per_s == pytest.approx(v.sla_requests_per_s / 2)
    assert "× 0.50" in v.calibration_basis and "2 archived vllm" in v.calibration_basis
    assert any("measured on H200-SXM-141GB, not on H100-SXM5-80GB" in n for n in v.notes)
    assert s.calibration_factor is None and "no archived measurement of sglang" in s.calibration_basis
    assert s.capacity_requests_per_s == s.sla_requests_per_s
    assert rec.batching_model.startswith("continuous batching") and rec.ttft_p95_ms == 2000


def test_the_committed_calibration_covers_the_measured_engines():
    table = load_calibration()
    assert set(table.engines) >= {"vllm", "sglang", "lmdeploy-pytorch", "lmdeploy-turbomind"}
    for f in table.engines.values():
        assert 0 < f.low <= f.factor <= f.high < 1  # datasheet peaks are never reached
        assert not math.isnan(f.factor)
