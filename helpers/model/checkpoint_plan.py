"""What a random-weight checkpoint holds: its tensors (Llama names and shapes), dtypes and shards, before writing.

bf16 throughout, or block FP8 (``helpers.model.fp8_blocks``) for the decoder layers' projections when the
model's ``config.json`` declares ``quant_method: fp8``. ``helpers.model.random_weights`` writes the plan.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from helpers.core.paths import resolve_model_dir
from helpers.model.fp8_blocks import FP8_DTYPE, SCALE_DTYPE, fp8_config, fp8_scale_shape, is_linear
from helpers.model.shape import ModelShape, read_model_shape

SHARD_BYTES = 4 * 2**30  # like Hugging Face checkpoints: a few GiB per file
BF16 = "bfloat16"
DTYPE_BYTES = {BF16: 2, FP8_DTYPE: 1, SCALE_DTYPE: 4}


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


def plan_shards(
    shapes: dict[str, tuple[int, ...]], shard_bytes: int = SHARD_BYTES, dtypes: Mapping[str, str] | None = None
) -> list[list[str]]:
    """Group tensors, in order, into shards of at most ``shard_bytes`` (a bigger tensor gets a shard alone).

    ``dtypes`` gives a tensor's dtype by name (bf16 when absent).
    """
    shards: list[list[str]] = [[]]
    size = 0
    for name, shape in shapes.items():
        n = math.prod(shape) * DTYPE_BYTES[(dtypes or {}).get(name, BF16)]
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
        return math.prod(self.shapes[name]) * DTYPE_BYTES[self.dtypes[name]]

    def shard_size(self, i: int) -> int:
        """Bytes of tensor data in shard ``i`` (0-based)."""
        return sum(self.nbytes(n) for n in self.shards[i])

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
        dtypes[name] = FP8_DTYPE if fp8 and is_linear(name) else BF16
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


def shard_files(plan: CheckpointPlan) -> list[str]:
    """The file names of the plan's shards, in order (``model-00001-of-00018.safetensors``, …)."""
    n = len(plan.shards)
    return [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
