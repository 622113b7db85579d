"""Write the playbook notebooks (thin: parameters, one view call per step), without outputs.

Run it after changing a notebook's shape: ``python scripts/build_notebooks.py``. The notebooks are
committed; engineers may also edit them directly in JupyterLab (keep the ``parameters`` tag).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

PLAYBOOK = Path(__file__).resolve().parent.parent / "playbook"

PARAMS = """config_path: str = "workloads/default.yaml"  # workload config (YAML); relative to playbook/ or absolute
run_dir: str = ""  # run folder to write into; empty means a scratch folder under reports"""


def step(n: int, title: str, text: str) -> nbformat.NotebookNode:
    """The markdown cell that opens a checklist step (its HTML id is the report's anchor)."""
    return new_markdown_cell(f'<h2 id="step-{n}">Step {n} — {title}</h2>\n\n{text}')


NOTEBOOKS = {
    "01_workload.ipynb": (
        "# Step 1: workload profile\n\nWhat the traffic looks like — lengths, concurrency, prefix reuse — "
        "measured from the user's own trace where one is configured.",
        "from helpers.workload import view",
        [
            (
                step(
                    1,
                    "Workload profile",
                    "Seed 003 §7.1 step 1: concurrency p50/p95/p99, length distributions, "
                    "prefix reuse, model update cadence.",
                ),
                ["profile = view.profile(ctx)", "view.show(ctx, profile)"],
            ),
        ],
    ),
    "02_environment.ipynb": (
        "# Steps 2-4: hardware, team, memory plan and engine test environments",
        "from helpers.environment import view",
        [
            (
                step(2, "Hardware", "Seed 003 §7.1 step 2: what the machine is, and the hardware plan."),
                ["inventory = view.hardware(ctx)", "view.show_hardware(ctx, inventory)"],
            ),
            (
                step(3, "Team", "Seed 003 §7.1 step 3: the team answers, as the decision will use them."),
                ["view.show_team(ctx)"],
            ),
            (
                step(
                    4,
                    "Memory plan and engine test environments",
                    "Seed 003 §7.2 step 4: what fits, with how much room for concurrent requests, the capacity "
                    "each configuration is predicted to have before any GPU time is spent, and which engines "
                    "are ready to run.",
                ),
                [
                    "plan = view.plan_memory(ctx, inventory)",
                    "view.show_memory_plan(ctx, plan)",
                    "prediction = view.predict(ctx, inventory)",
                    "view.show_prediction(ctx, prediction)",
                    "environments = view.engine_environments(ctx)",
                    "view.show_engine_environments(ctx, environments)",
                ],
            ),
        ],
    ),
    "03_benchmark.ipynb": (
        "# Step 5: live engine benchmarks\n\nEach engine configuration is launched, measured at every "
        "concurrency level with guidellm, and stopped. Points already in the run folder are kept.",
        "from helpers.benchmark import view",
        [
            (
                step(
                    5,
                    "Live engine benchmarks",
                    "Seed 003 §7.2 step 5: throughput, TTFT p95, cold start, memory; "
                    "prefix-cache hit rate where prefixes are shared.",
                ),
                ["results = await view.run(ctx)", "view.show(ctx, results)"],
            ),
        ],
    ),
    "04_cost.ipynb": (
        "# Step 6: cost analysis",
        "from helpers.cost import view",
        [
            (
                step(
                    6,
                    "Cost per million tokens and TCO",
                    "Seed 003 §4.4 and §7.2 step 6: GPU cost per token, operations cost, TCO.",
                ),
                ["cost = view.compute(ctx)", "view.show(ctx, cost)"],
            ),
        ],
    ),
    "05_decision.ipynb": (
        "# Steps 7-8: decision and risk",
        "from helpers.decision import view",
        [
            (
                step(
                    7,
                    "Decision",
                    "Seed 003 §3.5 and §7.3 step 7: the decision tree, scores, primary and backup.",
                ),
                ["decision = view.decide(ctx)", "view.show(ctx, decision)"],
            ),
            (
                step(8, "Risk", "Seed 003 §7.3 step 8: long-term risks and the migration plan."),
                ["risk = view.risk(ctx, decision)", "view.show_risk(ctx, risk)"],
            ),
        ],
    ),
    "06_rollout.ipynb": (
        "# Steps 9-10: pilot and rollout",
        "from helpers.rollout import view",
        [
            (
                step(9, "Pilot", "Seed 003 §7.4 step 9: the chosen engine's launch configuration for a pilot."),
                ["manifest = view.pilot(ctx)", "view.show_pilot(ctx, manifest)"],
            ),
            (
                step(10, "Rollout", "Seed 003 §7.4 step 10: alerts, dashboard, deployment and canary plan."),
                ["validation = view.validate(ctx, manifest)", "view.show_rollout(ctx, manifest, validation)"],
            ),
        ],
    ),
    "07_review.ipynb": (
        "# Steps 11-12: quarterly review and continuous learning",
        "from helpers.review import view",
        [
            (
                step(
                    11,
                    "Quarterly review",
                    "Seed 003 §7.5 step 11: this run against earlier runs of the same workload.",
                ),
                ["review = view.review(ctx)", "view.show_review(ctx, review)"],
            ),
            (
                step(12, "Continuous learning", "Seed 003 §7.5 step 12: engine versions measured vs current."),
                ["view.learning(ctx)"],
            ),
        ],
    ),
}


def build(name: str, intro: str, imports: str, steps: list) -> nbformat.NotebookNode:
    """One thin notebook: intro, parameters, setup, then a heading and one call per step."""
    cells = [new_markdown_cell(intro)]
    params = new_code_cell(PARAMS)
    params.metadata["tags"] = ["parameters"]
    cells.append(params)
    setup = new_code_cell(
        f"from helpers.report import notebook as nb\n{imports}\n\nctx = nb.start(config_path, run_dir)"
    )
    setup.metadata["tags"] = ["setup"]
    cells.append(setup)
    for heading, calls in steps:
        cells.append(heading)
        cells.append(new_code_cell("\n".join(calls)))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def main() -> None:
    """Write every notebook into playbook/."""
    for name, (intro, imports, steps) in NOTEBOOKS.items():
        nbformat.write(build(name, intro, imports, steps), PLAYBOOK / name)
        print(PLAYBOOK / name)


if __name__ == "__main__":
    main()
