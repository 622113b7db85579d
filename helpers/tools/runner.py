"""``playbook run``: execute the notebooks in checklist order with papermill, then archive the run.

Each notebook gets two parameters, the config path and the run folder. A notebook that fails is
still saved (papermill writes it with the error) and the next notebook runs; the report renders
whatever the run produced and says which notebook failed. A re-render from points of a healthy archive
is the exception: a failure puts the folder back as it was and raises (``helpers.run.rerender``).

The console shows one line per notebook and, during step 5, one progress bar with an ETA
(``helpers.tools.progress_console``, fed by the kernel through the run folder's ``logs/progress.jsonl``).
What the kernel prints (warnings, libraries' own bars) goes to ``logs/notebooks/<notebook>.log`` in the
run folder instead; the engines' logs are in ``logs/`` as before. The notebooks share one kernel, emptied
before each (``helpers.tools.kernel``): a kernel start and the imports once, not seven times.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import yaml

from helpers.core.atomic import write_json_atomic, write_text_atomic
from helpers.core.config import PlaybookConfig, public_dict
from helpers.core.errors import TimeLimitReached
from helpers.core.paths import PLAYBOOK_DIR, REPORTS_DIR, repo_relative
from helpers.core.secrets import known_secrets, redact
from helpers.core.text import slug
from helpers.launchers.config_check import load_config
from helpers.report.html import render_report
from helpers.report.index import write_index
from helpers.report.run_summary import write_summary
from helpers.run.lock import RunLock
from helpers.run.processes import Watchdog
from helpers.run.progress import PROGRESS_FILE
from helpers.run.rerender import (
    FROM_POINTS_ENV,
    MEASURE_ONLY_ENV,
    RUN_FILE,
    RerenderGuard,
    earlier_of_a_resume,
    rerender_log_name,
    run_info,
)
from helpers.run.time_limit import DEADLINE_ENV, clear_stop, deadline_from, stopped
from helpers.tools.engine_subset import config_file, select_engines, with_archived_engines
from helpers.tools.kernel import RunKernel, kernel_manager_writing_to
from helpers.tools.progress_console import watch_progress


def notebooks(playbook_dir: Path = PLAYBOOK_DIR) -> list[Path]:
    """The playbook's notebooks in checklist order (by their numeric prefix)."""
    return sorted(p for p in playbook_dir.glob("[0-9][0-9]_*.ipynb"))


def new_run_id(name: str, now: datetime | None = None) -> str:
    """A run id: UTC date-time plus the workload name."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{slug(name)}"


def notebook_log(run_dir: Path, nb: Path, rerender: bool = False) -> Path:
    """Where the kernel's stdout and stderr of notebook ``nb`` go: ``logs/notebooks/<name>.log``.

    A re-render from points writes ``<name>.rerender.log`` instead (the latest re-render's only), so that the
    logs of the attempts that measured stay as they were.
    """
    return run_dir / "logs" / "notebooks" / (rerender_log_name(nb.stem) if rerender else f"{nb.stem}.log")


def _redact_file(path: Path, secrets: list[str]) -> None:
    """Remove secrets, this machine's repository path and its home directory from a notebook or a log, in place.

    The notebooks get the config's and the run folder's absolute paths as parameters; an archived run keeps
    them relative to the repository (``./reports/<run>``), as its report does.
    """
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    clean = repo_relative(redact(text, secrets) if secrets else text)
    home = str(Path.home())
    if len(home) > 1:  # the user's home (an engine's cache under it, in its log) as ``~``
        clean = clean.replace(home + "/", "~/")
    if clean != text:
        write_text_atomic(path, clean)


def redact_logs(run_dir: Path, secrets: list[str]) -> None:
    """``_redact_file`` on every log the run folder holds: the engines' own logs and their clients' too.

    An engine logs the paths it was given (the model folder under the repository) and its caches (under the
    home directory); an archived run keeps neither.
    """
    for log in sorted(Path(run_dir).rglob("*.log")):
        _redact_file(log, secrets)


def execute(
    nb: Path, out: Path, config_path: Path, run_dir: Path, kernel: RunKernel | None = None, log: Path | None = None
) -> str | None:
    """Run one notebook with papermill; return None on success or the error in one line.

    The kernel's streams, and whatever it or its children write to their file descriptors, are appended
    to ``log`` (default ``notebook_log``), not echoed to the console. ``kernel``: the run's shared kernel
    (``helpers.tools.kernel``), emptied first; without it the notebook gets a kernel of its own.
    """
    # papermill is heavy; only the notebook runner needs it
    import papermill as pm

    log = log or notebook_log(run_dir, nb)
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log, "a", encoding="utf-8") as sink:
            if kernel is not None:
                manager = {"km": kernel.prepare(log)}
            else:
                manager = {"kernel_manager_class": kernel_manager_writing_to(sink)}
            pm.execute_notebook(
                str(nb),
                str(out),
                parameters={"config_path": str(config_path), "run_dir": str(run_dir)},
                kernel_name="python3",
                cwd=str(PLAYBOOK_DIR),
                log_output=False,
                stdout_file=sink,
                stderr_file=sink,
                progress_bar=False,
                request_save_on_cell_execute=True,
                **manager,
            )
    except pm.PapermillExecutionError as err:
        return f"{nb.name}: {err.ename}: {err.evalue}".splitlines()[0][:500]
    except Exception as err:  # a dead kernel or a timeout: the next notebooks still run
        return f"{nb.name}: {type(err).__name__}: {err}".splitlines()[0][:500]
    return None


CHECK_LOG = Path("logs") / "check.txt"
"""Where a run keeps what ``playbook check`` said before each of its ``playbook run`` calls."""


def archive_check(run_dir: Path, text: str, now: datetime | None = None) -> Path:
    """Append the preflight's lines to the run folder's ``logs/check.txt``, under the time of the call.

    Paths under this machine's repository or home directory are written relative to them (``_redact_file``).
    """
    path = run_dir / CHECK_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"# playbook check before playbook run, {(now or datetime.now(UTC)):%Y-%m-%d %H:%M:%S} UTC\n{text}\n")
    _redact_file(path, [])  # this machine's repository and home paths, as in the logs
    return path


def _set_environment(values: dict[str, str | None]) -> None:
    """``os.environ`` with ``values`` set (a value of None: the variable unset)."""
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextmanager
def kernel_environment(values: dict[str, str | None]) -> Iterator[None]:
    """Set ``values`` (None: unset) while the run lasts, so the notebooks' kernels inherit them; then restore."""
    before = {k: os.environ.get(k) for k in values}
    _set_environment(values)
    try:
        yield
    finally:
        _set_environment(before)


def run_playbook(
    config: str | Path,
    run_id: str | None = None,
    reports_dir: Path = REPORTS_DIR,
    only: list[str] | None = None,
    log_output: bool = True,
    engines: list[str] | None = None,
    console: TextIO | None = None,
    preflight: str | None = None,
    from_points: bool = False,
    overrides: list[str] | tuple[str, ...] = (),
    time_limit_s: float | None = None,
) -> Path:
    """Run the whole playbook for ``config``; return the path of ``report.html``.

    The config is validated first (a bad config fails before anything starts). Reusing a
    ``run_id`` resumes: measured points in that run folder are kept. ``engines`` (labels) measures only
    those engine configurations; the ones an earlier attempt archived in the run folder are kept and
    reported beside them (``helpers.tools.engine_subset``). With ``log_output`` step 5's
    progress is shown on ``console`` (default stderr): a bar on a terminal, else a line per unit.
    ``preflight``: what ``playbook check`` said before the run, appended to ``logs/check.txt``.
    ``from_points`` (or ``FROM_POINTS_ENV`` set): re-render the run folder from its stored points, launching
    nothing; on a healthy archive a failed notebook puts the folder back and raises ``RerenderError``
    (``helpers.run.rerender``), and ``run.json`` keeps the measuring run's ``notebook_seconds``.
    ``overrides``: ``KEY=VALUE`` changes to the config for this run (``helpers.core.config_overrides``).
    ``time_limit_s``: step 5 starts no configuration whose least expected time no longer fits in that many
    seconds from now; it stops there and ``TimeLimitReached`` is raised, nothing rendered (``helpers.run.time_limit``).
    """
    cfg = load_config(config, overrides)  # a bad config fails here, before anything is imported or started
    if engines:
        cfg = select_engines(cfg, engines)

    run_id = run_id or new_run_id(cfg.name)
    run_dir = (Path(reports_dir) / run_id).resolve()
    from_points = from_points or bool(os.environ.get(FROM_POINTS_ENV))
    kernel_env = {
        FROM_POINTS_ENV: "1" if from_points else None,
        MEASURE_ONLY_ENV: None,
        DEADLINE_ENV: deadline_from(time_limit_s),
    }
    # RunLock: one run per run id; Watchdog: what the run starts does not outlive it, even a `kill -9` of it
    with RunLock(run_dir), Watchdog(run_dir):
        if engines:  # these are measured; the configurations earlier attempts archived are kept, and reported
            kernel_env[MEASURE_ONLY_ENV] = json.dumps([e.label for e in cfg.engines])
            cfg = with_archived_engines(cfg, run_dir / "config.yaml")
        with config_file(cfg, config, bool(engines or overrides)) as path, kernel_environment(kernel_env):
            shown = (console or sys.stderr) if log_output else None
            with RerenderGuard(run_dir, from_points) as guard:  # a healthy archive: a copy to put back on failure
                if preflight is not None:
                    archive_check(run_dir, preflight)
                report = _run_locked(cfg, path, run_id, run_dir, only, shown, guard)
        write_index(Path(reports_dir))  # never from a re-render that failed: it raised above
        return report


def _run_locked(
    cfg: PlaybookConfig,
    config: str | Path,
    run_id: str,
    run_dir: Path,
    only: list[str] | None,
    console: TextIO | None,
    guard: RerenderGuard,
) -> Path:
    """The body of ``run_playbook``, run while its run folder is locked (``helpers.run.lock``).

    ``guard``: the re-render's guard (``helpers.run.rerender``); it raises when a guarded re-render failed.
    """
    started = time.time()
    (run_dir / "notebooks").mkdir(parents=True, exist_ok=True)
    cfg_copy = run_dir / "config.yaml"
    write_text_atomic(cfg_copy, yaml.safe_dump(public_dict(cfg), sort_keys=False))  # a full disk: never half a file
    secrets = known_secrets(cfg)
    failures: dict[str, str] = {}
    timings: dict[str, float] = {}
    chosen = [nb for nb in notebooks() if not only or nb.stem in only or nb.name in only]
    clear_stop(run_dir)
    why: str | None = None  # why step 5 stopped for the time limit, once it has
    with RunKernel(PLAYBOOK_DIR) as kernel:  # one kernel for the run's notebooks (helpers.tools.kernel)
        for nb in chosen:
            out = run_dir / "notebooks" / nb.name
            print(f"[playbook] {nb.name} ...", flush=True)
            t0 = time.monotonic()
            log = notebook_log(run_dir, nb, rerender=guard.earlier is not None)
            if guard.earlier is not None:
                log.unlink(missing_ok=True)  # the latest re-render's lines only
            with watch_progress(run_dir / PROGRESS_FILE, console):
                err = execute(nb, out, Path(config).resolve(), run_dir, kernel=kernel, log=log)
            timings[nb.name] = round(time.monotonic() - t0, 1)
            _redact_file(out, secrets)
            _redact_file(log, secrets)
            why = stopped(run_dir) if err else None
            if why is not None:  # step 5 stopped for the time limit: no later step runs on half of it
                print(f"[playbook] {nb.name} stopped: {why}", flush=True)
                break
            if err:
                failures[nb.name] = repo_relative(redact(err, secrets))
                print(f"[playbook] {nb.name} failed: {failures[nb.name]}", flush=True)
    redact_logs(run_dir, secrets)
    if why is not None:
        raise TimeLimitReached(why)
    guard.check(failures, list(timings))  # a guarded re-render stops here: the folder is put back
    earlier = guard.earlier if guard.earlier is not None else earlier_of_a_resume(run_dir, started)
    write_json_atomic(run_dir / RUN_FILE, run_info(run_id, failures, timings, earlier))
    write_summary(run_dir, cfg)
    return render_report(run_dir)
