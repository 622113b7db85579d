"""Shared test data for the cost, decision and risk tests: the recorded H200 fixtures and configs.

The fixtures hold grid (sweep) points only, as the H200 probes recorded them. A grid point never stands
for a configuration (``helpers.benchmark.sla.representative``), so ``results()`` gives each measured
result synthetic fixed-load trials derived from its recorded figures (``with_fixed_trials``);
``recorded()`` gives the fixtures exactly as measured.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

from helpers.benchmark.quality_phase import QualityGate
from helpers.benchmark.sla import meets_sla
from helpers.core.config import SLA, PlaybookConfig, parse_config
from helpers.cost.analysis import analyse
from helpers.cost.records import CostAnalysis
from helpers.decision.compute import decide
from helpers.decision.tree import DecisionResult
from helpers.run.records import CapacitySummary, EngineResult

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "decision"
VLLM, SGLANG, TRT, TRT_FAILED = (
    "vllm-h200-70b-fp8",
    "sglang-h200-70b-fp8",
    "trtllm-synthetic-fixture",
    "trtllm-failed",
)
FILES = {
    VLLM: "vllm.json",
    SGLANG: "sglang.json",
    TRT: "trtllm_synthetic.json",
    TRT_FAILED: "trtllm_failed.json",
}
ENGINE_OF = {VLLM: "vllm", SGLANG: "sglang", TRT: "trtllm", TRT_FAILED: "trtllm"}


TRIAL_SPREAD = (0.99, 1.00, 1.01)
"""Factors on the recorded throughputs of the synthetic trials: a mean equal to the recorded figure, ±2.5% CI."""


def recorded(*labels: str) -> list[EngineResult]:
    """The recorded results of ``labels`` (all four when none are given), grid points only, as measured."""
    return [EngineResult.model_validate_json((FIXTURES / FILES[x]).read_text()) for x in labels or FILES]


def trial_level(result: EngineResult, sla: SLA | None = None) -> int | None:
    """The synthetic trials' concurrency: the highest-throughput sweep point within ``sla``, else the lowest level."""
    sweep = [p for p in result.points if p.phase == "sweep" and p.requests > 0]
    if not sweep:
        return None
    ok = [p for p in sweep if meets_sla(p, sla or SLA())]
    return max(ok, key=lambda p: p.output_tok_s).concurrency if ok else min(p.concurrency for p in sweep)


def with_fixed_trials(result: EngineResult, sla: SLA | None = None) -> EngineResult:
    """A copy of ``result`` with fixed-load trials, as a run with ``evidence.search.enabled: false`` records them.

    SYNTHETIC evidence derived from recorded figures, not measured: the trials are copies of the recorded
    sweep point at ``trial_level`` (``phase="trial"``, ``trial=i``, its requests) whose throughputs are
    multiplied by ``TRIAL_SPREAD`` (latencies as recorded), so their mean is the recorded figure with a
    small 95% interval. A result without sweep points (failed) is returned unchanged.
    """
    r = copy.deepcopy(result)
    c = trial_level(r, sla)
    if c is None:
        return r
    base = next(p for p in r.points if p.phase == "sweep" and p.concurrency == c)
    for i, f in enumerate(TRIAL_SPREAD):
        t = base.model_copy(deep=True, update={"phase": "trial", "trial": i})
        t.output_tok_s, t.total_tok_s, t.req_s = base.output_tok_s * f, base.total_tok_s * f, base.req_s * f
        r.points.append(t)
    r.capacity = CapacitySummary(
        axis="concurrency",
        searched=False,
        trial_load=float(c),
        tolerance=0.05,
        note="test: fixed-load trials built from the recorded grid point",
        trials_note=f"{len(TRIAL_SPREAD)} trial(s) at {c} streams (synthetic, from the recorded sweep point)",
    )
    return r


def results(*labels: str) -> list[EngineResult]:
    """The recorded results of ``labels`` (all four when none are given), each with synthetic fixed-load trials."""
    return [with_fixed_trials(r) for r in recorded(*labels)]


def scaled(result: EngineResult, factor: float, label: str | None = None) -> EngineResult:
    """A copy of ``result`` whose throughputs (every point, trials included) are multiplied by ``factor``.

    Optionally relabelled.
    """
    r = copy.deepcopy(result)
    if label:
        r.label = label
    for p in r.points:
        p.output_tok_s *= factor
        p.total_tok_s *= factor
        if label:
            p.label = label
    return r


def cfg(engines: list[str] | None = None, **sections) -> PlaybookConfig:
    """A valid config over ``engines`` (labels; default: all four) with section overrides."""
    labels = engines or list(FILES)
    data = {
        "name": "decision-test",
        "model": {"path": "llama-3.3-70b-fp8"},
        "engines": [
            {"label": x, "engine": ENGINE_OF.get(x, x.split("-")[0]), "launcher": {"python": "python3"}} for x in labels
        ],
        "cost": {"gpu": "H200-SXM-141GB"},
    }
    for k, v in sections.items():
        data[k] = v
    return parse_config(data, "test")


_IDENT = re.compile(r"`[^`]*`")
_NUM = re.compile(r"(?<![\w.\-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w\-])")


def numbers_in(text: str) -> list[float]:
    """Numbers written in ``text`` (identifiers in backticks are skipped)."""
    text = _IDENT.sub(" ", text)
    return [float((m.group(1) + (m.group(2) or "")).replace(",", "")) for m in _NUM.finditer(text)]


def lmdeploy_random_cfg(label: str = "LMDeploy 0.18.0 (PyTorch)", **sections) -> PlaybookConfig:
    """A config of one LMDeploy configuration on random weights (its PyTorch backend), as the H200 run had."""
    engine = {
        "label": label,
        "engine": "lmdeploy",
        "launcher": {"kind": "python", "python": "python3"},
        "engine_options": {"backend": "pytorch", "weights": "random"},
        "knobs": {"dummy_weights": False},
    }
    return parse_config({"name": "t", "model": {"path": "tiny-llama"}, "engines": [engine], **sections})


def decide_measured(
    res: list[EngineResult],
    c: PlaybookConfig,
    profile=None,
    cost: CostAnalysis | None = None,
    quality: QualityGate | None = None,
) -> DecisionResult:
    """Step 7's decision on step 6's record, which is made here first as the notebook's step 6 saves it."""
    return decide(res, c, profile, cost if cost is not None else analyse(res, c, profile), quality)
