"""The exact command line and environment each engine adapter builds from a config (python launcher).

Flag names were checked against the pinned versions' own sources: vLLM 0.26.0
(``vllm/engine/arg_utils.py`` of the wheel: ``--max-num-seqs``, ``--max-num-batched-tokens``,
``--[no-]enable-prefix-caching`` (``bool | None`` → BooleanOptionalAction), ``--kv-cache-dtype``
(``CacheDType`` has ``fp8``), ``--quantization``, ``--tensor-parallel-size``,
``--gpu-memory-utilization``, ``--load-format`` (``dummy``), ``--max-model-len``), SGLang 0.5.16
(``sglang/srt/server_args.py``: fields ``max_running_requests``, ``chunked_prefill_size``,
``disable_radix_cache``, ``kv_cache_dtype`` with choice ``fp8_e4m3``, ``tp_size``,
``mem_fraction_static``, ``load_format``, ``context_length``, ``enable_metrics``,
``enable_cache_report``) and TensorRT-LLM (``tensorrt_llm/commands/serve.py``: ``serve MODEL``,
``--backend``, ``--max_batch_size``, ``--max_num_tokens``, ``--tp_size``,
``--kv_cache_free_gpu_memory_fraction``, ``--max_seq_len``, ``--extra_llm_api_options``).
"""

import sys
from pathlib import Path

import pytest
import yaml

from helpers.core.errors import ConfigError
from helpers.core.paths import MODELS_DIR, REPO_ROOT
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.config_check import parse_config

MODEL_DIR = str(MODELS_DIR / "tiny-llama")
PORT = 8123


def config(engine: str, knobs: dict | None = None, **fields):
    """A one-engine config on the tiny-llama model folder, launched by the python launcher."""
    launcher = {"kind": "python", "python": f".engines/{engine}/bin/python"}
    spec = {"label": f"{engine}-a", "engine": engine, "launcher": launcher}
    spec.update(fields)
    if knobs is not None:
        spec["knobs"] = knobs
    return parse_config({"name": "t", "model": {"path": "tiny-llama"}, "engines": [spec]})


def build(cfg, run_dir: Path):
    spec = cfg.engines[0]
    return LAUNCHERS[spec.launcher.kind].build(get_engine(spec.engine), spec, cfg.model, PORT, run_dir)


def test_vllm_defaults(tmp_path):
    cmd, env = build(config("vllm"), tmp_path)
    assert cmd == [
        str(REPO_ROOT / ".engines/vllm/bin/python"),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        MODEL_DIR,
        "--served-model-name",
        "tiny-llama",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--load-format",
        "dummy",
    ]
    assert env == {"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


ALL_KNOBS = {
    "max_num_seqs": 64,
    "max_batched_tokens": 8192,
    "prefix_caching": False,
    "kv_cache_dtype": "fp8",
    "quantization": "fp8",
    "tensor_parallel": 2,
    "memory_fraction": 0.9,
    "dummy_weights": False,
    "max_model_len": 4096,
}


def test_vllm_every_knob_and_extra_args_last(tmp_path):
    cfg = config("vllm", ALL_KNOBS, extra_args=["--enforce-eager"])
    cfg.model.dtype = "bfloat16"
    cmd, _ = build(cfg, tmp_path)
    assert cmd[3:] == [
        "--model",
        MODEL_DIR,
        "--served-model-name",
        "tiny-llama",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--dtype",
        "bfloat16",
        "--max-num-seqs",
        "64",
        "--max-num-batched-tokens",
        "8192",
        "--no-enable-prefix-caching",
        "--kv-cache-dtype",
        "fp8",
        "--quantization",
        "fp8",
        "--tensor-parallel-size",
        "2",
        "--gpu-memory-utilization",
        "0.9",
        "--max-model-len",
        "4096",
        "--enforce-eager",
    ]


def test_vllm_prefix_caching_on_and_served_name(tmp_path):
    cfg = config("vllm", {"prefix_caching": True})
    cfg.model.served_name = "llama"
    cmd, _ = build(cfg, tmp_path)
    assert cmd[cmd.index("--served-model-name") + 1] == "llama"
    assert "--enable-prefix-caching" in cmd and "--no-enable-prefix-caching" not in cmd


def test_vllm_cpu_drops_the_gpu_memory_fraction_and_sizes_kv_by_env(tmp_path):
    cfg = config("vllm-cpu", {"memory_fraction": 0.5, "max_model_len": 1024})
    cfg.engines[0].launcher.env = {"VLLM_CPU_KVCACHE_SPACE": "4"}
    cmd, env = build(cfg, tmp_path)
    assert cmd[1:] == [
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        MODEL_DIR,
        "--served-model-name",
        "tiny-llama",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--load-format",
        "dummy",
        "--max-model-len",
        "1024",
    ]
    assert env == {
        "VLLM_NO_USAGE_STATS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "4",  # the launcher's env wins over the adapter's default of 1
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the model runs in the engine-core process (one start less)
    }


def test_sglang_defaults(tmp_path):
    cmd, env = build(config("sglang"), tmp_path)
    assert cmd == [
        str(REPO_ROOT / ".engines/sglang/bin/python"),
        "-m",
        "sglang.launch_server",
        "--model-path",
        MODEL_DIR,
        "--served-model-name",
        "tiny-llama",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--enable-metrics",
        "--enable-cache-report",
        "--load-format",
        "dummy",
    ]
    assert env == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_sglang_every_knob(tmp_path):
    cmd, _ = build(config("sglang", ALL_KNOBS), tmp_path)
    assert cmd[cmd.index("--enable-cache-report") + 1 :] == [
        "--max-running-requests",
        "64",
        "--chunked-prefill-size",
        "8192",
        "--disable-radix-cache",
        "--kv-cache-dtype",
        "fp8_e4m3",
        "--quantization",
        "fp8",
        "--tp-size",
        "2",
        "--mem-fraction-static",
        "0.9",
        "--context-length",
        "4096",
    ]


def test_sglang_prefix_caching_on_is_its_default(tmp_path):
    cmd, _ = build(config("sglang", {"prefix_caching": True}), tmp_path)
    assert "--disable-radix-cache" not in cmd


def read_options(cmd: list[str]) -> dict:
    return yaml.safe_load(Path(cmd[cmd.index("--extra_llm_api_options") + 1]).read_text())


def test_trtllm_defaults_pytorch_backend(tmp_path):
    cmd, env = build(config("trtllm"), tmp_path)
    options = tmp_path / "launch" / "trtllm-a-extra-options.yaml"
    assert cmd == [
        str(REPO_ROOT / ".engines/trtllm/bin/python"),
        "-m",
        "tensorrt_llm.commands.serve",
        "serve",
        MODEL_DIR,
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--backend",
        "pytorch",
        "--extra_llm_api_options",
        str(options),
    ]
    assert env == {}
    # return_perf_metrics mounts /prometheus/metrics; enable_iter_perf_stats feeds its iteration gauges
    assert read_options(cmd) == {"return_perf_metrics": True, "enable_iter_perf_stats": True, "load_format": "dummy"}


def test_trtllm_every_knob(tmp_path):
    cmd, _ = build(config("trtllm", ALL_KNOBS, extra_args=["--log_level", "info"]), tmp_path)
    i = cmd.index("--backend")
    assert cmd[i:] == [
        "--backend",
        "pytorch",
        "--max_batch_size",
        "64",
        "--max_num_tokens",
        "8192",
        "--tp_size",
        "2",
        "--kv_cache_free_gpu_memory_fraction",
        "0.9",
        "--max_seq_len",
        "4096",
        "--log_level",
        "info",
        "--extra_llm_api_options",
        str(tmp_path / "launch" / "trtllm-a-extra-options.yaml"),
    ]
    assert read_options(cmd) == {
        "return_perf_metrics": True,
        "enable_iter_perf_stats": True,
        "kv_cache_config": {"dtype": "fp8", "enable_block_reuse": False, "free_gpu_memory_fraction": 0.9},
    }


def test_trtllm_compiled_engine_path_from_extra_args(tmp_path):
    cmd, _ = build(config("trtllm", {"dummy_weights": False}, extra_args=["--backend", "tensorrt"]), tmp_path)
    assert cmd.count("--backend") == 1 and cmd[cmd.index("--backend") + 1] == "tensorrt"
    # TrtLlmArgs has neither load_format nor enable_iter_perf_stats; the engine is built at start
    assert read_options(cmd) == {"return_perf_metrics": True}


def test_trtllm_compiled_engine_alias_and_bad_backend():
    trt = get_engine("trtllm")
    assert trt.backend(config("trtllm", extra_args=["--backend", "trt"]).engines[0]) == "tensorrt"
    with pytest.raises(ValueError, match="unknown trtllm backend 'onnx'"):
        trt.backend(config("trtllm", extra_args=["--backend", "onnx"]).engines[0])


def test_trtllm_metrics_and_health_paths():
    trt = get_engine("trtllm")
    assert trt.metrics_path == "/prometheus/metrics" and trt.health_path == "/health"
    assert trt.metrics.hit_rate_gauge == "trtllm_kv_cache_hit_rate"


def test_pythonpath_and_launcher_env_reach_the_process_env(tmp_path):
    cfg = config("vllm")
    cfg.engines[0].launcher.pythonpath = ["site", "/opt/extra"]
    cfg.engines[0].launcher.env = {"HF_HUB_OFFLINE": "0", "CUDA_VISIBLE_DEVICES": "1"}
    _, env = build(cfg, tmp_path)
    assert env["PYTHONPATH"] == f"{REPO_ROOT / 'site'}:/opt/extra"
    assert env["HF_HUB_OFFLINE"] == "0" and env["CUDA_VISIBLE_DEVICES"] == "1"


def test_endpoint_engine_has_no_command():
    cfg = parse_config(
        {
            "name": "t",
            "model": {"path": "tiny-llama"},
            "engines": [{"label": "e", "engine": "endpoint", "launcher": {"kind": "endpoint", "url": "http://h:1"}}],
        }
    )
    spec = cfg.engines[0]
    assert LAUNCHERS["endpoint"].build(get_engine("endpoint"), spec, cfg.model, PORT, Path("/x")) == ([], {})
    assert get_engine("endpoint").server_args(spec, cfg.model, MODEL_DIR, "h", 1) == []


def test_an_engine_without_a_launcher_runs_from_the_current_environment(tmp_path):
    cfg = parse_config({"name": "t", "model": {"path": "tiny-llama"}, "engines": [{"label": "a", "engine": "vllm"}]})
    spec = cfg.engines[0]
    assert spec.launcher.kind == "python" and spec.launcher.python is None
    cmd, _ = build(cfg, tmp_path)
    assert cmd[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    # the playbook's own environment holds no engine: the real readiness probe says so, naming the interpreter
    state, version, detail = LAUNCHERS["python"].readiness(get_engine("vllm"), spec)
    assert (state, version) == ("missing", None) and detail == f"{sys.executable} cannot import the engine package"


def test_an_engine_with_no_server_module_needs_a_launcher():
    with pytest.raises(ConfigError, match="engine 'endpoint' has no server module to start with the python launcher"):
        parse_config({"name": "t", "model": {"path": "tiny-llama"}, "engines": [{"label": "a", "engine": "endpoint"}]})


@pytest.mark.parametrize(("given", "kept"), [("0.26.0", "0.26.0"), (1.2, "1.2"), (None, None)])
def test_the_expected_engine_version_is_text(given, kept):
    assert config("vllm", version=given).engines[0].version == kept


def test_unknown_engine_names_the_allowed_ones():
    allowed = "endpoint, lmdeploy, sglang, trtllm, vllm, vllm-cpu"
    with pytest.raises(ConfigError, match=f"unknown engine 'vllmm'; allowed: {allowed}"):
        config("vllmm")
