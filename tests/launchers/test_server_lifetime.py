"""An engine process must not outlive the process that started it (a killed kernel or ``playbook run``).

On the GPU host a ``timeout`` that ended ``playbook run`` once left an SGLang server holding 137 GB
of GPU memory; engines now get SIGTERM when their parent dies.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")

ROOT = Path(__file__).resolve().parents[2]


def gone(pid: int) -> bool:
    """No such process, or a zombie waiting for a reaper (it no longer runs)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_engine_gets_sigterm_when_its_parent_is_killed(tmp_path):
    parent = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from helpers.engines import get_engine
        from helpers.launchers.server import start_process
        h = start_process([sys.executable, "-c", "import time; time.sleep(300)"], {{}},
                          Path({str(tmp_path)!r}) / "engine.log", "http://127.0.0.1:9", get_engine("vllm-cpu"))
        print(h.process.pid, flush=True)
        time.sleep(300)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", parent], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        child = int(p.stdout.readline())
        time.sleep(0.5)
        assert not gone(child)
        assert os.getsid(child) == child  # its own session, so that stop() can end its group
        p.send_signal(signal.SIGKILL)  # no cleanup code runs in the parent
        p.wait(10)
        deadline = time.monotonic() + 10
        while not gone(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(child)
    finally:
        p.kill()
