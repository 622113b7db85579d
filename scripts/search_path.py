"""Probes and engine-minutes until a capacity search was conclusive, for archived runs side by side.

``python scripts/search_path.py RUN_ID:LABEL [RUN_ID:LABEL ...]`` (run folders under ``reports/``, or paths)
prints, for each, the estimate after every probe and the first probe where its interval was within ± 5%
(``helpers.benchmark.search_path``); then one summary line per run. Used to compare a search started from step
4's prediction with one started from the grid (docs/measurements).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helpers.benchmark.search_path import first_conclusive, search_path
from helpers.core.errors import PlaybookError
from helpers.core.paths import REPORTS_DIR


def main() -> int:
    """Print each run's path and the summary; 2 on a bad argument."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="RUN_ID:LABEL")
    ap.add_argument("--target", type=float, default=0.05, help="half-width asked for (default 0.05)")
    args = ap.parse_args()
    summary = []
    for arg in args.runs:
        run, sep, label = arg.partition(":")
        if not sep or not label:
            print(f"{arg}: give RUN_ID:LABEL, e.g. h100-20261206-chat-8b-edge:vLLM 0.26.0", file=sys.stderr)
            return 2
        run_dir = Path(run) if Path(run).is_dir() else REPORTS_DIR / run
        try:
            steps = search_path(run_dir, label, args.target)
        except PlaybookError as e:
            print(e, file=sys.stderr)
            return 2
        print(f"\n{run_dir.name} · {label}")
        for s in steps:
            hw = f"± {s.rel_half_width:.1%}" if s.rel_half_width is not None else "no interval"
            value = f"{s.value:,.2f}" if s.value is not None else "-"
            print(
                f"  {s.number:2d} {s.stream:<6} {s.load:8.3f} {s.seconds:5.1f} s  {s.cumulative_s / 60:5.2f} min  "
                f"{s.status:<10} {value:>8} {hw:<12}{' conclusive' if s.conclusive else ''}"
            )
        done = first_conclusive(steps)
        if done:
            summary.append(
                f"{run_dir.name} · {label}: conclusive after {done.number} probes, {done.cumulative_s / 60:.2f} "
                f"engine-minutes of probes ({done.value:,.2f}, ± {done.rel_half_width:.1%})"
            )
        else:
            last = steps[-1] if steps else None
            tail = f" (last: {last.status}, {len(steps)} probes)" if last else ""
            summary.append(f"{run_dir.name} · {label}: not conclusive{tail}")
    print("\n" + "\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
