"""Step 7 declares where it departs from the seed, reads the concurrency step 5 measured, flags a borderline input."""

from __future__ import annotations

from pathlib import Path

import pytest

import helpers.report.notebook as notebook
from helpers.benchmark.in_flight import in_flight
from helpers.benchmark.quality_phase import QualityGate
from helpers.benchmark.sla import settle_estimates, standing_points
from helpers.core.config import load_config
from helpers.cost.records import CostAnalysis
from helpers.decision import view
from helpers.decision.compute import decide
from helpers.run.folder import RunFolder
from helpers.workload.profile import Profile

RUN = Path(__file__).resolve().parents[2] / "reports" / "h200-20261203-chat-70b-fp8"


def _decide(**updates):
    cfg = load_config(RUN / "config.yaml")
    if updates:
        cfg = cfg.model_copy(update={"cadence": cfg.cadence.model_copy(update=updates)})
    f = RunFolder(RUN)
    return decide(f.engine_results(), cfg, f.load(Profile), f.load(CostAnalysis), f.load(QualityGate)), cfg


def test_the_tree_reads_the_requests_in_flight_at_the_capacity_not_a_modelled_p99():
    d, _ = _decide()
    step3 = next(s for s in d.steps if s.step == 3)
    assert "profile.concurrency_p99" not in step3.inputs  # step 1 modelled 55 at 20 ms per output token
    value = step3.inputs["step5.in_flight_at_capacity"]
    # the engine's own running gauge over the probes that passed near the capacity (not the trial at 6.80 req/s
    # that fell behind: 62 running), the same whichever step asks first
    cfg = load_config(RUN / "config.yaml")
    results = settle_estimates(RunFolder(RUN).engine_results(), cfg)
    held = max((in_flight(r) for r in results), key=lambda h: h.total)
    assert held.label == "vLLM 0.26.0" and held.source == "engine metrics"
    standing = standing_points(next(r for r in results if r.label == held.label))
    assert all(p.phase == "search" for p in standing)
    assert value == round(sum(p.server.running_mean for p in standing) / len(standing)) == round(held.total) == 34
    assert step3.condition != "high_concurrency"  # 34 in flight: below decision.high_concurrency (50)


def test_every_departure_from_the_seed_is_declared_with_its_section():
    d, _ = _decide()
    topics = {x.topic: x for x in d.departures}
    bands = topics["concurrency bands"]
    assert "< 20" in bands.seed and "20-50" in bands.seed and "below decision.high_concurrency (50)" in bands.report
    assert "34 running" in topics["the concurrency the tree reads"].report
    weight = topics["measured cost and SLA in the score"].report
    assert "cost (30%)" in weight and "SLA share (20%)" in weight and "50% of the weight" in weight
    assert "≥ 0.3" in topics["heavy prefix reuse"].report and "no number" in topics["heavy prefix reuse"].seed
    assert not [w for w in d.warnings if "frequent model updates" in w]  # 34 in flight is not high concurrency
    cfg = load_config(RUN / "config.yaml")
    cfg = cfg.model_copy(update={"decision": cfg.decision.model_copy(update={"high_concurrency": 30})})
    f = RunFolder(RUN)
    high = decide(f.engine_results(), cfg, f.load(Profile), f.load(CostAnalysis), f.load(QualityGate))
    edge = next(w for w in high.warnings if "frequent model updates" in w and "concurrency" in w)
    assert "seed 003 §3.5" in edge and "§6.3" not in edge and "concurrency 34" in edge


def test_an_input_that_decides_on_its_threshold_is_flagged():
    d, _ = _decide()
    assert d.tree_end_step == 2
    flag = next(x for x in d.departures if x.borderline)
    assert "updates_per_month is 1, on the threshold" in flag.report
    assert any(w.startswith("Borderline: cadence.updates_per_month is 1") for w in d.warnings)
    clear, _ = _decide(updates_per_month=4)
    assert not any(x.borderline for x in clear.departures)


def test_step_7_shows_the_departures_table(monkeypatch):
    shown: list[str] = []
    monkeypatch.setattr(notebook, "_display", lambda obj: shown.append(getattr(obj, "data", "")))
    d, cfg = _decide()
    view.show(notebook.Context(cfg=cfg, run_dir=RUN, config_path=RUN / "config.yaml"), d)
    html = "\n".join(shown)
    assert "Where this report departs from the seed" in html and "20-50 is left to judgement" in html


@pytest.mark.parametrize("band", [30])
def test_a_concurrency_between_the_seeds_bands_is_said_to_be_counted_as_low(band):
    from helpers.decision.departures import departures
    from helpers.decision.tree import WEIGHTS

    _, cfg = _decide()
    rows = departures(cfg, [], WEIGHTS, (float(band), "profile.concurrency_p99", "step 1"), None)
    assert "leaves to judgement and is counted as low" in rows[0].report
