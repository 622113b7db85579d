"""Block FP8, the checkpoint layout that LMDeploy's TurboMind and vLLM read for ``quant_method: fp8``.

Each linear projection of a decoder layer is ``<name>.weight`` in float8_e4m3fn, shape [out, in], plus
``<name>.weight_scale_inv`` in float32, one scale per 128 × 128 block (shape [ceil(out/128), ceil(in/128)]);
the dequantized weight is the fp8 value times its block's scale. TurboMind 0.18.0 takes no other block size
for fp8 (``FP8Format`` in ``turbomind/weight_format.py``). ``fp8_config`` checks a ``config.json``'s
``quantization_config`` and gives the one the written folder declares; the rest draws uniform fp8 values
with numpy (which has no float8: ``e4m3_bits`` rounds float32 to e4m3 bit patterns).
``helpers.model.random_weights`` writes the folders.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from helpers.core.errors import ConfigError

FP8_BLOCK = 128  # block-FP8 scales cover 128 × 128 weights (TurboMind takes no other size for fp8)
FP8_MAX = 448.0  # the largest finite float8_e4m3fn value
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
FP8_DTYPE, SCALE_DTYPE = "float8_e4m3fn", "float32"
FP8_KEYS = ("quant_method", "fmt", "activation_scheme", "weight_block_size")
UNQUANTIZED_OK = ("lm_head", "embed_tokens", "model.embed_tokens")  # kept bf16 here anyway


def is_linear(name: str) -> bool:
    """Whether a tensor is the weight of a decoder layer's linear projection (what block FP8 quantizes)."""
    parts = name.split(".")
    return name.startswith("model.layers.") and parts[-1] == "weight" and parts[-2] in LINEAR


def fp8_scale_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """The ``weight_scale_inv`` shape of an [out, in] fp8 weight: one scale per 128 × 128 block, edges included."""
    rows, cols = shape
    return (math.ceil(rows / FP8_BLOCK), math.ceil(cols / FP8_BLOCK))


def fp8_config(path: Path, cfg: dict) -> dict | None:
    """The written config.json for a quantized source (None for a bf16 one); ``ConfigError`` for what is not made."""
    qc = cfg.get("quantization_config")
    if not qc:
        return None
    field = f"{path}: quantization_config"
    if not isinstance(qc, dict):
        raise ConfigError(f"{field} is {qc!r}, not a mapping")
    method = qc.get("quant_method")
    if method != "fp8":
        raise ConfigError(
            f"{field}.quant_method is {method!r}; random weights are plain bf16 or block FP8 (quant_method 'fp8', "
            "weight_block_size [128, 128]): use a config without quantization_config and ask the engine to quantize "
            "(knobs.quantization: fp8), or one that declares fp8"
        )
    block = qc.get("weight_block_size")
    if block is not None and (not isinstance(block, list | tuple) or list(block) != [FP8_BLOCK, FP8_BLOCK]):
        raise ConfigError(
            f"{field}.weight_block_size is {block}; random FP8 weights are written in [128, 128] blocks only "
            "(the one block size LMDeploy's TurboMind reads for fp8)"
        )
    if qc.get("fmt", "e4m3") != "e4m3":
        raise ConfigError(f"{field}.fmt is {qc['fmt']!r}; random FP8 weights are e4m3 (float8_e4m3fn)")
    if qc.get("activation_scheme", "dynamic") != "dynamic":
        raise ConfigError(
            f"{field}.activation_scheme is {qc['activation_scheme']!r}; random block-FP8 weights need 'dynamic' "
            "(no activation scales are written)"
        )
    for key, value in qc.items():
        if key in FP8_KEYS:
            continue
        if key in ("modules_to_not_convert", "ignored_layers") and set(value or ()) <= set(UNQUANTIZED_OK):
            continue  # names only what stays bf16 here anyway
        raise ConfigError(
            f"{field}.{key} ({value!r}) is not written by random block-FP8 weights (they know "
            f"{', '.join(FP8_KEYS)}; only the decoder layers' projections are fp8)"
        )
    quant = {**qc, "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"}
    quant["weight_block_size"] = [FP8_BLOCK, FP8_BLOCK]
    return {**cfg, "quantization_config": quant}


def _e4m3_table() -> np.ndarray:
    """The non-negative finite float8_e4m3fn values, indexed by their bit pattern 0x00-0x7E (0x7F is NaN)."""
    bits = np.arange(0x7F)
    exp, man = bits >> 3, (bits & 7) / 8
    return np.where(exp == 0, man * 2.0**-6, (1 + man) * 2.0 ** (exp - 7))


_E4M3 = _e4m3_table()


def _e4m3_bits_by_table(a: np.ndarray) -> np.ndarray:
    """e4m3 bit patterns of non-negative values by the nearest table entry, ties to the even pattern."""
    hi = np.minimum(np.searchsorted(_E4M3, a), len(_E4M3) - 1)  # first value ≥ a (the largest if none)
    lo = np.maximum(hi - 1, 0)
    up_gap, down_gap = _E4M3[hi] - a, a - _E4M3[lo]
    return np.where((up_gap < down_gap) | ((up_gap == down_gap) & (hi % 2 == 0)), hi, lo).astype(np.uint8)


def e4m3_bits(x: np.ndarray) -> np.ndarray:
    """float8_e4m3fn bit patterns (uint8) of finite ``x``: round to nearest, ties to even, saturating at ±448.

    numpy has no float8; safetensors writes these bytes under the dtype ``float8_e4m3fn`` (header ``F8_E4M3``).
    Normal values round float32's mantissa to 3 bits by integer arithmetic; the subnormal ones (below 2⁻⁶,
    one draw in 28,000 of ±448) take the table.
    """
    f = np.ascontiguousarray(x, np.float32)
    u = f.view(np.uint32)
    a = np.minimum(u & np.uint32(0x7FFFFFFF), np.uint32(0x43E00000))  # |x|'s bits, at most 448's
    r = a + np.uint32(0x7FFFF) + ((a >> 20) & np.uint32(1))  # round to nearest even at mantissa bit 20
    code = ((r >> 23).astype(np.int32) - (127 - 7)) * 8 + ((r >> 20) & np.uint32(7)).astype(np.int32)
    out = np.clip(code, 0, 0x7E).astype(np.uint8)
    small = a < np.uint32(0x3C800000)  # below 2**-6: e4m3 subnormals
    if small.any():
        out[small] = _e4m3_bits_by_table(np.abs(f[small]).astype(np.float64))
    return out | ((u >> 24).astype(np.uint8) & np.uint8(0x80))


def random_e4m3_numpy(shape: tuple[int, ...], rng: np.random.Generator, chunk: int = 1 << 22) -> np.ndarray:
    """Uniform values in ±448 as e4m3 bytes, converted a chunk at a time (float64 temporaries stay small)."""
    out = np.empty(math.prod(shape), np.uint8)
    for i in range(0, out.size, chunk):
        n = min(chunk, out.size - i)
        out[i : i + n] = e4m3_bits((rng.random(n, np.float32) * 2 - 1) * np.float32(FP8_MAX))
    return out.reshape(shape)
