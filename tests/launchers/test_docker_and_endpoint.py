"""The docker launcher's exact ``docker run`` line, and the endpoint launcher's handle and API key."""

from pathlib import Path

import pytest

from helpers.core.errors import ConfigError
from helpers.core.paths import MODELS_DIR
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.config_check import parse_config

MODEL_DIR = MODELS_DIR / "tiny-llama"


def docker_config(engine: str, **launcher):
    spec = {"label": f"{engine}-d", "engine": engine, "launcher": {"kind": "docker", **launcher}}
    return parse_config({"name": "t", "model": {"path": "tiny-llama"}, "engines": [spec]})


def build(cfg, run_dir: Path, port: int = 8200):
    spec = cfg.engines[0]
    return LAUNCHERS["docker"].build(get_engine(spec.engine), spec, cfg.model, port, run_dir)


def test_docker_vllm_official_image_gpus_model_mount_and_local_port(tmp_path):
    cfg = docker_config("vllm", env={"HF_TOKEN_PATH": "/x"})
    cmd, env = build(cfg, tmp_path)
    assert env == {}
    assert cmd == [
        "docker",
        "run",
        "--rm",
        "--gpus",
        "all",
        "--ipc",
        "host",
        "--shm-size",
        "16g",
        "-p",
        "127.0.0.1:8200:8200",
        "-v",
        f"{MODEL_DIR}:/model:ro",
        "-e",
        "HF_HUB_OFFLINE=1",
        "-e",
        "HF_TOKEN_PATH=/x",
        "-e",
        "TRANSFORMERS_OFFLINE=1",
        "-e",
        "VLLM_NO_USAGE_STATS=1",
        "vllm/vllm-openai:v0.26.0",
        "--model",
        "/model",
        "--served-model-name",
        "tiny-llama",
        "--host",
        "0.0.0.0",
        "--port",
        "8200",
        "--load-format",
        "dummy",
    ]
    assert LAUNCHERS["docker"].version(get_engine("vllm"), cfg.engines[0]) == "v0.26.0"


def test_docker_sglang_runs_its_module_in_the_image(tmp_path):
    cmd, _ = build(docker_config("sglang", image="lmsysorg/sglang:custom"), tmp_path)
    i = cmd.index("lmsysorg/sglang:custom")
    assert cmd[i + 1 : i + 6] == ["python3", "-m", "sglang.launch_server", "--model-path", "/model"]
    assert "--enable-metrics" in cmd


def test_docker_trtllm_mounts_the_options_file(tmp_path):
    cmd, _ = build(docker_config("trtllm"), tmp_path)
    launch = tmp_path / "launch"
    assert cmd[cmd.index("nvcr.io/nvidia/tensorrt-llm/release:1.2.1") - 2 :] == [
        "-v",
        f"{launch}:/playbook-launch:ro",
        "nvcr.io/nvidia/tensorrt-llm/release:1.2.1",
        "trtllm-serve",
        "serve",
        "/model",
        "--host",
        "0.0.0.0",
        "--port",
        "8200",
        "--backend",
        "pytorch",
        "--extra_llm_api_options",
        "/playbook-launch/trtllm-d-extra-options.yaml",
    ]
    assert (launch / "trtllm-d-extra-options.yaml").is_file()


def test_docker_engine_without_image_is_refused(tmp_path):
    with pytest.raises(ValueError, match="has no default image; set launcher.image"):
        build(docker_config("vllm-cpu"), tmp_path)


def test_endpoint_needs_a_url():
    with pytest.raises(ConfigError, match="launcher.url is required"):
        parse_config(
            {
                "name": "t",
                "model": {"path": "tiny-llama"},
                "engines": [{"label": "e", "engine": "endpoint", "launcher": {"kind": "endpoint"}}],
            }
        )


def test_endpoint_handle_reads_the_key_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYBOOK_TEST_KEY", "sk-abcdef123456")
    cfg = parse_config(
        {
            "name": "t",
            "model": {"path": "tiny-llama"},
            "engines": [
                {
                    "label": "e",
                    "engine": "endpoint",
                    "launcher": {"kind": "endpoint", "url": "http://127.0.0.1:9/", "api_key_env": "PLAYBOOK_TEST_KEY"},
                }
            ],
        }
    )
    spec = cfg.engines[0]
    h = LAUNCHERS["endpoint"].start(get_engine("endpoint"), spec, cfg.model, 0, tmp_path, tmp_path / "e.log")
    assert h.base_url == "http://127.0.0.1:9" and h.process is None
    assert h.headers == {"Authorization": "Bearer sk-abcdef123456"}
    assert "sk-abcdef123456" not in repr(h)
    assert "sk-abcdef123456" not in (tmp_path / "e.log").read_text()
