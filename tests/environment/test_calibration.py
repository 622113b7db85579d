"""The calibration against the archived GPU runs: the committed factors and docs page are what the archives give."""

import statistics

import pytest

from helpers.core.paths import REPO_ROOT
from helpers.environment.calibration import archived_runs, calibrate, calibration_yaml, markdown
from helpers.environment.prediction import CALIBRATION_FILE
from helpers.environment.prediction_check import EVERY_LOAD_PASSED

DOCS_PAGE = REPO_ROOT / "docs" / "measurements" / "prediction-vs-measured.md"


@pytest.fixture(scope="module")
def calibrated():
    return calibrate(archived_runs())


def test_every_archived_measured_capacity_is_a_row(calibrated):
    rows, _ = calibrated
    got = {(r.run, r.engine, r.shape.split()[0]) for r in rows}
    assert {
        ("h200-20261201-chat-8b-capacity", "vllm", "llama-3.1-8b"),
        ("h200-20261201-chat-8b-capacity", "sglang", "llama-3.1-8b"),
        ("h200-20261201-chat-8b-lmdeploy", "lmdeploy-pytorch", "llama-3.1-8b"),  # one engine, two backends:
        ("h100-20261206-chat-8b-turbomind", "lmdeploy-turbomind", "llama-3.1-8b"),  # calibrated apart
        ("h200-20261203-chat-70b-fp8", "vllm", "llama-3.3-70b-fp8"),
        ("h200-20261203-chat-70b-fp8", "sglang", "llama-3.3-70b-fp8"),
    } <= got
    copies = {(r.run, r.engine): r.duplicate_of for r in rows if r.duplicate_of}
    assert copies == {
        ("h200-20261201-chat-8b-lmdeploy", "vllm"): "h200-20261201-chat-8b-capacity",
        ("h200-20261201-chat-8b-lmdeploy", "sglang"): "h200-20261201-chat-8b-capacity",
    }
    assert ("h100-20261205-chat-8b-paired", "vllm", "llama-3.1-8b") in got  # other GPUs' runs are rows too
    assert {r.gpu for r in rows} == {"H200-SXM-141GB", "H100-SXM5-80GB"}
    assert all(r.axis == "rate" and r.ratio > 1 for r in rows)  # peaks are optimistic


def test_only_the_runs_whose_probes_kept_their_request_times_count_as_the_current_test(calibrated):
    rows, _ = calibrated
    current = {(r.run, r.engine) for r in rows if r.current_test}
    runs = (
        "h100-20261205-chat-8b-paired",
        "h100-20261205-chat-8b-late",
        "h100-20261206-chat-8b-edge",
        "h200-20261207-chat-8b-pair",
    )
    turbomind = "h100-20261206-chat-8b-turbomind"
    assert current == {(run, engine) for run in runs for engine in ("vllm", "sglang")} | {
        (turbomind, "vllm"),
        (turbomind, "lmdeploy-turbomind"),
        (turbomind, "sglang"),
        ("h100-20261207-chat-8b-start-grid", "vllm"),  # the grid-started search (issue 37's GPU half)
        # lower bounds where every load passed calibrate nothing; TurboMind's 70B bracket does
        ("h100-20261206-chat-70b-fp8", "vllm"),
        ("h100-20261206-chat-70b-fp8", "sglang"),
        ("h100-20261206-chat-70b-fp8", "lmdeploy-turbomind"),
    }
    bound = next(r for r in rows if r.run == "h100-20261205-chat-8b-paired" and r.engine == "sglang")
    assert bound.interval.startswith("at least") and bound.measured == bound.low  # a lower bound, not an estimate


def test_the_factor_comes_from_the_current_test_where_an_engine_has_one(calibrated):
    rows, table = calibrated
    for engine, n in (("vllm", 6), ("sglang", 6)):
        now = [1 / r.ratio for r in rows if r.current_test and r.engine == engine and r.interval != EVERY_LOAD_PASSED]
        f = table.engines[engine]
        assert f.runs == len(now) == n and f.factor == pytest.approx(statistics.median(now), abs=1e-4)
        assert f.basis.startswith("measurements judged by the current sustained test only")
    v = table.engines["vllm"]
    h200 = v.for_gpu("H200-SXM-141GB")  # a prediction on the H200 uses the H200's own current measurements
    assert h200 is not v and h200.gpus == ["H200-SXM-141GB"] and h200.factor < v.factor
    lm = table.engines["lmdeploy-pytorch"]  # no current measurement: all of its (older) ones
    assert lm.basis == "all judged by older tests" and lm.runs == 1


def test_leave_one_out_uses_only_the_other_measurements(calibrated):
    rows, table = calibrated
    lm = next(r for r in rows if r.engine == "lmdeploy-pytorch")
    assert lm.loo_ratio is None and table.engines["lmdeploy-pytorch"].runs == 1
    # an older row: the factor of the current measurements on its own GPU (the rule the next prediction follows)
    v70 = next(r for r in rows if r.engine == "vllm" and "70b" in r.shape and r.gpu.startswith("H200"))
    now = [r for r in rows if r.engine == "vllm" and r.current_test and r.interval != EVERY_LOAD_PASSED]
    same_gpu = [r for r in now if r.gpu == v70.gpu]
    assert same_gpu and len(same_gpu) < len(now)  # the H200's own, not the H100's
    factor = statistics.median(1 / r.ratio for r in same_gpu)
    assert v70.loo_ratio == pytest.approx(v70.ratio * factor, rel=1e-3)  # factors kept to 4 decimals
    # a current row: the other current ones on its GPU alone
    h100 = [r for r in now if r.gpu.startswith("H100")]
    others = statistics.median(1 / r.ratio for r in h100[1:])
    assert h100[0].loo_ratio == pytest.approx(h100[0].ratio * others, rel=1e-3)
    # the only current one on its GPU: the other GPUs' current ones
    (h200,) = same_gpu
    rest = statistics.median(1 / r.ratio for r in now if r is not h200)
    assert h200.loo_ratio == pytest.approx(h200.ratio * rest, rel=1e-3)


def test_a_lower_bound_no_failing_load_reached_is_listed_and_calibrates_nothing(calibrated):
    rows, table = calibrated
    bounds = [r for r in rows if r.interval == EVERY_LOAD_PASSED]
    assert {(b.run, b.engine, b.gpu) for b in bounds} == {("h100-20261206-chat-70b-fp8", "vllm", "H100-SXM5-80GB")}
    for bound in bounds:
        assert bound.loo_ratio is None and bound.high is None and bound.measured == bound.low
        assert bound.run not in {run for m in table.engines[bound.engine].measurements for run in m.runs}


def test_the_committed_files_are_not_stale(calibrated):
    rows, table = calibrated
    assert CALIBRATION_FILE.read_text(encoding="utf-8") == calibration_yaml(table), (
        "run scripts/calibrate_predictions.py"
    )
    assert DOCS_PAGE.read_text(encoding="utf-8") == markdown(rows, table), "run scripts/calibrate_predictions.py"


def test_a_run_rendered_again_is_not_predicted_from_its_own_measurement(calibrated):
    _, table = calibrated
    assert table.without("h100-20261205-chat-9b-new") == table  # a run the table does not hold: unchanged
    left = table.without("h100-20261205-chat-8b-paired")
    v = left.engines["vllm"]
    assert v.factor != table.engines["vllm"].factor and v.runs == 5  # the other current runs alone
    assert v.basis.endswith("h100-20261205-chat-8b-paired's own measurement left out")
    assert all("h100-20261205-chat-8b-paired" not in m.runs for m in v.measurements)
    # a copied measurement is the copying run's own too; an engine with nothing left has no factor
    lm = table.without("h200-20261201-chat-8b-lmdeploy")
    assert "lmdeploy-pytorch" not in lm.engines and "lmdeploy-turbomind" in lm.engines
    assert all("h200-20261201-chat-8b-lmdeploy" not in m.runs for m in lm.engines["sglang"].measurements)
    assert len(lm.engines["sglang"].measurements) == len(table.engines["sglang"].measurements) - 1
