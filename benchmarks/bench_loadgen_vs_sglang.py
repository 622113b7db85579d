"""Our load generator (guidellm via ``helpers.measure.loadgen.run_point``) against SGLang's ``sglang.bench_serving``.

The SGLang twin of ``bench_loadgen_vs_vllm.py``. One SGLang server, started through the config's
``python`` launcher on 127.0.0.1 with prefix caching off (``--disable-radix-cache``: every round
replays the same prompts), serves both clients. They send the same prompts
(``helpers.measure.prompts.fixed_shapes`` + ``write_dataset``: N words are N tokens in the
playbook's tokenizer) at the same concurrency and request count, with ``ignore_eos`` so every
answer has the requested length, in alternating rounds (which client goes first flips each round).
Prints each round's output tok/s of both clients and ours as a ratio of theirs, then the median
ratio (goal ≥ 0.98) and each client's median request latency (the median of the rounds' p50s):
equal latencies with less throughput mean the client leaves gaps between one request's end and the
next one's start. No assertions.

Their side is ``python -m sglang.bench_serving`` (SGLang 0.5.16 keeps that name as an alias of
``sglang.benchmark.serving``), run by the engine's own interpreter, with ``--backend sglang-oai``
(streamed ``/v1/completions``, what our client sends), ``--dataset-name random`` with fixed lengths
(``--random-input-len``, ``--random-output-len``, ``--random-range-ratio 1.0``), ``--num-prompts``,
``--max-concurrency`` and ``--output-file`` (a JSONL line whose ``output_throughput`` and
``median_e2e_latency_ms`` are read). Its ``random`` dataset cuts prompts to length from a
ShareGPT-format JSON file and would download ShareGPT from the Hub without one; it is given our
prompts in that format instead (``--dataset-path``), which it tokenizes, cuts to exactly their own
length and decodes back to the same text. It sends ``ignore_eos`` unless told not to; the script
also sends ``temperature`` 1.0, SGLang's default and so what guidellm (which sends none) gets,
where ``sglang.bench_serving`` would otherwise ask for greedy decoding, another sampling path. Each
of its runs starts with one untimed warm-up request of its own.

SGLang 0.5.16 is installed on the GPU host only: there, ``--config playbook/workloads/h200-offline/chat-8b.yaml
--engine "SGLang 0.5.16"`` (the defaults) measures that engine. Where its interpreter cannot import
``sglang`` (as on the CPU development machine, e.g. under ``make bench``) the script says so and
stops; ``--print-command`` prints the engine's and ``sglang.bench_serving``'s command lines without
starting anything, anywhere. ``sglang`` is imported only in those subprocesses.

Measured (H200, SGLang 0.5.16, Llama-3.1-8B shape with dummy weights, the defaults; 2026-12-02,
``reports/h200-20261202-bench-sglang``): ours / theirs 0.993, 0.995 and 1.069 in the three rounds
the 400 s limit allowed, median 0.995, with equal median latencies; each round took about 84 s,
mostly ``sglang.bench_serving`` importing SGLang.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from helpers.core.config import EngineSpec, ModelSpec
from helpers.core.errors import EngineError
from helpers.core.paths import resolve_repo_path
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.base import HOST
from helpers.launchers.config_check import load_config
from helpers.launchers.python import interpreter
from helpers.launchers.server import free_port
from helpers.measure.prompts import fixed_shapes, write_dataset

try:  # run as a script (make bench, scripts/gpu_host.sh): this folder is on sys.path
    from bench_loadgen_vs_vllm import Target, ours
except ImportError:  # imported as benchmarks.bench_loadgen_vs_sglang
    from benchmarks.bench_loadgen_vs_vllm import Target, ours

DEFAULT_CONFIG = "playbook/workloads/h200-offline/chat-8b.yaml"
BENCH_MODULE = "sglang.bench_serving"
# SGLang's default temperature, which guidellm's requests (no temperature) get; ignore_eos is bench_serving's default
THEIR_BODY = {"temperature": 1.0, "ignore_eos": True}


def bench_engine(config: str, label: str | None) -> tuple[EngineSpec, ModelSpec]:
    """The SGLang engine ``label`` (default: the first) of ``config``, prefix caching off, and its model.

    Every round replays the same prompts: with prefix caching on, whichever client ran later would
    find them cached and look faster.
    """
    cfg = load_config(resolve_repo_path(config))
    engines = [e for e in cfg.engines if get_engine(e.engine).family == "sglang" and e.launcher.kind == "python"]
    spec = next((e for e in engines if label is None or e.label == label), None)
    if spec is None:
        labels = ", ".join(repr(e.label) for e in cfg.engines)
        raise SystemExit(f"--engine must name an SGLang engine with a python launcher in {config} (has {labels})")
    return spec.model_copy(update={"knobs": spec.knobs.model_copy(update={"prefix_caching": False})}), cfg.model


def sharegpt_source(dataset: Path, path: Path) -> Path:
    """Our prompts (``write_dataset``'s JSONL) as the ShareGPT-format JSON that bench_serving's ``random`` dataset cuts.

    Only the first (human) turn is read; the second turn has to be there for the row to count.
    """
    rows = [json.loads(line) for line in dataset.read_text(encoding="utf-8").splitlines() if line.strip()]
    convs = [{"conversations": [{"from": "human", "value": r["prompt"]}, {"from": "gpt", "value": "ok"}]} for r in rows]
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


def theirs_cmd(t: Target, source: Path, c: int, n: int, inp: int, out: int, result: Path) -> list[str]:
    """The ``sglang.bench_serving`` command line of one run: ``n`` requests of ``inp`` / ``out`` tokens at ``c``."""
    cmd = [str(t.python), "-m", BENCH_MODULE, "--backend", "sglang-oai", "--base-url", t.url]
    cmd += ["--model", str(t.model_dir), "--served-model-name", t.served, "--tokenizer", str(t.model_dir)]
    cmd += ["--dataset-name", "random", "--dataset-path", str(source), "--random-input-len", str(inp)]
    cmd += ["--random-output-len", str(out), "--random-range-ratio", "1.0", "--num-prompts", str(n)]
    cmd += ["--max-concurrency", str(c), "--extra-request-body", json.dumps(THEIR_BODY)]
    return cmd + ["--disable-tqdm", "--output-file", str(result)]


def theirs(t: Target, source: Path, c: int, n: int, inp: int, out: int, work: Path) -> dict:
    """One ``sglang.bench_serving`` run; the result line it appended to its output file."""
    result = work / f"sglang-bench-{time.monotonic_ns()}.jsonl"
    cmd = theirs_cmd(t, source, c, n, inp, out, result)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env={**os.environ, **t.env})
    lines = result.read_text(encoding="utf-8").splitlines() if result.is_file() else []
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"sglang.bench_serving failed (rc {run.returncode}): {(run.stdout + run.stderr)[-1500:]}")
    return json.loads(lines[-1])


def _env_line(env: dict[str, str]) -> str:
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))


def main() -> None:
    """Start the engine, alternate the two clients, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--requests", type=int, default=384)
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument(
        "--config", default=DEFAULT_CONFIG, help=f"workload config holding the engine (default {DEFAULT_CONFIG})"
    )
    ap.add_argument("--engine", help="label of an SGLang engine in --config (default: its first SGLang engine)")
    ap.add_argument(
        "--print-command",
        action="store_true",
        help="print the engine's and sglang.bench_serving's command lines, run nothing",
    )
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    spec, model = bench_engine(a.config, a.engine)
    adapter, launcher = get_engine(spec.engine), LAUNCHERS[spec.launcher.kind]
    if not a.print_command:
        status, version, detail = launcher.readiness(adapter, spec)
        if status != "ready":
            print(f"{spec.label}: {detail}; SGLang runs on the GPU host (scripts/gpu_host.sh), not here")
            return
        print(f"{spec.label}: {adapter.package} {version} ({detail})")
    model_dir, served = model.directory, adapter.served_model_name(model)
    # sglang.bench_serving imports `datasets` at start (its MMMU loader) and the SGLang bundle does not carry
    # it (H200, 2026-12-01: ModuleNotFoundError); the playbook runtime does (guidellm needs it), so the
    # inherited PYTHONPATH follows the launcher's folders
    folders = [str(resolve_repo_path(p)) for p in spec.launcher.pythonpath]
    folders += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in folders]
    env = {**adapter.env(spec), **({"PYTHONPATH": os.pathsep.join(folders)} if folders else {})}
    c, n, inp, out = a.concurrency, a.requests, a.input_tokens, a.output_tokens
    with tempfile.TemporaryDirectory(prefix="bench-loadgen-sglang-") as tmp:
        work = Path(tmp)
        dataset = write_dataset(fixed_shapes(n, inp, out), model_dir, work / "prompts.jsonl", seed=7)
        source = sharegpt_source(dataset, work / "prompts-sharegpt.json")
        port = free_port()
        if a.print_command:
            engine_cmd, engine_env = launcher.build(adapter, spec, model, port, work)
            t = Target(f"http://{HOST}:{port}", served, model_dir, interpreter(spec.launcher), env)
            print(f"# engine {spec.label!r} (an inherited PYTHONPATH is appended to this one):")
            print(f"{_env_line(engine_env)} {shlex.join(engine_cmd)}")
            print(f"# ours: run_point({t.url!r}, {served!r}, {str(model_dir)!r}, {str(dataset)!r},")
            print(f"#     concurrency={c}, max_requests={n}): {n} prompts of {inp} tokens, {out} out each (ignore_eos)")
            print("# theirs, one round (PYTHONPATH: the launcher's folders, then the inherited one):")
            print(f"{_env_line(env)} {shlex.join(theirs_cmd(t, source, c, n, inp, out, work / 'sglang-bench.jsonl'))}")
            return
        handle = launcher.start(adapter, spec, model, port, work, work / "engine.log")
        try:
            try:
                ready = handle.wait_healthy(spec.startup_timeout_s)
            except EngineError as err:
                raise SystemExit(f"{spec.label}: {err}\n{handle.log_tail()}") from None
            print(f"engine healthy after {ready:.0f} s at {handle.base_url}")
            t = Target(handle.base_url, served, model_dir, interpreter(spec.launcher), env)
            ours(t, dataset, c, min(8, n))  # warm-up
            theirs(t, source, c, min(8, n), inp, out, work)
            ratios, lat_ours, lat_theirs = [], [], []
            for i in range(a.rounds):
                order = ("ours", "theirs") if i % 2 == 0 else ("theirs", "ours")
                got = {}
                for who in order:
                    got[who] = ours(t, dataset, c, n) if who == "ours" else theirs(t, source, c, n, inp, out, work)
                o, s = got["ours"], got["theirs"]
                ratio = o["output_tok_s"] / s["output_throughput"] if s["output_throughput"] else float("nan")
                ratios.append(ratio)
                lat_ours.append(o["e2e_p50_ms"] or 0.0)
                lat_theirs.append(s.get("median_e2e_latency_ms") or 0.0)
                print(
                    f"round {i + 1} ({order[0]} first): guidellm {o['output_tok_s']:,.0f} out tok/s "
                    f"(tokens / first-sent-to-last-done {o['tokens_over_span']:,.0f}, {o['completed']} ok, "
                    f"{o['errors']} errors), "
                    f"sglang.bench_serving {s['output_throughput']:,.0f} out tok/s ({s['completed']} ok), "
                    f"ratio {ratio:.3f}; "
                    f"request latency p50 {lat_ours[-1]:,.0f} vs {lat_theirs[-1]:,.0f} ms"
                )
        finally:
            handle.stop()
    print(
        f"\n{spec.label}, concurrency {c}, {n} requests, {inp} in / {out} out tokens: "
        f"ours / theirs output tok/s = {statistics.median(ratios):.3f} (median of {len(ratios)} rounds, "
        f"range {min(ratios):.3f}-{max(ratios):.3f}; goal >= 0.98); median request latency "
        f"{statistics.median(lat_ours):,.0f} ms (guidellm) vs {statistics.median(lat_theirs):,.0f} ms "
        f"(sglang.bench_serving)"
    )


if __name__ == "__main__":
    main()
