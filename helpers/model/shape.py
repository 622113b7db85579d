"""Model-shape arithmetic of a Llama-style model, read from its ``config.json``.

One home for the numbers both the memory plan (step 4) and the roofline bound (step 5) need:
the shape itself, parameter counts, weight bytes per precision and KV-cache bytes per token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from helpers.core.errors import ConfigError
from helpers.core.paths import resolve_model_dir

GIB = 1024**3
KV_BLOCK_TOKENS = 16  # engines hand out KV memory in blocks of this many tokens
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class WeightFormat:
    """How one precision stores a linear layer's weights: bytes per weight plus group scales."""

    name: str
    bytes_per_weight: float
    group_size: int = 0  # weights sharing one 16-bit scale (0: per-tensor scale, negligible)
    needs_fp8_hardware: bool = False


# Registry of weight precisions; INT4 is the GPTQ/AWQ layout (group size 128, FP16 scales).
WEIGHT_FORMATS: dict[str, WeightFormat] = {
    "bf16": WeightFormat("bf16", 2.0),
    "fp8": WeightFormat("fp8", 1.0, needs_fp8_hardware=True),
    "int4": WeightFormat("int4", 0.5, group_size=128),
}
KV_DTYPES = ("auto", "bf16", "fp16", "fp8")


class ModelShape(_Strict):
    """The figures of a Llama-style ``config.json`` that size its memory."""

    name: str
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    dtype_bytes: int = Field(default=2, description="Bytes of the model's own 16/32-bit dtype.")
    checkpoint_precision: str = Field(default="bf16", description="bf16, or the quantization it declares.")


def read_model_shape(model_dir: str | Path) -> ModelShape:
    """Read ``config.json`` of a model folder; ``ConfigError`` naming the file and the missing key."""
    d = resolve_model_dir(model_dir)
    path = d / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found (a model folder needs config.json)") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON: line {err.lineno}: {err.msg}") from None
    missing = [
        k
        for k in (
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "vocab_size",
        )
        if k not in cfg
    ]
    if missing:
        raise ConfigError(f"{path}: missing {', '.join(missing)} (not a Llama-style config?)")
    heads = cfg["num_attention_heads"]
    quant = (cfg.get("quantization_config") or {}).get("quant_method")
    return ModelShape(
        name=d.name,
        hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"],
        num_layers=cfg["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads") or heads,
        head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
        vocab_size=cfg["vocab_size"],
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        attention_bias=bool(cfg.get("attention_bias", False)),
        mlp_bias=bool(cfg.get("mlp_bias", False)),
        dtype_bytes=_DTYPE_BYTES.get(str(cfg.get("torch_dtype", "bfloat16")), 2),
        checkpoint_precision={"fp8": "fp8", "awq": "int4", "gptq": "int4"}.get(str(quant), "bf16"),
    )


class ParameterCount(_Strict):
    """Parameters by part; ``linear`` is what FP8/INT4 quantize."""

    embedding: int
    attention: int
    mlp: int
    norms: int
    lm_head: int

    @property
    def linear(self) -> int:
        """Weights of the attention and MLP projections."""
        return self.attention + self.mlp

    @property
    def total(self) -> int:
        """All parameters."""
        return self.embedding + self.attention + self.mlp + self.norms + self.lm_head


def count_parameters(s: ModelShape) -> ParameterCount:
    """Count a Llama-style model's parameters from its shape."""
    h, q, kv = s.hidden_size, s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
    attn = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if s.attention_bias else 0)
    mlp = 3 * h * s.intermediate_size + ((2 * s.intermediate_size + h) if s.mlp_bias else 0)
    return ParameterCount(
        embedding=s.vocab_size * h,
        attention=s.num_layers * attn,
        mlp=s.num_layers * mlp,
        norms=(2 * s.num_layers + 1) * h,
        lm_head=0 if s.tie_word_embeddings else s.vocab_size * h,
    )


def weight_bytes(s: ModelShape, precision: str) -> int:
    """Bytes of all weights when the linear layers are stored in ``precision`` (bf16, fp8, int4)."""
    if precision not in WEIGHT_FORMATS:
        raise ConfigError(f"unknown precision {precision!r}; allowed: {', '.join(WEIGHT_FORMATS)}")
    f, p = WEIGHT_FORMATS[precision], count_parameters(s)
    linear = p.linear * f.bytes_per_weight + (p.linear / f.group_size * 2 if f.group_size else 0)
    return int(linear + (p.total - p.linear) * s.dtype_bytes)


def kv_bytes_per_token(s: ModelShape, kv_dtype: str = "auto", tensor_parallel: int = 1) -> int:
    """KV-cache bytes one token takes on one GPU of a ``tensor_parallel`` group (1: the whole model).

    KV heads are split across the group; when there are fewer heads than GPUs each GPU keeps one.
    """
    if kv_dtype not in KV_DTYPES:
        raise ConfigError(f"unknown kv_dtype {kv_dtype!r}; allowed: {', '.join(KV_DTYPES)}")
    nbytes = s.dtype_bytes if kv_dtype == "auto" else (1 if kv_dtype == "fp8" else 2)
    heads = max(1, s.num_kv_heads // tensor_parallel)
    return s.num_layers * heads * s.head_dim * 2 * nbytes
