"""Step 5 alone in its own process, on the fake engine: ``python bench_once.py CONFIG RUN_DIR`` (YAML or JSON).

The process a reliability test can ``kill -9`` mid-sweep and run again on the same run folder; it
prints the benchmark's progress lines and, at the end, ``done <label>=<status> ...``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import yaml
from fake_engine import FAKE_ENGINE, FakeEngineAdapter

from helpers.benchmark.run import run_benchmarks
from helpers.core.config import parse_config
from helpers.engines import ENGINES


def main() -> None:
    """Benchmark the config's engines into the run folder."""
    cfg_path, run_dir = sys.argv[1:3]
    ENGINES.add(FAKE_ENGINE, FakeEngineAdapter())
    cfg = parse_config(yaml.safe_load(Path(cfg_path).read_text()), cfg_path)  # YAML or JSON
    results = asyncio.run(run_benchmarks(cfg, Path(run_dir), progress=lambda m: print(m, flush=True)))
    print("done " + " ".join(f"{r.label}={r.status}" for r in results), flush=True)


if __name__ == "__main__":  # guidellm's worker processes are spawned: they import this module
    main()
