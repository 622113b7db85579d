"""``summary.json``: the machine-readable record of a run.

It holds the recommendation, config, versions, hardware and every measured point, and is read by
the index, the quarterly review and other tools.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helpers import __version__
from helpers.benchmark.run import points_table, target_concurrency, tuned_point
from helpers.core.config import PlaybookConfig, public_dict
from helpers.core.secrets import known_secrets, redact_data
from helpers.run.records import load_engine_results, write_json_atomic


def _read(run_dir: Path, name: str) -> Any | None:
    p = run_dir / name
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def host_facts() -> dict[str, Any]:
    """Minimal facts about this machine, used when step 2 wrote no inventory."""
    return {"cpu_cores": os.cpu_count(), "platform": platform.platform(), "gpus": []}


def build_summary(run_dir: Path, cfg: PlaybookConfig) -> dict[str, Any]:
    """Gather the run's artifacts into one JSON-ready dict."""
    run_dir = Path(run_dir)
    results = load_engine_results(run_dir)
    target = target_concurrency(cfg)
    engines = []
    for r in results:
        rep = tuned_point(r, target)
        engines.append(
            {
                "label": r.label,
                "engine": r.engine,
                "version": r.version,
                "status": r.status,
                "reason": r.reason,
                "cold_start_s": r.cold_start_s,
                "ready_s": r.ready_s,
                "kv_capacity_tokens": r.kv_capacity_tokens,
                "tuned_knobs": r.tuned_knobs,
                "command": r.command,
                "representative_point": rep.model_dump(mode="json") if rep else None,
            }
        )
    decision = _read(run_dir, "decision.json") or {}
    run_info = _read(run_dir, "run.json") or {}
    env = _read(run_dir, "environment.json") or {}
    summary = {
        "schema": 1,
        "run_id": run_dir.name,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "playbook_version": __version__,
        "workload": cfg.name,
        "model": cfg.model.served_name or cfg.model.path,
        "hardware": env.get("hardware") or host_facts(),
        "recommendation": {
            "primary": decision.get("primary"),
            "backup": decision.get("backup"),
            "sentences": decision.get("sentences", []),
        },
        "engines": engines,
        "points": points_table(results),
        "profile": _read(run_dir, "profile.json"),
        "cost": _read(run_dir, "cost.json"),
        "decision": decision or None,
        "review_flags": (_read(run_dir, "review.json") or {}).get("flags", []),
        "failures": run_info.get("failures", {}),
        "notebook_seconds": run_info.get("notebook_seconds", {}),
        "config": public_dict(cfg),
    }
    return redact_data(summary, known_secrets(cfg))


def write_summary(run_dir: Path, cfg: PlaybookConfig) -> Path:
    """Write ``summary.json`` into the run folder."""
    p = Path(run_dir) / "summary.json"
    write_json_atomic(p, build_summary(run_dir, cfg))
    return p
