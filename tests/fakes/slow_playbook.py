"""``playbook run`` through the real ``helpers.tools.cli.main``, with notebooks that only sleep.

``python slow_playbook.py REPORTS_DIR CONFIG RUN_ID [SECONDS]``: the run folder is under
``REPORTS_DIR`` and each notebook "runs" for ``SECONDS`` (default 60), printing ``executing <name>``
first, so tests can start two runs at once, or signal one mid-run, in a second or two.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

from helpers.tools import cli, runner


def _slow_execute(seconds: float, nb: Path, out: Path, config_path: Path, run_dir: Path, **_kernel) -> None:
    print(f"executing {nb.name}", flush=True)
    time.sleep(seconds)


def main() -> int:
    """Run ``playbook run CONFIG --run-id RUN_ID --only 01_workload`` with a sleeping notebook."""
    reports, config, run_id = sys.argv[1:4]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
    runner.execute = functools.partial(_slow_execute, seconds)
    cli.run_playbook = functools.partial(runner.run_playbook, reports_dir=Path(reports))
    return cli.main(["run", config, "--run-id", run_id, "--only", "01_workload", "--quiet"])


if __name__ == "__main__":
    raise SystemExit(main())
