"""The values of random weights, and the shard files that hold them (safetensors, with numpy or torch).

Values are drawn once per shard into a pool of ``POOL`` values per dtype (a prime count, so no row or 128 ×
128 block of a tensor repeats another) and each tensor is its pool repeated from a random offset: writing
runs at memory speed, not at the random generator's. bf16 weights are uniform in ±``BOUND`` (RMSNorm
weights 1.0); block-FP8 weights are uniform e4m3 values in ±448 times the block scale ``FP8_SCALE``. The
torch backend writes the same bytes as numpy, through safetensors' torch serializer.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from safetensors import TensorSpec, serialize_file

from helpers.core.errors import ConfigError
from helpers.model.checkpoint_plan import BF16, CheckpointPlan, is_norm
from helpers.model.fp8_blocks import FP8_DTYPE, FP8_MAX, SCALE_DTYPE, random_e4m3_numpy

BOUND = 1e-3  # weights are uniform in [-BOUND, BOUND]
FP8_SCALE = 2.0 ** math.floor(math.log2(BOUND / FP8_MAX))  # 2**-19: fp8 values × this stay within ±BOUND
POOL = 1_048_573  # values drawn per shard and dtype: a prime below 2**20, so no row or 128-block repeats another


class Pools:
    """A shard's random values: one pool per dtype, drawn once; each tensor repeats its pool from a random offset."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        uniform = (self.rng.random(POOL, np.float32) * 2 - 1) * np.float32(BOUND)
        self.bf16 = np.ascontiguousarray((uniform.view(np.uint32) >> 16).astype(np.uint16))  # bf16 bits (truncated)
        self.fp8 = random_e4m3_numpy((POOL,), self.rng)  # e4m3 bytes

    def tile(self, pool: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """``shape`` filled with ``pool`` repeated, starting at a random offset."""
        n = math.prod(shape)
        start = int(self.rng.integers(POOL))
        reps = -(-(n + start) // POOL)
        return np.tile(pool, reps)[start : start + n].reshape(shape)


def _arrays(names: list[str], plan: CheckpointPlan, seed: int) -> dict[str, np.ndarray]:
    """The shard's tensors as numpy arrays of their bytes: bf16 as uint16 bits, fp8 as uint8 e4m3 codes."""
    pools = Pools(seed)
    arrays: dict[str, np.ndarray] = {}
    for name in names:
        shape, dtype = plan.shapes[name], plan.dtypes[name]
        if dtype == FP8_DTYPE:
            arrays[name] = pools.tile(pools.fp8, shape)
        elif dtype == SCALE_DTYPE:
            arrays[name] = np.full(shape, FP8_SCALE, np.float32)
        elif is_norm(name):
            arrays[name] = np.full(shape, 0x3F80, np.uint16)  # 1.0 in bf16
        else:
            arrays[name] = pools.tile(pools.bf16, shape)
    return arrays


def _save_torch(names: list[str], plan: CheckpointPlan, path: Path, seed: int) -> None:
    # torch is optional (heavy): the playbook's environment and the GPU host have it, a bare host may not
    import torch
    from safetensors.torch import save_file  # safetensors.torch imports torch: lazily, for the same reason

    views = {BF16: torch.bfloat16, FP8_DTYPE: torch.float8_e4m3fn, SCALE_DTYPE: torch.float32}
    arrays = _arrays(names, plan, seed)
    tensors = {k: torch.from_numpy(a).view(views[plan.dtypes[k]]) for k, a in arrays.items()}
    save_file(tensors, str(path), metadata={"format": "pt"})


def _save_numpy(names: list[str], plan: CheckpointPlan, path: Path, seed: int) -> None:
    """Write the arrays' bytes with safetensors' own serializer, under their safetensors dtypes."""
    arrays = _arrays(names, plan, seed)
    specs = {
        k: TensorSpec(dtype=plan.dtypes[k], shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
        for k, a in arrays.items()
    }
    serialize_file(specs, str(path), metadata={"format": "pt"})  # ``arrays`` keeps the buffers alive


def pick_backend(requested: str) -> str:
    """``torch`` or ``numpy``: as asked, or for ``auto`` torch where this interpreter has it (same bytes either way)."""
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


def save_shard(how: str, names: list[str], plan: CheckpointPlan, path: Path, seed: int) -> None:
    """Write one shard's tensors to ``path`` with the backend ``how`` (``pick_backend``'s answer)."""
    (_save_torch if how == "torch" else _save_numpy)(names, plan, path, seed)
