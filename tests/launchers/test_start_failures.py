"""An engine that runs out of memory at start is a row that says so, quoting the engine's own line.

The engine is ``tests/fakes/fake_openai_server.py`` in ``oom_at_start`` mode, started and watched by
the real launch layer (``helpers.launchers.server``): it prints a failed start shaped like vLLM's (the
out-of-memory line in the EngineCore's traceback, then 60 lines of the API server's) and exits 1. The
messages are those vLLM, SGLang and LMDeploy print; the negative case is every engine log archived
from the H200 runs (healthy starts of vLLM and SGLang).
"""

import sys
from pathlib import Path

import pytest
from fakes.gpu_faults import oom_named

from helpers.core.errors import EngineError
from helpers.engines import get_engine
from helpers.launchers.server import PORT_TAKEN, free_port, out_of_memory_line, start_on_a_free_port, start_process

FAKES = Path(__file__).resolve().parents[1] / "fakes"
REPORTS = Path(__file__).resolve().parents[2] / "reports"
TORCH_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of"
    " 139.81 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 138.78 GiB memory in use."
)


def start_failure(log: Path, mode: str, engine: str = "vllm", oom_line: str | None = None) -> str:
    """Start the fake engine in ``mode``; the ``EngineError`` it fails with before becoming healthy."""
    port = free_port()
    env = {"PYTHONPATH": str(FAKES), "FAKE_ENGINE_MODE": mode, **({"FAKE_OOM_LINE": oom_line} if oom_line else {})}
    cmd = [sys.executable, "-m", "fake_openai_server", "--port", str(port)]
    handle = start_process(cmd, env, log, f"http://127.0.0.1:{port}", get_engine(engine))
    try:
        with pytest.raises(EngineError) as err:
            handle.wait_healthy(30)
        assert not handle.alive()
        return str(err.value)
    finally:
        handle.stop(grace_s=5)


def test_a_gpu_engine_out_of_memory_at_start_is_named_with_its_line(tmp_path):
    log = tmp_path / "engine.log"
    reason = start_failure(log, "oom_at_start")
    head = "out of GPU memory at start: engine process exited with code 1 before becoming healthy (log: "
    assert reason.startswith(head) and reason.endswith("…)")
    quoted = reason.removeprefix(head).removesuffix("…)")
    assert quoted.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB.")
    assert TORCH_OOM.startswith(quoted) and len(quoted) < 160  # cut, colour codes and log prefix dropped
    assert "\n" not in reason
    assert oom_named(reason)  # what bench_reliability.py --gpu counts as the OOM fault named
    tail = "\n".join(log.read_text().splitlines()[-30:])  # the row's log tail (LOG_TAIL_LINES)
    assert "memory" not in tail  # the line is above the tail: only reading the start's whole log finds it


KV = (
    "ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is"
    " needed, which is larger than the available KV cache memory (2.1 GiB)."
)
SGLANG = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


@pytest.mark.parametrize(
    ("line", "quoted"),
    [
        (f"(EngineCore_DP0 pid=7) {KV}", KV[:159] + "…"),
        (
            "ERROR 12-01 16:05:31 [core.py:708] ValueError: No available memory for the cache blocks.",
            "ValueError: No available memory for the cache blocks.",
        ),
        (
            "ValueError: Free memory on device (6.9/139.8 GiB) on startup is less than desired GPU memory utilization",
            "ValueError: Free memory on device (6.9/139.8 GiB) on startup is less than desired GPU memory utilization",
        ),
        (f"[2026-12-01 16:05:31 TP0] {SGLANG}", SGLANG),
        (
            "[TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/memory_utils.cu:32",
            "CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/memory_utils.cu:32",
        ),
        ("RuntimeError: No enough gpu memory for runtime.", "RuntimeError: No enough gpu memory for runtime."),
        ("RuntimeError: CUDA error: out of memory", "RuntimeError: CUDA error: out of memory"),
    ],
    ids=["vllm-kv-too-small", "vllm-no-cache-blocks", "vllm-free-memory", "sglang", "turbomind", "lmdeploy", "cuda"],
)
def test_each_engines_out_of_memory_message_is_named(tmp_path, line, quoted):
    reason = start_failure(tmp_path / "engine.log", "oom_at_start", oom_line=line)
    assert reason == (
        f"out of GPU memory at start: engine process exited with code 1 before becoming healthy (log: {quoted})"
    )


def test_a_cpu_engine_out_of_memory_says_memory_not_gpu_memory(tmp_path):
    line = "ValueError: No available memory for the cache blocks. Try increasing `VLLM_CPU_KVCACHE_SPACE`."
    reason = start_failure(tmp_path / "engine.log", "oom_at_start", engine="vllm-cpu", oom_line=line)
    assert reason == f"out of memory at start: engine process exited with code 1 before becoming healthy (log: {line})"
    assert not oom_named(reason)


def test_an_earlier_start_out_of_memory_in_the_same_log_is_not_blamed(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text(f"{TORCH_OOM}\n")  # a previous start of this configuration (the log is appended to)
    assert start_failure(log, "bad_flag") == "engine process exited with code 2 before becoming healthy"


def test_healthy_engine_logs_from_the_h200_name_no_out_of_memory():
    logs = sorted(REPORTS.glob("h200-*/logs/*.log"))
    assert len(logs) >= 10, "the archived H200 engine logs are the negative cases"
    named = {p.name: out_of_memory_line(p.read_text(errors="replace")) for p in logs}
    assert {k: v for k, v in named.items() if v} == {}


class _Handle:
    """A stand-in for a started engine: healthy, or exited before it was (the error path only)."""

    def __init__(self, healthy: bool):
        self.healthy, self.stopped = healthy, False

    def wait_healthy(self, timeout_s: float) -> float:
        if not self.healthy:
            raise EngineError("engine process exited with code 1 before becoming healthy")
        return 1.5

    def stop(self) -> int:
        self.stopped = True
        return 0


def test_an_engine_whose_port_was_taken_is_started_again_on_another_port():
    handles, ports, said = [_Handle(False), _Handle(True)], [], []

    def start(port: int) -> _Handle:
        ports.append(port)
        return handles[len(ports) - 1]

    assert start_on_a_free_port(start, lambda: f"OSError: [Errno 98] {PORT_TAKEN}", 5, said.append) == 1.5
    assert len(ports) == 2 and handles[0].stopped and not handles[1].stopped
    assert said and "taken" in said[0]


def test_an_engine_that_fails_for_another_reason_is_not_started_again():
    starts = []
    with pytest.raises(EngineError, match="before becoming healthy"):
        start_on_a_free_port(lambda port: starts.append(port) or _Handle(False), lambda: "CUDA out of memory", 5)
    assert len(starts) == 1
