"""The adapters' KV-capacity patterns against the log lines the pinned engines really print.

vLLM 0.26 (vllm/v1/core/kv_cache_utils.py): ``logger.info_once("GPU KV cache size: %s tokens",
f"{num_tokens:,}")`` — thousands separated by commas. SGLang 0.5.x (scheduler):
``max_total_num_tokens={n}, chunked_prefill_size=...`` — a bare integer. TensorRT-LLM
(kvCacheManager.cpp): ``[MemUsageChange] Allocated %0.2f GiB for max tokens in paged KV cache (%d).``
"""

from helpers.engines import get_engine

VLLM_LOG = """\
(APIServer pid=2101) INFO 11-29 14:01:02 [api_server.py:1843] vLLM API server version 0.26.0
(EngineCore_DP0 pid=2188) INFO 11-29 14:02:40 [gpu_worker.py:391] Available KV cache memory: 58.39 GiB
(EngineCore_DP0 pid=2188) INFO 11-29 14:02:41 [kv_cache_utils.py:1087] GPU KV cache size: 191,328 tokens
(EngineCore_DP0 pid=2188) INFO 11-29 14:02:41 [kv_cache_utils.py:1091] Maximum concurrency for 4,096 tokens \
per request: 46.71x
"""

SGLANG_LOG = """\
[2026-11-29 15:10:01] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=70.12 GB
[2026-11-29 15:10:02] KV Cache is allocated. #tokens: 190000, K size: 29.00 GB, V size: 29.00 GB
[2026-11-29 15:10:40] max_total_num_tokens=190000, chunked_prefill_size=8192, max_prefill_tokens=16384, \
max_running_requests=4096, context_len=4096, available_gpu_mem=8.31 GB
"""

TRTLLM_LOG = """\
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 58.39 GiB for max tokens in paged KV cache (191328).
"""


def test_vllm_reads_comma_separated_tokens():
    assert get_engine("vllm").kv_capacity_from_log(VLLM_LOG) == 191_328


def test_vllm_takes_the_last_line_when_the_engine_restarted():
    text = VLLM_LOG.replace("191,328", "919,824") + VLLM_LOG
    assert get_engine("vllm").kv_capacity_from_log(text) == 191_328


def test_vllm_small_and_large_numbers():
    vllm = get_engine("vllm")
    assert vllm.kv_capacity_from_log("INFO GPU KV cache size: 912 tokens") == 912
    assert vllm.kv_capacity_from_log("INFO GPU KV cache size: 1,234,567 tokens") == 1_234_567


def test_vllm_cpu_build_uses_the_same_line():
    assert get_engine("vllm-cpu").kv_capacity_from_log(VLLM_LOG) == 191_328


def test_no_line_gives_none():
    for name in ("vllm", "sglang"):
        assert get_engine(name).kv_capacity_from_log("nothing here\n") is None


def test_sglang_reads_max_total_num_tokens():
    assert get_engine("sglang").kv_capacity_from_log(SGLANG_LOG) == 190_000


def test_trtllm_reads_paged_kv_cache_tokens():
    assert get_engine("trtllm").kv_capacity_from_log(TRTLLM_LOG) == 191_328
