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
from types import SimpleNamespace

import pytest

from helpers.engines import get_engine
from helpers.launchers.server import start_process
from helpers.run.processes import members

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


FAMILY = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print(child.pid, flush=True)
    time.sleep(300)
    """
)


def test_stop_ends_what_an_engine_killed_by_pid_left_of_its_group(tmp_path):
    """An API server killed by pid leaves its EngineCore running: ``stop`` ends the rest of the group."""
    log = tmp_path / "engine.log"
    h = start_process([sys.executable, "-c", FAMILY], {}, log, "http://127.0.0.1:9", get_engine("vllm-cpu"))
    deadline = time.monotonic() + 30
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(log.read_text().split()[0])
    assert os.getpgid(child) == h.process.pid  # the engine's own child is in its group
    os.kill(h.process.pid, signal.SIGKILL)  # the "API server" only
    h.process.wait(10)
    assert not gone(child)
    assert h.stop() == 1  # one left-over process ended
    assert gone(child) and members(h.process.pid) == []


def test_an_engine_started_with_sigint_ignored_still_stops_on_sigint_without_waiting_its_grace(tmp_path):
    """``nohup playbook run … &`` (or a CI runner's background job) starts the run with SIGINT ignored.

    An ignored signal survives exec: the engine would ignore ``stop``'s SIGINT and every stop would wait its
    20 s grace before SIGTERM (in a full test run, 20 s for each fake engine stopped). The engine gets SIGINT's
    default back, so that the graceful stop is the one that ends it.
    """
    parent = textwrap.dedent(
        f"""
        import signal, sys, time
        from pathlib import Path
        from helpers.engines import get_engine
        from helpers.launchers.server import start_process
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        engine = ("import time\\ntry:\\n    time.sleep(300)\\n"
                  "except KeyboardInterrupt:\\n    print('interrupted', flush=True)")
        h = start_process([sys.executable, "-c", engine], {{}}, Path({str(tmp_path)!r}) / "engine.log",
                          "http://127.0.0.1:9", get_engine("vllm-cpu"))
        time.sleep(1.0)  # the interpreter is up and sleeping
        ignored = int(next(line.split()[1] for line in open(f"/proc/{{h.process.pid}}/status")
                           if line.startswith("SigIgn:")), 16)
        t0 = time.monotonic()
        h.stop()
        print(bool(ignored & (1 << (signal.SIGINT - 1))), round(time.monotonic() - t0, 1), flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", parent], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    ignored, seconds = out.stdout.split()
    assert ignored == "False"  # the engine does not inherit the ignored SIGINT
    assert float(seconds) < 10  # ended by SIGINT, not by SIGTERM after the 20 s grace
    assert "interrupted" in (tmp_path / "engine.log").read_text()  # the engine's own Ctrl-C handling ran


def test_health_is_probed_often_while_the_engine_is_young_then_every_second(tmp_path, monkeypatch):
    """A stand-in that is up in a fraction of a second is not kept waiting a whole second (once per start).

    The clock is the test's: each sleep advances it; health answers on the 60th probe (at about 14 s).
    """
    import helpers.launchers.server as server

    now = [100.0]
    slept: list[float] = []
    clock = SimpleNamespace(monotonic=lambda: now[0], sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + s)))
    monkeypatch.setattr(server, "time", clock)
    probes = iter(range(1, 1000))
    monkeypatch.setattr(server.ServerHandle, "healthy", lambda self: next(probes) >= 60)
    monkeypatch.setattr(server.ServerHandle, "alive", lambda self: True)
    h = server.ServerHandle("http://127.0.0.1:9", get_engine("vllm-cpu"), tmp_path / "log", started_at=100.0)
    took = h.wait_healthy(600)
    fast = [s for s in slept if s == server.HEALTH_POLL_FAST_S]
    assert len(slept) == 59 and slept[: len(fast)] == fast  # fast probes first, then one a second
    per = round(server.HEALTH_POLL_FAST_FOR_S / server.HEALTH_POLL_FAST_S)
    assert per <= len(fast) <= per + 1  # for the first 5 s (the sum of 0.1 s steps lands on either side of 5)
    assert set(slept[len(fast) :]) == {1.0} and took == pytest.approx(sum(slept))
