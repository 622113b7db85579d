"""``helpers.benchmark.search_path``: a search replayed probe by probe from an archived run folder.

Read on the archived H100 run ``h100-20261206-chat-8b-edge`` (vLLM's search went conclusive during its
fifth edge round; SGLang's never did). The replay must end where the run's own estimate ended, count each
probe once and in order, and its script must name a bad argument.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from helpers.benchmark.search_path import first_conclusive, search_path
from helpers.core.errors import PlaybookError
from helpers.core.paths import REPO_ROOT, REPORTS_DIR
from helpers.run.records import load_engine_result

RUN = REPORTS_DIR / "h100-20261206-chat-8b-edge"


def stored_estimate(label: str) -> dict:
    """The capacity estimate the run saved for ``label``."""
    return load_engine_result(RUN, label).capacity.estimate.model_dump()


@pytest.mark.parametrize("label", ["vLLM 0.26.0", "SGLang 0.5.16"])
def test_the_replay_ends_on_the_runs_own_estimate_and_counts_each_probe_once(label):
    steps = search_path(RUN, label)
    stored = stored_estimate(label)
    assert [s.number for s in steps] == list(range(1, len(steps) + 1))
    assert len({s.stream for s in steps}) == len(steps) == stored["probes"]
    assert steps[0].stream == "p0" and steps[0].status == "at_least"  # one passing probe bounds it from below only
    assert all(b.cumulative_s > a.cumulative_s for a, b in zip(steps, steps[1:], strict=False))
    assert abs(sum(s.seconds for s in steps) - steps[-1].cumulative_s) < 1e-6
    last = steps[-1]
    assert last.value == pytest.approx(stored["value"], rel=1e-9)
    assert last.rel_half_width == pytest.approx(stored["rel_half_width"], rel=1e-9)
    assert last.conclusive is stored["conclusive"]


def test_the_first_conclusive_step_is_the_first_within_the_half_width_asked_for():
    steps = search_path(RUN, "vLLM 0.26.0")
    done = first_conclusive(steps)
    assert done is not None and done.rel_half_width <= 0.05
    assert all(s.rel_half_width is None or s.rel_half_width > 0.05 for s in steps[: done.number - 1])
    assert done.stream.startswith("e")  # the coarse probes alone never bound it that tightly
    wider = first_conclusive(search_path(RUN, "vLLM 0.26.0", target_rel=0.10))
    assert wider is not None and wider.number < done.number
    assert first_conclusive(search_path(RUN, "SGLang 0.5.16")) is None


def test_a_folder_without_its_progress_log_or_probes_is_named(tmp_path):
    with pytest.raises(PlaybookError, match="progress.jsonl"):
        search_path(tmp_path, "vLLM 0.26.0")
    (tmp_path / "logs").mkdir()
    shutil.copy(RUN / "logs" / "progress.jsonl", tmp_path / "logs" / "progress.jsonl")
    with pytest.raises(PlaybookError, match="no capacity probe of 'vLLM 0.26.0'"):
        search_path(tmp_path, "vLLM 0.26.0")


def test_the_script_prints_each_run_and_rejects_an_argument_without_a_label():
    script = REPO_ROOT / "scripts" / "search_path.py"
    env = {"PYTHONPATH": str(REPO_ROOT)}
    ok = subprocess.run(
        [sys.executable, str(script), f"{RUN.name}:vLLM 0.26.0", f"{RUN.name}:SGLang 0.5.16"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    summary = ok.stdout.strip().splitlines()[-2:]
    assert summary[0].startswith(f"{RUN.name} · vLLM 0.26.0: conclusive after ")
    assert summary[1].startswith(f"{RUN.name} · SGLang 0.5.16: not conclusive")
    bad = subprocess.run([sys.executable, str(script), RUN.name], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "RUN_ID:LABEL" in bad.stderr
