import math
import re

import pytest
from decision_data import SGLANG, TRT, VLLM, cfg, results, scaled
from decision_data import decide_measured as decide

from helpers.core.config import Knobs
from helpers.core.paths import REPO_ROOT
from helpers.cost.analysis import analyse
from helpers.decision.risk import citable, migration_plan, risk_register
from helpers.engines import ENGINES
from helpers.model.reference_data import load_engine_facts

STABLE = {"updates_per_month": 0.2}
BIG_TEAM = {"size": 12, "mlops_maturity": "high", "chase_peak": True}
RISKS = {"ecosystem lock-in", "hardware binding", "community activity", "model-support lag", "ops complexity"}


def _decision(labels, **sections):
    c = cfg(labels, **sections)
    return decide(results(*labels), c, {"format": "csv", "peak_requests_per_s": 20, "output_tokens_mean": 256}), c


def _cell(reg, family, risk, col):
    return reg[(reg["family"] == family) & (reg["risk"] == risk)][col].iloc[0]


def test_engine_facts_are_dated_and_sourced():
    facts = load_engine_facts()
    assert {"vllm", "sglang", "trtllm"} <= set(facts)
    for fam in facts.values():
        assert all(f.date and f.source for f in fam.facts)
        assert fam.ops_hours_per_month.assumption  # the hours are labelled assumptions
    community = " ".join(f.text + f.date for f in facts["vllm"].about("community"))
    assert "46,500" in community and "1,000" in community and "2025-05" in community
    assert facts["trtllm"].nvidia_only and facts["trtllm"].cold_start.seconds == 28 * 60
    assert facts["vllm"].cold_start.seconds == 62


def test_register_covers_every_family_and_risk_with_roles():
    d, c = _decision([VLLM, SGLANG, TRT], cadence=STABLE, team=BIG_TEAM)
    reg = risk_register(d, c)
    assert set(reg["family"]) == {"vllm", "sglang", "trtllm"}
    for fam in ("vllm", "sglang", "trtllm"):
        assert set(reg[reg["family"] == fam]["risk"]) == RISKS
    assert reg.iloc[0]["role"] == "primary" and reg.iloc[0]["family"] == d.primary_family
    assert set(reg[reg["family"] == d.backup_family]["role"]) == {"backup"}
    assert reg["mitigation"].str.len().min() > 10 and reg["evidence"].str.len().min() > 10
    assert _cell(reg, "trtllm", "hardware binding", "likelihood") == "high"
    assert _cell(reg, "trtllm", "hardware binding", "impact") == "high"
    assert _cell(reg, "vllm", "hardware binding", "likelihood") == "low"
    assert "46,500" in _cell(reg, "vllm", "community activity", "evidence")


@pytest.mark.parametrize(
    ("sections", "family", "risk", "likelihood", "impact"),
    [
        ({"cadence": STABLE}, "sglang", "hardware binding", "medium", "medium"),
        (
            {"cadence": STABLE, "hardware": {"vendors": "amd-planned"}},
            "sglang",
            "hardware binding",
            "high",
            "medium",
        ),
        ({"cadence": STABLE}, "sglang", "model-support lag", "medium", "medium"),
        ({"cadence": {"updates_per_month": 4}}, "sglang", "model-support lag", "high", "high"),
        ({"cadence": STABLE, "team": BIG_TEAM}, "vllm", "ops complexity", "low", "medium"),
        ({"cadence": STABLE, "team": {"size": 2}}, "vllm", "ops complexity", "medium", "high"),
    ],
)
def test_config_answers_adjust_likelihood_and_impact(sections, family, risk, likelihood, impact):
    d, c = _decision([VLLM, SGLANG], **sections)
    reg = risk_register(d, c)
    assert (_cell(reg, family, risk, "likelihood"), _cell(reg, family, risk, "impact")) == (
        likelihood,
        impact,
    )


def test_migration_plan_reads_the_adapters():
    d, c = _decision([VLLM, SGLANG, TRT], cadence=STABLE, team=BIG_TEAM)
    assert (d.primary, d.backup) == (TRT, VLLM)
    plan = migration_plan(d, c)
    ch = plan["changes"].set_index("aspect")
    src, dst = ENGINES["trtllm"], ENGINES["vllm"]
    assert ch.loc["deployment image", "from"] == src.default_image
    assert ch.loc["deployment image", "to"] == dst.default_image
    assert ch.loc["launch flags (knobs)", "to"] == " ".join(dst.knob_flags(Knobs(dummy_weights=False)))
    assert ch.loc["metric: waiting", "from"] == src.metrics.waiting
    assert ch.loc["metric: waiting", "to"] == dst.metrics.waiting
    assert ch.loc["metrics path", "from"] == "/prometheus/metrics"
    assert any("2,000 ms" in t for t in plan["rollback_triggers"])
    assert not any("tok/s" in t for t in plan["rollback_triggers"])  # without the results: no measured floor
    plan = migration_plan(d, c, results(VLLM, SGLANG, TRT), analyse(results(VLLM, SGLANG, TRT), c))
    assert any("417 tok/s with 10 running" in t for t in plan["rollback_triggers"])  # the backup's measurement
    assert plan["effort_days"] == pytest.approx(plan["effort"]["days"].sum())


def test_migration_to_a_compiled_engine_adds_a_build_pipeline():
    # TensorRT-LLM's fixture is 16% faster, which its trials' intervals resolve: the measurement would make it
    # primary. At vLLM's throughput it is a tie within noise, the tree (small team) keeps vLLM, TensorRT-LLM backs it
    c = cfg([VLLM, TRT], cadence=STABLE)
    vllm, trt = results(VLLM, TRT)
    even = scaled(trt, vllm.points[1].output_tok_s / trt.points[1].output_tok_s)
    d = decide([vllm, even], c, {"format": "csv", "peak_requests_per_s": 20, "output_tokens_mean": 256})
    assert (d.primary, d.backup) == (VLLM, TRT) and d.verdict.decided_by == "tree and operations cost"
    assert _decision([VLLM, TRT], cadence=STABLE)[0].primary == TRT  # the faster one, by measurement
    plan = migration_plan(d, c)
    assert "build pipeline" in " ".join(plan["effort"]["task"])
    assert plan["changes"].set_index("aspect").loc["options file", "to"] != "(none)"  # trtllm's LLM-API YAML


def test_migration_without_backup():
    d, c = _decision([VLLM])
    plan = migration_plan(d, c)
    assert plan["to"] is None and math.isnan(plan["effort_days"]) and "measure one" in plan["steps"][0]


def test_migration_flags_never_load_dummy_weights():
    """The benchmark's random weights (``--load-format dummy``) must not reach a deployment's flags."""
    d, c = _decision([VLLM, SGLANG], cadence=STABLE)
    assert all(e.knobs.dummy_weights for e in c.engines)  # as benchmarked
    changes = migration_plan(d, c)["changes"].set_index("aspect")
    flags = " ".join(changes.loc["launch flags (knobs)", ["from", "to"]])
    assert "dummy" not in flags and "--load-format" not in flags


def test_register_quotes_the_runs_measured_cold_starts():
    """With the run's results, the ops evidence gives their cold starts (190 s, 125 s here), not the seeds'."""
    d, c = _decision([VLLM, SGLANG], cadence=STABLE)
    res = results(VLLM, SGLANG)
    res = [r.model_copy(update={"cold_start_s": s}) for r, s in zip(res, (81.0, 133.0), strict=True)]
    reg = risk_register(d, c, analyse(res, c))
    vllm_ops = _cell(reg, "vllm", "ops complexity", "evidence")
    sglang_ops = _cell(reg, "sglang", "ops complexity", "evidence")
    assert "81 s per update (measured in this run" in vllm_ops and "62 s" not in vllm_ops
    assert "133 s per update (measured in this run" in sglang_ops and "125 s" not in sglang_ops
    # without step 6's record the dated facts remain, labelled with their source
    assert "62 s per update (seed 003" in _cell(risk_register(d, c), "vllm", "ops complexity", "evidence")


def test_register_cites_only_files_in_the_repository():
    """A fact whose source is a file outside the repository (gpu/README.md) is not cited as if it were here."""
    d, c = _decision([VLLM, SGLANG, TRT], cadence=STABLE)
    text = " ".join(risk_register(d, c)["evidence"]) + " ".join(migration_plan(d, c)["effort"]["basis"])
    named = re.findall(r"[\w.-]+(?:/[\w.-]+)*\.(?:md|txt|json|ya?ml)\b", text)
    assert named, "the register names no file at all (nothing tested)"
    missing = [f for f in named if not (REPO_ROOT / f).is_file() and not (REPO_ROOT / "helpers" / "data" / f).is_file()]
    assert missing == []
    assert citable("gpu/README.md (this project)") == "notes outside this repository (this project)"
    assert citable("README.md section") == "README.md section"
