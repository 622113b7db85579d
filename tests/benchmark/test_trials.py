"""With the search disabled: at which fixed load the trials run, how their record is rebuilt from stored trials,
and that a trial that did not keep up stays out of every interval."""

from helpers.benchmark.evidence import fixed_load_summary
from helpers.benchmark.loads import fixed_concurrency, load_axis
from helpers.benchmark.sla import representative
from helpers.core.config import parse_config
from helpers.run.records import EngineResult, Point


def fixed_cfg(trials: dict | None = None, **workload):
    """A config with the search disabled: the trials run at a fixed number of streams."""
    return parse_config(
        {
            "name": "fixed",
            "model": {"path": "tiny-llama"},
            "engines": [{"label": "e", "engine": "vllm-cpu", "launcher": {"kind": "python", "python": "python3"}}],
            "workload": {"concurrency": [1, 8], **workload},
            "evidence": {"search": {"enabled": False}, "trials": trials or {}},
        }
    )


def point(c: int, phase: str = "sweep", trial: int | None = None, tok_s: float = 100.0, requests: int = 20) -> Point:
    return Point(label="e", engine="vllm-cpu", concurrency=c, phase=phase, trial=trial, requests=requests,
                 duration_s=1.0, output_tok_s=tok_s, total_tok_s=2 * tok_s, req_s=1.0, ttft_ms_p95=500.0)  # fmt: skip


def test_the_fixed_load_is_configured_else_the_target_else_the_top_sweep_level():
    assert fixed_concurrency(fixed_cfg()) == 8
    assert fixed_concurrency(fixed_cfg(target_concurrency=4)) == 4
    assert fixed_concurrency(fixed_cfg({"fixed_concurrency": 2}, target_concurrency=4)) == 2
    assert load_axis(fixed_cfg()) == "concurrency"  # closed loop, whatever the search's axis says


def test_the_fixed_load_summary_is_rebuilt_from_the_trials_stored_at_that_load():
    cfg = fixed_cfg({"fixed_concurrency": 8})
    trials = [point(8, "trial", i, tok) for i, tok in enumerate((95.0, 100.0, 105.0))]
    r = EngineResult(
        label="e", engine="vllm-cpu", points=[point(1), point(8), *trials, point(8, "trial", 3, requests=0)]
    )
    cap = fixed_load_summary(r, cfg)
    assert (cap.axis, cap.searched, cap.capacity, cap.trial_load) == ("concurrency", False, None, 8.0)
    assert cap.trials_note == "3 trial(s) at 8 streams"  # the trial that completed nothing is not one
    assert "search disabled" in cap.note and "not a capacity" in cap.note
    r.capacity = cap
    rep = representative(r, cfg)
    assert (rep.source, rep.concurrency, rep.requests) == ("fixed", 8, 60)
    assert rep.output_tok_s.mean == 100.0 and rep.output_tok_s.n == 3
    # only grid points, or trials at another load than the configured one: no fixed-load record
    assert fixed_load_summary(EngineResult(label="e", engine="vllm-cpu", points=[point(1), point(8)]), cfg) is None
    assert fixed_load_summary(r, fixed_cfg({"fixed_concurrency": 4})) is None


def test_a_trial_that_did_not_keep_up_is_left_out_of_the_interval():
    cfg = fixed_cfg({"fixed_concurrency": 8})
    trials = [point(8, "trial", i, tok) for i, tok in enumerate((95.0, 100.0, 105.0, 20.0))]
    trials[3].errors, trials[3].probe = 10, {"load": 8, "ttft_p95_ms": 500.0, "requests": 20, "sustained": True,
                                              "meets_sla": False, "why": "errors", "errors_ok": False}  # fmt: skip
    r = EngineResult(label="e", engine="vllm-cpu", points=[point(8), *trials])
    r.capacity = fixed_load_summary(r, cfg)
    rep = representative(r, cfg)
    assert rep.output_tok_s.n == 3 and rep.output_tok_s.mean == 100.0  # the fourth fell behind: not averaged in
