"""The engine adapter interface (the registry of adapters is ``helpers.engines.ENGINES``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, Knobs, ModelSpec


@dataclass(frozen=True)
class MetricNames:
    """Names of an engine's Prometheus series that the playbook normalises.

    Prefix-cache hit rate comes from two counters (hits and queries, both summed over labels)
    whose deltas over a point are divided; ``hit_rate_gauge`` is used only when no counters exist.
    """

    prefix_hits: str | None = None
    prefix_queries: str | None = None
    hit_rate_gauge: str | None = None
    kv_usage: str | None = None
    waiting: str | None = None
    running: str | None = None
    # speculative decoding: counters of accepted and drafted tokens and of drafts (vLLM), whose deltas
    # over a point give the acceptance rate; a gauge of the rate where an engine has no counters (SGLang)
    spec_accepted: str | None = None
    spec_drafted: str | None = None
    spec_drafts: str | None = None
    spec_accept_rate_gauge: str | None = None
    spec_accept_length_gauge: str | None = None


class EngineAdapter:
    """What the playbook needs to know about one engine; subclasses fill the class attributes."""

    name: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    family: ClassVar[str] = ""  # decision-tree family: vllm, sglang, trtllm or lmdeploy (endpoint: unknown)
    module: ClassVar[str | None] = None  # python -m <module> starts the server
    package: ClassVar[str | None] = None  # distribution/import name used to read the version
    default_image: ClassVar[str | None] = None
    container_entrypoint: ClassVar[list[str]] = []
    health_path: ClassVar[str] = "/health"
    metrics_path: ClassVar[str] = "/metrics"
    metrics: ClassVar[MetricNames] = MetricNames()
    # where the benchmark samples server statistics during a point, when that is not the Prometheus
    # page above (``metrics`` stays what dashboards and alerts scrape): a path, a page format named
    # in ``helpers.measure.metrics.PAGE_FORMATS`` and the names of the normalised quantities in that format
    sample_path: ClassVar[str | None] = None
    sample_format: ClassVar[str] = "prometheus"
    sample_metrics: ClassVar[MetricNames | None] = None
    default_port: ClassVar[int] = 8000
    install_hint: ClassVar[str] = ""
    # regex over the engine log with one group: the KV-cache capacity in tokens
    kv_capacity_pattern: ClassVar[str | None] = None
    runs_on_cpu: ClassVar[bool] = False
    # speculative-decoding methods (``knobs.speculative.method``) the adapter maps onto flags; others are refused
    speculative_methods: ClassVar[frozenset[str]] = frozenset()
    # flag that takes the path of a YAML file of launch options (``launch_options``), if the engine has one
    options_flag: ClassVar[str | None] = None
    # POST endpoint that empties the prefix cache (between repeated trials), if the engine has one
    cache_reset_path: ClassVar[str | None] = None
    # the prefix cache's block size (tokens): the flag that sets it, a regex over the engine log with one group
    # (the size it logged), and the engine's default when neither says (None: not known)
    block_size_flag: ClassVar[str | None] = None
    block_size_pattern: ClassVar[str | None] = None
    default_block_size: ClassVar[int | None] = None

    def knob_flags(self, knobs: Knobs) -> list[str]:
        """Map the engine-neutral knobs onto this engine's command-line flags."""
        raise NotImplementedError

    def server_args(self, spec: EngineSpec, model: ModelSpec, model_path: str, host: str, port: int) -> list[str]:
        """Arguments of the server entry point (after ``python -m module``), ``extra_args`` last."""
        raise NotImplementedError

    def env(self, spec: EngineSpec) -> dict[str, str]:
        """Environment variables the engine needs, before the launcher's own ``env``."""
        return {}

    def launch_options(self, spec: EngineSpec) -> dict:
        """Settings that have no command-line flag; launchers write them to a YAML file passed with ``options_flag``."""
        return {}

    def check_spec(self, spec: EngineSpec) -> None:
        """Raise ``ValueError`` naming the field when the configuration asks for what this engine cannot do.

        Called while the config is validated, so the error comes before any engine starts.
        """

    def benchmark_env(self) -> dict[str, str]:
        """Environment the benchmark's own launches add (e.g. what exposes ``cache_reset_path``); never deployed."""
        return {}

    def benchmark_args(self) -> list[str]:
        """Arguments the benchmark's own launches add (e.g. per-request cached-token reports); never deployed."""
        return []

    def benchmark_spec(self, spec: EngineSpec) -> EngineSpec:
        """``spec`` with ``benchmark_env`` and ``benchmark_args`` added (a copy; the config's spec is untouched)."""
        env, args = self.benchmark_env(), [a for a in self.benchmark_args() if a not in spec.extra_args]
        if not env and not args:
            return spec
        spec = spec.model_copy(deep=True)
        spec.launcher.env = {**env, **spec.launcher.env}
        spec.extra_args = [*args, *spec.extra_args]
        return spec

    def block_size(self, spec: EngineSpec, log_text: str = "") -> tuple[int | None, str]:
        """The prefix cache's block size (tokens) and where it came from: the engine log, a flag, the default."""
        found = re.findall(self.block_size_pattern, log_text) if self.block_size_pattern else []
        if found:
            return int(found[-1]), "engine log"
        args = list(spec.extra_args)
        if self.block_size_flag:
            for i, a in enumerate(args):
                value = a.split("=", 1)[1] if a.startswith(self.block_size_flag + "=") else None
                if a == self.block_size_flag and i + 1 < len(args):
                    value = args[i + 1]
                if value is not None and value.isdigit():
                    return int(value), f"{self.block_size_flag} in extra_args"
        if self.default_block_size:
            return self.default_block_size, f"{self.display_name or self.name} default"
        return None, f"not known for {self.display_name or self.name}"

    def prepare(self, spec: EngineSpec, model: ModelSpec, log: Callable[[str], None] = print) -> None:
        """Make what the engine needs on this host before launch (e.g. random weights); nothing by default.

        ``log`` takes progress lines (the run's progress notes), for what takes minutes.
        """

    def startup_problem(self, log_text: str) -> str | None:
        """Why an engine that became healthy is still not what the configuration asked for, if it is not.

        Called with the engine log after readiness; a reason makes the row failed (e.g. LMDeploy serving
        its PyTorch engine when TurboMind was asked for), never a silent substitution.
        """
        return None

    def start_failure_line(self, log_text: str) -> tuple[str, str] | None:
        """(what failed, the log line quoted) for a start that died before health, beyond running out of memory.

        Called with the log of that start; e.g. LMDeploy's TurboMind without its CUDA 12 runtime (``libcudart.so.12:
        cannot open shared object file``). None by default: the row then says only how the process exited.
        """
        return None

    def version_code(self) -> str:
        """Python source that prints the engine's version when run by its interpreter."""
        pkg = self.package or self.name
        return (
            "import importlib.metadata as m\n"
            f"for d in ({pkg!r},):\n"
            "    try:\n        print(m.version(d)); break\n    except m.PackageNotFoundError: pass\n"
        )

    def kv_capacity_from_log(self, text: str, kv_bytes_per_token: int | None = None) -> int | None:
        """The KV-cache capacity in tokens that the engine logged at start, if it did.

        ``kv_bytes_per_token`` (one GPU's share) turns an engine's logged byte budget into tokens where it
        logs bytes only (LMDeploy's TurboMind).
        """
        if not self.kv_capacity_pattern:
            return None
        found = re.findall(self.kv_capacity_pattern, text)
        return int(found[-1].replace(",", "")) if found else None

    def kv_share(self, spec: EngineSpec) -> str:
        """What ``knobs.memory_fraction`` is a share of, for the memory plan: ``gpu``, ``static`` or ``free``.

        ``gpu``: the whole GPU's memory, weights and activations included (vLLM). ``static``: the whole GPU's
        memory for weights and KV only (SGLang's ``--mem-fraction-static``). ``free``: the memory free once the
        weights are loaded (LMDeploy's TurboMind, ``--cache-max-entry-count``).
        """
        return "gpu"

    def calibration_key(self, spec: EngineSpec) -> str:
        """The engine as the capacity prediction's calibration keys it: its name, and its backend where it has two.

        Two backends of one engine are two engines to calibrate: on the Llama-3.1-8B shape LMDeploy's PyTorch
        engine reached 14.4 req/s on an H200, its TurboMind engine at least 38.6 on an H100, so
        ``lmdeploy-turbomind`` and ``lmdeploy-pytorch`` are apart.
        """
        return self.name

    def sampling(self) -> tuple[str, str, MetricNames]:
        """Path, page format and series names the benchmark samples during a point."""
        return self.sample_path or self.metrics_path, self.sample_format, self.sample_metrics or self.metrics

    def served_model_name(self, model: ModelSpec) -> str:
        """The model name requests must carry."""
        return model.served_name or model.path
