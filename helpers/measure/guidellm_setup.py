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
    return settings.mp_context_type


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
