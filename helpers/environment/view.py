"""Steps 2-4 view: hardware inventory, team answers, memory plan and engine test environments."""

from __future__ import annotations

import pandas as pd

from helpers.environment.engine_status import engine_status_frame
from helpers.environment.hardware import Inventory, hardware_plan_table, inventory, inventory_frame
from helpers.environment.kv_prediction import cpu_kv_plan
from helpers.environment.memory_plan import memory_plan as plan_memory
from helpers.environment.memory_plan import memory_plan_frame, plot_memory_plan
from helpers.environment.quantization import quantization_advice
from helpers.environment.team import team_table
from helpers.model.gpu_specs import gpu_spec
from helpers.report.notebook import Context, say, show_figure, show_table


def _inventory(ctx: Context) -> Inventory:
    data = ctx.load_json("environment.json") or {}
    if "hardware" in data:
        return Inventory.model_validate(data["hardware"])
    inv = inventory()
    ctx.save_json("environment.json", {**data, "hardware": inv.model_dump(mode="json")})
    return inv


def hardware(ctx: Context) -> None:
    """Step 2: what this machine is, and the hardware plan from the config."""
    inv = _inventory(ctx)
    say(inv.statement, "warn" if not inv.gpus else "ok")
    show_table(inventory_frame(inv), "Inventory (NVML, nvidia-smi topo -m, /proc)")
    show_table(hardware_plan_table(ctx.cfg, inv), "Hardware plan (config) and what the decision tree reads from it")


def team(ctx: Context) -> None:
    """Step 3: the team answers with the seed's guidance."""
    show_table(team_table(ctx.cfg), "Team answers (config) as the decision uses them")


def _gpu_for_plan(ctx: Context, inv: Inventory):
    if inv.gpus:
        return gpu_spec(inv.gpus[0].name) or (inv.gpus[0].memory_total_mib / 1024)
    return gpu_spec(ctx.cfg.cost.gpu)


def memory_plan(ctx: Context) -> None:
    """Step 4: the memory plan for the model on this GPU (or the priced GPU when there is none)."""
    inv = _inventory(ctx)
    cpu = cpu_kv_plan(ctx.cfg)
    if cpu is not None:
        ctx.save_json("memory_plan_cpu.json", cpu.to_dict(orient="records"))
        show_table(cpu, "KV-cache plan of the CPU engines (KV space set by VLLM_CPU_KVCACHE_SPACE)")
    gpu = _gpu_for_plan(ctx, inv)
    if gpu is None:
        say(
            f"No GPU here and no GPU specification named {ctx.cfg.cost.gpu!r} in the config: no GPU memory plan.",
            "missing",
        )
        return
    if not inv.gpus:
        say(
            f"No GPU here: the plan below is for the priced GPU ({ctx.cfg.cost.gpu}), the hardware you would "
            "deploy on.",
            "note",
        )
    fractions = {e.knobs.memory_fraction for e in ctx.cfg.engines if e.knobs.memory_fraction}
    frac = min(fractions) if fractions else 0.92
    wl = ctx.cfg.workload
    plan = plan_memory(
        ctx.cfg.model.directory,
        gpu,
        memory_fraction=frac,
        context_tokens=wl.input_tokens + wl.output_tokens,
        gpu_count=ctx.cfg.hardware.gpu_count,
    )
    ctx.save_json("memory_plan.json", plan.model_dump(mode="json"))
    show_table(memory_plan_frame(plan), f"Memory plan: {ctx.cfg.model.path} at memory fraction {frac:g}")
    show_figure(plot_memory_plan(plan))
    for line in quantization_advice(plan, gpu if not isinstance(gpu, float) else None):
        say(line, "note")
    say("Step 5 shows these predictions beside the KV capacity each engine reports when it starts.", "note")


def engine_environments(ctx: Context) -> None:
    """Step 4: which engines are installed and runnable with their launcher.

    Checked once per run folder, on the machine that measured it, like the inventory.
    """
    data = ctx.load_json("environment.json") or {}
    if "engines" in data:
        df = pd.DataFrame(data["engines"])
    else:
        df = engine_status_frame(ctx.cfg)
        ctx.save_json("environment.json", {**data, "engines": df.to_dict(orient="records")})
    show_table(df, "Engine test environments")
