"""What the load generator asks of the engine: streamed completions with usage in the last chunk only.

guidellm asks for ``continuous_usage_stats`` by default, which makes an engine serialise a usage
block into every streamed token; real clients rarely do, and the playbook only reads the final
usage. The fake engine counts what each streamed request asked for.
"""

import asyncio

import httpx
from fakes.fake_process import fake_server

from helpers.core.paths import MODELS_DIR
from helpers.measure.loadgen import run_point
from helpers.measure.metrics import parse_page
from helpers.measure.prompts import fixed_shapes, write_dataset


def test_requests_ask_for_final_usage_but_not_per_chunk_usage(tmp_path):
    model_dir = MODELS_DIR / "tiny-llama"
    dataset = write_dataset(fixed_shapes(6, 16, 4), model_dir, tmp_path / "prompts.jsonl", seed=1)
    with fake_server(tmp_path) as url:
        r = asyncio.run(run_point(url, "tiny-llama", model_dir, dataset, concurrency=2, max_requests=6, max_seconds=60))
        page = parse_page(httpx.get(url + "/metrics", timeout=5).text)
    assert r.requests == 6 and r.errors == 0
    assert r.output_tokens_mean == 4  # counted from the final usage chunk
    assert page["fake:streamed_requests_total"] >= 6
    assert page["fake:include_usage_requests_total"] == page["fake:streamed_requests_total"]
    assert page["fake:continuous_usage_requests_total"] == 0


class _Dump:
    """A guidellm benchmark as ``summarize`` reads it (``model_dump``), from a real one's dump."""

    def __init__(self, data):
        self.data = data

    def model_dump(self, mode="json"):
        return self.data


def test_a_request_outside_guidellms_window_still_counts(tmp_path, monkeypatch):
    """guidellm's totals are windowed; a request it lists as done counts (likely cause of a static side's 11 of 12)."""
    import copy

    import helpers.measure.loadgen as loadgen

    dumps = []
    real = loadgen.summarize
    monkeypatch.setattr(loadgen, "summarize", lambda bench: dumps.append(bench.model_dump(mode="json")) or real(bench))
    model_dir = MODELS_DIR / "tiny-llama"
    shapes = [*fixed_shapes(2, 16, 4), *fixed_shapes(2, 16, 12)]
    dataset = write_dataset(shapes, model_dir, tmp_path / "prompts.jsonl", seed=1)
    with fake_server(tmp_path) as url:
        r = asyncio.run(run_point(url, "tiny-llama", model_dir, dataset, concurrency=4, max_requests=4, max_seconds=60))
    assert r.requests == 4 and r.output_tokens_mean == 8
    # the same benchmark with its totals windowed as a busy client can leave them: one finished request left out
    lost = copy.deepcopy(dumps[-1])
    lost["metrics"]["request_totals"]["successful"] = 3
    for name in ("output_token_count", "prompt_token_count"):
        lost["metrics"][name]["successful"]["mean"] = 999.0
    again = real(_Dump(lost))
    assert again.requests == 4
    assert again.output_tokens_mean == 8 and again.input_tokens_mean == r.input_tokens_mean
    # with the totals intact nothing is recounted
    assert real(_Dump(dumps[-1])).output_tokens_mean == r.output_tokens_mean
