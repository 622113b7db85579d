"""LMDeploy adapter (``python -m lmdeploy serve api_server MODEL``), TurboMind and PyTorch backends.

Checked against LMDeploy's own source — the newest stored here is ``main`` just after v0.16.0
(2026-08-21): ``lmdeploy/__main__.py`` runs the ``lmdeploy`` CLI, so ``python -m lmdeploy serve
api_server MODEL`` is the console script's command; ``lmdeploy/cli/serve.py`` and
``lmdeploy/cli/utils.py`` define ``--server-name``, ``--server-port``, ``--backend {pytorch,
turbomind}`` (default turbomind), ``--model-name``, ``--dtype {auto,float16,bfloat16}``, ``--tp``,
``--session-len``, ``--max-batch-size``, ``--cache-max-entry-count``, ``--enable-prefix-caching``
(store_true, default off), ``--max-prefill-token-num``, ``--quant-policy``, ``--model-format``,
``--log-level`` and ``--max-log-len``; 0.18.0 itself was probed on the H200 (shared/gpu/README.md)
with ``--backend``, ``--server-name``/``--server-port`` and ``--session-len``.

Knobs: ``max_num_seqs`` → ``--max-batch-size``; ``max_batched_tokens`` → ``--max-prefill-token-num``;
``prefix_caching: true`` → ``--enable-prefix-caching`` (LMDeploy's default is OFF, unlike vLLM and
SGLang); ``tensor_parallel`` → ``--tp``; ``max_model_len`` → ``--session-len``; ``memory_fraction`` →
``--cache-max-entry-count``, which in LMDeploy is the share of the memory FREE AFTER the weights
(and, on PyTorch, after its runtime reserve) that the KV cache takes — not vLLM's share of the whole
GPU — and must be below 1. KV cache: ``QuantPolicy`` (``lmdeploy/messages.py``) has 0/4/8 (none,
int4, int8) and, since v0.14.0, 16/17 (fp8 e4m3 / e5m2); ``TurbomindEngineConfig.__post_init__``
asserts "FP8 quantization is not supported", so ``kv_cache_dtype: fp8`` maps to ``--quant-policy
16`` on PyTorch and is a config error on TurboMind. Weights: ``quantization: fp8`` maps to
``--model-format fp8`` on PyTorch (``_patch_quantization_config`` quantizes a bf16 checkpoint to
blocked FP8 at load); TurboMind only reads checkpoints already in FP8, so it is refused there.

No dummy weights: LMDeploy has no dummy loader, so ``dummy_weights: true`` is refused. With
``engine_options: {weights: random}`` the engine is given the random-weight folder of the model
(``helpers.model.random_weights``; ``prepare`` writes it before launch, or ``playbook
random-weights MODEL_DIR`` on the host; ``weights_root: DIR`` puts it under DIR instead of
``/dev/shm/pb-models``, for ``--root DIR``), else ``model.path`` itself, which must hold weights. The folder
is bf16, or block FP8 (float8_e4m3fn in 128 × 128 blocks, which TurboMind reads) when the model's
``config.json`` declares ``quant_method: fp8``.

Metrics: on by default (``--disable-metrics`` turns them off; there is no ``--enable-metrics``) at
``/metrics`` (``mount_metrics`` in ``serve/openai/api_server.py``), series from
``lmdeploy/metrics/loggers.py``: counters ``lmdeploy:cached_tokens_total`` (prefix-cached prompt
tokens, added at request end) and ``lmdeploy:prompt_tokens_total``; gauges
``lmdeploy:prefix_cache_hit_rate``, ``lmdeploy:gpu_cache_usage_perc``,
``lmdeploy:num_requests_waiting`` and ``lmdeploy:num_requests_running`` (the gauges are refreshed
every 10 s). Health: ``GET /health`` (200 when the engine monitor says healthy).

KV capacity: the PyTorch engine logs ``Building CacheEngine with config:`` and, on the next line,
``CacheConfig(..., block_size=B, ..., num_gpu_blocks=N, ...)`` at INFO (``pytorch/engine/executor/base.py``), so the
server runs with ``--log-level INFO`` (and ``--max-log-len 0`` so prompts stay out of the log); the
capacity is N × B tokens (on TurboMind the Python log is at WARNING: at INFO it writes four lines per
request). TurboMind logs a byte budget, not tokens: ``Object cache budget: %.2f MB from free %.2f MB and
ratio %.3f`` (``TurboMind::Impl::CreateEngine``, ``src/turbomind/turbomind.cc``: the
ratio, ``--cache-max-entry-count``, of what ``cudaMemGetInfo`` finds free once the weights are loaded), at
INFO in its C++ log, so ``TM_LOG_LEVEL`` is INFO for TurboMind (the server would take ``--log-level``
otherwise); the capacity is that budget over the KV bytes of one token. The memory plan reads
``memory_fraction`` the same way for TurboMind (``kv_share``: ``free``).

Fallback: asked for TurboMind where TurboMind cannot run (not built, no CUDA 12 libraries, model not
supported), LMDeploy logs ``Fallback to pytorch engine because ...`` (``lmdeploy/archs.py``; 0.18.0
on the H200: ``... because turbomind is not built.``) and serves PyTorch instead of failing;
``startup_problem`` turns that into a failed row. In 0.18.0 (read from its wheel) the extension's import
error is kept, not logged: ``lmdeploy/turbomind/__init__.py`` catches ``ImportError``/``OSError`` of
``_turbomind`` (whose ELF needs ``libcudart.so.12``, ``libcublas.so.12`` and ``libcublasLt.so.12``), so
``archs.py`` says "turbomind is not built" for a missing CUDA 12 runtime too. Where TurboMind is built
without that check (``AsyncEngine._build_turbomind``), the start dies with ``RuntimeError: TurboMind was
requested but its native module is unavailable.`` raised from the import error (``ImportError:
libcudart.so.12: cannot open shared object file: No such file or directory``); ``start_failure_line``
names that, and an unknown ``--backend`` (argparse's ``invalid choice``, reachable through extra_args),
in the failed row.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.core.errors import ConfigError, EngineError
from helpers.engines.base import EngineAdapter, MetricNames
from helpers.model.random_weights import random_weights_dir, write_random_weights

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, Knobs, ModelSpec

BACKENDS = ("turbomind", "pytorch")
DEFAULT_BACKEND = "turbomind"  # LMDeploy's own default
OPTIONS = {
    "backend": "turbomind | pytorch",
    "weights": "random (random weights generated on the host: bf16, or block FP8 for an fp8 config.json)",
    "weights_root": "a folder for the random weights (default /dev/shm/pb-models, else a cache folder)",
}
QUANT_POLICY_FP8 = "16"  # QuantPolicy.FP8: float8_e4m3fn, per-tensor scale (PyTorch engine only)
_FALLBACK = re.compile(r"Fallback to pytorch engine because ([^\n]*)")
_CACHE_CONFIG = re.compile(r"Building CacheEngine with config:\s*CacheConfig\(([^\n]*)")
_GPU_BLOCKS = re.compile(r"\bnum_gpu_blocks=(\d+)")
_CACHE_BUDGET = re.compile(r"Object cache budget: ([\d.]+) MB from free [\d.]+ MB")
_BLOCK_SIZE = re.compile(r"\bblock_size=(\d+)")
CUDA12_LIBRARIES = {
    "libcudart.so.12": "nvidia-cuda-runtime-cu12",
    "libcublas.so.12": "nvidia-cublas-cu12",
    "libcublasLt.so.12": "nvidia-cublas-cu12",
}
"""The CUDA 12 libraries ``_turbomind``'s ELF needs (its NEEDED entries in 0.18.0), and the wheels that carry them."""
TURBOMIND_BUNDLE = "lmdeploy-0.18.0-turbomind-cu12"
_MISSING_LIBRARY = re.compile(r"(lib[\w+-]+\.so[\w.]*): cannot open shared object file")
_WRONG_VERSION = re.compile(r"version `([^']+)' not found")
_NO_TURBOMIND = "TurboMind was requested but its native module is unavailable"
_BAD_BACKEND = re.compile(r"argument --backend: invalid choice: '?([\w.-]+)'?")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_QUOTE_CHARS = 160


class LmdeployAdapter(EngineAdapter):
    """``lmdeploy serve api_server``; the backend comes from ``engine_options.backend``."""

    name = "lmdeploy"
    display_name = "LMDeploy"
    family = "lmdeploy"
    module = "lmdeploy"
    package = "lmdeploy"
    default_image = "openmmlab/lmdeploy:v0.18.0-cu12"  # the tag pattern of LMDeploy's images; not pulled here
    container_entrypoint = ["lmdeploy"]
    default_port = 23333
    metrics = MetricNames(
        prefix_hits="lmdeploy:cached_tokens_total",
        prefix_queries="lmdeploy:prompt_tokens_total",
        hit_rate_gauge="lmdeploy:prefix_cache_hit_rate",
        kv_usage="lmdeploy:gpu_cache_usage_perc",
        waiting="lmdeploy:num_requests_waiting",
        running="lmdeploy:num_requests_running",
        # exported by loggers.py too; knobs.speculative is not mapped onto LMDeploy's flags yet (refused)
        spec_accepted="lmdeploy:spec_decode_num_accepted_tokens_total",
        spec_drafted="lmdeploy:spec_decode_num_draft_tokens_total",
        spec_drafts="lmdeploy:spec_decode_num_drafts_total",
        spec_accept_rate_gauge="lmdeploy:spec_decode_mean_accept_rate",
        spec_accept_length_gauge="lmdeploy:spec_decode_mean_accept_length",
    )
    install_hint = "playbook setup-engine lmdeploy (offline: playbook bundle lmdeploy)"

    def calibration_key(self, spec: EngineSpec) -> str:
        """``lmdeploy-<backend>``: each backend is calibrated on its own (``EngineAdapter.calibration_key``)."""
        return f"lmdeploy-{self.backend(spec)}"

    def backend(self, spec: EngineSpec) -> str:
        """``turbomind`` (LMDeploy's default) or ``pytorch``, from ``engine_options.backend``."""
        chosen = spec.engine_options.get("backend", DEFAULT_BACKEND)
        if chosen not in BACKENDS:
            raise ValueError(
                f"engine {spec.label!r}: engine_options.backend: unknown LMDeploy backend {chosen!r}; "
                f"allowed: {', '.join(BACKENDS)}"
            )
        return chosen

    def check_spec(self, spec: EngineSpec) -> None:
        """Refuse what LMDeploy cannot do, naming the field: dummy weights, FP8 KV or online FP8 on TurboMind."""
        who = f"engine {spec.label!r}"
        unknown = sorted(set(spec.engine_options) - set(OPTIONS))
        if unknown:
            allowed = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
            raise ValueError(f"{who}: engine_options.{unknown[0]}: not an LMDeploy option; allowed: {allowed}")
        if spec.engine_options.get("weights", "random") != "random":
            raise ValueError(f"{who}: engine_options.weights: only 'random' is known (or leave it out)")
        if spec.engine_options.get("weights") == "random" and spec.launcher.kind != "python":
            raise ValueError(
                f"{who}: engine_options.weights: random needs the python launcher (the weights are written on "
                f"this host; the {spec.launcher.kind} launcher would not see them)"
            )
        if "weights_root" in spec.engine_options and spec.engine_options.get("weights") != "random":
            raise ValueError(f"{who}: engine_options.weights_root: only with weights: random (it says where they go)")
        backend, k = self.backend(spec), spec.knobs
        if k.dummy_weights:
            raise ValueError(
                f"{who}: knobs.dummy_weights: LMDeploy has no dummy-weight loader; set dummy_weights: false and "
                "engine_options.weights: random (random bf16 weights written on the GPU host before launch, or "
                "`playbook random-weights MODEL_DIR` there), or point model.path at a folder with weights"
            )
        if k.kv_cache_dtype == "fp8" and backend == "turbomind":
            raise ValueError(
                f"{who}: knobs.kv_cache_dtype: fp8 KV cache is not offered by LMDeploy's TurboMind backend "
                "(its quant policies there are 0/4/8: none, int4, int8); use engine_options.backend: pytorch "
                "(--quant-policy 16) or kv_cache_dtype: auto"
            )
        if k.quantization == "fp8" and backend == "turbomind":
            raise ValueError(
                f"{who}: knobs.quantization: TurboMind reads FP8 checkpoints but does not quantize bf16 weights "
                "at load; use engine_options.backend: pytorch (--model-format fp8) or an FP8 checkpoint"
            )
        if k.memory_fraction is not None and k.memory_fraction >= 1:
            raise ValueError(f"{who}: knobs.memory_fraction: LMDeploy needs a share of free memory below 1")

    def knob_flags(self, knobs: Knobs, backend: str = DEFAULT_BACKEND) -> list[str]:
        """Map knobs onto ``lmdeploy serve api_server`` flags (``check_spec`` has refused what does not map)."""
        f: list[str] = []
        if knobs.max_num_seqs:
            f += ["--max-batch-size", str(knobs.max_num_seqs)]
        if knobs.max_batched_tokens:
            f += ["--max-prefill-token-num", str(knobs.max_batched_tokens)]
        if knobs.prefix_caching:
            f.append("--enable-prefix-caching")  # off is LMDeploy's default: no flag for False
        if knobs.kv_cache_dtype == "fp8" and backend == "pytorch":
            f += ["--quant-policy", QUANT_POLICY_FP8]
        if knobs.quantization == "fp8" and backend == "pytorch":
            f += ["--model-format", "fp8"]
        if knobs.tensor_parallel > 1:
            f += ["--tp", str(knobs.tensor_parallel)]
        if knobs.memory_fraction is not None:
            f += ["--cache-max-entry-count", str(knobs.memory_fraction)]
        if knobs.max_model_len:
            f += ["--session-len", str(knobs.max_model_len)]
        return f

    def weights_dir(self, spec: EngineSpec, model_path: str) -> str:
        """The folder the engine loads: the random-weight folder of ``model_path`` when asked for, else itself.

        A path that is not a model folder here (``/model`` inside a container, in the rollout's Docker
        form) is passed on as given: random weights exist only on the host that wrote them.
        """
        if spec.engine_options.get("weights") == "random" and (Path(model_path) / "config.json").is_file():
            return str(random_weights_dir(model_path, spec.engine_options.get("weights_root")))
        return model_path

    def prepare(self, spec: EngineSpec, model: ModelSpec, log: Callable[[str], None] = print) -> None:
        """Write the random weights (cached by ``config.json``'s hash) before launch, when the config asks for them.

        ``log`` gets a line per shard with the time left (72.7 GB for 70B in block FP8). A model they cannot be
        made for (AWQ, GPTQ, FP8 in other blocks), or a filesystem without room for them, is an
        ``EngineError``: a failed row, not a crash.
        """
        if spec.engine_options.get("weights") != "random":
            return
        try:
            root = spec.engine_options.get("weights_root")
            write_random_weights(model.directory, random_weights_dir(model.directory, root), log=log)
        except ConfigError as err:
            raise EngineError(f"engine {spec.label!r}: no random weights: {err}") from None

    def server_args(self, spec: EngineSpec, model: ModelSpec, model_path: str, host: str, port: int) -> list[str]:
        """``serve api_server DIR --server-name H --server-port P --backend B --model-name N`` plus knobs."""
        self.check_spec(spec)
        backend = self.backend(spec)
        args = ["serve", "api_server", self.weights_dir(spec, model_path), "--server-name", host]
        args += ["--server-port", str(port), "--backend", backend, "--model-name", self.served_model_name(model)]
        if model.dtype != "auto":
            if model.dtype == "float32":
                raise ValueError(f"engine {spec.label!r}: model.dtype: LMDeploy offers auto, float16, bfloat16")
            args += ["--dtype", model.dtype]
        if "--log-level" not in spec.extra_args:
            # PyTorch: INFO for the CacheEngine line that gives the KV capacity. TurboMind's budget line is in its
            # C++ log (TM_LOG_LEVEL); its Python INFO is four lines per request (8.9 MB on one H100 run), so WARNING,
            # which keeps the fallback warning that ``startup_problem`` reads.
            args += ["--log-level", "INFO" if backend == "pytorch" else "WARNING"]
        if "--max-log-len" not in spec.extra_args:
            args += ["--max-log-len", "0"]  # INFO would log every prompt in full otherwise
        return args + self.knob_flags(spec.knobs, backend) + list(spec.extra_args)

    def env(self, spec: EngineSpec) -> dict[str, str]:
        """Keep LMDeploy offline; TurboMind's C++ log at INFO for its cache budget, at WARNING on PyTorch."""
        level = "INFO" if self.backend(spec) == "turbomind" else "WARNING"
        return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TM_LOG_LEVEL": level}

    def kv_share(self, spec: EngineSpec) -> str:
        """``free`` on TurboMind (its cache takes the ratio of the memory free after the weights), else ``gpu``."""
        return "free" if self.backend(spec) == "turbomind" else "gpu"

    def kv_capacity_from_log(self, text: str, kv_bytes_per_token: int | None = None) -> int | None:
        """KV tokens the engine logged: PyTorch's ``num_gpu_blocks`` × ``block_size``, or TurboMind's budget in tokens.

        PyTorch: its last ``CacheConfig``; TurboMind: its last object-cache budget over ``kv_bytes_per_token``
        (module doc). None when neither line is there, or TurboMind's is and ``kv_bytes_per_token`` is not given.
        """
        found = _CACHE_CONFIG.findall(text)
        blocks, size = (_GPU_BLOCKS.search(found[-1]), _BLOCK_SIZE.search(found[-1])) if found else (None, None)
        if blocks and size:
            return int(blocks.group(1)) * int(size.group(1))
        budget = _CACHE_BUDGET.findall(text)
        if budget and kv_bytes_per_token:
            return int(float(budget[-1]) * 2**20) // kv_bytes_per_token
        return None

    def start_failure_line(self, log_text: str) -> tuple[str, str] | None:
        """What stopped a start that died, with its line: TurboMind's CUDA 12 runtime missing, an unknown backend.

        A missing library (``libcudart.so.12: cannot open shared object file``) or one of another CUDA build
        (``version `libcublas.so.12' not found``) names the library and the wheel that carries it; LMDeploy's
        ``TurboMind was requested but its native module is unavailable`` without such a line is said as is;
        argparse's ``argument --backend: invalid choice`` names the backend. None for anything else.
        """
        lines = [_ANSI.sub("", raw).strip() for raw in log_text.splitlines()]
        for line in lines:
            found = _MISSING_LIBRARY.search(line) or _WRONG_VERSION.search(line)
            if found:
                return _library_problem(found.group(1), found.re is _WRONG_VERSION), _quote(line)
        for line in lines:
            if _NO_TURBOMIND in line:
                return f"TurboMind could not be loaded (bundle {TURBOMIND_BUNDLE})", _quote(line)
        for line in lines:
            if found := _BAD_BACKEND.search(line):
                return f"unknown LMDeploy backend {found.group(1)!r} (allowed: {', '.join(BACKENDS)})", _quote(line)
        return None

    def startup_problem(self, log_text: str) -> str | None:
        """A TurboMind run that LMDeploy quietly moved to its PyTorch engine is a failure, with LMDeploy's reason."""
        found = _FALLBACK.search(log_text)
        if not found:
            return None
        named = self.start_failure_line(log_text)
        return (
            "asked for the TurboMind backend, but LMDeploy fell back to its PyTorch engine "
            f"(its log: 'Fallback to pytorch engine because {found.group(1).strip()}'); not measured as TurboMind. "
            "TurboMind needs libcublas.so.12 and libcudart.so.12 on the library path (bundle lmdeploy-turbomind)"
            + (f"; the log also says: {named[1]}" if named else "")
        )


def _quote(line: str) -> str:
    """``line`` from its exception name where it has one (``ImportError: ...``), cut to 160 characters."""
    start = re.search(r"\b[A-Za-z_][\w.]*(?:Error|Exception): ", line)
    quote = line[start.start() :] if start else line
    return quote if len(quote) <= _QUOTE_CHARS else quote[: _QUOTE_CHARS - 1].rstrip() + "…"


def _library_problem(library: str, wrong_build: bool) -> str:
    """What a missing (or wrongly built) shared library means for LMDeploy, naming the wheel that carries it."""
    wheel = CUDA12_LIBRARIES.get(library)
    if wheel is None:
        return f"a shared library LMDeploy needs is {'of another build' if wrong_build else 'missing'} ({library})"
    how = "of another CUDA build (a CUDA 13 host's do not do)" if wrong_build else "missing"
    return (
        f"TurboMind's CUDA 12 runtime is {how}: {library} (wheel {wheel}, in bundle {TURBOMIND_BUNDLE}; "
        "its nvidia/*/lib folders on LD_LIBRARY_PATH)"
    )
