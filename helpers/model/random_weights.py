"""Random-weight model folders, for engines that have no dummy-weight loader (LMDeploy).

vLLM and SGLang serve ``--load-format dummy`` from a ``config.json`` alone; LMDeploy 0.18.0 has no
such loader (``--empty-init`` leaves the weights unloaded, and a folder without weight files raises
``RuntimeError('Unknown weight type.')``; shared/gpu/README.md). Throughput and latency depend on
shapes, not on values, so a folder of random bf16 safetensors does instead: uniform in ±1e-3, the
RMSNorm weights 1.0, the Llama tensor names and shapes derived from ``helpers.model.shape``.

The weights are written WHERE THE ENGINE RUNS (16 GB for an 8B model is not a file to carry):
``playbook random-weights MODEL_DIR`` on the GPU host, or ``write_random_weights`` from the
code that launches the engine. torch is used when it is importable (fast, multi-threaded), else
numpy with safetensors' own serializer. The output folder is named after a hash of
``config.json`` — ``/dev/shm/pb-models/<name>-<hash>`` where ``/dev/shm`` exists (RAM: the engine
reads it at memory speed and nothing is left on disk), else a cache folder — and a second call
with the same ``config.json`` finds it complete and does nothing. Folders are written under a
temporary name and renamed when complete, so an interrupted run never leaves a folder that looks done.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from safetensors import TensorSpec, serialize_file

from helpers.core.errors import ConfigError
from helpers.core.paths import resolve_model_dir
from helpers.model.shape import ModelShape, read_model_shape

SHM_ROOT = Path("/dev/shm/pb-models")
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "engine-playbook" / "models"
MARKER = "playbook_random_weights.json"
INDEX = "model.safetensors.index.json"
SHARD_BYTES = 4 * 2**30  # like Hugging Face checkpoints: a few GiB per file
BOUND = 1e-3  # weights are uniform in [-BOUND, BOUND]
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_DTYPE = "bfloat16"
_BYTES = 2


def tensor_shapes(s: ModelShape) -> dict[str, tuple[int, ...]]:
    """The tensors of a Llama-style checkpoint (Hugging Face names) and their shapes, in file order."""
    h, q, kv, inter = s.hidden_size, s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim, s.intermediate_size
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (s.vocab_size, h)}
    for i in range(s.num_layers):
        p = f"model.layers.{i}"
        out[f"{p}.input_layernorm.weight"] = (h,)
        for name, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
            out[f"{p}.self_attn.{name}.weight"] = (rows, h)
            if s.attention_bias:
                out[f"{p}.self_attn.{name}.bias"] = (rows,)
        out[f"{p}.self_attn.o_proj.weight"] = (h, q)
        if s.attention_bias:
            out[f"{p}.self_attn.o_proj.bias"] = (h,)
        out[f"{p}.post_attention_layernorm.weight"] = (h,)
        for name, shape in (("gate_proj", (inter, h)), ("up_proj", (inter, h)), ("down_proj", (h, inter))):
            out[f"{p}.mlp.{name}.weight"] = shape
            if s.mlp_bias:
                out[f"{p}.mlp.{name}.bias"] = shape[:1]
    out["model.norm.weight"] = (h,)
    if not s.tie_word_embeddings:
        out["lm_head.weight"] = (s.vocab_size, h)
    return out


def is_norm(name: str) -> bool:
    """Whether a tensor is an RMSNorm weight (filled with 1.0, as a trained model's start)."""
    return name.endswith("layernorm.weight") or name == "model.norm.weight"


def config_hash(model_dir: str | Path) -> str:
    """The first 12 hex digits of the sha256 of the folder's ``config.json`` (the cache key)."""
    path = resolve_model_dir(model_dir) / "config.json"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found (a model folder needs config.json)") from None


def default_root() -> Path:
    """Where random-weight folders go: ``/dev/shm/pb-models`` when ``/dev/shm`` exists, else a cache folder."""
    return SHM_ROOT if SHM_ROOT.parent.is_dir() else CACHE_ROOT


def random_weights_dir(model_dir: str | Path, root: str | Path | None = None) -> Path:
    """The folder the random weights of ``model_dir`` go to: ``ROOT/<name>-<config hash>``."""
    d = resolve_model_dir(model_dir)
    return Path(root or default_root()) / f"{d.name}-{config_hash(d)}"


def is_complete(out: Path, digest: str) -> bool:
    """Whether ``out`` holds finished random weights made from a ``config.json`` with this hash."""
    try:
        return json.loads((out / MARKER).read_text(encoding="utf-8")).get("config_sha256_12") == digest
    except (OSError, ValueError):
        return False


def plan_shards(shapes: dict[str, tuple[int, ...]], shard_bytes: int = SHARD_BYTES) -> list[list[str]]:
    """Group tensors, in order, into shards of at most ``shard_bytes`` (a bigger tensor gets a shard alone)."""
    shards: list[list[str]] = [[]]
    size = 0
    for name, shape in shapes.items():
        n = int(np.prod(shape)) * _BYTES
        if shards[-1] and size + n > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += n
    return shards


def _save_torch(names: list[str], shapes: dict[str, tuple[int, ...]], path: Path, seed: int) -> None:
    # torch is optional (heavy): the playbook's environment and the GPU host have it, a bare host may not
    import torch
    from safetensors.torch import save_file  # safetensors.torch imports torch: lazily, for the same reason

    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for name in names:
        t = torch.empty(shapes[name], dtype=torch.bfloat16)
        tensors[name] = t.fill_(1.0) if is_norm(name) else t.uniform_(-BOUND, BOUND, generator=gen)
    save_file(tensors, str(path), metadata={"format": "pt"})


def _save_numpy(names: list[str], shapes: dict[str, tuple[int, ...]], path: Path, seed: int) -> None:
    """Write with numpy, which has no bf16: the top 16 bits of each float32 are its bf16 value (truncated)."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for name in names:
        shape = shapes[name]
        f32 = np.ones(shape, np.float32) if is_norm(name) else (rng.random(shape, np.float32) * 2 - 1) * BOUND
        arrays[name] = np.ascontiguousarray((f32.view(np.uint32) >> 16).astype(np.uint16))
    specs = {
        k: TensorSpec(dtype=_DTYPE, shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
        for k, a in arrays.items()
    }
    serialize_file(specs, str(path), metadata={"format": "pt"})  # ``arrays`` keeps the buffers alive


def _backend(requested: str) -> str:
    if requested not in ("auto", "torch", "numpy"):
        raise ConfigError(f"unknown random-weights backend {requested!r}; allowed: auto, numpy, torch")
    if requested != "auto":
        return requested
    try:
        # torch is optional (heavy): only probing whether this interpreter has it
        import torch  # noqa: F401
    except ImportError:
        return "numpy"
    return "torch"


def _copy_model_files(src: Path, dst: Path) -> None:
    """Copy everything of the model folder except weights (config, tokenizer, generation config)."""
    for p in sorted(src.iterdir()):
        if p.is_file() and not p.name.endswith(_WEIGHT_SUFFIXES) and p.name not in (INDEX, MARKER):
            shutil.copy2(p, dst / p.name)


def write_random_weights(
    model_dir: str | Path,
    out: str | Path | None = None,
    shard_bytes: int = SHARD_BYTES,
    backend: str = "auto",
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> Path:
    """Write a model folder of random bf16 weights for ``model_dir`` into ``out``; return ``out``.

    ``out`` defaults to ``random_weights_dir(model_dir)``. Nothing is written when ``out`` already
    holds the weights of the same ``config.json``. A checkpoint that declares a quantization (FP8
    scales, INT4 groups) is refused: these weights are plain bf16.
    """
    src = resolve_model_dir(model_dir)
    shape = read_model_shape(src)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    if cfg.get("quantization_config"):
        method = cfg["quantization_config"].get("quant_method")
        raise ConfigError(
            f"{src / 'config.json'}: declares quantization_config ({method}); random weights are plain bf16 "
            "(no scales): use a config without it and ask the engine to quantize (knobs.quantization: fp8)"
        )
    digest = config_hash(src)
    out = Path(out) if out else random_weights_dir(src)
    if is_complete(out, digest):
        log(f"random weights: {out} is complete for config {digest}; nothing to do")
        return out
    if out.exists() and any(out.iterdir()):
        raise ConfigError(
            f"{out}: exists and does not hold random weights of this config.json; remove it or pick --out"
        )
    how = _backend(backend)
    shapes = tensor_shapes(shape)
    shards = plan_shards(shapes, shard_bytes)
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t0, weight_map, total = time.monotonic(), {}, 0
    try:
        _copy_model_files(src, tmp)
        for i, names in enumerate(shards, 1):
            fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
            (_save_torch if how == "torch" else _save_numpy)(names, shapes, tmp / fname, seed + i)
            weight_map.update(dict.fromkeys(names, fname))
            total += sum(int(np.prod(shapes[n])) * _BYTES for n in names)
            log(f"random weights: {fname} written ({time.monotonic() - t0:.0f} s)")
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (tmp / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        marker = {
            "config_sha256_12": digest,
            "source": str(src),
            "tensors": len(shapes),
            "parameters": total // _BYTES,
            "bytes": total,
            "dtype": _DTYPE,
            "uniform_bound": BOUND,
            "backend": how,
            "seconds": round(time.monotonic() - t0, 1),
        }
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty (checked above)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"random weights: {out} ({total / 2**30:.2f} GiB in {len(shards)} shards, {marker['seconds']} s, {how})")
    return out
