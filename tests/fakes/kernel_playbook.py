"""``playbook run`` through the real ``helpers.tools.cli.main``, whose step 5 runs in a kernel-like child.

``python kernel_playbook.py REPORTS_DIR CONFIG RUN_ID [--no-kernel] [ARG...]``: each notebook is replaced by
``bench_once.py`` started the way jupyter_client starts a kernel (a session of its own, the run's
pid in ``JPY_PARENT_PID``), so the process tree is the real one: ``playbook run`` (the lock, the
watchdog) → kernel → the fake engine in its own session, and guidellm's worker processes in the
kernel's group. The fake engine is registered here too, so that the config validates. With
``--no-kernel`` the notebooks do nothing: a run that only takes the lock (and cleans up after a dead one).
Other ARGs go to ``playbook run``.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from fake_engine import FAKE_ENGINE, FakeEngineAdapter

from helpers.engines import ENGINES
from helpers.tools import cli, runner

HERE = Path(__file__).resolve().parent


def _kernel_execute(nb: Path, out: Path, config_path: Path, run_dir: Path, **_kernel) -> str | None:
    print(f"executing {nb.name}", flush=True)
    env = {**os.environ, "JPY_PARENT_PID": str(os.getpid())}
    cmd = [sys.executable, str(HERE / "bench_once.py"), str(config_path), str(run_dir)]
    with open(run_dir / "kernel.log", "ab") as log:
        code = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True).returncode
    return None if code == 0 else f"{nb.name}: kernel exited {code}"


def main() -> int:
    """Run ``playbook run CONFIG --run-id RUN_ID --only 03_benchmark`` with step 5 in a kernel-like child."""
    reports, config, run_id = sys.argv[1:4]
    ENGINES.add(FAKE_ENGINE, FakeEngineAdapter())
    runner.execute = _kernel_execute if "--no-kernel" not in sys.argv else lambda *_args, **_kw: None
    runner.render_report = lambda run_dir: Path(run_dir) / "report.html"  # not what these tests look at
    cli.run_playbook = functools.partial(runner.run_playbook, reports_dir=Path(reports))
    extra = [a for a in sys.argv[4:] if a != "--no-kernel"]  # e.g. --time-limit 30
    return cli.main(["run", config, "--run-id", run_id, "--only", "03_benchmark", "--quiet", *extra])


if __name__ == "__main__":
    raise SystemExit(main())
