"""One Jupyter kernel for all the notebooks of a run, emptied between them.

A kernel of its own for each of the seven notebooks meant a kernel start and the same imports (2-3.5 s)
seven times over: on the 2-core machine the six notebooks besides step 5 took 35 s of the CPU default's
re-run, and 17 s with one kernel (2026-12-03). ``RunKernel`` starts one kernel, and before each notebook empties its
namespace (IPython's ``reset``: every name a notebook defined is gone, so a notebook that would lean
on an earlier one's variables fails here as it does alone in Jupyter) and closes pyplot's figures; what
stays is what Python keeps process-wide: imported modules (the saving), and their settings. The
kernel's own output descriptors are pointed at each notebook's log in turn, so what it and the
processes it starts write there lands in that notebook's log, as with a kernel per notebook. A kernel
that died (or was shut down by a signal) is started again for the next notebook.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from jupyter_core.utils import run_sync  # light (papermill brings it); nbclient runs on the same loop

KERNEL_NAME = "python3"
READY_TIMEOUT_S = 120.0
"""Seconds for a (re)started kernel to answer, and for the reset before a notebook to finish."""

_RESET = """
def _empty(ip=get_ipython()):
    # the module's own dunders (__spec__: multiprocessing's spawn and forkserver read it) outlive the reset
    keep = {{k: v for k, v in ip.user_ns.items() if k.startswith("__") and k.endswith("__")}}
    ip.reset(new_session=False)
    for k, v in keep.items():
        ip.user_ns.setdefault(k, v)
_empty()
import os as _os, sys as _sys
if "matplotlib.pyplot" in _sys.modules:
    _sys.modules["matplotlib.pyplot"].close("all")
_fd = _os.open({log}, _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT, 0o644)
_sys.stdout.flush(); _sys.stderr.flush()
_os.dup2(_fd, 1); _os.dup2(_fd, 2); _os.close(_fd)
del _os, _sys, _fd
"""


def kernel_manager_writing_to(log: IO[str]) -> type:
    """A kernel manager class whose kernels' own stdout and stderr go to ``log``, not to this terminal.

    The kernel relays what Python code prints to papermill, but not what reaches its file descriptors
    directly: its start-up warning ("running over TCP without encryption"), and the processes it starts
    (multiprocessing's resource tracker: "leaked semaphore objects" when guidellm's workers end).
    """
    # jupyter_client is heavy; only the notebook runner needs it (papermill brings it)
    from jupyter_client.manager import AsyncKernelManager

    class NotebookKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: object) -> None:
            kw.setdefault("stdout", log)
            kw.setdefault("stderr", log)
            await super()._async_launch_kernel(kernel_cmd, **kw)

    return NotebookKernelManager


class RunKernel:
    """The kernel a run's notebooks share (a context manager: shut down on leaving).

    ``prepare(log)`` before each notebook returns the kernel manager to hand to papermill, the
    kernel alive and emptied, its descriptors writing to ``log``.
    """

    def __init__(self, cwd: Path):
        self.cwd = cwd
        self.km = None
        self._sink: IO[str] | None = None

    def __enter__(self) -> RunKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prepare(self, log: Path):
        """The kernel manager for the next notebook: alive (started again if it died), emptied, writing to ``log``.

        Raises ``RuntimeError`` naming what failed when the kernel does not answer or the reset fails.
        """
        log.parent.mkdir(parents=True, exist_ok=True)
        return run_sync(self._prepare)(log)

    def close(self) -> None:
        """Shut the kernel down (gracefully, then for good) and close its log; nothing if none was started."""
        if self.km is not None or self._sink is not None:
            run_sync(self._shutdown)()

    def alive(self) -> bool:
        """Whether the shared kernel is running now."""
        return self.km is not None and run_sync(self.km.is_alive)()

    async def _prepare(self, log: Path):
        if self.km is None or not await self.km.is_alive():
            await self._start(log)
        client = self.km.client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=READY_TIMEOUT_S)
            reply = await client.execute_interactive(
                _RESET.format(log=json.dumps(str(log))), store_history=False, timeout=READY_TIMEOUT_S
            )
        finally:
            client.stop_channels()
        content = reply.get("content", {})
        if content.get("status") != "ok":
            raise RuntimeError(f"the kernel's reset before the notebook failed: {content.get('evalue', content)}")
        return self.km

    async def _start(self, log: Path) -> None:
        """Start a kernel whose own start-up output goes to ``log`` (the notebook it is started for)."""
        await self._shutdown()
        self._sink = open(log, "a", encoding="utf-8")  # noqa: SIM115 - open for the kernel's lifetime
        self.km = kernel_manager_writing_to(self._sink)(kernel_name=KERNEL_NAME)
        await self.km.start_kernel(cwd=str(self.cwd))

    async def _shutdown(self) -> None:
        """Shut the kernel down if there is one, and close the log its descriptors were opened on."""
        km, self.km = self.km, None
        sink, self._sink = self._sink, None
        try:
            if km is not None:
                try:
                    if await km.is_alive():
                        await km.shutdown_kernel(now=False)
                except RuntimeError:  # "No kernel is running!": a signal's handler shut it down already
                    pass
                finally:
                    await km.cleanup_resources()
        finally:
            if sink is not None:
                sink.close()
