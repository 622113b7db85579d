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
code that launches the engine. ``helpers.model.checkpoint_plan`` says what the folder holds and
``helpers.model.weight_values`` draws the values from a pool per shard, so a write runs at memory speed,
not at the random generator's (drawing every fp8 value wrote 70B's 72.7 GB at about 100 MB/s on a 16-core
H100 host, 2026-12-06: longer than a device call). The output folder is named after a hash of
``config.json`` — ``/dev/shm/pb-models/<name>-<hash>`` where ``/dev/shm`` exists (RAM: the engine
reads it at memory speed and nothing is left on disk), else a cache folder — and a second call
with the same ``config.json`` finds it complete and does nothing. Folders are written under a
temporary name (``.<name>.partial``) and renamed when complete, so an interrupted run never leaves a
folder that looks done; a shard is written as ``<file>.tmp`` and renamed when whole, so a call after an
interruption keeps the whole shards of the same plan (recorded in the partial folder) and writes the rest.
One writer at a time: a second one while the first holds the partial folder's lock is refused. Before
anything is written, the destination's free space is checked against the bytes still to write (a 70B FP8
checkpoint is about 72 GB, more than /dev/shm holds at its usual default size on a 128 GB host, half its
memory). Shards are written one at a time: only one shard is held in memory; after each, a line says how
much is written and the time left at the pace so far.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from helpers.core.errors import ConfigError
from helpers.core.paths import resolve_model_dir
from helpers.model.checkpoint_plan import BF16, SHARD_BYTES, CheckpointPlan, plan_random_weights, shard_files
from helpers.model.fp8_blocks import FP8_BLOCK, FP8_DTYPE, FP8_MAX
from helpers.model.weight_values import BOUND, FP8_SCALE, POOL, pick_backend, save_shard
from helpers.run.progress import duration_text

SHM_ROOT = Path("/dev/shm/pb-models")
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "engine-playbook" / "models"
MARKER = "playbook_random_weights.json"
INDEX = "model.safetensors.index.json"
DISK_MARGIN = 256 * 2**20  # free space asked for beyond the files themselves
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_GIB = 2**30
PLAN_FILE = "plan.json"  # in the partial folder: the plan its whole shards were written for
LOCK_FILE = ".lock"


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


def free_bytes(out: Path) -> tuple[Path, int]:
    """(the existing folder ``out`` would be made in, its filesystem's free bytes)."""
    where = _existing_parent(out)
    return where, shutil.disk_usage(where).free


def check_free_space(out: Path, needed: int) -> None:
    """``ConfigError`` when the filesystem ``out`` goes to has less than ``needed`` bytes (plus a margin) free."""
    where, free = free_bytes(out)
    if free < needed + DISK_MARGIN:
        raise ConfigError(
            f"{out}: the random weights need {needed / _GIB:.1f} GiB but {where} has {free / _GIB:.1f} GiB free "
            f"(and {DISK_MARGIN // 2**20} MiB are kept to spare); nothing was written: pass --out on a larger "
            "filesystem (playbook random-weights MODEL_DIR --out DIR)"
        )


def _same_plan(tmp: Path, record: dict) -> bool:
    """Whether the partial folder ``tmp`` was started for this plan (config hash, seed, shards)."""
    try:
        return json.loads((tmp / PLAN_FILE).read_text(encoding="utf-8")) == record
    except (OSError, ValueError):
        return False


def _kept_shards(tmp: Path, record: dict, names: list[str]) -> list[int]:
    """The shards (by index) that an earlier call finished in ``tmp`` for this same plan; none for another plan."""
    return [i for i, f in enumerate(names) if (tmp / f).is_file()] if _same_plan(tmp, record) else []


def _lock_partial(tmp: Path, record: dict) -> int:
    """Make and lock the partial folder; clear it unless it was started for this plan. Returns the lock's fd.

    ``ConfigError`` when another writer holds the lock (the weights are being written now).
    """
    tmp.mkdir(parents=True, exist_ok=True)
    fd = os.open(tmp / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"{tmp}: another process is writing these random weights now; wait for it") from None
    if not _same_plan(tmp, record):
        for p in tmp.iterdir():  # started for another plan, or nothing yet: start over, keeping only the lock
            if p.name != LOCK_FILE:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        (tmp / PLAN_FILE).write_text(json.dumps(record) + "\n", encoding="utf-8")
    for p in tmp.glob("*.tmp"):  # a shard cut mid-write
        p.unlink()
    return fd


def _plan_record(plan: CheckpointPlan, seed: int) -> dict:
    return {"config_sha256_12": config_hash(plan.source), "seed": seed, "shards": plan.shards}


def _partial_dir(out: Path) -> Path:
    """Where the weights of ``out`` are written until they are whole: ``.<name>.partial`` beside it."""
    return out.with_name(f".{out.name}.partial")


def _bytes_left(plan: CheckpointPlan, out: Path, seed: int) -> int:
    """Bytes of ``plan`` still to write into ``out``: 0 when complete, less than all after an interrupted call."""
    if is_complete(out, config_hash(plan.source)):
        return 0
    kept = _kept_shards(_partial_dir(out), _plan_record(plan, seed), shard_files(plan))
    return plan.total_bytes - sum(plan.shard_size(i) for i in kept)


def bytes_to_write(
    model_dir: str | Path, out: str | Path | None = None, shard_bytes: int = SHARD_BYTES, seed: int = 0
) -> tuple[int, int]:
    """(bytes still to write, bytes of the whole checkpoint) for ``write_random_weights`` with these arguments.

    0 still to write when ``out`` is complete; less than the whole when an interrupted call of the same plan
    left whole shards.
    """
    plan = plan_random_weights(model_dir, shard_bytes)
    out = Path(out) if out else random_weights_dir(plan.source)
    return _bytes_left(plan, out, seed), plan.total_bytes


def _marker(plan: CheckpointPlan, how: str, seconds: float, kept: int) -> dict:
    """The finished folder's record (``MARKER``): what was written, how, and how long it took."""
    marker = {
        "config_sha256_12": config_hash(plan.source),
        "source": str(plan.source),
        "precision": plan.precision,
        "tensors": len(plan.shapes),
        "parameters": plan.parameters,
        "bytes": plan.total_bytes,
        "bytes_by_dtype": plan.bytes_by_dtype(),
        "dtype": FP8_DTYPE if plan.precision == "fp8" else BF16,
        "uniform_bound": BOUND,
        "pool_values": POOL,
        "backend": how,
        "seconds": round(seconds, 1),
        "shards_kept": kept,
    }
    if plan.precision == "fp8":
        marker |= {"fp8_block": [FP8_BLOCK, FP8_BLOCK], "fp8_scale": FP8_SCALE, "fp8_bound": FP8_MAX * FP8_SCALE}
    return marker


def _write_shards(
    plan: CheckpointPlan, tmp: Path, how: str, seed: int, done: list[int], log: Callable[[str], None]
) -> None:
    """Write the shards not in ``done`` into ``tmp``, each whole or not at all, with a progress line after each."""
    names = shard_files(plan)
    to_write, written, t0 = plan.total_bytes - sum(plan.shard_size(i) for i in done), 0, time.monotonic()
    for i, (fname, shard) in enumerate(zip(names, plan.shards, strict=True)):
        if i in done:
            continue
        part = tmp / f"{fname}.tmp"
        save_shard(how, shard, plan, part, seed + i + 1)
        part.rename(tmp / fname)
        written += plan.shard_size(i)
        spent = time.monotonic() - t0
        log(
            f"random weights: shard {i + 1} of {len(names)} written, {written / 1e9:.1f} of "
            f"{to_write / 1e9:.1f} GB in {duration_text(spent)} ({written / 1e6 / max(spent, 1e-3):,.0f} MB/s); "
            f"ETA {duration_text(spent / written * (to_write - written))}"
        )


def _finish(plan: CheckpointPlan, tmp: Path, out: Path, marker: dict) -> None:
    """Index and marker into the partial folder, then rename it to ``out``: from here on the folder is done."""
    weight_map = {n: fname for fname, shard in zip(shard_files(plan), plan.shards, strict=True) for n in shard}
    index = {"metadata": {"total_size": plan.total_bytes}, "weight_map": weight_map}
    (tmp / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    for extra in (PLAN_FILE, LOCK_FILE):
        (tmp / extra).unlink()
    if out.exists():
        out.rmdir()  # empty (checked before anything was written)
    tmp.rename(out)


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
    filesystem has too little free space for what is left to write (``ConfigError``). A call after an
    interrupted one keeps the shards it finished. ``log`` gets a line per shard with the bytes written and
    the time left. Any other quantization (AWQ, GPTQ, FP8 in other blocks) is refused.
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
    how, files, names = pick_backend(backend), _model_files(src), shard_files(plan)
    tmp, record = _partial_dir(out), _plan_record(plan, seed)
    check_free_space(out, _bytes_left(plan, out, seed) + sum(p.stat().st_size for p in files))
    fd = _lock_partial(tmp, record)
    done, t0 = _kept_shards(tmp, record, names), time.monotonic()
    if done:
        log(f"random weights: {len(done)} of {len(names)} shards kept from an earlier call in {tmp}")
    try:
        for p in files:
            shutil.copy2(p, tmp / p.name)
        if plan.config != json.loads((src / "config.json").read_text(encoding="utf-8")):
            # the written config.json declares the files' format (block size, fmt); the source is left as it is
            (tmp / "config.json").write_text(json.dumps(plan.config, indent=2) + "\n", encoding="utf-8")
        _write_shards(plan, tmp, how, seed, done, log)
        marker = _marker(plan, how, time.monotonic() - t0, len(done))
        _finish(plan, tmp, out, marker)
    except BaseException:
        kept = sum(1 for f in names if (tmp / f).is_file())
        log(f"random weights: stopped; {kept} of {len(names)} shards kept in {tmp} (the next call goes on from them)")
        raise
    finally:
        os.close(fd)  # releases the lock
    log(
        f"random weights: {out} ({plan.total_bytes / _GIB:.2f} GiB in {len(names)} shards, {marker['seconds']} s, "
        f"{how}, {plan.precision})"
    )
    return out
