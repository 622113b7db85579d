"""A run's time limit: the deadline its kernels read, the stop it records, and the least time an engine needs."""

import asyncio
import json
import shutil
from types import SimpleNamespace

import pytest

from helpers.benchmark.plan import engine_units, least_seconds
from helpers.benchmark.priors import cold_start_seconds, point_seconds, probe_seconds
from helpers.benchmark.probe_size import PROBE_OVERHEAD_S, ensure_time, expected_seconds, latency_estimate
from helpers.core.config import load_config
from helpers.core.errors import TimeLimitReached
from helpers.core.paths import PLAYBOOK_DIR, REPORTS_DIR
from helpers.run.folder import RunFolder
from helpers.run.records import point_path
from helpers.run.time_limit import (
    DEADLINE_ENV,
    STOP_FILE,
    clear_stop,
    deadline_from,
    seconds_left,
    stop_for_time,
    stopped,
)
from helpers.tools.cli import build_parser


def test_the_deadline_is_read_from_the_environment_and_a_stop_is_recorded_once(tmp_path, monkeypatch):
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    assert deadline_from(None) is None and seconds_left() is None  # no limit
    monkeypatch.setenv(DEADLINE_ENV, deadline_from(100.0, now=1_000.0))
    assert seconds_left(now=1_030.0) == pytest.approx(70.0) and seconds_left(now=1_150.0) == pytest.approx(-50.0)

    assert stopped(tmp_path) is None
    err = stop_for_time(tmp_path, "SGLang 0.5.16", 288.4, 131.2, "cold start, 8 capacity probe(s)")
    assert str(err) == (
        "stopped before 'SGLang 0.5.16' for the time limit: it needs at least 288 s (cold start, "
        "8 capacity probe(s)) and 131 s are left"
    )
    assert stopped(tmp_path) == str(err)
    assert json.loads((tmp_path / STOP_FILE).read_text())["label"] == "SGLang 0.5.16"
    clear_stop(tmp_path)
    assert stopped(tmp_path) is None
    clear_stop(tmp_path)  # nothing to clear: no error


def test_the_least_time_counts_the_fewest_probes_less_those_stored(tmp_path):
    cfg = load_config(PLAYBOOK_DIR / "workloads" / "h200-offline" / "chat-8b.yaml")
    spec, s = cfg.engines[1], cfg.evidence.search
    need, what = least_seconds(spec, cfg, tmp_path)
    fewest = 2 + 2 * s.edge_rounds_min  # one load on each side of the edge, then the rounds it must run
    assert (
        fewest < s.max_probes + 2 * s.edge_rounds_max == len([u for u in engine_units(spec, cfg) if u.kind == "probe"])
    )
    sweep = sum(point_seconds(cfg, c) for c in cfg.workload.concurrency)
    cross = sum(u.expected_s for u in engine_units(spec, cfg) if u.kind == "crosscheck")
    assert len(cfg.evidence.crosscheck.rates) == 3 and cross > 0  # counted whole
    assert need == pytest.approx(cold_start_seconds(spec) + sweep + cross + fewest * probe_seconds(cfg))
    assert what == f"cold start, 1 grid point(s), 3 cross-check rate(s), {fewest} capacity probe(s)"

    # a resume: the grid point and three probes are stored (the H200 run's own); one probe measured again is
    # set aside (superseded), not counted
    archived = REPORTS_DIR / "h200-20261207-chat-8b-pair"
    for name in ("sweep-c0100.json", "search-p0-c0000.json", "search-p1-c0000.json", "search-p0-short-c0000.json"):
        path = point_path(tmp_path, spec.label, "sweep", 0).parent / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(point_path(archived, spec.label, "sweep", 0).parent / name, path)
    need, what = least_seconds(spec, cfg, tmp_path)
    assert need == pytest.approx(cold_start_seconds(spec) + cross + (fewest - 2) * probe_seconds(cfg))
    assert what == f"cold start, 3 cross-check rate(s), {fewest - 2} capacity probe(s)"
    # the other configuration has nothing stored
    assert least_seconds(cfg.engines[0], cfg, tmp_path)[0] > need


@pytest.mark.parametrize("bad", ["0", "-5", "soon"])
def test_a_time_limit_is_seconds_above_zero(bad, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "cfg.yaml", "--time-limit", bad])
    assert "--time-limit" in capsys.readouterr().err
    assert build_parser().parse_args(["run", "cfg.yaml", "--time-limit", "540"]).time_limit == 540.0


def test_a_started_configuration_stops_before_a_probe_that_would_not_end_in_time(tmp_path, monkeypatch):
    """Between two probes: the next one's arrivals, one request latency and the client's start must fit."""
    cfg = load_config(PLAYBOOK_DIR / "workloads" / "h200-offline" / "chat-8b.yaml")
    spec = cfg.engines[0]
    # the H200 run's own grid point and first two probes, as a session holds them after measuring them
    folder = RunFolder(REPORTS_DIR / "h200-20261207-chat-8b-pair")
    points = list(folder.points(spec.label, "sweep")) + list(folder.points(spec.label, "search"))[:2]
    said: list[str] = []
    session = SimpleNamespace(
        cfg=cfg, spec=spec, run_dir=tmp_path, result=SimpleNamespace(points=points), say=said.append
    )
    latency = latency_estimate(points, 40.0)
    assert latency and latency > 1.0  # a 512 / 256 request takes seconds on the H200
    need = expected_seconds(session, 40.0, 800)
    assert need == pytest.approx(800 / 40.0 + latency + PROBE_OVERHEAD_S)

    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    ensure_time(session, 40.0, 800, "the capacity probe on stream e0-lo")  # no limit: nothing happens
    monkeypatch.setenv(DEADLINE_ENV, deadline_from(need + 10))
    ensure_time(session, 40.0, 800, "the capacity probe on stream e0-lo")  # it fits
    assert stopped(tmp_path) is None and not said
    monkeypatch.setenv(DEADLINE_ENV, deadline_from(need - 5))
    with pytest.raises(TimeLimitReached) as err:
        ensure_time(session, 40.0, 800, "the capacity probe on stream e0-lo")
    assert str(err.value).startswith(f"stopped before {spec.label!r} for the time limit: it needs at least ")
    assert "(the capacity probe on stream e0-lo, 800 requests at 40)" in str(err.value)
    assert stopped(tmp_path) == str(err.value)  # recorded: the runner reads why and exits 75
    assert said == [f"{spec.label}: {err.value}; resume with the same --run-id"]


class _Begun(Exception):
    """Raised by the test's progress when a cross-check rate would start its client."""


def test_a_crosscheck_rate_that_would_not_end_in_time_is_not_begun(tmp_path, monkeypatch):
    """Before each rate of the cross-check: its arrivals, one request latency and the client's start must fit."""
    from helpers.benchmark.crosscheck import RateRun
    from helpers.benchmark.crosscheck_phase import CLIENT_START_S, _one_rate

    cfg = load_config(PLAYBOOK_DIR / "workloads" / "h200-offline" / "chat-8b.yaml")
    spec = cfg.engines[0]
    folder = RunFolder(REPORTS_DIR / "h200-20261207-chat-8b-pair")
    points = list(folder.points(spec.label, "sweep")) + list(folder.points(spec.label, "search"))

    def begin(*_args):
        raise _Begun

    said: list[str] = []
    session = SimpleNamespace(
        cfg=cfg, spec=spec, run_dir=tmp_path, result=SimpleNamespace(points=points), say=said.append,
        steps=SimpleNamespace(begin=begin),
    )  # fmt: skip
    rr = RateRun(multiple=1.1, rate=44.0, prompts=880)
    need = 880 / 44.0 + latency_estimate(points) + CLIENT_START_S

    def one_rate():
        asyncio.run(_one_rate(session, rr, tmp_path / "python", {}, tmp_path / "crosscheck"))

    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    with pytest.raises(_Begun):  # no limit: the client would start
        one_rate()
    monkeypatch.setenv(DEADLINE_ENV, deadline_from(need + 10))
    with pytest.raises(_Begun):  # it fits
        one_rate()
    monkeypatch.setenv(DEADLINE_ENV, deadline_from(need - 5))
    with pytest.raises(TimeLimitReached) as err:
        one_rate()
    assert "(vllm bench serve at 1.1× capacity, 880 prompts at 44 req/s)" in str(err.value), err.value
    assert stopped(tmp_path) == str(err.value) and said == [f"{spec.label}: {err.value}; resume with the same --run-id"]
