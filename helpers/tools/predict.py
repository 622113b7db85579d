"""``playbook predict CONFIG --gpu NAME``: predicted capacity, fleet and $/Mtok on a GPU, without starting an engine.

The prediction is step 4's (``helpers.environment.prediction``, calibrated by the engine's factor from the
archived runs unless ``--raw``) on any GPU of ``helpers/data/gpu_specs.yaml``, not only one this machine has.
Fleet: replicas = ceil(``workload.peak_requests_per_s`` ÷ predicted capacity), each ``tensor_parallel``
GPUs. $/Mtok: step 6's formula (``helpers.cost.compute.cost_per_million``) at the predicted capacity's
output tokens/s, priced from ``helpers/data/gpu_prices.yaml`` (``price_for``).
"""

from __future__ import annotations

import argparse
import json
import math

from pydantic import BaseModel, ConfigDict

from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.cost.compute import cost_per_million, price_for, traffic_demand
from helpers.environment.prediction import load_calibration, predict_run
from helpers.environment.records import ConfigPrediction, PredictionRecord
from helpers.launchers.config_check import load_config
from helpers.model.gpu_specs import gpu_spec, load_gpu_specs


class PredictedFleet(BaseModel):
    """One configuration's prediction with the fleet for the config's peak and its $/Mtok."""

    model_config = ConfigDict(extra="forbid")

    prediction: ConfigPrediction
    peak_requests_per_s: float | None = None
    replicas: int | None = None
    gpus: int | None = None
    price_per_gpu_hour: float | None = None
    price_source: str = ""
    usd_per_mtok_output: float | None = None


def _priced_as(cfg: PlaybookConfig, gpu_name: str) -> PlaybookConfig:
    """``cfg`` with ``cost.gpu`` set to ``gpu_name``; its own hourly price kept only when it is for that GPU."""
    own = gpu_spec(cfg.cost.gpu)
    same = own is not None and own.name == gpu_name
    cost = cfg.cost.model_copy(
        update={"gpu": gpu_name, "gpu_price_per_hour": cfg.cost.gpu_price_per_hour if same else None}
    )
    return cfg.model_copy(update={"cost": cost})


def fleet(cfg: PlaybookConfig, pred: ConfigPrediction) -> PredictedFleet:
    """Replicas, GPUs and $/Mtok of one prediction (None where the prediction or the price is missing)."""
    out = PredictedFleet(prediction=pred, peak_requests_per_s=traffic_demand(cfg, None)["requests_per_s"])
    cap = pred.capacity_requests_per_s
    if not pred.available or not cap or cap <= 0 or pred.gpu is None:
        return out
    if out.peak_requests_per_s:
        out.replicas = math.ceil(out.peak_requests_per_s / cap)
        out.gpus = out.replicas * pred.tensor_parallel
    try:
        price, source, _ = price_for(pred.engine, _priced_as(cfg, pred.gpu))
    except ConfigError as err:
        out.price_source = str(err)
        return out
    out.price_per_gpu_hour, out.price_source = price, source
    out.usd_per_mtok_output = cost_per_million(price * pred.tensor_parallel, cap * (pred.output_tokens or 0.0))
    return out


def predict_for(
    config: str, gpu: str | None = None, raw: bool = False
) -> tuple[PredictionRecord, list[PredictedFleet]]:
    """The prediction of every configuration of ``config`` on ``gpu`` (default: its ``cost.gpu``) and the fleets."""
    cfg = load_config(config)
    name = gpu or cfg.cost.gpu
    spec = gpu_spec(name)
    if spec is None:
        known = ", ".join(g.name for g in load_gpu_specs().gpus)
        raise ConfigError(f"--gpu {name!r}: not in helpers/data/gpu_specs.yaml (known: {known})")
    rec = predict_run(cfg, spec, f"{spec.name} (playbook predict)", None if raw else load_calibration())
    return rec, [fleet(cfg, p) for p in rec.predictions]


def _num(v: float | None, fmt: str) -> str:
    return "—" if v is None else fmt.format(v)


def predict_text(rec: PredictionRecord, fleets: list[PredictedFleet]) -> str:
    """The prediction as lines for the console, one block per configuration."""
    lines = [f"Predicted on {rec.gpu}, SLA TTFT p95 ≤ {rec.ttft_p95_ms:,.0f} ms (no engine started)."]
    for f in fleets:
        p = f.prediction
        lines.append(f"\n{p.label} ({p.engine})")
        if not p.available:
            lines.append(f"  no prediction: {p.reason}")
            continue
        lines += [
            f"  capacity: {_num(p.capacity_requests_per_s, '{:,.2f}')} req/s within the SLA "
            f"({_num(p.capacity_concurrency, '{:,.0f}')} in flight); raw model {_num(p.sla_requests_per_s, '{:,.2f}')}"
            f" req/s, peak {_num(p.peak_requests_per_s, '{:,.2f}')} req/s ({_num(p.peak_output_tok_s, '{:,.0f}')} "
            "output tok/s)",
            f"  basis: {p.calibration_basis}",
            f"  batch: up to {p.max_batch} ({p.batch_limit}); KV {p.kv_tokens:,} tokens on "
            f"{p.tensor_parallel} × {p.gpu}",
        ]
        if f.replicas is not None:
            lines.append(
                f"  fleet: {f.replicas} replica(s) = {f.gpus} GPU(s) for the peak {f.peak_requests_per_s:g} req/s"
            )
        else:
            lines.append("  fleet: no peak given (workload.peak_requests_per_s) or no capacity: not sized")
        if f.usd_per_mtok_output is not None:
            lines.append(
                f"  cost: ${f.usd_per_mtok_output:,.3f} per M output tokens at ${f.price_per_gpu_hour:g}/GPU-h "
                f"({f.price_source})"
            )
        else:
            lines.append(f"  cost: not priced ({f.price_source or 'no capacity'})")
        lines += [f"  note: {n}" for n in p.notes]
    lines.append(f"\nModel: {rec.batching_model}.")
    return "\n".join(lines)


def add_predict_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of ``playbook predict``."""
    p.add_argument("config", help="workload config YAML (e.g. playbook/workloads/h200-offline/chat-8b.yaml)")
    p.add_argument("--gpu", help="GPU of helpers/data/gpu_specs.yaml to predict for (default: the config's cost.gpu)")
    p.add_argument("--raw", action="store_true", help="the raw model: no calibration factor from archived runs")
    p.add_argument("--json", action="store_true", help="print the prediction and fleets as JSON")
    return p


def predict_command(args: argparse.Namespace) -> int:
    """Run ``playbook predict``: print the prediction; no engine is started, nothing is written."""
    rec, fleets = predict_for(args.config, args.gpu, args.raw)
    if args.json:
        print(json.dumps({"prediction": rec.model_dump(), "fleets": [f.model_dump() for f in fleets]}, indent=2))
    else:
        print(predict_text(rec, fleets))
    return 0
