"""The console side of step 5's progress: a line per unit off a terminal, a bar on one; the file watched live."""

import io
import os
import pty
import re
import subprocess
import sys
import threading
import time

from helpers.core.paths import REPO_ROOT
from helpers.run.progress import ProgressEvents, Unit
from helpers.tools.progress_console import ConsoleProgress, watch_progress


def unit(key: str, kind: str, seconds: float, what: str) -> Unit:
    return Unit(key=key, label="vllm", kind=kind, what=what, expected_s=seconds)


PLAN = [
    unit("c", "cold", 90, "cold start"),
    unit("s1", "sweep", 20, "sweep c=1"),
    unit("p0", "probe", 15, "capacity probe 1"),
    unit("p1", "probe", 15, "capacity probe 2"),
]


def story() -> list[dict]:
    """A configuration whose search stops after one probe."""
    dump = {u.key: u.model_dump() for u in PLAN}
    return [
        {"event": "plan", "t": 0, "units": list(dump.values())},
        {"event": "start", "t": 0, "unit": dump["c"]},
        {"event": "note", "t": 1, "text": "vllm: launching (python)"},
        {"event": "done", "t": 60, "key": "c"},
        {"event": "kept", "t": 60, "key": "s1"},
        {"event": "start", "t": 60, "unit": dump["p0"]},
        {"event": "done", "t": 90, "key": "p0"},
        {"event": "drop", "t": 90, "label": "vllm", "kinds": ["probe"], "keys": None},
        {"event": "end", "t": 91},
    ]


def shown(tty: bool) -> str:
    out, now = io.StringIO(), [0.0]
    console = ConsoleProgress(out, tty=tty, clock=lambda: now[0])
    for ev in story():
        now[0] = ev["t"]
        console.handle(ev)
    console.close()
    return out.getvalue()


def test_off_a_terminal_each_unit_is_a_line_with_the_count_and_the_eta():
    text = shown(tty=False)
    assert "\r" not in text
    assert text.splitlines() == [
        "[step 5] 0/4 (0%) planned 4 units; ETA 2m20s",
        "[step 5] vllm: launching (python)",
        "[step 5] 1/4 (25%) vllm: cold start done in 1m00s; ETA 50s",
        "[step 5] 2/4 (50%) vllm: sweep c=1 kept from an earlier attempt; ETA 30s",
        # the probe took twice its 15 s: the next one would too; then the search needs no more
        "[step 5] 3/4 (75%) vllm: capacity probe 1 done in 30s; ETA 30s",
        "[step 5] 3/3 (100%) vllm: 1 planned units not needed; ETA 0s",
        "[step 5] 3/3 (100%) measurements done in 1m31s",
    ]


def test_on_a_terminal_one_bar_is_redrawn_and_notes_go_above_it():
    text = shown(tty=True)
    assert "\r" in text
    frames = [f for f in re.split(r"[\r\n]", text) if "units [" in f]
    assert frames and "0/4 units" in frames[0]
    assert re.search(r"100%\|.*\| 3/3 units \[.*ETA 0s", frames[-1]), frames[-1]
    assert any("ETA 50s" in f for f in frames)
    assert "[step 5] vllm: launching (python)\n" in text
    assert "planned 4 units" not in text  # the per-unit lines are for logs only


def test_the_watch_shows_what_the_kernel_appends_while_it_runs_and_skips_an_earlier_attempt(tmp_path):
    path = tmp_path / "logs" / "progress.jsonl"
    old = ProgressEvents(path)
    old.plan(PLAN[:1])
    old.note("from the interrupted attempt")
    out = io.StringIO()
    with watch_progress(path, out, poll_s=0.05):
        events = ProgressEvents(path)

        def kernel() -> None:
            events.plan(PLAN[1:2])
            events.start(PLAN[1])
            time.sleep(0.2)
            events.done("s1")
            events.end()

        writer = threading.Thread(target=kernel)
        writer.start()
        writer.join()
    text = out.getvalue()
    assert "interrupted attempt" not in text
    assert "[step 5] 1/1 (100%) vllm: sweep c=1 done in 0s; ETA 0s" in text
    assert text.rstrip().endswith("measurements done in 0s")


def test_no_stream_shows_nothing(tmp_path):
    with watch_progress(tmp_path / "progress.jsonl", None) as console:
        assert console is None


KERNEL_IN_A_TERMINAL = """
import sys
from pathlib import Path
from helpers.run.progress import ProgressEvents, Unit
from helpers.tools.progress_console import watch_progress
path = Path(sys.argv[1])
units = [Unit(key=f"k{i}", label="vllm", kind="sweep", what=f"sweep {i}", expected_s=1.0) for i in range(2)]
with watch_progress(path, sys.stderr, poll_s=0.05):
    ev = ProgressEvents(path)
    ev.plan(units)
    for u in units:
        ev.start(u)
        ev.done(u.key)
    ev.end()
"""


def test_a_real_terminal_without_a_size_still_gets_the_bar(tmp_path):
    """A pseudo-terminal that reports 0 x 0 (as some ``docker exec`` sessions do): tqdm alone draws nothing there."""
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", KERNEL_IN_A_TERMINAL, str(tmp_path / "progress.jsonl")],
        stdout=child,
        stderr=child,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=60) == 0
    text = out.decode("utf-8", errors="replace")
    assert "\r[step 5] 100%|" in text and "2/2 units" in text, text
