"""Shared data of the rollout tests: recorded engine results, a config and a decision per engine."""

from __future__ import annotations

from pathlib import Path

from decision_data import decide_measured as decide
from decision_data import with_fixed_trials

from helpers.core.config import PlaybookConfig, parse_config
from helpers.decision.tree import DecisionResult
from helpers.run.records import EngineResult

TESTS = Path(__file__).resolve().parents[1]
DECISION_FIXTURES = TESTS / "fixtures" / "decision"
METRIC_PAGES = TESTS / "fixtures" / "metrics"

# label → (engine, fixture file the result is read from)
CONFIGS = {
    "vllm-h200": ("vllm", "vllm.json"),
    "sglang-h200": ("sglang", "sglang.json"),
    "trtllm-h200": ("trtllm", "trtllm_synthetic.json"),
    "vllm-cpu-tiny": ("vllm-cpu", "vllm.json"),
}
LABEL_OF = {engine: label for label, (engine, _) in CONFIGS.items()}
TUNED = {"vllm-cpu-tiny": {"max_num_seqs": 4}, "sglang-h200": {"max_num_seqs": 48}}


def results() -> list[EngineResult]:
    """One recorded result per configuration, relabelled; two of them carry tuned knobs.

    Each has synthetic fixed-load trials built from its recorded sweep point (``decision_data.with_fixed_trials``):
    a grid point alone never stands for a configuration, and the rollout baseline is what stands for it.
    """
    out = []
    for label, (engine, file) in CONFIGS.items():
        r = with_fixed_trials(EngineResult.model_validate_json((DECISION_FIXTURES / file).read_text()))
        r = r.model_copy(update={"label": label, "engine": engine, "tuned_knobs": TUNED.get(label)})
        for p in r.points:
            p.label, p.engine = label, engine
        out.append(r)
    return out


def config(env: dict[str, str] | None = None, **sections) -> PlaybookConfig:
    """A valid config over the four configurations (vLLM with tensor parallel 2 and a memory fraction)."""
    engines = []
    for label, (engine, _) in CONFIGS.items():
        e = {"label": label, "engine": engine, "launcher": {"python": "python3", "env": env or {}}}
        if engine == "vllm":
            e["knobs"] = {"tensor_parallel": 2, "memory_fraction": 0.92, "max_model_len": 8192}
        if engine == "trtllm":
            e["knobs"] = {"kv_cache_dtype": "fp8", "prefix_caching": True}
        engines.append(e)
    data = {
        "name": "rollout-test",
        "model": {"path": "llama-3.3-70b-fp8", "served_name": "llama-70b"},
        "engines": engines,
        "cost": {"gpu": "H200-SXM-141GB"},
        **sections,
    }
    return parse_config(data, "test")


def decision_for(engine: str, cfg: PlaybookConfig, res: list[EngineResult]) -> DecisionResult:
    """A real decision over the results, with its primary set to ``engine``'s configuration."""
    d = decide(res, cfg)
    primary = LABEL_OF[engine]
    backup = next(label for label in CONFIGS if label != primary)
    return d.model_copy(update={"primary": primary, "primary_family": engine.split("-")[0], "backup": backup})
