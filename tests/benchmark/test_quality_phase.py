"""Step 5's quality phase and speculative comparison, and the decision that excludes a failed configuration.

The answers are written into a run folder as the phase stores them (``quality/<label>.json``); the
engines behind them are exercised in ``test_quality.py`` (fake server) and
``tests/e2e/test_quality_e2e.py`` (the real CPU engine with SmolLM2).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from decision_data import SGLANG, VLLM, cfg, lmdeploy_random_cfg, results, scaled
from decision_data import decide_measured as decide

from helpers.benchmark.quality import ItemResult, QualityOutcome, load_eval_set, paired_delta_interval, wilson
from helpers.benchmark.quality_phase import (
    NOT_MEASURED_DUMMY,
    QUALITY,
    GateRow,
    QualityGate,
    judge_gate,
    outcome_path,
)
from helpers.benchmark.speculative import compare_speculative
from helpers.core.config import parse_config
from helpers.run.records import EngineResult, Point, SpecDecodeStats, write_json_atomic

N = 50


def quality_pending(cfg_, run_dir: Path, spec) -> bool:
    """Whether the configuration still owes the gate its answers: a file of the phase's records is missing."""
    return not all(p.is_file() for p in QUALITY.records(spec, cfg_, run_dir))


STABLE = {"updates_per_month": 0.2}


def _config(dummy: bool = False, **quality) -> object:
    def engine(label: str, **knobs) -> dict:
        return {"label": label, "engine": "vllm", "launcher": {"kind": "python", "python": "python3"},
                "knobs": {"dummy_weights": dummy, **knobs}}  # fmt: skip

    spec = {} if dummy else {"speculative": {"method": "ngram"}}
    return parse_config(
        {
            "name": "t",
            "model": {"path": "tiny-llama"},
            "engines": [engine("bf16"), engine("fp8", quantization="fp8"), engine("broken", **spec)],
            "quality": {"max_items": N, **quality},
        }
    )


def _outcome(right: int) -> QualityOutcome:
    items = load_eval_set(limit=N)
    rows = [ItemResult(id=it.id, output=it.answers[0] if i < right else "no", correct=i < right) for i, it in
            enumerate(items)]  # fmt: skip
    return QualityOutcome(measurable=True, eval_set="quality-v1.jsonl", eval_set_sha256="same", n=N, correct=right,
                          accuracy=right / N, items=rows)  # fmt: skip


def _store(run_dir: Path, **right: int) -> None:
    for label, r in right.items():
        write_json_atomic(outcome_path(run_dir, label), _outcome(r).model_dump(mode="json"))


def test_wilson_and_paired_intervals():
    low, high = wilson(45, 50)
    assert low == pytest.approx(0.786, abs=1e-3) and high == pytest.approx(0.957, abs=1e-3)
    assert wilson(0, 0) is None
    lo, hi = paired_delta_interval(0, 0, 50)  # nothing changed: still an interval around 0
    assert lo < 0 < hi and lo == pytest.approx(-hi)
    lo, hi = paired_delta_interval(0, 20, 50)
    assert hi < 0 and lo < -40 * 0.5


def test_dummy_weights_say_not_measured_never_a_number(tmp_path: Path):
    gate = judge_gate(_config(dummy=True), tmp_path, [])
    assert gate.reason == NOT_MEASURED_DUMMY and not gate.measured and gate.failed() == {}
    assert [r.gate_passed for r in gate.rows] == [None, None, None]
    assert all(r.accuracy is None and r.reason == NOT_MEASURED_DUMMY for r in gate.rows)


def test_random_weights_are_not_measurable_even_with_answers_stored(tmp_path: Path):
    """LMDeploy's random-weight folder answers noise: a stored 0/50 is not a quality figure (H200 run, 2026-12-01)."""
    random_cfg = lmdeploy_random_cfg("lm")
    spec = random_cfg.engines[0]
    assert spec.placeholder_weights and not spec.knobs.dummy_weights
    _store(tmp_path, lm=0)
    gate = judge_gate(random_cfg, tmp_path, [])
    assert gate.reason == NOT_MEASURED_DUMMY and not gate.measured and gate.row("lm").accuracy is None
    assert not quality_pending(random_cfg, tmp_path / "fresh", spec)


def test_gate_passes_a_small_loss_and_fails_a_broken_configuration(tmp_path: Path):
    _store(tmp_path, bf16=45, fp8=44, broken=10)
    gate = judge_gate(_config(), tmp_path, [])
    assert gate.measured and gate.reference == "bf16" and gate.items == N
    fp8, broken = gate.row("fp8"), gate.row("broken")
    assert fp8.gate_passed is True and fp8.delta_points == -2.0 and fp8.expected.startswith("< 1 point (FP8")
    assert fp8.precision == "fp8 weights" and fp8.delta_low < -2 < fp8.delta_high and "more items" in fp8.note
    assert broken.gate_passed is False and broken.delta_points == -70.0 and broken.delta_high < -2
    assert broken.speculative == "ngram" and broken.expected.startswith("none: drafts are verified")
    assert gate.failed() == {"broken": "failed the quality gate: accuracy -70.0 points vs the reference (limit -2)"}
    again = QualityGate.model_validate_json(gate.model_dump_json())
    assert again.failed() == gate.failed()


def test_a_configuration_without_answers_is_not_measured_with_its_engine_status(tmp_path: Path):
    _store(tmp_path, bf16=45)
    failed = EngineResult(label="fp8", engine="vllm", status="failed", reason="out of memory")
    gate = judge_gate(_config(), tmp_path, [failed])
    assert (
        gate.row("fp8").gate_passed is None and gate.row("fp8").reason == "not measured (engine failed: out of memory)"
    )
    assert gate.row("broken").reason == "not measured (no answers stored)"


def test_stored_answers_are_what_a_resumed_run_needs(tmp_path: Path):
    cfg_ = _config()
    spec = cfg_.engines[0]
    assert quality_pending(cfg_, tmp_path, spec)
    _store(tmp_path, bf16=45)
    assert not quality_pending(cfg_, tmp_path, spec)
    off = _config(enabled=False)
    assert not quality_pending(off, tmp_path / "x", spec) and judge_gate(off, tmp_path / "x", []).reason.endswith(
        "enabled is false)"
    )


def test_the_decision_excludes_a_configuration_that_failed_the_gate():
    res = [results(VLLM)[0], scaled(results(SGLANG)[0], 1.3)]
    c = cfg([VLLM, SGLANG], cadence=STABLE, workload={"shared_prefix_tokens": 2000})
    assert decide(res, c, {"prefix_reuse_ratio": 0.6}).primary == SGLANG
    row = GateRow(label=SGLANG, reference=VLLM, measurable=True, gate_passed=False, threshold_points=2.0,
                  reason="accuracy -12.0 points vs the reference (limit -2)")  # fmt: skip
    gate = QualityGate(enabled=True, measured=True, reference=VLLM, rows=[row])
    d = decide(res, c, {"prefix_reuse_ratio": 0.6}, quality=gate)
    assert d.primary == VLLM and d.backup is None
    score = next(s for s in d.scores if s.label == SGLANG)
    assert (
        not score.eligible
        and score.why_not == "failed the quality gate: accuracy -12.0 points vs the reference (limit -2)"
    )
    assert f"`{SGLANG}` cannot be primary: failed the quality gate: accuracy -12.0 points" in " ".join(d.reasons)


def _point(label: str, c: int, tok_s: float, spec: SpecDecodeStats | None = None) -> Point:
    p = Point(label=label, engine="vllm", concurrency=c, requests=8, duration_s=10, output_tok_s=tok_s,
              total_tok_s=tok_s * 5, req_s=1.0, itl_ms_p50=1000 / tok_s)  # fmt: skip
    p.server.spec_decode = spec
    return p


def test_speculative_configuration_beside_its_baseline():
    cfg_ = parse_config(
        {
            "name": "t", "model": {"path": "tiny-llama"},
            "engines": [
                {"label": x, "engine": "vllm", "launcher": {"python": "python3"},
                 "knobs": {"dummy_weights": False, **k}}
                for x, k in [("off", {}), ("fp8", {"quantization": "fp8"}),
                             ("ngram", {"speculative": {"method": "ngram"}})]
            ],
        }
    )  # fmt: skip
    stats = SpecDecodeStats(source="counters", drafted=400, accepted=172, drafts=100, acceptance_rate=0.43,
                            mean_acceptance_length=2.72)  # fmt: skip
    res = [
        EngineResult(label="off", engine="vllm", points=[_point("off", 1, 10.0), _point("off", 4, 30.0)]),
        EngineResult(label="ngram", engine="vllm", points=[_point("ngram", 1, 21.0, stats), _point("ngram", 8, 50.0)]),
    ]
    cmp = compare_speculative(res, cfg_)
    one, eight = cmp.rows
    assert (one.label, one.baseline, one.concurrency, one.acceptance_rate) == ("ngram", "off", 1, 0.43)
    assert one.speedup == pytest.approx(2.1) and one.baseline_output_tok_s == 10.0 and one.source == "counters"
    assert eight.speedup is None and eight.acceptance_rate is None  # the baseline has no point at 8
    assert cmp.note == ""
    none = compare_speculative(res, _config(dummy=True))
    assert none.rows == [] and none.note.startswith("No configuration enables")
