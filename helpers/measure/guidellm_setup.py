"""guidellm's process-wide set-up: its log level and workers, and its import done ahead of the first load.

``configure_guidellm`` is called before every load (``helpers.measure.loadgen``, the trace replay of
``helpers.workload.replay_run``); ``prewarm`` is called while an engine starts, so that the first load
does not wait for guidellm's import.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import warnings
from multiprocessing import forkserver

WORKER_PRELOAD = ("guidellm.scheduler.worker_group", "guidellm.scheduler", "guidellm.backends")
"""Modules the fork server imports once, so that guidellm's workers start already holding them.

guidellm starts its worker processes (and a multiprocessing manager) for every load; with its default
``spawn`` context each of them imports guidellm (and torch) again. From one fork server that imported
them once, a load of 4 requests against SmolLM2 on the 2-core machine took 3.9 s instead of 5.0 s
around 2.0 s of requests (2026-12-01): about a second less per point. ``PLAYBOOK_GUIDELLM_MP_CONTEXT=spawn``
goes back to guidellm's default. Either way a load generator killed with SIGKILL leaves its workers
to whoever watches it (``playbook run``'s watchdog, ``helpers.run.processes``).
"""


def configure_guidellm() -> str:
    """Quiet guidellm's console logging (and the bars of the ``datasets`` it reads prompts with); size its workers.

    The log level is read by guidellm when it is first imported, so it is set through its
    environment variable before that import (reconfiguring its logger later hangs its workers).
    Returns the multiprocessing context guidellm's workers start from.
    """
    level = os.environ.get("PLAYBOOK_GUIDELLM_LOG_LEVEL", "WARNING")
    os.environ.setdefault("GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL", level)
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # a "Generating train split" bar per load
    warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm.auto in a kernel without ipywidgets
    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.settings import settings

    cpus = os.cpu_count() or 2
    settings.max_worker_processes = int(os.environ.get("PLAYBOOK_GUIDELLM_WORKERS", str(min(10, max(1, cpus)))))
    settings.mp_context_type = os.environ.get("PLAYBOOK_GUIDELLM_MP_CONTEXT", "forkserver")  # type: ignore[assignment]
    if settings.mp_context_type == "forkserver":
        multiprocessing.set_forkserver_preload(list(WORKER_PRELOAD))
    settings.scheduler_start_delay_non_distributed = START_DELAY_S
    return settings.mp_context_type


START_DELAY_S = 0.2
"""Seconds between guidellm's workers being up and its benchmark's start (guidellm's default: 1.0).

guidellm sets the start time only after every worker process has passed its start-up barrier, so
the default second is slack that every load waits out: about a second less for each of the 20-odd
loads of the CPU default (2026-12-03, 2-core machine: a load of 4 requests against a stand-in server
took 1.8 s at 0.3 s against 2.5 s at the default, its requests' own span unchanged at 0.04-0.07 s).
Poisson probes keep their own lead before the first arrival (``helpers.measure.loadgen.SCHEDULE_LEAD_S``).
guidellm's poll interval (0.1 s) is left as it is: at 0.02 s a multi-turn replay lost one of its 9
requests in 2 of 8 runs side by side on the 2-core machine (8 of 8 complete at the default).
"""


_warming: threading.Thread | None = None


def prewarm() -> None:
    """Import guidellm and start its fork server in the background (once per process), e.g. while an engine starts.

    The first load of a kernel otherwise waits for both: about 6 s on the 2-core machine, while the
    engine's own start keeps one of the two cores busy and leaves the other idle. Failures are left to
    the load itself, which imports the same modules and says what went wrong.
    """
    global _warming
    if _warming is None:
        _warming = threading.Thread(target=_warm, name="guidellm-prewarm", daemon=True)
        _warming.start()


def _warm() -> None:
    try:
        context = configure_guidellm()
        # guidellm pulls in torch: imported here, in the background, only when a run measures
        import guidellm.benchmark.entrypoints  # noqa: F401

        if context == "forkserver":
            forkserver.ensure_running()
    except Exception:  # noqa: BLE001 - the load that follows imports the same and reports the failure
        pass
