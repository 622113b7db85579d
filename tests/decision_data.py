"""Shared test data for the cost, decision and risk tests: the recorded H200 fixtures and configs."""

from __future__ import annotations

import copy
import re
from pathlib import Path

from helpers.core.config import PlaybookConfig, parse_config
from helpers.run.records import EngineResult

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


def results(*labels: str) -> list[EngineResult]:
    """The recorded results of ``labels`` (all four when none are given)."""
    return [EngineResult.model_validate_json((FIXTURES / FILES[x]).read_text()) for x in labels or FILES]


def scaled(result: EngineResult, factor: float, label: str | None = None) -> EngineResult:
    """A copy of ``result`` whose throughputs are multiplied by ``factor`` (optionally relabelled)."""
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
