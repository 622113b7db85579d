"""The LMDeploy adapter: its command lines (both backends), refusals, KV capacity, fallback check and metrics.

Flags, metric names and log lines were read from LMDeploy's source (``main`` just after v0.16.0;
see ``helpers/engines/lmdeploy.py``): ``lmdeploy/cli/serve.py`` and ``cli/utils.py`` for the flags,
``lmdeploy/messages.py`` for ``QuantPolicy`` and the TurboMind FP8 assertion, ``metrics/loggers.py``
for the series, ``pytorch/engine/executor/base.py`` for the CacheEngine log line, ``archs.py`` for
the fallback warning (worded as LMDeploy 0.18.0 printed it on the H200).
"""

import json
import shutil
from pathlib import Path

import pytest
from decision_data import SGLANG, VLLM, cfg, recorded, scaled
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from helpers.benchmark.claims import claims_table
from helpers.core.errors import ConfigError, EngineError
from helpers.core.paths import MODELS_DIR, REPO_ROOT, WORKLOADS_DIR
from helpers.decision.tree import DISPLAY, FAMILIES, FIT
from helpers.engines import ENGINES, get_engine
from helpers.engines.lmdeploy import CUDA12_LIBRARIES
from helpers.environment.kv_prediction import kv_token_bytes, predicted_kv_tokens
from helpers.environment.memory_plan import memory_plan
from helpers.environment.prediction import load_calibration, predict_config
from helpers.launchers import LAUNCHERS
from helpers.launchers.config_check import load_config, parse_config
from helpers.measure.metrics import parse_page, snapshot, summarize
from helpers.model import random_weights as rw
from helpers.model.gpu_specs import gpu_spec
from helpers.model.reference_data import load_engine_facts
from helpers.tools.bundle.build import _pick_pins, _slim
from helpers.tools.bundle.spec import DEFAULT_TARGET_FREEZE, find_spec, layer_requirements, read_freeze
from helpers.tools.check.host import check_random_weights
from helpers.tools.cli import build_parser
from helpers.tools.engine_subset import select_engines

MODEL_DIR = str(MODELS_DIR / "tiny-llama")
PORT = 8123
PY = ".engines/lmdeploy/bin/python"


def config(knobs: dict | None = None, launcher: dict | None = None, **fields):
    """A one-engine LMDeploy config on tiny-llama (real weights assumed unless engine_options say random)."""
    spec = {"label": "lmd", "engine": "lmdeploy", "launcher": launcher or {"kind": "python", "python": PY}}
    spec["knobs"] = {"dummy_weights": False, **(knobs or {})}
    spec.update(fields)
    return parse_config({"name": "t", "model": {"path": "tiny-llama", "served_name": "tiny"}, "engines": [spec]})


def build(cfg, run_dir: Path):
    spec = cfg.engines[0]
    return LAUNCHERS[spec.launcher.kind].build(get_engine(spec.engine), spec, cfg.model, PORT, run_dir)


def test_turbomind_is_the_default_backend_and_the_command_is_the_cli_one(tmp_path):
    cmd, env = build(config(), tmp_path)
    assert cmd == [
        str(REPO_ROOT / PY),
        "-m",
        "lmdeploy",
        "serve",
        "api_server",
        MODEL_DIR,
        "--server-name",
        "127.0.0.1",
        "--server-port",
        "8123",
        "--backend",
        "turbomind",
        "--model-name",
        "tiny",
        "--log-level",
        "WARNING",  # the Python log: four INFO lines per request; the fallback warning stays
        "--max-log-len",
        "0",
    ]
    assert env == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TM_LOG_LEVEL": "INFO"}  # its cache budget


ALL_KNOBS = {
    "max_num_seqs": 64,
    "max_batched_tokens": 8192,
    "prefix_caching": True,
    "kv_cache_dtype": "fp8",
    "quantization": "fp8",
    "tensor_parallel": 2,
    "memory_fraction": 0.9,
    "max_model_len": 4096,
}


def test_pytorch_backend_every_knob_random_weights_and_extra_args_last(tmp_path, monkeypatch):
    monkeypatch.setattr(rw, "SHM_ROOT", tmp_path / "shm")
    (tmp_path / "shm").mkdir()
    cfg = config(ALL_KNOBS, engine_options={"backend": "pytorch", "weights": "random"}, extra_args=["--eager-mode"])
    cfg.model.dtype = "bfloat16"
    cmd, _ = build(cfg, tmp_path)
    weights = tmp_path / "shm" / f"tiny-llama-{rw.config_hash(MODEL_DIR)}"
    assert cmd[3:] == [
        "serve",
        "api_server",
        str(weights),
        "--server-name",
        "127.0.0.1",
        "--server-port",
        "8123",
        "--backend",
        "pytorch",
        "--model-name",
        "tiny",
        "--dtype",
        "bfloat16",
        "--log-level",
        "INFO",
        "--max-log-len",
        "0",
        "--max-batch-size",
        "64",
        "--max-prefill-token-num",
        "8192",
        "--enable-prefix-caching",
        "--quant-policy",
        "16",  # QuantPolicy.FP8 (float8_e4m3fn)
        "--model-format",
        "fp8",
        "--tp",
        "2",
        "--cache-max-entry-count",
        "0.9",
        "--session-len",
        "4096",
        "--eager-mode",
    ]


def test_prefix_caching_off_is_lmdeploys_default_and_log_level_can_be_overridden(tmp_path):
    cmd, _ = build(config({"prefix_caching": False}, extra_args=["--log-level", "WARNING"]), tmp_path)
    assert "--enable-prefix-caching" not in cmd
    assert cmd.count("--log-level") == 1 and cmd[-2:] == ["--log-level", "WARNING"]


def test_prepare_writes_the_random_weights_once(tmp_path, monkeypatch):
    monkeypatch.setattr(rw, "SHM_ROOT", tmp_path / "shm")
    (tmp_path / "shm").mkdir()
    cfg = config(engine_options={"backend": "pytorch", "weights": "random"})
    adapter, spec = get_engine("lmdeploy"), cfg.engines[0]
    notes = []
    adapter.prepare(spec, cfg.model, notes.append)  # the run passes its progress notes
    folder = Path(build(cfg, tmp_path)[0][5])
    assert rw.is_complete(folder, rw.config_hash(MODEL_DIR))
    assert "ETA" in notes[0] and notes[-1].startswith(f"random weights: {folder} (")
    assert sorted(p.name for p in folder.glob("*.safetensors")) == ["model-00001-of-00001.safetensors"]
    stamp = (folder / rw.MARKER).stat().st_mtime_ns
    adapter.prepare(spec, cfg.model)
    assert (folder / rw.MARKER).stat().st_mtime_ns == stamp
    adapter.prepare(config().engines[0], cfg.model)  # real weights asked for: nothing to write
    assert len(list((tmp_path / "shm").iterdir())) == 1


def test_weights_root_puts_the_random_weights_there_and_the_cli_writes_the_same_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(rw, "SHM_ROOT", tmp_path / "shm")
    (tmp_path / "shm").mkdir()
    root = tmp_path / "big-disk"
    cfg = config(engine_options={"backend": "pytorch", "weights": "random", "weights_root": str(root)})
    folder = Path(build(cfg, tmp_path)[0][5])
    assert folder.parent == root and folder.name == f"tiny-llama-{rw.config_hash(MODEL_DIR)}"
    args = build_parser().parse_args(["random-weights", MODEL_DIR, "--root", str(root)])
    assert args.func(args) == 0
    assert rw.is_complete(folder, rw.config_hash(MODEL_DIR))
    stamp = (folder / rw.MARKER).stat().st_mtime_ns
    get_engine("lmdeploy").prepare(cfg.engines[0], cfg.model)  # the engine finds them: nothing written again
    assert (folder / rw.MARKER).stat().st_mtime_ns == stamp
    assert not list((tmp_path / "shm").iterdir())
    with pytest.raises(SystemExit):  # one destination or the other
        build_parser().parse_args(["random-weights", MODEL_DIR, "--root", str(root), "--out", str(tmp_path / "o")])


@pytest.mark.parametrize(
    ("knobs", "options", "message"),
    [
        ({"dummy_weights": True}, {}, "knobs.dummy_weights: LMDeploy has no dummy-weight loader; set dummy_weights"),
        ({"kv_cache_dtype": "fp8"}, {}, "knobs.kv_cache_dtype: fp8 KV cache is not offered by LMDeploy's TurboMind"),
        ({"quantization": "fp8"}, {"backend": "turbomind"}, "knobs.quantization: TurboMind reads FP8 checkpoints"),
        ({"memory_fraction": 1.0}, {"backend": "pytorch"}, "knobs.memory_fraction: LMDeploy needs a share .* below 1"),
        ({}, {"backend": "tensorrt"}, "engine_options.backend: unknown LMDeploy backend 'tensorrt'"),
        ({}, {"backnd": "pytorch"}, "engine_options.backnd: not an LMDeploy option; allowed: backend"),
        ({}, {"weights": "dummy"}, "engine_options.weights: only 'random' is known"),
        ({}, {"weights_root": "/data"}, "engine_options.weights_root: only with weights: random"),
    ],
)
def test_what_lmdeploy_cannot_do_fails_at_config_time_naming_the_field(knobs, options, message):
    with pytest.raises(ConfigError, match=f"engines.0: engine 'lmd': {message}"):
        config(knobs, engine_options=options)


def test_random_weights_need_the_python_launcher():
    docker = {"kind": "docker", "image": "openmmlab/lmdeploy:v0.18.0-cu12"}
    with pytest.raises(ConfigError, match="weights: random needs the python launcher"):
        config(launcher=docker, engine_options={"weights": "random"})
    assert config(launcher=docker).engines[0].launcher.kind == "docker"  # real weights under /model are fine


def test_float32_is_not_an_lmdeploy_dtype(tmp_path):
    cfg = config()
    cfg.model.dtype = "float32"
    with pytest.raises(ValueError, match="model.dtype: LMDeploy offers auto, float16, bfloat16"):
        build(cfg, tmp_path)


# pytorch/engine/executor/base.py: logger.info(f'Building CacheEngine with config: \n{self.cache_config}.'),
# the dataclass repr of lmdeploy/pytorch/config.py's CacheConfig (fields in declaration order)
PYTORCH_LOG = """\
2026-12-01 10:00:01,101 - lmdeploy - INFO - async_engine.py:130 - input backend=pytorch, backend_config=...
2026-12-01 10:00:35,512 - lmdeploy - INFO - base.py:456 - Building CacheEngine with config:
CacheConfig(max_batches=256, block_size=64, num_cpu_blocks=0, num_gpu_blocks=14398, kernel_block_size=64, \
window_size=-1, cache_max_entry_count=0.8, max_prefill_token_num=8192, cudagraph_capture_batch_sizes=[1, 2, 4], \
enable_prefix_caching=False, quant_policy=<QuantPolicy.NONE: 0>, device_type='cuda', num_state_caches=None, \
prefix_cache_state_budget=0, prefix_cache_decode_state_interval=0, states_shapes=[], num_reserved_gpu_blocks=0, \
role=<EngineRole.Hybrid: 1>, migration_backend=<MigrationBackend.DLSlime: 1>).
2026-12-01 10:00:36,001 - lmdeploy - INFO - base.py:469 - Warming up model.
"""

TURBOMIND_LOG = """\
[TM][INFO] Object cache budget: 97312.55 MB from free 121640.69 MB and ratio 0.800
"""

FALLBACK_LOG = """\
2026-12-01 09:12:03,441 - lmdeploy - WARNING - archs.py:45 - Fallback to pytorch engine because turbomind is not built.
2026-12-01 09:13:19,020 - lmdeploy - INFO - base.py:456 - Building CacheEngine with config:
"""


def test_kv_capacity_is_gpu_blocks_times_block_size_on_pytorch():
    lmd = get_engine("lmdeploy")
    assert lmd.kv_capacity_from_log(PYTORCH_LOG) == 14398 * 64 == 921_472
    restarted = PYTORCH_LOG.replace("num_gpu_blocks=14398", "num_gpu_blocks=100") + PYTORCH_LOG
    assert lmd.kv_capacity_from_log(restarted) == 921_472  # the last start counts


def test_turbomind_logs_bytes_which_the_kv_bytes_of_a_token_turn_into_tokens():
    lmd = get_engine("lmdeploy")
    per_token = 131_072  # Llama-3.1-8B, bf16 KV: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes
    assert lmd.kv_capacity_from_log(TURBOMIND_LOG, per_token) == int(97312.55 * 2**20) // per_token == 778_500
    restarted = TURBOMIND_LOG.replace("97312.55", "100.00") + TURBOMIND_LOG
    assert lmd.kv_capacity_from_log(restarted, per_token) == 778_500  # the last start counts
    assert lmd.kv_capacity_from_log(TURBOMIND_LOG) is None  # bytes without the bytes of a token: no tokens
    assert lmd.kv_capacity_from_log("nothing here\n", per_token) is None


def test_turbomind_falling_back_to_pytorch_is_a_startup_problem():
    lmd = get_engine("lmdeploy")
    problem = lmd.startup_problem(FALLBACK_LOG)
    assert problem.startswith("asked for the TurboMind backend, but LMDeploy fell back to its PyTorch engine")
    assert "'Fallback to pytorch engine because turbomind is not built.'" in problem
    assert "libcublas.so.12" in problem
    assert lmd.startup_problem(PYTORCH_LOG) is None and lmd.startup_problem(TURBOMIND_LOG) is None


def test_other_engines_report_no_startup_problem():
    assert {n: ENGINES[n].startup_problem(FALLBACK_LOG) for n in ("vllm", "sglang", "trtllm")} == dict.fromkeys(
        ("vllm", "sglang", "trtllm")
    )


def lmdeploy_page(prompt: float, cached: float, usage: float, waiting: float, running: float) -> str:
    """A /metrics page with LMDeploy's series as metrics/loggers.py declares them (names and labels)."""
    reg = CollectorRegistry()
    labels = {"model_name": "tiny", "engine": "0"}

    def gauge(name: str, value: float) -> None:
        Gauge(name, name, list(labels), registry=reg).labels(**labels).set(value)

    def counter(name: str, value: float) -> None:
        Counter(name, name, list(labels), registry=reg).labels(**labels).inc(value)

    counter("lmdeploy:prompt_tokens_total", prompt)
    counter("lmdeploy:cached_tokens_total", cached)
    gauge("lmdeploy:gpu_cache_usage_perc", usage)
    gauge("lmdeploy:prefix_cache_hit_rate", cached / prompt if prompt else 0.0)
    gauge("lmdeploy:num_requests_waiting", waiting)
    gauge("lmdeploy:num_requests_running", running)
    return generate_latest(reg).decode()


def test_metrics_pages_normalise_to_hit_rate_kv_usage_and_queues():
    lmd = get_engine("lmdeploy")
    assert (lmd.metrics_path, lmd.health_path, lmd.family) == ("/metrics", "/health", "lmdeploy")
    path, fmt, names = lmd.sampling()
    assert (path, fmt) == ("/metrics", "prometheus")
    first = snapshot(parse_page(lmdeploy_page(1000, 0, 0.1, 0, 1)), names, t=0)
    last = snapshot(parse_page(lmdeploy_page(5000, 3000, 0.4, 7, 16)), names, t=10)
    assert (last.hits, last.queries, last.kv_usage, last.waiting, last.running) == (3000, 5000, 0.4, 7, 16)
    stats = summarize([first, last])
    assert stats.prefix_cache_hit_rate == pytest.approx(3000 / 4000)  # Δcached ÷ Δprompt over the point
    assert (stats.kv_cache_usage_max, stats.queue_max, stats.running_max) == (0.4, 7, 16)


def test_version_comes_from_the_lmdeploy_distribution():
    code = get_engine("lmdeploy").version_code()
    assert "('lmdeploy',)" in code and "m.version(d)" in code


def claim_row(results: list) -> dict:
    df = claims_table(results, cfg([VLLM, SGLANG]))  # the fixtures' model is the seed's (70B FP8)
    return df[df["claim"].str.startswith("LMDeploy / vLLM")].iloc[0].to_dict()


def test_lmdeploy_claim_is_measured_only_with_lmdeploy_and_vllm_points():
    v, s = recorded(VLLM, SGLANG)  # the claim compares grid points: the recorded sweep alone
    lmd = scaled(s, 1.1, label="LMDeploy pytorch")
    lmd.engine = "lmdeploy"
    r = claim_row([v, s, lmd])
    assert r["seed says"].startswith("≈1.30, level with SGLang")
    pl, pv = lmd.points[-1], v.points[-1]
    assert pl.concurrency == pv.concurrency == 100
    assert r["measured here"] == f"LMDeploy pytorch: {pl.total_tok_s / pv.total_tok_s:.2f}" == "LMDeploy pytorch: 0.99"
    assert r["basis"] == (
        f"{pl.total_tok_s:,.0f} / 5,922 total tok/s at concurrency 100 (LMDeploy pytorch / vllm-h200-70b-fp8); "
        "SGLang / vLLM there 0.90 (sglang-h200-70b-fp8)"
    )
    assert claim_row([v, s])["measured here"] == "not measured in this run"
    assert claim_row([lmd])["measured here"] == "not measured in this run"


def test_bundle_specs_pytorch_first_and_turbomind_optional(capsys):
    spec = find_spec("lmdeploy")
    assert spec.name == "lmdeploy-0.18.0" and [layer.name for layer in spec.layers] == ["site"]
    pins = layer_requirements(spec, spec.layers[0])
    assert sorted(pins) == [
        "addict==2.4.0",
        "fire==0.7.1",
        "lmdeploy==0.18.0",
        "mmengine-lite==0.10.7",
        "platformdirs==4.14.9",
        "shortuuid==1.0.13",
        "termcolor==3.3.0",
        "yapf==0.43.0",
    ]
    assert not spec.layers[0].resolve  # the list is complete: the rest comes from the vLLM bundle
    assert {"ray", "rdkit", "tilelang", "flash-linear-attention", "nvidia-cublas-cu12"} <= set(spec.exclude)
    host = read_freeze(DEFAULT_TARGET_FREEZE)
    keep, left = _pick_pins(spec, "site", pins, host, override=False)
    assert len(keep) == 8 and left == []  # the H200 host has none of them
    tm = find_spec("lmdeploy-turbomind")
    assert tm.name == "lmdeploy-0.18.0-turbomind-cu12" and tm.layers[0].override_target
    assert sorted(layer_requirements(tm, tm.layers[0])) == [
        "lmdeploy==0.18.0",
        "nvidia-cublas-cu12==12.9.3.13",
        "nvidia-cuda-runtime-cu12==12.9.79",
    ]
    assert not any("_turbomind" in pattern for pattern in tm.remove)  # this one carries TurboMind
    args = build_parser().parse_args(["bundle", "--list"])
    assert args.func(args) == 0
    listed = capsys.readouterr().out
    assert "lmdeploy-0.18.0 " in listed and "engine=lmdeploy " in listed and "engine=lmdeploy-turbomind" in listed


def test_pytorch_bundle_slims_away_turbomind_and_the_static_library(tmp_path):
    site = tmp_path / "site"
    files = [
        "lmdeploy/lib/_turbomind.cpython-312-x86_64-linux-gnu.so",  # where LMDeploy's setup.py installs it
        "lmdeploy/turbomind/_turbomind.cpython-312-x86_64-linux-gnu.so",  # the layout named in gpu/README.md
        "lmdeploy/lib64/libxgrammar.a",
        "lib64/libxgrammar.a",
        "lmdeploy/turbomind/turbomind.py",
        "lmdeploy/pytorch/engine/engine.py",
        "fire/core.py",
    ]
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).write_bytes(b"x" * 10)
    removed, freed = _slim(tmp_path, "site", find_spec("lmdeploy"), "cp312")
    assert sorted(removed) == sorted(f"site/{f}" for f in files[:4]) and freed == 40
    assert sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()) == sorted(files[4:])


def test_h200_workload_runs_lmdeploy_pytorch_on_random_weights_from_the_bundles(tmp_path, monkeypatch):
    monkeypatch.setattr(rw, "SHM_ROOT", tmp_path / "shm")
    (tmp_path / "shm").mkdir()
    cfg = load_config(WORKLOADS_DIR / "h200-offline" / "chat-8b-lmdeploy.yaml")
    assert [e.engine for e in cfg.engines] == ["vllm", "sglang", "lmdeploy"]
    spec = cfg.engines[2]
    cmd, env = LAUNCHERS["python"].build(get_engine("lmdeploy"), spec, cfg.model, PORT, tmp_path)
    weights = tmp_path / "shm" / f"llama-3.1-8b-{rw.config_hash(cfg.model.directory)}"
    assert cmd[:8] == ["/opt/torch/.venv/bin/python3", "-m", "lmdeploy", "serve", "api_server", str(weights),
                       "--server-name", "127.0.0.1"]  # fmt: skip
    assert cmd[cmd.index("--backend") + 1] == "pytorch" and cmd[cmd.index("--session-len") + 1] == "4096"
    assert env["PYTHONPATH"] == "/tmp/pb/lmdeploy-0.18.0/site:/tmp/pb/vllm-0.26.0/site"


def test_the_container_form_keeps_the_mounted_path(tmp_path):
    spec = config(engine_options={"backend": "pytorch", "weights": "random"}).engines[0]
    args = get_engine("lmdeploy").server_args(spec, config().model, "/model", "0.0.0.0", 23333)
    assert args[:3] == ["serve", "api_server", "/model"]


def test_random_weights_for_a_quantized_checkpoint_fail_the_row_not_the_run(tmp_path):
    awq = tmp_path / "tiny-awq"  # AWQ: no random weights (FP8 gets block-FP8 ones, tests/model/test_random_weights.py)
    shutil.copytree(MODELS_DIR / "tiny-llama", awq)
    config_json = json.loads((awq / "config.json").read_text())
    config_json["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}
    (awq / "config.json").write_text(json.dumps(config_json))
    cfg = parse_config(
        {
            "name": "t",
            "model": {"path": str(awq)},
            "engines": [
                {
                    "label": "lmd",
                    "engine": "lmdeploy",
                    "launcher": {"kind": "python", "python": PY},
                    "engine_options": {"backend": "pytorch", "weights": "random"},
                    "knobs": {"dummy_weights": False},
                }
            ],
        }
    )
    with pytest.raises(EngineError, match="engine 'lmd': no random weights: .*quant_method is 'awq'"):
        get_engine("lmdeploy").prepare(cfg.engines[0], cfg.model)


def test_speculative_decoding_is_not_mapped_yet():
    with pytest.raises(ConfigError, match="knobs.speculative.method 'ngram' is not supported by engine 'lmdeploy'"):
        config({"speculative": {"method": "ngram"}})
    assert get_engine("lmdeploy").metrics.spec_accepted == "lmdeploy:spec_decode_num_accepted_tokens_total"


def test_lmdeploy_is_a_family_the_decision_and_risk_steps_know():
    assert DISPLAY["lmdeploy"] == "LMDeploy" and "lmdeploy" in FAMILIES
    assert all("lmdeploy" in row for answers in FIT.values() for row in answers.values())
    assert FIT["hardware"]["amd-planned"]["lmdeploy"] == FIT["hardware"]["amd-planned"]["sglang"] == 0.4
    facts = load_engine_facts()["lmdeploy"]
    assert facts.cold_start.seconds == 76 and not facts.nvidia_only and facts.ops_hours_per_month.assumption
    assert any("130% of vLLM" in f.text for f in facts.about("workload"))


def test_dummy_weights_refusal_points_at_the_random_weights_step():
    with pytest.raises(ConfigError) as err:
        config({"dummy_weights": True})
    assert "engine_options.weights: random" in str(err.value)
    assert "`playbook random-weights MODEL_DIR`" in str(err.value)
    args = build_parser().parse_args(["random-weights", "playbook/models/llama-3.1-8b", "--shard-gib", "2"])
    assert (args.model_dir, args.out, args.shard_gib, args.backend) == (
        "playbook/models/llama-3.1-8b",
        None,
        2.0,
        "auto",
    )


def test_turbomind_on_random_weights_with_its_cache_share(tmp_path, monkeypatch):
    """TurboMind reads the same random-weight folder as PyTorch; the KV share is --cache-max-entry-count."""
    monkeypatch.setattr(rw, "SHM_ROOT", tmp_path / "shm")
    (tmp_path / "shm").mkdir()
    knobs = {"memory_fraction": 0.8, "max_model_len": 4096, "max_num_seqs": 128, "prefix_caching": True}
    cmd, env = build(config(knobs, engine_options={"backend": "turbomind", "weights": "random"}), tmp_path)
    weights = tmp_path / "shm" / f"tiny-llama-{rw.config_hash(MODEL_DIR)}"
    assert cmd[3:] == ["serve", "api_server", str(weights), "--server-name", "127.0.0.1", "--server-port", "8123",
                       "--backend", "turbomind", "--model-name", "tiny", "--log-level", "WARNING", "--max-log-len", "0",
                       "--max-batch-size", "128", "--enable-prefix-caching", "--cache-max-entry-count", "0.8",
                       "--session-len", "4096"]  # fmt: skip
    assert env["TM_LOG_LEVEL"] == "INFO"  # the object-cache budget line is INFO
    pytorch = config(knobs, engine_options={"backend": "pytorch", "weights": "random"}).engines[0]
    assert get_engine("lmdeploy").env(pytorch)["TM_LOG_LEVEL"] == "WARNING"


def test_h200_turbomind_config_runs_beside_vllm_and_sglang_from_the_optional_bundle(tmp_path, monkeypatch):
    monkeypatch.setattr(rw, "SHM_ROOT", tmp_path / "shm")
    (tmp_path / "shm").mkdir()
    cfg = load_config(WORKLOADS_DIR / "h200-offline" / "chat-8b-turbomind.yaml")
    base = load_config(WORKLOADS_DIR / "h200-offline" / "chat-8b.yaml")
    assert cfg.name == base.name == "chat-8b" and [e.engine for e in cfg.engines] == ["vllm", "lmdeploy", "sglang"]
    assert (cfg.workload, cfg.evidence, cfg.sla) == (base.workload, base.evidence, base.sla)  # measured alike
    spec = cfg.engines[1]  # before SGLang: a run cut short has measured the engine new to the GPU
    assert spec.label == "LMDeploy 0.18.0 (TurboMind)" and spec.placeholder_weights
    cmd, env = LAUNCHERS["python"].build(get_engine("lmdeploy"), spec, cfg.model, PORT, tmp_path)
    assert cmd[cmd.index("--backend") + 1] == "turbomind" and cmd[cmd.index("--cache-max-entry-count") + 1] == "0.8"
    assert cmd[5] == str(tmp_path / "shm" / f"llama-3.1-8b-{rw.config_hash(cfg.model.directory)}")
    tm = find_spec("lmdeploy-turbomind")
    site = f"/tmp/pb/{tm.name}/site"
    assert env["PYTHONPATH"].split(":") == [site, "/tmp/pb/lmdeploy-0.18.0/site", "/tmp/pb/vllm-0.26.0/site"]
    assert env["LD_LIBRARY_PATH"].split(":") == [f"{site}/nvidia/cublas/lib", f"{site}/nvidia/cuda_runtime/lib"]
    args = build_parser().parse_args(["run", str(WORKLOADS_DIR / "h200-offline" / "chat-8b-turbomind.yaml"),
                                      "--engines", spec.label])  # fmt: skip
    assert args.engines == [spec.label] and select_engines(cfg, args.engines).engines == [spec]


def test_the_70b_turbomind_config_is_the_8b_one_at_the_seeds_shape_with_block_fp8_random_weights(tmp_path, monkeypatch):
    """chat-70b-fp8-turbomind.yaml: the seed's 70B FP8 shape, the three engines launched as chat-8b-turbomind's."""
    monkeypatch.setattr(rw, "SHM_ROOT", tmp_path / "shm")
    (tmp_path / "shm").mkdir()
    offline = WORKLOADS_DIR / "h200-offline"
    cfg = load_config(offline / "chat-70b-fp8-turbomind.yaml")
    eight = load_config(offline / "chat-8b-turbomind.yaml")
    assert cfg.name == load_config(offline / "chat-70b-fp8.yaml").name == "chat-70b-fp8"  # compared with its runs
    assert cfg.model.path == "llama-3.3-70b-fp8" and cfg.workload.concurrency == [100]  # the seed's load

    def launch(c):
        return [(e.label, e.engine, e.launcher, e.engine_options, e.knobs.memory_fraction) for e in c.engines]

    assert launch(cfg) == launch(eight)
    spec = cfg.engines[1]
    plan = rw.plan_random_weights(cfg.model.directory)  # what the host writes before TurboMind starts
    assert plan.precision == "fp8" and plan.config["quantization_config"]["weight_block_size"] == [128, 128]
    assert round(plan.total_bytes / 2**30, 1) == 67.7
    cmd, _ = LAUNCHERS["python"].build(get_engine("lmdeploy"), spec, cfg.model, PORT, tmp_path)
    assert cmd[5] == str(tmp_path / "shm" / f"llama-3.3-70b-fp8-{rw.config_hash(cfg.model.directory)}")
    h100 = gpu_spec("NVIDIA H100 80GB HBM3")  # the seed's one 80 GB GPU: TurboMind's KV share is of what is free
    assert predicted_kv_tokens(cfg, spec, h100) > predicted_kv_tokens(cfg, cfg.engines[0], h100) > 0


def test_turbomind_kv_is_predicted_and_read_as_a_share_of_free_memory():
    """Step 4 plans TurboMind's cache as 0.8 of what the weights leave; its logged budget becomes tokens alike."""
    cfg = load_config(WORKLOADS_DIR / "h200-offline" / "chat-8b-turbomind.yaml")
    vllm, turbomind = cfg.engines[0], cfg.engines[1]
    h200 = gpu_spec("NVIDIA H200")
    assert get_engine("lmdeploy").kv_share(turbomind) == "free" and get_engine("vllm").kv_share(vllm) == "gpu"
    want = memory_plan(cfg.model.directory, h200, memory_fraction=0.8, context_tokens=768, kv_share="free")
    assert predicted_kv_tokens(cfg, turbomind, h200) == want.row("bf16").kv_tokens
    assert predicted_kv_tokens(cfg, turbomind, h200) > predicted_kv_tokens(
        cfg, turbomind.model_copy(update={"engine_options": {"backend": "pytorch", "weights": "random"}}), h200
    )
    per_token = kv_token_bytes(cfg, turbomind)
    assert per_token == 131_072  # bf16 KV of Llama-3.1-8B
    budget = f"[TM][INFO] Object cache budget: {want.row('bf16').kv_gib_per_gpu * 1024:.2f} MB from free 1 MB\n"
    logged = get_engine("lmdeploy").kv_capacity_from_log(budget, per_token)
    assert abs(logged - want.row("bf16").kv_tokens) <= 10  # kv_gib_per_gpu is rounded to 1 MiB


def test_each_lmdeploy_backend_is_calibrated_on_its_own_measurements():
    """The prediction of a TurboMind configuration takes TurboMind's factor, never the PyTorch engine's."""
    cfg = load_config(WORKLOADS_DIR / "h200-offline" / "chat-8b-turbomind.yaml")
    turbomind = cfg.engines[1]
    pytorch = turbomind.model_copy(update={"engine_options": {"backend": "pytorch", "weights": "random"}})
    lmd, table = get_engine("lmdeploy"), load_calibration()
    assert (lmd.calibration_key(turbomind), lmd.calibration_key(pytorch)) == ("lmdeploy-turbomind", "lmdeploy-pytorch")
    h200 = gpu_spec("NVIDIA H200")
    tm, pt = predict_config(cfg, turbomind, h200, table), predict_config(cfg, pytorch, h200, table)
    assert tm.calibration_factor == table.engines["lmdeploy-turbomind"].factor
    assert pt.calibration_factor == table.engines["lmdeploy-pytorch"].factor
    assert "archived lmdeploy-turbomind capacities" in tm.calibration_basis


# The NEEDED entries of lmdeploy-0.18.0-cp312's lmdeploy/turbomind/_turbomind.cpython-312-x86_64-linux-gnu.so
# (readelf -d; RUNPATH $ORIGIN/lib:$ORIGIN/../../nvidia/{nccl,cuda_runtime,cublas,curand}/lib) that no
# system package provides: the CUDA 12 ones, and NCCL's (soname libnccl.so.2 in CUDA 12 and 13 alike).
TURBOMIND_NEEDED = ["libcublas.so.12", "libnccl.so.2", "libturbomind_nccl_stub.so", "libcudart.so.12",
                    "libcuda.so.1", "libcublasLt.so.12"]  # fmt: skip


def test_turbomind_bundle_carries_every_cuda12_library_the_extension_needs():
    tm = find_spec("lmdeploy-turbomind")
    pins = {p.split("==")[0]: p.split("==")[1] for p in layer_requirements(tm, tm.layers[0])}
    cuda12 = [lib for lib in TURBOMIND_NEEDED if lib.endswith(".so.12")]
    assert sorted(CUDA12_LIBRARIES) == sorted(cuda12)
    assert {CUDA12_LIBRARIES[lib] for lib in cuda12} == {"nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12"} <= set(pins)
    assert pins["lmdeploy"] == "0.18.0" and pins["nvidia-cuda-runtime-cu12"].startswith("12.")
    # curand is on the RUNPATH but not NEEDED; libnccl.so.2 comes with the host's torch (CUDA 13's NCCL wheel);
    # the driver's libcuda.so.1 is the host's own. lmdeploy declares all three wheels: the bundle leaves them out.
    assert {"nvidia-curand-cu12", "nvidia-nccl-cu12"} <= set(tm.exclude) and not set(pins) & set(tm.exclude)


def interrupt(_line):
    raise KeyboardInterrupt  # stands for a run cut while the weights are written


def test_playbook_check_says_what_random_weights_are_left_to_write_and_whether_they_fit(tmp_path):

    root = tmp_path / "weights"
    cfg = config(engine_options={"backend": "turbomind", "weights": "random", "weights_root": str(root)})
    folder = rw.random_weights_dir(MODEL_DIR, root)
    total = rw.plan_random_weights(MODEL_DIR).total_bytes
    (line,) = check_random_weights(cfg)
    assert line.ok and line.name == "random weights 'lmd'"
    assert line.detail.startswith(f"{total / 2**30:.1f} GiB to write to {folder} before the start; ")
    assert f"--root {root}` writes them ahead" in line.detail
    with pytest.raises(KeyboardInterrupt):  # a write cut after its first shard: that shard counts as written
        rw.write_random_weights(MODEL_DIR, folder, log=interrupt, shard_bytes=2**20)
    left, whole = rw.bytes_to_write(MODEL_DIR, folder, shard_bytes=2**20)
    assert whole == total and 0 < left < total
    assert rw.bytes_to_write(MODEL_DIR, folder) == (total, total)  # another plan (shard size): nothing of it kept
    rw.write_random_weights(MODEL_DIR, folder, log=lambda _m: None)
    (line,) = check_random_weights(cfg)
    assert line.ok and line.detail == f"{folder}: written already ({total / 2**30:.1f} GiB)"
    big = shutil.copytree(MODELS_DIR / "tiny-llama", tmp_path / "big")
    (big / "config.json").write_text(json.dumps({**json.loads((big / "config.json").read_text()), "vocab_size": 2**32}))
    options = {"weights": "random", "weights_root": str(root)}
    launcher, knobs = {"kind": "python", "python": PY}, {"dummy_weights": False}
    spec = {"label": "lmd", "engine": "lmdeploy", "launcher": launcher, "engine_options": options, "knobs": knobs}
    huge = parse_config({"name": "t", "model": {"path": str(big), "served_name": "tiny"}, "engines": [spec]})
    (line,) = check_random_weights(huge)
    assert not line.ok and line.rows == ("lmd",) and "GiB free there" in line.detail
    assert line.fix.startswith("set engine_options.weights_root to a filesystem with ")
    assert check_random_weights(config()) == []  # real weights asked for: no line
