"""The workload profile: Azure numbers against pandas, prefix reuse against hand counts, plots, config."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from helpers.core.config import parse_config
from helpers.core.paths import MODELS_DIR
from helpers.workload.plots import plot_concurrency, plot_lengths, plot_prefix_reuse
from helpers.workload.profile import Profile, profile_command, profile_from_config, profile_trace, token_stats
from helpers.workload.traces import finish_trace, load_trace
from helpers.workload.traces.synthetic import synthetic_trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
AZURE = Path("/work/shared/data/azure-llm-inference-trace-2023-conv.csv")
needs_azure = pytest.mark.skipif(not AZURE.is_file(), reason="shared Azure trace not present")


@pytest.fixture(scope="module")
def azure() -> Profile:
    return profile_trace(load_trace(AZURE), per_token_ms=20, prefill_ms_per_1k=50)


@needs_azure
def test_azure_lengths_match_pandas(azure):
    ref = pd.read_csv(AZURE)
    assert azure.requests == len(ref) == 19366
    assert azure.input_tokens.p50 == 1020 == ref["ContextTokens"].median()
    assert azure.output_tokens.p50 == 129 == ref["GeneratedTokens"].median()
    for stats, col in ((azure.input_tokens, "ContextTokens"), (azure.output_tokens, "GeneratedTokens")):
        assert stats.mean == pytest.approx(ref[col].mean())
        assert stats.p95 == pytest.approx(ref[col].quantile(0.95))
        assert stats.p99 == pytest.approx(ref[col].quantile(0.99))
        assert stats.max == ref[col].max() and stats.min == ref[col].min()
        assert sum(stats.histogram_counts) == len(ref)
    assert azure.output_tokens_mean == pytest.approx(ref["GeneratedTokens"].mean())


@needs_azure
def test_azure_rates_and_estimated_concurrency(azure):
    ref = pd.read_csv(AZURE)
    ts = pd.to_datetime(ref["TIMESTAMP"])
    span = (ts.max() - ts.min()).total_seconds()
    assert azure.duration_s == pytest.approx(span, abs=1e-3)
    assert azure.mean_requests_per_s == pytest.approx(len(ref) / span)
    per_min = ((ts - ts.min()).dt.total_seconds() // 60).value_counts().max()
    assert azure.peak_window_s == 60 and azure.peak_requests_per_s == pytest.approx(per_min / 60)
    assert azure.concurrency_method == "estimated"
    assert "20 ms per output token" in azure.concurrency_model
    # Little's law: mean in flight = total busy time / horizon.
    dur = 0.05 * ref["ContextTokens"] / 1000 + 0.02 * ref["GeneratedTokens"]
    end = (ts - ts.min()).dt.total_seconds() + dur
    assert azure.concurrency_mean == pytest.approx(dur.sum() / end.max(), rel=1e-6)
    assert azure.concurrency_p50 <= azure.concurrency_p95 <= azure.concurrency_p99 <= azure.concurrency_max


@needs_azure
def test_azure_prefix_reuse_unknown_with_reason(azure):
    assert azure.prefix_reuse_ratio is None and azure.prefix_reuse is None
    assert "no prompt content" in azure.prefix_reuse_reason
    assert azure.timeline.prefix_reuse_ratio is None


@needs_azure
def test_profile_command_is_json_ready():
    import json

    d = profile_command(str(AZURE), None, None)
    assert json.loads(json.dumps(d))["input_tokens"]["p50"] == 1020
    assert Profile.model_validate(d).requests == 19366


def test_mooncake_prefix_reuse_by_hand():
    p = profile_trace(load_trace(FIX / "mooncake_small.jsonl"))
    # Full blocks only. Hits: r1 [1,2] 1024; r2 [1,2,3] 1536; r3 chain (7,2) new; r4 [1,2,3,5] 2048;
    # r5 [1,2] 1024. The chain 1-2 branches (to 3 and 8): those blocks are the shared prefix.
    r = p.prefix_reuse
    assert r.prompt_tokens == 10004
    assert r.reusable_tokens == 5632
    assert p.prefix_reuse_ratio == pytest.approx(5632 / 10004)
    assert r.system_prompt_tokens == 4 * 1024
    assert r.multi_turn_tokens == 512 + 1024
    assert r.attribution == "structure" and r.block_size == 512
    assert r.requests_with_reuse == pytest.approx(4 / 6)


def test_openai_log_system_vs_history():
    p = profile_trace(load_trace(FIX / "openai_chat.jsonl", model_dir=MODELS_DIR / "tiny-llama", block_size=4))
    r = p.prefix_reuse
    assert (r.prompt_tokens, r.reusable_tokens, r.system_prompt_tokens, r.multi_turn_tokens) == (
        44,
        20,
        16,
        4,
    )
    assert r.attribution == "marked"
    assert p.concurrency_method == "measured" and p.concurrency_model is None
    assert p.concurrency_max == 2


def test_synthetic_system_prompt_reported_as_system_reuse():
    n = 200
    p = profile_trace(synthetic_trace(n, 2128, 64, shared_prefix_tokens=2000, block_size=16))
    r = p.prefix_reuse
    assert r.system_prompt_tokens == (n - 1) * 2000
    assert r.multi_turn_tokens == 0
    assert p.prefix_reuse_ratio == pytest.approx((n - 1) * 2000 / (n * 2128))


def test_measured_concurrency_from_start_and_end():
    frame = pd.DataFrame(
        {
            "start_s": [0.0, 0.0, 5.0],
            "end_s": [10.0, 5.0, 10.0],
            "input_tokens": [1, 1, 1],
            "output_tokens": [1, 1, 1],
        }
    )
    p = profile_trace(finish_trace("x", "test", frame))
    # Two in flight for the whole 10 s (0-5: A,B; 5-10: A,C); the instant at 5 s holds no time.
    assert p.concurrency_method == "measured"
    assert (p.concurrency_p50, p.concurrency_p99, p.concurrency_max) == (2, 2, 2)
    assert p.concurrency_mean == pytest.approx(2.0)


def test_token_stats_quantiles_are_percentiles():
    s = token_stats(np.arange(1, 101))
    assert len(s.quantiles) == 101 and s.quantiles[0] == 1 and s.quantiles[-1] == 100
    assert s.p50 == pytest.approx(50.5)


def test_profile_is_strict_and_round_trips():
    p = profile_trace(load_trace(FIX / "mooncake_small.jsonl"))
    d = p.model_dump(mode="json")
    assert Profile.model_validate(d) == p
    d["typo"] = 1
    with pytest.raises(ValueError, match="typo"):
        Profile.model_validate(d)


def _config(workload):
    return parse_config(
        {
            "name": "t",
            "model": {"path": "tiny-llama"},
            "engines": [
                {
                    "label": "a",
                    "engine": "endpoint",
                    "launcher": {"kind": "endpoint", "url": "http://localhost:1"},
                }
            ],
            "workload": workload,
        }
    )


def test_profile_from_config_synthetic():
    cfg = _config({"input_tokens": 2128, "output_tokens": 32, "shared_prefix_tokens": 2000, "mean_requests_per_s": 5})
    p = profile_from_config(cfg)
    assert p.format == "synthetic" and p.input_tokens.p50 == 2128
    assert p.prefix_reuse.system_prompt_ratio > 0.9
    assert p.mean_requests_per_s == pytest.approx(5, rel=0.15)


def test_profile_from_config_trace_relative_to_repo():
    cfg = _config({"source": {"kind": "trace", "path": "tests/fixtures/traces/mooncake_small.jsonl"}})
    assert profile_from_config(cfg).requests == 6


def test_plots_return_figures():
    p = profile_trace(load_trace(FIX / "mooncake_small.jsonl"))
    unknown = profile_trace(load_trace(FIX / "azure_small.csv"))
    for fig in (plot_lengths(p), plot_concurrency(p), plot_prefix_reuse(p), plot_prefix_reuse(unknown)):
        assert isinstance(fig, Figure) and fig.axes
    assert "unknown" in plot_prefix_reuse(unknown).axes[0].texts[0].get_text()
