"""``playbook check`` on a GPU host: the memory plan of each configuration against what NVML says is free.

No GPU here, so the GPUs are given as NVML would report them (an H200: 143,771 MiB); the configs are
the shipped offline-H200 ones, the plan the real step-4 memory plan (its 8B and 70B KV capacities
match what vLLM 0.26.0 logged on the H200 within 0.5%: tests/environment/test_memory_plan.py).
"""

import json
import shutil

import pytest
import yaml

from helpers.core.config import load_config, parse_config
from helpers.core.paths import MODELS_DIR, WORKLOADS_DIR
from helpers.tools.check.host import GpuNow, check_gpus, visible_to

H200_GIB = 143771 / 1024


def h200(index: int = 0, free_gib: float = 139.6) -> GpuNow:
    return GpuNow(index, "NVIDIA H200", f"GPU-{index}abc", H200_GIB, free_gib)


def lines(name: str, gpus: list[GpuNow], **knobs) -> list[str]:
    cfg = load_config(WORKLOADS_DIR / "h200-offline" / f"{name}.yaml")
    for e in cfg.engines:
        e.knobs = e.knobs.model_copy(update=knobs)
    return [c.line() for c in check_gpus(cfg, gpus, None)]


def test_the_8b_plan_fits_a_free_h200_with_the_engines_own_kv_capacity():
    out = lines("chat-8b", [h200()])
    assert out[0] == "✓ GPUs: 1 visible: GPU 0 NVIDIA H200, 139.6 of 140.4 GiB free"
    assert out[1] == (
        "✓ GPU memory 'vLLM 0.26.0': bf16 weights 15.0 GiB + overhead 2.3 GiB + KV 111.9 GiB (917,008 tokens) = "
        "129.2 GiB per GPU at memory fraction 0.92; fits GPU 0 (139.6 GiB free)"
    )
    assert out[2].startswith("✓ GPU memory 'SGLang 0.5.16':")


def test_a_busy_gpu_is_a_failed_row_with_the_share_that_would_fit():
    out = lines("chat-70b-fp8", [h200(free_gib=20.0)])
    assert out[1] == (
        "✗ GPU memory 'vLLM 0.26.0': fp8 weights 67.7 GiB + overhead 3.1 GiB + KV 58.4 GiB (191,520 tokens) = "
        "129.2 GiB per GPU, but GPU 0 has 20.0 GiB free — that configuration will be a failed row; fix: free the "
        "GPU (nvidia-smi lists what holds it), or lower knobs.memory_fraction below 0.14"
    )


def bf16_70b(tmp_path) -> dict:
    """chat-70b-fp8 on a BF16 70B folder (the FP8 folder without its quantization_config), as the GPU fault test."""
    folder = tmp_path / "llama-3.3-70b-bf16"
    shutil.copytree(MODELS_DIR / "llama-3.3-70b-fp8", folder)
    shape = json.loads((folder / "config.json").read_text())
    shape.pop("quantization_config", None)
    (folder / "config.json").write_text(json.dumps(shape))
    data = yaml.safe_load((WORKLOADS_DIR / "h200-offline" / "chat-70b-fp8.yaml").read_text())
    data["model"] = {"path": str(folder)}
    return data


@pytest.mark.parametrize(("tp", "ok"), [(1, False), (2, True)])
def test_70b_in_bf16_fits_two_h200s_not_one_and_the_fix_says_so(tmp_path, tp, ok):
    data = bf16_70b(tmp_path)
    for e in data["engines"]:
        e["knobs"]["tensor_parallel"] = tp
    (gpus, vllm, *_rest) = check_gpus(parse_config(data), [h200(0), h200(1)], None)
    assert gpus.ok and vllm.ok == ok
    if not ok:
        assert "does not fit at tensor_parallel 1: bf16 weights 131.4 GiB" in vllm.line()
        assert "(out of memory at start)" in vllm.line() and vllm.line().endswith("fix: knobs.tensor_parallel: 2")


def test_more_tensor_parallel_than_gpus_and_the_gpus_an_engine_sees(monkeypatch):
    out = lines("chat-8b", [h200()], tensor_parallel=2)
    assert "tensor_parallel 2 needs 2 GPUs, 1 visible to it" in out[1]
    cfg = load_config(WORKLOADS_DIR / "h200-offline" / "chat-8b.yaml")
    spec = cfg.engines[0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert visible_to(spec, [h200(0), h200(1)]) == [h200(1)]
    spec.launcher.env = {"CUDA_VISIBLE_DEVICES": "GPU-0"}  # the launcher's own, by UUID prefix
    assert visible_to(spec, [h200(0), h200(1)]) == [h200(0)]


@pytest.mark.parametrize("name", ["default", "endpoint"])
def test_cpu_engines_and_endpoints_need_no_gpu(name):
    cfg = load_config(WORKLOADS_DIR / f"{name}.yaml")
    assert [c.line() for c in check_gpus(cfg, [], "NVML found no GPU")] == [
        "✓ GPUs: none needed (every configuration runs on the CPU or at an endpoint)"
    ]


def test_no_gpu_visible_names_every_gpu_configuration():
    cfg = load_config(WORKLOADS_DIR / "gpu-venv.yaml")
    (only,) = check_gpus(cfg, [], "NVML Shared Library Not Found")
    assert only.line().startswith("✗ GPUs: none visible (NVML Shared Library Not Found) — these 2 configurations")
    assert only.rows == ("vLLM 0.26.0", "SGLang 0.5.16")
