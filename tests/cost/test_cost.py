import math

import pandas as pd
import pytest
from decision_data import SGLANG, TRT, TRT_FAILED, VLLM, cfg, recorded, results, scaled, with_fixed_trials
from matplotlib.figure import Figure

from helpers.core.errors import ConfigError
from helpers.cost.analysis import analyse
from helpers.cost.break_even import tco_curve
from helpers.cost.compute import HOURS_PER_MONTH, cost_per_million, price_for, traffic_demand, within_sla
from helpers.cost.compute import cost_table as cost_rows
from helpers.cost.plots import plot_cost_per_mtok, plot_tco_stacked, plot_tco_vs_traffic
from helpers.cost.records import frame
from helpers.model.reference_data import load_gpu_prices

PEAK = {"format": "mooncake", "source": "trace.jsonl", "peak_requests_per_s": 20, "output_tokens_mean": 256,
        "concurrency_p99": 120}  # fmt: skip


def cost_table(res, c):
    """Step 6's priced points as a table."""
    return frame(cost_rows(res, c))


def _table(res, c, profile, rows):
    """One table of step 6's record (``analyse``, run once), empty when nothing was measured."""
    a = analyse(res, c, profile)
    return frame(getattr(a, rows)) if a is not None else pd.DataFrame()


def best_points(res, c):
    return _table(res, c, None, "best")


def fleet_and_tco(res, c, profile):
    return _table(res, c, profile, "fleet")


def break_even(res, c, profile):
    return _table(res, c, profile, "break_even")


@pytest.mark.parametrize(
    ("price", "tok_s", "expected"),
    [
        (5.01, 12_500, 0.111333),  # seed 003 §4.4: H100 $5.01/h, vLLM ~12.5k tok/s
        (5.01, 16_200, 0.085905),  # SGLang ~16.2k tok/s
        (4.54, 417.0, 3.024247),  # the H200 fixture's vLLM point at concurrency 10
    ],
)
def test_cost_formula_on_seed_example(price, tok_s, expected):
    assert cost_per_million(price, tok_s) == pytest.approx(expected, rel=1e-5)


def test_cost_formula_without_throughput_is_nan():
    assert math.isnan(cost_per_million(5.01, 0))


def test_price_table_has_seed_price_with_source_and_date():
    prices = load_gpu_prices()
    h100 = prices["H100-SXM5-80GB"]
    assert h100.price_per_hour == 5.01 and h100.date == "2026-08" and "Spheron" in h100.source
    assert prices["cpu"].kind == "assumption" and "ASSUMED" in prices["cpu"].source
    assert all(p.source and p.date for p in prices.values())


def test_price_choice_config_table_cpu_and_unknown():
    c = cfg([VLLM], cost={"gpu": "H100-SXM5-80GB"})
    price, source, what = price_for("vllm", c)
    assert (price, what) == (5.01, "H100-SXM5-80GB") and "Spheron" in source
    price, source, what = price_for("vllm-cpu", c)
    assert what == "cpu" and "ASSUMED" in source
    c = cfg([VLLM], cost={"gpu": "H100-SXM5-80GB", "gpu_price_per_hour": 2.5})
    assert price_for("vllm", c)[:2] == (2.5, "config cost.gpu_price_per_hour")
    assert price_for("vllm", cfg([VLLM], cost={"gpu": "NVIDIA H200"}))[::2] == (4.54, "H200-SXM-141GB")
    with pytest.raises(ConfigError, match="cost.gpu: 'MI300X'"):
        price_for("vllm", cfg([VLLM], cost={"gpu": "MI300X"}))


def test_cost_table_rows_and_formula():
    t = cost_table(results(), cfg())
    assert len(t) == 22  # 3 engines × (4 sweep points + 3 trials) + the failed engine's one row
    assert (t["phase"] == "trial").sum() == 9
    failed = t[t["label"] == TRT_FAILED].iloc[0]
    assert failed["status"] == "failed" and pd.isna(failed["usd_per_mtok_output"])
    vllm = t[(t["label"] == VLLM) & (t["phase"] == "sweep")]
    row = vllm[vllm["concurrency"] == 10].iloc[0]
    assert row["usd_per_mtok_output"] == pytest.approx(4.54 / (417.0 * 3600) * 1e6)
    assert row["usd_per_mtok_total"] == pytest.approx(4.54 / (1251.1 * 3600) * 1e6)
    assert vllm["within_sla"].tolist() == [True, True, False, False]  # TTFT p95 2,000 ms
    assert len(cost_table(recorded(VLLM), cfg([VLLM]))) == 4  # as recorded: the grid points alone


def test_tensor_parallel_multiplies_the_hourly_cost():
    c = cfg([VLLM])
    c.engines[0].knobs.tensor_parallel = 2
    row = cost_table(results(VLLM), c).iloc[1]
    assert row["gpus_per_replica"] == 2 and row["usd_per_hour"] == pytest.approx(9.08)


def test_within_sla_rejects_points_with_errors():
    p = results(VLLM)[0].points[1].model_copy(update={"errors": 5})
    assert not within_sla(p, cfg([VLLM]))
    assert within_sla(results(VLLM)[0].points[1], cfg([VLLM]))


@pytest.mark.parametrize("ttft_sla", [2000, 6000, 700, 100])
def test_grid_points_alone_never_stand_for_a_configuration(ttft_sla):
    """Whatever the SLA lets through, a result with grid points only has no representative to price."""
    c = cfg([VLLM], sla={"ttft_p95_ms": ttft_sla})
    grid_only = recorded(VLLM)
    assert any(within_sla(p, c) for p in grid_only[0].points)  # some grid point meets each SLA here
    assert best_points(grid_only, c).empty
    assert fleet_and_tco(grid_only, c, PEAK).empty


@pytest.mark.parametrize(
    ("ttft_sla", "expected_conc", "tok_s"), [(2000, 10, 417.0), (6000, 100, 1974.1), (700, 10, 417.0), (100, 1, 48.3)]
)
def test_best_point_is_the_mean_of_the_trials_with_its_interval(ttft_sla, expected_conc, tok_s):
    c = cfg([VLLM], sla={"ttft_p95_ms": ttft_sla})
    res = [with_fixed_trials(recorded(VLLM)[0], c.sla)]  # trials at the best level within this SLA
    b = best_points(res, c).iloc[0]
    assert (b["source"], b["phase"], b["concurrency"]) == ("fixed", "trial", expected_conc) and b["meets_sla"]
    assert b["output_tok_s"] == pytest.approx(tok_s)  # the mean of 0.99, 1.00 and 1.01 × the recorded figure
    assert b["output_tok_s_low"] < tok_s < b["output_tok_s_high"]
    assert b["representative"] == f"{VLLM}@fixed:c{expected_conc}"
    assert b["points"] == 4  # the grid points are counted, but none was picked


def test_trials_that_miss_the_sla_are_priced_but_flagged():
    b = best_points(results(VLLM), cfg([VLLM], sla={"ttft_p95_ms": 500})).iloc[0]  # trials at c=10: 663 ms
    assert b["concurrency"] == 10 and not b["meets_sla"] and not b["within_sla"]
    assert b["usd_per_mtok_output"] == pytest.approx(cost_per_million(4.54, b["output_tok_s"]))


def test_traffic_demand_config_then_measured_trace_never_synthetic():
    assert traffic_demand(cfg([VLLM]), PEAK)["output_tok_s"] == 5120
    c = cfg([VLLM], workload={"peak_requests_per_s": 3.0, "output_tokens": 100})
    d = traffic_demand(c, None)
    assert d["output_tok_s"] == 300 and "config" in d["basis"]
    d = traffic_demand(c, PEAK)  # the config's peak wins over the trace's
    assert d["requests_per_s"] == 3.0 and "config" in d["source"]
    assert traffic_demand(cfg([VLLM]), {})["basis"].startswith("no peak traffic")
    synthetic = {**PEAK, "format": "synthetic", "source": "synthetic"}
    d = traffic_demand(cfg([VLLM]), synthetic)  # a synthetic sample's peak is an artefact: not used
    assert d["requests_per_s"] is None and d["concurrency"] is None


def test_fleet_sizing_and_tco():
    f = fleet_and_tco(results(), cfg(), PEAK).set_index("label")
    assert TRT_FAILED not in f.index
    v = f.loc[VLLM]
    assert v["replicas"] == 13  # ceil(5,120 / 417) = 13 > ceil(120 / 10) = 12
    assert v["gpu_monthly_usd"] == pytest.approx(13 * 4.54 * HOURS_PER_MONTH)
    assert v["build_s"] == 190 and "measured" in v["build_source"]
    t = f.loc[TRT]
    assert t["build_s"] == 1680 and "seed 003" in t["build_source"]  # no measured cold start: seed 28 min
    assert "assumption" in t["ops_hours_source"]
    assert t["tco_monthly_usd"] == pytest.approx(t["gpu_monthly_usd"] + t["ops_monthly_usd"])
    expected_ops = (24 + 1680 / 3600) * 100 + 1680 / 3600 * 4.54
    assert t["ops_monthly_usd"] == pytest.approx(expected_ops)


def test_fleet_p99_concurrency_can_dominate_and_ops_hours_from_config():
    c = cfg([VLLM], cost={"gpu": "H200-SXM-141GB", "ops_hours_per_month": {"vllm": 2}})
    f = fleet_and_tco(results(VLLM), c, {"format": "csv", "concurrency_p99": 200}).iloc[0]
    assert f["replicas"] == 20 and f["base_ops_hours"] == 2 and "config" in f["ops_hours_source"]


def test_fleet_without_sla_point_or_demand():
    f = fleet_and_tco(results(VLLM), cfg([VLLM], sla={"ttft_p95_ms": 10}), PEAK).iloc[0]
    assert pd.isna(f["replicas"]) and pd.isna(f["tco_monthly_usd"]) and "no measured point" in f["sizing_basis"]
    f = fleet_and_tco(results(VLLM), cfg([VLLM]), None).iloc[0]
    assert f["replicas"] == 1 and "one replica" in f["sizing_basis"]


def test_break_even_traffic_equalises_cost():
    be = break_even(results(VLLM, TRT), cfg([VLLM, TRT]), PEAK)
    row = be[(be["harder"] == TRT) & (be["easier"] == VLLM)].iloc[0]
    f = fleet_and_tco(results(VLLM, TRT), cfg([VLLM, TRT]), PEAK).set_index("label")
    t = row["break_even_output_tok_s"]

    def monthly(label):
        g = f.loc[label]
        return g["ops_monthly_usd"] + t * 4.54 * HOURS_PER_MONTH / g["output_tok_s"]

    assert monthly(TRT) == pytest.approx(monthly(VLLM))
    assert row["pays_off_now"] == (5120 >= t)


def test_break_even_never_when_harder_is_not_cheaper():
    slow = scaled(results(TRT)[0], 0.5)
    be = break_even([results(VLLM)[0], slow], cfg([VLLM, TRT]), PEAK)
    row = be.iloc[0]
    assert row["harder"] == TRT and pd.isna(row["break_even_output_tok_s"]) and row["verdict"].startswith("never")


def test_tco_curve_and_plots():
    res, c = results(), cfg()
    a = analyse(res, c, PEAK)
    curve = tco_curve(a.fleet, a.break_even, a.demand)
    assert set(curve["label"]) == {VLLM, SGLANG, TRT} and (curve["replicas"] >= 1).all()
    figs = [
        plot_cost_per_mtok(cost_table(res, c)),
        plot_tco_stacked(fleet_and_tco(res, c, PEAK)),
        plot_tco_vs_traffic(curve, 5120),
    ]
    assert all(isinstance(f, Figure) for f in figs)
    assert len(figs[0].axes[0].get_lines()) == 3
    assert len(figs[1].axes[0].patches) == 6  # 3 configurations × (GPU, operations)
    empty = plot_tco_stacked(fleet_and_tco([], c, PEAK))
    assert isinstance(empty, Figure)
