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
