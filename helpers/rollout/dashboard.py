"""Checklist step 10: a Grafana dashboard for the chosen engine, built with grafana-foundation-sdk.

Panels: output throughput, TTFT p95 (with the SLA line), queued/running requests, KV-cache usage,
prefix-cache hit rate, GPU utilisation and GPU memory (DCGM exporter; left out for a CPU engine).
Queries use the engine's own metric names (``helpers.rollout.series``) and a ``datasource``
variable, so the JSON imports into any Grafana with a Prometheus data source. ``validate_dashboard``
loads the file back through the SDK's model and checks that every panel kept its queries.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from helpers.rollout.alerts import AlertThresholds
from helpers.rollout.choice import Chosen
from helpers.rollout.series import Signals, engine_selector, gpu_selector, signals

SDK_PIN = "grafana-foundation-sdk==1769699998!10.1.0"
DATASOURCE_VAR = "datasource"


class Sdk(NamedTuple):
    """The modules of grafana-foundation-sdk the dashboard is built and read back with."""

    cb: ModuleType  # builders.common
    db: ModuleType  # builders.dashboard
    pb: ModuleType  # builders.prometheus
    ts: ModuleType  # builders.timeseries
    cm: ModuleType  # models.common
    dm: ModuleType  # models.dashboard
    pm: ModuleType  # models.prometheus
    encoder: ModuleType  # cog.encoder (JSONEncoder)
    plugins: ModuleType  # cog.plugins (register_default_plugins)


@cache
def sdk() -> Sdk:
    """grafana-foundation-sdk's modules, imported once, on first use (``ImportError`` where it is missing)."""
    # grafana_foundation_sdk: thousands of generated classes, imported only when a dashboard is built or read back
    from grafana_foundation_sdk.builders import common, dashboard, prometheus, timeseries
    from grafana_foundation_sdk.cog import encoder, plugins
    from grafana_foundation_sdk.models import common as models_common
    from grafana_foundation_sdk.models import dashboard as models_dashboard
    from grafana_foundation_sdk.models import prometheus as models_prometheus

    return Sdk(common, dashboard, prometheus, timeseries, models_common, models_dashboard, models_prometheus,
               encoder, plugins)  # fmt: skip


def _panel(title: str, unit: str, queries: list[tuple[str, str]], description: str, limit: float | None = None):
    s = sdk()
    cb, db, pb, ts, cm, dm = s.cb, s.db, s.pb, s.ts, s.cm, s.dm
    panel = (
        ts.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(dm.DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VAR}}}"))
        .span(12)
        .height(8)
        .line_width(1)
        .fill_opacity(10)
        .legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.LIST)
                .placement(cm.LegendPlacement.BOTTOM))
        .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI))
    )  # fmt: skip
    for i, (expr, legend) in enumerate(queries):
        panel = panel.with_target(pb.Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + i)))
    if limit is not None:
        steps = [dm.Threshold(value=None, color="green"), dm.Threshold(value=limit, color="red")]
        panel = panel.thresholds(db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps))
        panel = panel.thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.DASHED))
    return panel


def build(chosen: Chosen, th: AlertThresholds, sig: Signals | None = None) -> dict[str, Any]:
    """The dashboard JSON model (a dict) for ``chosen``."""
    db, encoder = sdk().db, sdk().encoder
    gpus = None if chosen.adapter.runs_on_cpu else gpu_selector(chosen.name)
    sig = sig or signals(chosen.adapter, engine_selector(chosen.served_name), gpus, th.window)
    who = f"{chosen.adapter.display_name} {chosen.version or ''}".strip()
    d = (
        db.Dashboard(f"{chosen.workload} — {chosen.spec.label}")
        .uid(chosen.name[:40])
        .description(f"Engine Playbook rollout dashboard: {who} serving {chosen.served_name}.")
        .tags(["engine-playbook", chosen.adapter.name, chosen.workload])
        .refresh("30s")
        .time("now-6h", "now")
        .with_variable(db.DatasourceVariable(DATASOURCE_VAR).label("Prometheus").type("prometheus"))
    )
    d = d.with_row(db.Row("Serving"))
    d = d.with_panel(_panel("Output throughput", "short", [(sig.output_tok_s, "output tokens/s")],
                            "Generated tokens per second, all replicas."))  # fmt: skip
    d = d.with_panel(_panel("TTFT p95", "s", [(sig.ttft_p95_s, "p95")],
                            f"Time to first token, 95th percentile; the SLA is {th.ttft_p95_ms:g} ms.",
                            th.ttft_p95_ms / 1000))  # fmt: skip
    queue = [(sig.queue, "waiting")] + ([(sig.running, "running")] if sig.running else [])
    d = d.with_panel(_panel("Requests queued / running", "short", queue,
                            f"Requests waiting for a batch slot; alert above {th.queue_max:g}.",
                            th.queue_max))  # fmt: skip
    if sig.kv_usage:
        d = d.with_panel(_panel("KV-cache usage", "percentunit", [(sig.kv_usage, "KV cache used")],
                                "Share of the KV cache in use (max over replicas)."))  # fmt: skip
    if sig.prefix_hit_rate:
        d = d.with_panel(_panel("Prefix-cache hit rate", "percentunit", [(sig.prefix_hit_rate, "hit rate")],
                                "Share of prompt tokens served from the prefix cache."))  # fmt: skip
    if sig.gpu_util_pct and sig.gpu_mem_pct:
        d = d.with_row(db.Row("GPU (DCGM exporter)"))
        d = d.with_panel(_panel("GPU utilisation", "percent", [(sig.gpu_util_pct, "{{pod}}")],
                                f"DCGM_FI_DEV_GPU_UTIL per pod; alert below {th.gpu_util_min_pct:g}% for "
                                f"{th.gpu_util_for}.", th.gpu_util_min_pct))  # fmt: skip
        d = d.with_panel(_panel("GPU memory used", "percent", [(sig.gpu_mem_pct, "{{pod}} GPU {{gpu}}")],
                                f"FB used / (used + free) per GPU; alert above {th.gpu_mem_max_pct:g}%.",
                                th.gpu_mem_max_pct))  # fmt: skip
    return json.loads(json.dumps(d.build(), cls=encoder.JSONEncoder))


def write_dashboard(path: Path, chosen: Chosen, th: AlertThresholds) -> Path:
    """Write the dashboard JSON; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build(chosen, th), indent=2, sort_keys=True), encoding="utf-8")
    return path


def load_dashboard(path: Path):
    """The dashboard file loaded back into the SDK's model (``grafana_foundation_sdk.models.dashboard``)."""
    sdk().plugins.register_default_plugins()
    return sdk().dm.Dashboard.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def validate_dashboard(path: Path) -> tuple[bool, str]:
    """Load the file back through the SDK; every panel must keep a Prometheus query and survive a round trip."""
    try:
        dm, pm, encoder = sdk().dm, sdk().pm, sdk().encoder
    except ImportError:
        return False, f"grafana-foundation-sdk is not installed ({SDK_PIN})"
    path = Path(path)
    try:
        original = json.loads(path.read_text(encoding="utf-8"))
        model = load_dashboard(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return False, f"{path.name}: does not load as a Grafana dashboard: {err}"
    problems, titles = [], []
    for panel in model.panels or []:
        if not isinstance(panel, dm.Panel):  # rows
            continue
        titles.append(panel.title)
        queries = [t for t in panel.targets or [] if isinstance(t, pm.Dataquery) and t.expr]
        if not queries:
            problems.append(f"panel {panel.title!r} has no Prometheus query")
    again = json.loads(json.dumps(model, cls=encoder.JSONEncoder))
    if again != original:
        problems.append("the dashboard changes when loaded and written back (fields the SDK does not know)")
    if not titles:
        problems.append("no panels")
    if problems:
        return False, f"{path.name}: " + "; ".join(problems)
    return True, f"{path.name}: loads back through grafana-foundation-sdk; {len(titles)} panels: {', '.join(titles)}"


def expressions(path: Path) -> list[str]:
    """Every PromQL expression of the dashboard file (to check them with promtool)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [t["expr"] for p in data.get("panels", []) for t in p.get("targets") or [] if t.get("expr")]
