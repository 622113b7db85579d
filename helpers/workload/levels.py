"""The request shapes a run replays: synthetic lengths from the config, or a trace's profile.

A CPU engine cannot serve production-length prompts in reasonable time, so with
``workload.cpu_scale_down`` the shapes of a profiled trace are capped for CPU engines; the
report says so (``scale_note``).
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.core.config import PlaybookConfig
from helpers.core.paths import resolve_repo_path
from helpers.engines import ENGINES
from helpers.measure.prompts import RequestShape, fixed_shapes
from helpers.run.folder import RunFolder
from helpers.workload.profile import Profile, profile_from_config
from helpers.workload.shapes import concurrency_levels, shapes_from_profile
from helpers.workload.traces import load_trace

# What two CPU cores serve in seconds rather than minutes (tiny model, see playbook/models).
CPU_MAX_INPUT_TOKENS = 512
CPU_MAX_OUTPUT_TOKENS = 64


def on_cpu(cfg: PlaybookConfig) -> bool:
    """Whether every engine of the config runs on the CPU."""
    return all(ENGINES[e.engine].runs_on_cpu for e in cfg.engines)


def request_count(cfg: PlaybookConfig) -> int:
    """Rows per dataset: enough for the largest point."""
    wl = cfg.workload
    return max(wl.requests_per_point, max(wl.concurrency), wl.target_concurrency or 0)


def point_requests(cfg: PlaybookConfig, concurrency: int) -> int:
    """Requests sent at one concurrency level: whole waves when ``requests_per_stream`` is set."""
    wl = cfg.workload
    if wl.requests_per_stream:
        return max(concurrency, min(wl.requests_per_point, concurrency * wl.requests_per_stream))
    return max(wl.requests_per_point, concurrency)


def run_profile(cfg: PlaybookConfig, run_dir: Path | None = None) -> Profile:
    """The workload profile: step 1's record in the run folder when it exists, else computed."""
    saved = RunFolder(run_dir).load(Profile) if run_dir else None
    return saved if saved is not None else profile_from_config(cfg)


def workload_shapes(cfg: PlaybookConfig, run_dir: Path | None = None, n: int | None = None) -> list[RequestShape]:
    """The shapes of one point's requests (``n`` of them; default: enough for the largest grid point)."""
    wl = cfg.workload
    n = n or request_count(cfg)
    if wl.source.kind == "synthetic":
        return fixed_shapes(n, wl.input_tokens, wl.output_tokens, wl.shared_prefix_tokens)

    caps = (CPU_MAX_INPUT_TOKENS, CPU_MAX_OUTPUT_TOKENS) if (wl.cpu_scale_down and on_cpu(cfg)) else (None, None)
    return shapes_from_profile(run_profile(cfg, run_dir), n=n, seed=0, max_input=caps[0], max_output=caps[1])


def write_replay_trace(cfg: PlaybookConfig, path: Path) -> Path:
    """Write the replayed window of the trace as guidellm trace rows (timestamp s, input/output length).

    Lengths are capped like the sweep's shapes when the engines run on the CPU.
    """
    wl, src = cfg.workload, cfg.workload.source
    rp = wl.replay
    assert rp is not None and src.path is not None
    trace = load_trace(
        resolve_repo_path(src.path), src.format, model_dir=cfg.model.directory, block_size=src.block_size
    )
    df = trace.requests
    df = df[df["start_s"] >= rp.start_s].head(rp.requests)
    cap_in, cap_out = (
        (CPU_MAX_INPUT_TOKENS, CPU_MAX_OUTPUT_TOKENS) if (wl.cpu_scale_down and on_cpu(cfg)) else (None, None)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = float(df["start_s"].iloc[0]) if len(df) else 0.0
    with open(path, "w", encoding="utf-8") as f:
        for start, n_in, n_out in zip(df["start_s"], df["input_tokens"], df["output_tokens"], strict=True):
            row = {
                "timestamp": round(float(start) - t0, 6),
                "input_length": int(min(n_in, cap_in) if cap_in else n_in),
                "output_length": max(1, int(min(n_out, cap_out) if cap_out else n_out)),
            }
            f.write(json.dumps(row) + "\n")
    return path


def sweep_levels(cfg: PlaybookConfig, run_dir: Path | None = None) -> list[int]:
    """The concurrency levels of the sweep: the config's, plus the profile's p50/p95/p99 when asked."""
    levels = set(cfg.workload.concurrency)
    if cfg.workload.profile_concurrency:
        levels |= set(concurrency_levels(run_profile(cfg, run_dir)))
    return sorted(levels)


def scale_note(cfg: PlaybookConfig) -> str | None:
    """A sentence for the report when profiled shapes were capped for a CPU engine."""
    wl = cfg.workload
    if wl.source.kind != "synthetic" and wl.cpu_scale_down and on_cpu(cfg):
        return (
            f"The benchmark replays the profiled length distributions capped at {CPU_MAX_INPUT_TOKENS} input and "
            f"{CPU_MAX_OUTPUT_TOKENS} output tokens, because the engines here run on the CPU; the profile itself "
            "is shown uncapped."
        )
    return None
