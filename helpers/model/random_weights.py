"""Random-weight model folders, for engines that have no dummy-weight loader (LMDeploy).

vLLM and SGLang serve ``--load-format dummy`` from a ``config.json`` alone; LMDeploy 0.18.0 has no
such loader (``--empty-init`` leaves the weights unloaded, and a folder without weight files raises
``RuntimeError('Unknown weight type.')``; shared/gpu/README.md). Throughput and latency depend on
shapes, not on values, so a folder of random bf16 safetensors does instead: uniform in ±1e-3, the
RMSNorm weights 1.0, the Llama tensor names and shapes derived from ``helpers.model.shape``.

Block FP8: a ``config.json`` whose ``quantization_config`` says ``quant_method: fp8`` (with no
``weight_block_size``, or ``[128, 128]``) gets the checkpoint layout of DeepSeek-V3 / Qwen3-FP8, which
LMDeploy's TurboMind (``FP8Format`` in ``turbomind/weight_format.py`` of 0.18.0: block 128 × 128, the
only group size it takes for fp8) and vLLM (Fp8 with ``weight_block_size``) both read: each linear
projection of a decoder layer is ``<name>.weight`` in float8_e4m3fn, shape [out, in], plus
``<name>.weight_scale_inv`` in float32, shape [ceil(out/128), ceil(in/128)], the dequantized weight
being the fp8 value times its block's scale. The fp8 values are uniform in ±448 (the largest finite
e4m3 value), rounded to e4m3, and every scale is ``FP8_SCALE`` = 2⁻¹⁹ (a power of two: the dequantized
weights, uniform in ±8.5e-4, are exact and within ±1e-3). Embeddings, ``lm_head`` and the norms stay
bf16. The folder's ``config.json`` then declares what the files hold (``fmt: e4m3``, ``activation_scheme:
dynamic``, ``weight_block_size: [128, 128]``); any other quantization is refused.

The weights are written WHERE THE ENGINE RUNS (16 GB for an 8B model is not a file to carry):
``playbook random-weights MODEL_DIR`` on the GPU host, or ``write_random_weights`` from the
code that launches the engine. torch is used when it is importable (fast, multi-threaded), else
numpy with safetensors' own serializer. The output folder is named after a hash of
``config.json`` — ``/dev/shm/pb-models/<name>-<hash>`` where ``/dev/shm`` exists (RAM: the engine
reads it at memory speed and nothing is left on disk), else a cache folder — and a second call
with the same ``config.json`` finds it complete and does nothing. Folders are written under a
temporary name and renamed when complete, so an interrupted run never leaves a folder that looks done;
before anything is written, the destination's free space is checked against the checkpoint's bytes
(a 70B FP8 checkpoint is about 72 GB, more than /dev/shm holds at its usual default size on a 128 GB
host, half its memory). Shards are written one at a time: only one shard is held in memory.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors import TensorSpec, serialize_file

from helpers.core.errors import ConfigError
from helpers.core.paths import resolve_model_dir
from helpers.model.fp8_blocks import (
    FP8_BLOCK,
    FP8_DTYPE,
    FP8_MAX,
    SCALE_DTYPE,
    fp8_config,
    fp8_scale_shape,
    is_linear,
    random_e4m3_numpy,
    random_e4m3_torch,
)
from helpers.model.shape import ModelShape, read_model_shape

SHM_ROOT = Path("/dev/shm/pb-models")
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "engine-playbook" / "models"
MARKER = "playbook_random_weights.json"
INDEX = "model.safetensors.index.json"
SHARD_BYTES = 4 * 2**30  # like Hugging Face checkpoints: a few GiB per file
BOUND = 1e-3  # weights are uniform in [-BOUND, BOUND]
DISK_MARGIN = 256 * 2**20  # free space asked for beyond the files themselves
FP8_SCALE = 2.0 ** math.floor(math.log2(BOUND / FP8_MAX))  # 2**-19: fp8 values × this stay within ±BOUND
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_DTYPE = "bfloat16"
_BYTES = 2
_DTYPE_BYTES = {_DTYPE: _BYTES, FP8_DTYPE: 1, SCALE_DTYPE: 4}
_GIB = 2**30


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


def plan_shards(
    shapes: dict[str, tuple[int, ...]], shard_bytes: int = SHARD_BYTES, dtypes: Mapping[str, str] | None = None
) -> list[list[str]]:
    """Group tensors, in order, into shards of at most ``shard_bytes`` (a bigger tensor gets a shard alone).

    ``dtypes`` gives a tensor's dtype by name (bf16 when absent).
    """
    shards: list[list[str]] = [[]]
    size = 0
    for name, shape in shapes.items():
        n = math.prod(shape) * _DTYPE_BYTES[(dtypes or {}).get(name, _DTYPE)]
        if shards[-1] and size + n > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += n
    return shards


@dataclass(frozen=True)
class CheckpointPlan:
    """What ``write_random_weights`` writes for a model folder, computed before anything is written."""

    source: Path
    precision: str  # "bf16", or "fp8" (block FP8 linear layers, the rest bf16)
    shapes: dict[str, tuple[int, ...]]  # every tensor, in file order
    dtypes: dict[str, str]  # safetensors dtype names: bfloat16, float8_e4m3fn, float32
    shards: list[list[str]]
    config: dict  # the written folder's config.json

    def nbytes(self, name: str) -> int:
        """Bytes of one tensor's data."""
        return math.prod(self.shapes[name]) * _DTYPE_BYTES[self.dtypes[name]]

    @property
    def total_bytes(self) -> int:
        """Bytes of all tensor data (the index's ``total_size``)."""
        return sum(self.nbytes(n) for n in self.shapes)

    @property
    def parameters(self) -> int:
        """Weights of the model (block scales not counted)."""
        return sum(math.prod(s) for n, s in self.shapes.items() if not n.endswith(".weight_scale_inv"))

    def bytes_by_dtype(self) -> dict[str, int]:
        """Tensor bytes by dtype."""
        out: dict[str, int] = {}
        for n in self.shapes:
            out[self.dtypes[n]] = out.get(self.dtypes[n], 0) + self.nbytes(n)
        return out


def plan_random_weights(model_dir: str | Path, shard_bytes: int = SHARD_BYTES) -> CheckpointPlan:
    """The tensors, dtypes, shards and config.json of ``model_dir``'s random weights (nothing is written).

    A ``config.json`` without ``quantization_config`` gives bf16; one with ``quant_method: fp8`` (block size
    absent or [128, 128], e4m3, dynamic activations) gives block FP8; anything else is a ``ConfigError``
    naming the file and the field.
    """
    src = resolve_model_dir(model_dir)
    shape = read_model_shape(src)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    fp8 = fp8_config(src / "config.json", cfg)
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, str] = {}
    for name, dims in tensor_shapes(shape).items():
        shapes[name] = dims
        dtypes[name] = FP8_DTYPE if fp8 and is_linear(name) else _DTYPE
        if fp8 and is_linear(name):
            scale = name.removesuffix(".weight") + ".weight_scale_inv"
            shapes[scale], dtypes[scale] = fp8_scale_shape(dims), SCALE_DTYPE
    return CheckpointPlan(
        source=src,
        precision="fp8" if fp8 else "bf16",
        shapes=shapes,
        dtypes=dtypes,
        shards=plan_shards(shapes, shard_bytes, dtypes),
        config=fp8 or cfg,
    )


def _save_torch(names: list[str], plan: CheckpointPlan, path: Path, seed: int) -> None:
    # torch is optional (heavy): the playbook's environment and the GPU host have it, a bare host may not
    import torch
    from safetensors.torch import save_file  # safetensors.torch imports torch: lazily, for the same reason

    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for name in names:
        shape, dtype = plan.shapes[name], plan.dtypes[name]
        if dtype == FP8_DTYPE:
            tensors[name] = random_e4m3_torch(shape, gen)
        elif dtype == SCALE_DTYPE:
            tensors[name] = torch.full(shape, FP8_SCALE, dtype=torch.float32)
        else:
            t = torch.empty(shape, dtype=torch.bfloat16)
            tensors[name] = t.fill_(1.0) if is_norm(name) else t.uniform_(-BOUND, BOUND, generator=gen)
    save_file(tensors, str(path), metadata={"format": "pt"})


def _save_numpy(names: list[str], plan: CheckpointPlan, path: Path, seed: int) -> None:
    """Write with numpy, which has no bf16: the top 16 bits of each float32 are its bf16 value (truncated)."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for name in names:
        shape, dtype = plan.shapes[name], plan.dtypes[name]
        if dtype == FP8_DTYPE:
            arrays[name] = random_e4m3_numpy(shape, rng)
        elif dtype == SCALE_DTYPE:
            arrays[name] = np.full(shape, FP8_SCALE, np.float32)
        else:
            f32 = np.ones(shape, np.float32) if is_norm(name) else (rng.random(shape, np.float32) * 2 - 1) * BOUND
            arrays[name] = np.ascontiguousarray((f32.view(np.uint32) >> 16).astype(np.uint16))
    specs = {
        k: TensorSpec(dtype=plan.dtypes[k], shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
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


def _model_files(src: Path) -> list[Path]:
    """Everything of the model folder except weights (config, tokenizer, generation config)."""
    return [
        p
        for p in sorted(src.iterdir())
        if p.is_file() and not p.name.endswith(_WEIGHT_SUFFIXES) and p.name not in (INDEX, MARKER)
    ]


def _existing_parent(path: Path) -> Path:
    """``path`` or its nearest parent that exists (the filesystem a new folder there lands on)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_free_space(out: Path, needed: int) -> None:
    """``ConfigError`` when the filesystem ``out`` goes to has less than ``needed`` bytes (plus a margin) free."""
    where = _existing_parent(out)
    free = shutil.disk_usage(where).free
    if free < needed + DISK_MARGIN:
        raise ConfigError(
            f"{out}: the random weights need {needed / _GIB:.1f} GiB but {where} has {free / _GIB:.1f} GiB free "
            f"(and {DISK_MARGIN // 2**20} MiB are kept to spare); nothing was written: pass --out on a larger "
            "filesystem (playbook random-weights MODEL_DIR --out DIR)"
        )


def write_random_weights(
    model_dir: str | Path,
    out: str | Path | None = None,
    shard_bytes: int = SHARD_BYTES,
    backend: str = "auto",
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> Path:
    """Write a model folder of random weights for ``model_dir`` into ``out``; return ``out``.

    bf16, or block FP8 when ``config.json`` declares ``quant_method: fp8`` (see the module's docstring;
    ``plan_random_weights`` says what is written). ``out`` defaults to ``random_weights_dir(model_dir)``.
    Nothing is written when ``out`` already holds the weights of the same ``config.json``, or when its
    filesystem has too little free space for them (``ConfigError``). Any other quantization (AWQ, GPTQ,
    FP8 in other blocks) is refused.
    """
    plan = plan_random_weights(model_dir, shard_bytes)
    src = plan.source
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
    files = _model_files(src)
    check_free_space(out, plan.total_bytes + sum(p.stat().st_size for p in files))
    shards = plan.shards
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t0, weight_map, total = time.monotonic(), {}, plan.total_bytes
    try:
        for p in files:
            shutil.copy2(p, tmp / p.name)
        if plan.config != json.loads((src / "config.json").read_text(encoding="utf-8")):
            # the written config.json declares the files' format (block size, fmt); the source is left as it is
            (tmp / "config.json").write_text(json.dumps(plan.config, indent=2) + "\n", encoding="utf-8")
        for i, names in enumerate(shards, 1):
            fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
            (_save_torch if how == "torch" else _save_numpy)(names, plan, tmp / fname, seed + i)
            weight_map.update(dict.fromkeys(names, fname))
            log(f"random weights: {fname} written ({time.monotonic() - t0:.0f} s)")
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (tmp / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        marker = {
            "config_sha256_12": digest,
            "source": str(src),
            "precision": plan.precision,
            "tensors": len(plan.shapes),
            "parameters": plan.parameters,
            "bytes": total,
            "bytes_by_dtype": plan.bytes_by_dtype(),
            "dtype": FP8_DTYPE if plan.precision == "fp8" else _DTYPE,
            "uniform_bound": BOUND,
            "backend": how,
            "seconds": round(time.monotonic() - t0, 1),
        }
        if plan.precision == "fp8":
            marker |= {"fp8_block": [FP8_BLOCK, FP8_BLOCK], "fp8_scale": FP8_SCALE, "fp8_bound": FP8_MAX * FP8_SCALE}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty (checked above)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(
        f"random weights: {out} ({total / _GIB:.2f} GiB in {len(shards)} shards, {marker['seconds']} s, {how}, "
        f"{plan.precision})"
    )
    return out
