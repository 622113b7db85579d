"""``playbook init``: a starting workload config from a few answers or flags, validated, every key commented.

The answers: the model folder, the engines and how each starts (its own venv under ``.engines/``, its
official image, the current environment, or an endpoint already running), the GPU priced, a trace to
profile, the SLA. What is not asked comes from the shipped host-neutral examples: an engine section
from the first example with that engine and launcher (its knobs, flags and start-up time), the sizing
of the CPU default (``default.yaml``) when every engine runs on the CPU, else of ``gpu-venv.yaml``.
The config is validated by the same pydantic models as ``playbook run`` before it is written, and read
back after; a trace is profiled first, and its figures head the file.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.core.paths import REPO_ROOT, WORKLOADS_DIR, resolve_model_dir
from helpers.core.text import slug, unknown_choice
from helpers.engines import ENGINES, get_engine
from helpers.launchers.config_check import load_config, parse_config
from helpers.model.gpu_specs import gpu_spec
from helpers.tools.check.host import read_gpus
from helpers.tools.commented_yaml import commented_yaml
from helpers.tools.engine_setup import RECIPES
from helpers.workload.profile import profile_command

LAUNCHER_CHOICES = ("venv", "docker", "current")
CPU_TEMPLATE, GPU_TEMPLATE = "default", "gpu-venv"
DEFAULT_MODEL = ".engines/models/smollm2-135m-instruct"
FALLBACK_MODEL = "tiny-llama"
SIZING_SECTIONS = ("workload", "sla", "evidence")
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.gguf")


FIRST_EXAMPLES = ("default", "gpu-venv", "gpu-docker")
"""Examples whose engine sections are taken first: the CPU default and the two GPU examples."""


def shipped_examples() -> list[dict[str, Any]]:
    """The host-neutral example configs (``playbook/workloads/*.yaml``) as data, ``FIRST_EXAMPLES`` first."""
    paths = sorted(WORKLOADS_DIR.glob("*.yaml"), key=lambda p: (p.stem not in FIRST_EXAMPLES, p.stem))
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in paths]


def _template(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKLOADS_DIR / f"{name}.yaml").read_text(encoding="utf-8"))


def pinned_version(engine: str) -> str | None:
    """The version ``playbook setup-engine ENGINE`` installs (its recipe's pin of the engine's package)."""
    adapter = get_engine(engine)
    for pin in RECIPES[engine].packages if engine in RECIPES else []:
        name, _, version = pin.partition("==")
        if name in (adapter.package, adapter.name):
            return version
    return None


def engine_section(engine: str, launcher: str, examples: list[dict[str, Any]]) -> dict[str, Any]:
    """One engine section: the first shipped example's with that engine and way of starting, else a minimal one."""
    adapter = get_engine(engine)
    venv = f".engines/{engine}/bin/python"
    for ex in examples:
        for e in ex.get("engines", []):
            kind = (e.get("launcher") or {}).get("kind", "python")
            same = e["engine"] == engine and (
                (launcher == "venv" and kind == "python" and e["launcher"].get("python") == venv)
                or (launcher == "docker" and kind == "docker")
            )
            if same:
                spec = {k: copy.deepcopy(v) for k, v in e.items() if k not in ("label", "note")}
                spec["knobs"] = {k: v for k, v in spec.get("knobs", {}).items() if k != "prefix_caching"}
                return spec
    spec: dict[str, Any] = {"engine": engine}
    if launcher == "venv":
        spec["version"] = pinned_version(engine)
        spec["launcher"] = {"kind": "python", "python": venv}
    elif launcher == "docker":
        tag = (adapter.default_image or "").rpartition(":")[2]
        spec["version"] = tag.lstrip("v") or None
        spec["launcher"] = {"kind": "docker", "image": adapter.default_image}
    return {k: v for k, v in spec.items() if v is not None}


def label_of(spec: dict[str, Any]) -> str:
    """``vLLM 0.26.0``, ``vLLM 0.26.0 (image)``, ``vLLM (current environment)``: engine, version, how it starts."""
    adapter = get_engine(spec["engine"])
    name = " ".join(x for x in (adapter.display_name or adapter.name, spec.get("version")) if x)
    kind = (spec.get("launcher") or {}).get("kind")
    return name + {"docker": " (image)", None: " (current environment)"}.get(kind, "")


def has_weights(model: Path) -> bool:
    """Whether the model folder holds weights (else the engines serve dummy ones)."""
    return any(next(model.glob(p), None) is not None for p in WEIGHT_FILES)


def _repo_path(path: str) -> str:
    """A path given here as a config writes it: relative to the repository root when inside it, else absolute."""
    p = Path(os.path.abspath(Path(path).expanduser()))  # links kept: .engines may be one
    try:
        return str(p.relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


def model_path(model: str) -> str:
    """The model as the config names it: a folder that exists from here, else as given (a playbook/models name)."""
    return _repo_path(model) if Path(model).expanduser().is_dir() else model


def profile_header(trace: str, fmt: str | None) -> list[str]:
    """The trace's profile in a few lines (it is read here: a trace that does not load fails now)."""
    prof = profile_command(trace, fmt, None)
    i, o = prof["input_tokens"], prof["output_tokens"]
    c = [prof.get(f"concurrency_p{q}") for q in (50, 95, 99)]
    return [
        f"Trace {trace} ({prof['format']}): {prof['requests']:,} requests over {prof['duration_s'] / 60:.0f} min, "
        f"mean {prof['mean_requests_per_s']:.2f} req/s, peak {prof['peak_requests_per_s']:.2f} req/s "
        f"(over {prof['peak_window_s']:g} s); input tokens p50 {i['p50']:,.0f} / p95 {i['p95']:,.0f}, output p50 "
        f"{o['p50']:,.0f} / p95 {o['p95']:,.0f}; concurrency p50/p95/p99 {'/'.join(f'{x:g}' for x in c)} "
        f"({prof['concurrency_method']}). Step 1 profiles it again in the run; step 5 replays its lengths."
    ]


def build_config(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The config data from the answers, and the lines that head the file."""
    model = args.model or (DEFAULT_MODEL if (REPO_ROOT / DEFAULT_MODEL / "config.json").is_file() else FALLBACK_MODEL)
    folder = resolve_model_dir(model)
    real = has_weights(folder) and not args.dummy_weights
    examples = shipped_examples()
    engines = []
    for name in args.engines or []:
        if name not in ENGINES or name == "endpoint":
            raise ConfigError(unknown_choice("engine", name, [e for e in ENGINES if e != "endpoint"]))
        spec = engine_section(name, args.launcher, examples)
        if args.launcher == "current":
            spec.pop("launcher", None)
        spec.setdefault("knobs", {})["dummy_weights"] = not real
        engines.append({"label": label_of(spec), **spec})
    if args.endpoint:
        launcher = {"kind": "endpoint", "url": args.endpoint}
        engines.append({"label": "endpoint", "engine": "endpoint", "launcher": launcher})
    if not engines:
        raise ConfigError("give the engines to compare (--engines vllm-cpu sglang ...) or an --endpoint URL")
    on_cpu = all(get_engine(e["engine"]).runs_on_cpu or e["engine"] == "endpoint" for e in engines)
    sizing = _template(CPU_TEMPLATE if on_cpu else GPU_TEMPLATE)
    data: dict[str, Any] = {"name": args.name or slug(Path(args.trace).stem if args.trace else folder.name)}
    data["description"] = f"Written by playbook init: {', '.join(e['label'] for e in engines)} on {folder.name}."
    data["model"] = {"path": model_path(model), "served_name": folder.name}
    if on_cpu and real:
        data["model"]["dtype"] = "float32"  # bf16 has no fast kernel on many CPUs (the CPU default's choice)
    data["engines"] = engines
    data.update({k: copy.deepcopy(sizing[k]) for k in SIZING_SECTIONS if k in sizing})
    header = []
    if args.trace:
        header = profile_header(args.trace, args.format)
        wl = data["workload"]
        for key in ("input_tokens", "output_tokens", "shared_prefix_tokens", "prompts"):
            wl.pop(key, None)
        source = {"kind": "trace", "path": _repo_path(args.trace)}
        wl["source"] = {**source, "format": args.format} if args.format else source
        wl["profile_concurrency"] = not on_cpu  # the trace's p50/p95/p99 streams: too many for a CPU
    else:
        data["workload"].update({k: v for k, v in (("input_tokens", args.input_tokens),
                                                   ("output_tokens", args.output_tokens)) if v})  # fmt: skip
    data["sla"] = {"ttft_p95_ms": args.ttft_ms, **({"itl_p95_ms": args.itl_ms} if args.itl_ms else {})}
    if real and "quality" in sizing:
        data["quality"] = copy.deepcopy(sizing["quality"])
    named = gpu_spec(args.gpu) if args.gpu else None
    data["cost"] = {
        "gpu": named.name if named else args.gpu or (f"cpu-{os.cpu_count() or 1}core" if on_cpu else _local_gpu())
    }
    data["hardware"] = {"vendors": "nvidia-only", "autoscaling": False, "gpu_count": args.gpus}
    data["team"] = {"size": 3, "mlops_maturity": "low", "chase_peak": False}
    data["cadence"] = {"updates_per_month": 1.0, "concurrent_models": 1}
    sized = "the CPU default (default.yaml)" if on_cpu else "gpu-venv.yaml"
    header.append(
        f"Sizing (workload, evidence) as in {sized}; team, cadence and hardware are the defaults: answer them."
    )
    return data, header


def _local_gpu() -> str:
    """The spec-table name of this host's first GPU, else the seed's H100."""
    gpus, _ = read_gpus()
    spec = gpu_spec(gpus[0].name) if gpus else None
    return spec.name if spec else "H100-SXM5-80GB"


def write_config(data: dict[str, Any], header: list[str], out: Path, force: bool = False) -> PlaybookConfig:
    """Validate ``data``, write it with comments to ``out`` and read it back; the config as ``playbook run`` sees it."""
    if out.exists() and not force:
        raise ConfigError(f"{out}: already exists; give --force to replace it, or another --out")
    parse_config(data, str(out))  # the same validation as playbook run: a bad answer fails before writing
    now = datetime.now(UTC)
    said = (
        f"Written by `playbook init` on {now:%Y-%m-%d} (UTC), validated against the config schema; every key says "
        "what it is above it (docs/reference/config.md lists them all). Next: `playbook check` on this file "
        "(seconds: what would fail, and the fix), then `playbook run` on it."
    )
    top = [*textwrap.wrap(said, 100), "", *(ln for h in header for ln in textwrap.wrap(h, 100))]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(commented_yaml(PlaybookConfig, data, top), encoding="utf-8")
    try:
        return load_config(out)
    except ConfigError:
        out.unlink()
        raise


def _ask(question: str, default: str) -> str:
    """One question on the terminal; Enter keeps ``default``."""
    answer = input(f"{question} [{default}]: ").strip()
    return answer or default


def ask_missing(args: argparse.Namespace) -> None:
    """On a terminal, ask for the answers not given as flags (``--yes``: take the defaults)."""
    if args.yes or not sys.stdin.isatty():
        return
    if not args.engines and not args.endpoint:
        args.engines = _ask(
            "Engines to compare (space-separated: vllm-cpu vllm sglang lmdeploy trtllm)", "vllm-cpu"
        ).split()
    if args.model is None:
        args.model = _ask("Model folder (config.json + tokenizer; weights optional)", DEFAULT_MODEL)
    if args.trace is None:
        args.trace = _ask("A trace of your traffic to profile (CSV, Mooncake or OpenAI-style JSONL; empty: none)", "")
        args.trace = args.trace or None
    args.ttft_ms = float(_ask("SLA: TTFT p95 limit in ms", f"{args.ttft_ms:g}"))


def add_init_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of ``playbook init``."""
    p.add_argument("--engines", nargs="+", metavar="ENGINE", help="engines to compare (vllm-cpu, vllm, sglang, ...)")
    p.add_argument("--launcher", choices=LAUNCHER_CHOICES, default="venv",
                   help="how they start: venv (.engines/<engine>, playbook setup-engine), docker (official image), "
                   "current (this environment)")  # fmt: skip
    p.add_argument("--endpoint", metavar="URL", help="also (or only) a server already running at URL")
    p.add_argument("--model", help=f"model folder (default {DEFAULT_MODEL} when made, else {FALLBACK_MODEL})")
    p.add_argument("--dummy-weights", action="store_true", help="serve dummy weights even if the folder has weights")
    p.add_argument("--trace", help="a trace of your traffic: profiled now, replayed by the run")
    p.add_argument("--format", help="the trace's format (detected when omitted)")
    p.add_argument("--input-tokens", type=int, help="prompt tokens of the synthetic workload (no trace)")
    p.add_argument("--output-tokens", type=int, help="output tokens of the synthetic workload (no trace)")
    p.add_argument("--ttft-ms", type=float, default=2000.0, help="SLA: TTFT p95 limit in ms (default 2000)")
    p.add_argument("--itl-ms", type=float, help="SLA: inter-token latency p95 limit in ms (default none)")
    p.add_argument("--gpu", help="GPU priced, a name of helpers/data/gpu_specs.yaml (default: this host's)")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per serving replica (default 1)")
    p.add_argument("--name", help="workload name (default: from the trace or the model)")
    p.add_argument("--out", help="where to write it (default playbook/workloads/<name>.yaml)")
    p.add_argument("--force", action="store_true", help="replace the file if it exists")
    p.add_argument("--yes", "-y", action="store_true", help="ask nothing on a terminal: flags and defaults only")
    return p


def init_command(args: argparse.Namespace) -> int:
    """Run ``playbook init``: write the config and say what to do next."""
    ask_missing(args)
    if args.gpu and gpu_spec(args.gpu) is None and not re.fullmatch(r"cpu.*", args.gpu):
        raise ConfigError(f"--gpu {args.gpu!r}: not in helpers/data/gpu_specs.yaml (see playbook predict --help)")
    data, header = build_config(args)
    out = Path(args.out) if args.out else WORKLOADS_DIR / f"{data['name']}.yaml"
    cfg = write_config(data, header, out, args.force)
    labels = ", ".join(e.label for e in cfg.engines)
    print(f"wrote {out}: {cfg.name!r}, {len(cfg.engines)} engine configuration(s) ({labels})")
    print(f"next: playbook check {out}   then: playbook run {out}")
    return 0
