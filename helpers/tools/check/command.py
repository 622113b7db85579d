"""The ``playbook check`` command, and the preflight ``playbook run`` makes with the same checks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from helpers.core.config import PlaybookConfig
from helpers.core.paths import REPORTS_DIR
from helpers.tools.check import DEFAULT_MIN_FREE_GIB, check_config, check_loaded
from helpers.tools.check.lines import Check, CheckReport

BENCHMARK_NOTEBOOK = "03_benchmark"
"""The notebook that starts engines: without it in a run (``--only``), engines are not checked."""


def add_check_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of ``playbook check``."""
    p.add_argument("config", help="workload config YAML (e.g. playbook/workloads/default.yaml)")
    p.add_argument("--engines", nargs="+", metavar="LABEL", help="check only these engine configurations (labels)")
    p.add_argument(
        "--min-free-gib",
        type=float,
        default=DEFAULT_MIN_FREE_GIB,
        help=f"free disk space wanted where runs are written, GiB (default {DEFAULT_MIN_FREE_GIB:g})",
    )
    p.add_argument("--reports-dir", default=str(REPORTS_DIR), help="where the run folder would be written")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds an interpreter may take to import its engine")
    return p


def check_command(args: argparse.Namespace) -> int:
    """Run ``playbook check``: one line per check on stdout, then a summary; exit 1 on any ✗."""
    report = check_config(args.config, args.engines, Path(args.reports_dir), args.min_free_gib, args.timeout)
    sys.stdout.write(report.text())
    return 0 if report.ok else 1


def starts_engines(only: list[str] | None) -> bool:
    """Whether a run with ``--only only`` runs step 5 (the notebook that starts engines)."""
    return not only or any(Path(x).stem == BENCHMARK_NOTEBOOK for x in only)


def preflight(
    cfg: PlaybookConfig,
    only: list[str] | None,
    console: TextIO | None,
    errors: TextIO,
    reports_dir: Path = REPORTS_DIR,
) -> CheckReport:
    """The checks ``playbook run`` makes before anything starts (engines only when step 5 runs).

    Every ✗ goes to ``errors`` with what it means for the run; ``console`` (None: quiet) gets one line
    saying how many checks passed. The whole report is what the run archives (``logs/check.txt``).
    """
    report = CheckReport(check_loaded(cfg, reports_dir, engines=starts_engines(only)))
    for c in report.failed:
        print(c.line(), file=errors, flush=True)
    if console is not None:
        print(f"[playbook] preflight: {_passed(report)} (playbook check; --no-check skips it)", file=console)
    return report


def _passed(report: CheckReport) -> str:
    """``7 checks passed``, or how many failed and what the run does about it."""
    n, bad = len(report.checks), len(report.failed)
    if not bad:
        return f"{n} checks passed"
    if report.stops_run:
        return f"{bad} of {n} checks failed; the run stops before any notebook"
    rows = report.failed_rows
    return f"{bad} of {n} checks failed; {', '.join(map(repr, rows))} will be failed row(s), the others run"


__all__ = ["Check", "add_check_arguments", "check_command", "preflight", "starts_engines"]
