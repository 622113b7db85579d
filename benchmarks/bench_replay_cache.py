"""Experiment: a Mooncake-format trace replayed on the CPU vLLM engine, its prefix-cache hit rate against the model.

Generates a Mooncake JSONL trace (512-token hash blocks: a few Zipf-popular system prompts,
conversations that grow a block a turn, turns interleaved), reads it with the playbook's
reader, writes it as a block replay (``helpers.workload.structured``, run by ``replay_run``), starts vLLM's CPU build on
the tiny model with dummy weights and a KV cache far smaller than the trace's distinct blocks
(``--kv-cache-memory-bytes``: ``VLLM_CPU_KVCACHE_SPACE`` counts whole GiB, a million tokens of this
model), replays the trace one request at a time with guidellm, and prints:

- predicted unbounded: the share of prompt tokens an unbounded prefix cache would serve;
- predicted finite: ``simulate_prefix_cache`` at the engine's block size (128 on CPU) and the KV
  capacity in tokens the engine logged;
- achieved: Δ``vllm:prefix_cache_hits_total`` / Δ``vllm:prefix_cache_queries_total`` over the replay
  (and, beside it, the same from the per-request ``cached_tokens``).

Run it alone, the engine under the shared lock: ``flock /tmp/pb-engine.lock .venv/bin/python
benchmarks/bench_replay_cache.py [REQUESTS] [KV_BYTES]``. It takes a few minutes on two cores.

Measured on the 2-core development machine (vllm-cpu 0.32.0, 240 requests, 12 MiB = 12,288 tokens of
KV cache, 96 blocks of 128): predicted unbounded 0.662, predicted finite 0.482, achieved 0.477 (the
per-request ``cached_tokens`` agree: 0.477); TTFT p50 456 ms with a hit, 805 ms without.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from helpers.core.paths import MODELS_DIR, REPO_ROOT
from helpers.engines import get_engine
from helpers.launchers.server import free_port, start_process
from helpers.measure.metrics import parse_page
from helpers.workload.cache_sim import simulate_prefix_cache
from helpers.workload.replay_run import run_structured_replay
from helpers.workload.structured import write_block_dataset
from helpers.workload.traces import load_trace

ENGINE_PYTHON = REPO_ROOT / ".engines" / "vllm-cpu" / "bin" / "python"
MODEL = MODELS_DIR / "tiny-llama"
ENGINE_BLOCK = 128  # vLLM's CPU block size
HITS, QUERIES = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"


def write_trace(path: Path, n: int, seed: int = 0) -> None:
    """``n`` Mooncake rows: 6 system prompts (Zipf), 12 conversations at once growing a block a turn, interleaved.

    System prompts are 1-2 blocks, a conversation ends at 7 blocks, and turns of the open
    conversations come in random order, so a conversation's history ages in the cache.
    """
    rng = np.random.default_rng(seed)
    sys_blocks = rng.integers(1, 3, 6)
    rows: list[dict] = []
    live: list[dict] = []
    next_id, t = 1000, 0.0
    while len(rows) < n:
        if not live or (len(live) < 12 and rng.random() < 0.3):
            s = int(min(rng.zipf(1.5) - 1, len(sys_blocks) - 1))
            ids = [s * 10 + j for j in range(sys_blocks[s])]
            live.append({"ids": ids, "turns": 7 - len(ids)})
        conv = live[int(rng.integers(len(live)))]
        conv["ids"] = conv["ids"] + [next_id]
        next_id += 1
        n_in = len(conv["ids"]) * 512 - int(rng.integers(0, 400))
        rows.append({"timestamp": round(t * 1000), "input_length": n_in, "output_length": 8, "hash_ids": conv["ids"]})
        t += float(rng.exponential(0.5))
        conv["turns"] -= 1
        if conv["turns"] == 0:
            live.remove(conv)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def counters(url: str) -> tuple[float, float]:
    """The engine's prefix-cache hit and query counters (tokens)."""
    page = parse_page(httpx.get(url + "/metrics", timeout=10).text)
    return page.get(HITS, 0.0), page.get(QUERIES, 0.0)


def main(n: int = 240, kv_bytes: int = 12 << 20) -> dict[str, float]:
    """Run the experiment; print and return the three hit rates."""
    work = Path(tempfile.mkdtemp(prefix="bench-replay-cache-"))
    src = work / "trace.jsonl"
    write_trace(src, n)
    trace = load_trace(src, "mooncake")
    ds = write_block_dataset(trace, work / "blocks.jsonl")
    longest = int(trace.requests["input_tokens"].max())
    print(f"trace: {len(trace)} requests, {trace.block_hashes.size} hash blocks, longest prompt {longest} tokens")
    adapter = get_engine("vllm-cpu")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [str(ENGINE_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL)]
    cmd += ["--served-model-name", "tiny-llama", "--load-format", "dummy", "--port", str(port)]
    cmd += ["--max-model-len", "4096", "--enable-prefix-caching", "--enable-prompt-tokens-details"]
    cmd += ["--kv-cache-memory-bytes", str(kv_bytes), "--block-size", str(ENGINE_BLOCK), "--max-num-seqs", "4"]
    os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override --kv-cache-memory-bytes (whole GiB)
    env = {"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}
    handle = start_process(cmd, env, work / "engine.log", url, adapter)
    try:
        t = time.monotonic()
        handle.wait_healthy(600)
        capacity = adapter.kv_capacity_from_log(handle.log_tail(100000))
        print(f"engine healthy after {time.monotonic() - t:.0f} s; KV capacity {capacity} tokens")
        if capacity is None:
            raise SystemExit("the engine did not log its KV capacity:\n" + handle.log_tail(30))
        h0, q0 = counters(url)
        t = time.monotonic()
        res = asyncio.run(run_structured_replay(url, "tiny-llama", MODEL, ds, concurrency=1, max_seconds=1500))
        h1, q1 = counters(url)
        print(f"replayed {res.load.requests} requests ({res.load.errors} errors) in {time.monotonic() - t:.0f} s")
    finally:
        handle.stop(grace_s=10)
    sim = simulate_prefix_cache(ds.trace, capacity, ENGINE_BLOCK).summary
    out = {
        "predicted_unbounded": sim.unbounded_hit_rate,
        "predicted_finite": sim.hit_rate,
        "achieved": (h1 - h0) / (q1 - q0) if q1 > q0 else float("nan"),
        "achieved_from_usage": res.cache.hit_rate if res.cache.hit_rate is not None else float("nan"),
    }
    print(
        f"predicted unbounded {out['predicted_unbounded']:.3f}, predicted finite {out['predicted_finite']:.3f} "
        f"({sim.capacity_blocks} blocks of {ENGINE_BLOCK}, {sim.evicted_blocks} evicted), "
        f"achieved {out['achieved']:.3f} (per-request cached_tokens: {out['achieved_from_usage']:.3f})"
    )
    print(f"TTFT p50 hit {res.cache.ttft_hit_ms_p50} ms, miss {res.cache.ttft_miss_ms_p50} ms; files in {work}")
    return out


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    main(*args)
