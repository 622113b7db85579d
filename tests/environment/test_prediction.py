"""Step 4's capacity prediction: the stated batching model on the shipped configs, its bounds and its calibration."""

import math

import pytest

from helpers.core.config import load_config
from helpers.core.paths import PLAYBOOK_DIR
from helpers.environment.prediction import (
    CalibrationFactor,
    CalibrationMeasurement,
    CalibrationTable,
    factor_from,
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


def test_a_gpu_with_its_own_current_measurements_is_calibrated_on_those_alone():
    """H200 predictions use the H200's current-test measurements; a GPU without any, every GPU's factor."""

    def m(run, gpu, ratio, current=True):
        return CalibrationMeasurement(runs=[run], label="vLLM", shape="s", gpu=gpu, ratio=ratio, current_test=current)

    ms = [m("a", "H100-SXM5-80GB", 0.60), m("b", "H100-SXM5-80GB", 0.64), m("c", "H200-SXM-141GB", 0.50)]
    # an older test's reading: never used while current ones exist
    ms.append(m("old", "H200-SXM-141GB", 0.30, current=False))
    f = factor_from(ms)
    assert f.factor == pytest.approx(0.60) and f.runs == 3  # the median over every GPU's current ones
    h200 = f.for_gpu("H200-SXM-141GB")
    assert h200.factor == 0.5 and h200.runs == 1 and h200.gpus == ["H200-SXM-141GB"]
    assert h200.basis.startswith("measured on H200-SXM-141GB only") and "H100-SXM5-80GB left out" in h200.basis
    assert f.for_gpu("H100-SXM5-80GB").factor == pytest.approx(0.62)
    assert f.for_gpu("L40S") is f  # no measurement there: every GPU's
    # only an older measurement on a GPU: the current ones elsewhere win
    assert factor_from([m("a", "H100-SXM5-80GB", 0.6), m("old", "L40S", 0.3, False)]).for_gpu("L40S").factor == 0.6
    # a run rendered again leaves its own out, and says so, before the GPU is chosen
    left = CalibrationTable(as_of="x", source="t", engines={"vllm": f}).without("c").engines["vllm"]
    assert left.for_gpu("H200-SXM-141GB").factor == pytest.approx(0.62)  # no other H200 one: every GPU's
    both = factor_from([*ms, m("d", "H200-SXM-141GB", 0.54)])
    again = CalibrationTable(as_of="x", source="t", engines={"vllm": both}).without("c").engines["vllm"]
    one = again.for_gpu("H200-SXM-141GB")
    assert one.factor == 0.54 and one.basis.endswith("; c's own measurement left out")

    # in a prediction: the factor of the GPU predicted for, and the basis says which
    cfg = cfg_of("h200-offline/chat-8b")
    table = CalibrationTable(as_of="2026-12-07", source="test", engines={"vllm": f})
    on_h200, on_h100 = (
        predict_run(cfg, H200, "t", table).of("vLLM 0.26.0"),
        predict_run(cfg, H100, "t", table).of("vLLM 0.26.0"),
    )
    assert on_h200.calibration_factor == 0.5 and "measured on H200-SXM-141GB only" in on_h200.calibration_basis
    assert on_h100.calibration_factor == pytest.approx(0.62) and not any("not on" in n for n in on_h100.notes)


def test_the_committed_calibration_covers_the_measured_engines():
    table = load_calibration()
    assert set(table.engines) >= {"vllm", "sglang", "lmdeploy-pytorch", "lmdeploy-turbomind"}
    for f in table.engines.values():
        assert 0 < f.low <= f.factor <= f.high < 1  # datasheet peaks are never reached
        assert not math.isnan(f.factor)
