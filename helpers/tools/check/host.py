"""What ``playbook check`` asks of this host: the model folder, GPUs and their free memory, ports, disk space.

GPU memory is the step-4 memory plan (``helpers.environment.memory_plan``) of each GPU configuration on
the GPU it would get: weights + overhead + KV cache at its memory fraction and tensor-parallel size,
against what NVML says is free on each of those GPUs now. Configurations run one after another, so each
is compared with the whole free memory. CPU engines and endpoints need no GPU.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from helpers.core.config import DEFAULT_MEMORY_FRACTION, EngineSpec, PlaybookConfig
from helpers.core.errors import PlaybookError
from helpers.core.paths import repo_relative
from helpers.engines import get_engine
from helpers.environment.kv_prediction import gpu_kv_tokens, weight_precision
from helpers.launchers import LAUNCHERS
from helpers.measure.telemetry import nvml_handles
from helpers.model.gpu_specs import gpu_spec
from helpers.model.random_weights import DISK_MARGIN, bytes_to_write, free_bytes, random_weights_dir
from helpers.model.shape import read_model_shape
from helpers.tools.check.lines import Check

GIB = 2**30
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf")
_PORT_FLAG = re.compile(r"^--[\w-]*port$")


def starts_engine(spec: EngineSpec) -> bool:
    """Whether the playbook starts this configuration's engine here (not an endpoint's)."""
    return LAUNCHERS[spec.launcher.kind].starts_engine


def needs_gpu(spec: EngineSpec) -> bool:
    """Whether this configuration's engine runs on a GPU of this host."""
    return starts_engine(spec) and not get_engine(spec.engine).runs_on_cpu


def check_model(cfg: PlaybookConfig) -> list[Check]:
    """The model folder has a tokenizer (the run needs it), and weights where a configuration asks for real ones."""
    d = cfg.model.directory
    shown = repo_relative(str(d))
    tokenizer = [f for f in TOKENIZER_FILES if (d / f).is_file()]
    if not tokenizer:
        fix = "copy the model's tokenizer files (tokenizer.json or tokenizer.model, tokenizer_config.json) there"
        return [Check("model", False, f"{shown} has config.json but no tokenizer ({', '.join(TOKENIZER_FILES)})", fix)]
    real = [s.label for s in cfg.engines if starts_engine(s) and not s.placeholder_weights]
    weights = sorted({p for pattern in WEIGHT_PATTERNS for p in d.glob(pattern)})
    if real and not weights:
        fix = (
            "put the checkpoint there (`playbook setup-model smollm2` makes the shipped real model), "
            "or set knobs.dummy_weights: true"
        )
        detail = f"{shown} has no weights ({', '.join(WEIGHT_PATTERNS)}) and real weights are asked for"
        return [Check("model", False, detail, fix, tuple(real))]
    if weights:
        size = sum(p.stat().st_size for p in weights) / GIB
        what = f"weights ({len(weights)} file(s), {size:.2f} GiB)"
    else:
        what = "no weights needed (dummy or random weights declared)" if cfg.engines else "no engine"
    return [Check("model", True, f"{shown}: config.json, tokenizer, {what}")] + check_random_weights(cfg)


def check_random_weights(cfg: PlaybookConfig) -> list[Check]:
    """Per configuration that serves random weights written here: written already, or the room to write them.

    Written before the engine starts, inside its start (``EngineAdapter.prepare``); 72.7 GB for 70B in block FP8,
    so the line says how much is left to write and where, and a ✗ when that filesystem lacks the room.
    """
    out: list[Check] = []
    for spec in cfg.engines:
        if not starts_engine(spec) or spec.engine_options.get("weights") != "random":
            continue
        name, root = f"random weights {spec.label!r}", spec.engine_options.get("weights_root")
        try:
            folder = random_weights_dir(cfg.model.directory, root)
            left, total = bytes_to_write(cfg.model.directory, folder)
        except PlaybookError as err:
            out.append(Check(name, False, str(err), "serve a bf16 or block-FP8 config.json", (spec.label,)))
            continue
        if left == 0:
            out.append(Check(name, True, f"{repo_relative(str(folder))}: written already ({total / GIB:.1f} GiB)"))
            continue
        where, free = free_bytes(folder)
        kept = f"; {(total - left) / GIB:.1f} GiB kept from an interrupted write" if left < total else ""
        shown = repo_relative(str(folder))
        detail = f"{left / GIB:.1f} GiB to write to {shown} before the start{kept}; {free / GIB:.1f} GiB free there"
        if free < left + DISK_MARGIN:
            fix = f"set engine_options.weights_root to a filesystem with {left / GIB:.0f} GiB free, or free {where}"
            out.append(Check(name, False, detail, fix, (spec.label,)))
        else:
            at = f" --root {root}" if root else ""
            ahead = f"`playbook random-weights {repo_relative(str(cfg.model.directory))}{at}` writes them ahead"
            out.append(Check(name, True, f"{detail} ({ahead})"))
    return out


@dataclass(frozen=True)
class GpuNow:
    """One GPU as NVML reports it now."""

    index: int
    name: str
    uuid: str
    total_gib: float
    free_gib: float


def read_gpus() -> tuple[list[GpuNow], str | None]:
    """The GPUs of this host with their free memory now, or ``([], why not)``."""
    handles, reason = nvml_handles()
    if not handles:
        return [], reason or "NVML found no GPU"
    # NVML exists only on GPU hosts (nvml_handles imported it already)
    import pynvml

    def text(v: object) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    gpus = []
    for i, h in enumerate(handles):
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        name, uuid = text(pynvml.nvmlDeviceGetName(h)), text(pynvml.nvmlDeviceGetUUID(h))
        gpus.append(GpuNow(i, name, uuid, mem.total / GIB, mem.free / GIB))
    return gpus, None


def visible_to(spec: EngineSpec, gpus: list[GpuNow]) -> list[GpuNow]:
    """The GPUs the engine would see: those ``CUDA_VISIBLE_DEVICES`` names (the launcher's, else ours), in order."""
    names = spec.launcher.env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    if names is None:
        return gpus
    out = []
    for n in (x.strip() for x in names.split(",") if x.strip()):
        out += [g for g in gpus if str(g.index) == n or g.uuid.startswith(n)][:1]
    return out


def check_gpus(cfg: PlaybookConfig, gpus: list[GpuNow], reason: str | None) -> list[Check]:
    """Whether GPUs are visible when a configuration needs one, and each one's memory against its plan."""
    on_gpu = [s.label for s in cfg.engines if needs_gpu(s)]
    if not on_gpu:
        return [Check("GPUs", True, "none needed (every configuration runs on the CPU or at an endpoint)")]
    if not gpus:
        fix = "run on a GPU host where nvidia-smi lists the GPUs (and the driver loads), or use a CPU engine"
        return [Check("GPUs", False, f"none visible ({reason})", fix, tuple(on_gpu))]
    shown = "; ".join(f"GPU {g.index} {g.name}, {g.free_gib:.1f} of {g.total_gib:.1f} GiB free" for g in gpus)
    return [Check("GPUs", True, f"{len(gpus)} visible: {shown}")] + [
        check_gpu_memory(cfg, s, visible_to(s, gpus)) for s in cfg.engines if needs_gpu(s)
    ]


def check_gpu_memory(cfg: PlaybookConfig, spec: EngineSpec, gpus: list[GpuNow]) -> Check:
    """The memory plan of one configuration (weights + overhead + KV per GPU) against its GPUs' free memory."""
    name, row = f"GPU memory {spec.label!r}", (spec.label,)
    tp = spec.knobs.tensor_parallel
    if len(gpus) < tp:
        fix = "set knobs.tensor_parallel to the GPUs there are, or make more visible (CUDA_VISIBLE_DEVICES)"
        return Check(name, False, f"tensor_parallel {tp} needs {tp} GPUs, {len(gpus)} visible to it", fix, row)
    use = gpus[:tp]
    try:
        _tokens, plan = gpu_kv_tokens(cfg, spec, gpu_spec(use[0].name) or use[0].total_gib)
        precision = weight_precision(spec, read_model_shape(cfg.model.directory))
        p = plan.row(precision) if plan is not None else None
    except (PlaybookError, KeyError, ValueError) as err:
        fix = "check the model's config.json and knobs.tensor_parallel"
        return Check(name, False, f"no memory plan for this model and GPU ({err})", fix, row)
    if p is None:
        return Check(name, True, "not planned (no GPU model for this engine)")
    frac = spec.knobs.memory_fraction or DEFAULT_MEMORY_FRACTION
    takes = p.weights_gib_per_gpu + p.overhead_gib_per_gpu + p.kv_gib_per_gpu
    parts = f"{precision} weights {p.weights_gib_per_gpu:.1f} GiB + overhead {p.overhead_gib_per_gpu:.1f} GiB"
    if not p.fits:
        fix = f"knobs.tensor_parallel: {p.tp_needed}" if p.tp_needed else "knobs.quantization: fp8, or a larger GPU"
        detail = (
            f"does not fit at tensor_parallel {tp}: {parts} per GPU leave {p.kv_gib_per_gpu:.1f} GiB of "
            f"{frac:g} × {plan.gpu_memory_gib:.1f} GiB for the KV cache, less than one "
            f"{plan.context_tokens:,}-token sequence (out of memory at start)"
        )
        return Check(name, False, detail, fix, row)
    short = [g for g in use if g.free_gib < takes]
    plan_text = f"{parts} + KV {p.kv_gib_per_gpu:.1f} GiB ({p.kv_tokens:,} tokens) = {takes:.1f} GiB per GPU"
    if short:
        free = ", ".join(f"GPU {g.index} has {g.free_gib:.1f} GiB free" for g in short)
        share = min(g.free_gib / g.total_gib for g in short)
        fix = f"free the GPU (nvidia-smi lists what holds it), or lower knobs.memory_fraction below {share:.2f}"
        return Check(name, False, f"{plan_text}, but {free}", fix, row)
    where = ", ".join(f"GPU {g.index} ({g.free_gib:.1f} GiB free)" for g in use)
    return Check(name, True, f"{plan_text} at memory fraction {frac:g}; fits {where}")


def fixed_ports(spec: EngineSpec) -> list[tuple[int, str]]:
    """Ports the configuration fixes: ``--...port N`` in ``extra_args`` and ``*_PORT`` in the launcher's env."""
    out: list[tuple[int, str]] = []
    args = list(spec.extra_args)
    for i, a in enumerate(args):
        flag, _, value = a.partition("=")
        if not value and i + 1 < len(args):
            value = args[i + 1]
        if _PORT_FLAG.match(flag) and value.isdigit():
            out.append((int(value), f"extra_args {flag}"))
        elif flag == "--dist-init-addr" and value.rpartition(":")[2].isdigit():
            out.append((int(value.rpartition(":")[2]), "extra_args --dist-init-addr"))
    env = {**get_engine(spec.engine).env(spec), **spec.launcher.env}
    out += [(int(v), f"launcher.env {k}") for k, v in sorted(env.items()) if k.endswith("_PORT") and v.isdigit()]
    return out


def port_taken(port: int) -> bool:
    """Whether something already listens on ``port`` (on any address of this host)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return True
    return False


def check_ports(cfg: PlaybookConfig) -> list[Check]:
    """Engines get a free port each at start; a port the config fixes must be free (and never the server's own)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
    except OSError as err:
        return [Check("ports", False, f"cannot bind a port on 127.0.0.1 ({err})", "bring the loopback interface up")]
    checks, fine = [], []
    for spec in (s for s in cfg.engines if starts_engine(s)):
        for port, where in fixed_ports(spec):
            name, row = f"port {port} of {spec.label!r}", (spec.label,)
            if where == "extra_args --port":
                detail = "extra_args sets --port: the engine would listen there, not on the port the playbook gives it"
                checks.append(Check(name, False, detail, "remove --port from extra_args", row))
            elif port_taken(port):
                fix = f"stop what listens there (ss -ltnp 'sport = :{port}'), or choose another port"
                checks.append(Check(name, False, f"{where} {port} is in use", fix, row))
            else:
                fine.append(f"{port} ({where} of {spec.label!r})")
    free = f"; fixed in the config and free: {', '.join(fine)}" if fine else " (none fixed in the config)"
    return [Check("ports", True, f"each engine gets a free port on 127.0.0.1 at its start{free}"), *checks]


def check_disk(run_dir: Path, min_free_gib: float) -> Check:
    """Free space where the run folder is written, against ``min_free_gib``."""
    where = Path(run_dir)
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free / GIB
    shown = repo_relative(str(Path(run_dir)))
    detail = f"{free:,.1f} GiB free where {shown} is written (at least {min_free_gib:g} GiB wanted)"
    if free >= min_free_gib:
        return Check("disk", True, detail)
    return Check("disk", False, detail, "free some space, or write the run elsewhere")
