"""Step 5 as a session with phases: the imports that keep it acyclic, and the sequence the plan and the run share.

The import graph here counts every import of ``helpers/benchmark``, those under ``if TYPE_CHECKING:`` and inside
functions included: a phase reaches the engine through the session, never through the orchestrator.
"""

import ast
from pathlib import Path

from helpers.benchmark import phases, plan
from helpers.benchmark.session import EngineSession, Phase
from helpers.core.config import parse_config

BENCHMARK = Path(__file__).resolve().parents[2] / "helpers" / "benchmark"
ORCHESTRATOR = "helpers.benchmark.run"
NOTEBOOK_VIEW = "helpers.benchmark.view"
"""What the notebook calls: above the orchestrator (it starts ``run_benchmarks``), the one module that imports it."""


def every_import(path: Path) -> set[str]:
    """Every module ``path`` imports from ``helpers``, at any depth (TYPE_CHECKING and function level counted)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("helpers")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("helpers"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(
                    full
                    if (BENCHMARK / f"{a.name}.py").is_file() and node.module == "helpers.benchmark"
                    else node.module
                )
    return out


def benchmark_graph() -> dict[str, set[str]]:
    mods = {f"helpers.benchmark.{p.stem}": p for p in BENCHMARK.glob("*.py") if p.stem != "__init__"}
    return {m: {t for t in every_import(p) if t in mods and t != m} for m, p in mods.items()}


def test_no_module_of_step_5_imports_the_orchestrator_and_only_the_plan_and_run_import_every_phase():
    g = benchmark_graph()
    assert [m for m, targets in g.items() if ORCHESTRATOR in targets] == [NOTEBOOK_VIEW]
    assert sorted(m for m, targets in g.items() if "helpers.benchmark.phases" in targets) == [
        "helpers.benchmark.plan",
        ORCHESTRATOR,
    ]


def test_the_session_imports_no_phase():
    phase_modules = {type(p).__module__ for p in phases.PHASES}
    assert len(phase_modules) >= 8  # quality, sweep, replays, evidence, cross-check, batching, tuning
    assert benchmark_graph()["helpers.benchmark.session"].isdisjoint(phase_modules | {"helpers.benchmark.phases"})


def test_step_5_has_no_import_circle_with_type_checking_imports_counted():
    g = benchmark_graph()
    seen: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for t in sorted(g[m]):
            assert seen.get(t) != 1, f"import circle: {' → '.join([*path, m, t])}"
            if t not in seen:
                visit(t, [*path, m])
        seen[m] = 2

    for m in sorted(g):
        if m not in seen:
            visit(m, [])


def test_the_phases_run_in_one_order_on_the_engine_then_after_it():
    names = [p.name for p in phases.PHASES]
    assert names == [
        "start",
        "quality",
        "sweep",
        "replay",
        "structured",
        "evidence",
        "crosscheck",
        "batching",
        "tuning",
    ]
    assert all(isinstance(p, Phase) for p in phases.PHASES)
    on = [p.on_engine for p in phases.PHASES]
    assert on == sorted(on, reverse=True) and on.count(False) == 1  # tuning, after the engine stopped


def test_the_plan_is_what_each_phase_declares_in_the_phase_order():
    cfg = parse_config({
        "name": "phases", "model": {"path": "tiny-llama"},
        "engines": [{"label": "a", "engine": "vllm-cpu", "launcher": {"kind": "python"}, "tune_max_num_seqs": [4, 16],
                     "knobs": {"max_num_seqs": 8, "dummy_weights": True}}],
        "workload": {"input_tokens": 64, "output_tokens": 20, "concurrency": [1, 8], "requests_per_point": 24},
        "evidence": {"search": {"max_probes": 3, "edge_rounds_max": 1, "edge_rounds_min": 1}},
        "batching": {"enabled": True},
    })  # fmt: skip
    spec = cfg.engines[0]
    units = plan.engine_units(spec, cfg)
    kinds = [u.kind for u in units]
    assert kinds == ["cold", "sweep", "sweep", *["probe"] * 5, "batching", "batching", "cold", "tune", "cold", "tune"]
    by_phase = [[u.kind for u in p.planned(spec, cfg)] for p in phases.PHASES]
    assert by_phase[phases.PHASES.index(phases.TUNING)] == ["cold", "tune", "cold", "tune"]
    assert sum(by_phase, []) == kinds and len({u.key for u in units}) == len(units)
    files = [p.name for p in plan.planned_files(spec, cfg, Path("/run"))]
    assert files == [
        "sweep-c0001.json",
        "sweep-c0008.json",
        "batching-static-c0008.json",
        "batching-continuous-c0008.json",
        "tune-seqs4-c0008.json",
        "tune-seqs16-c0008.json",
    ]  # quality is off on dummy weights; probes and trials vary in number


def test_a_session_without_a_run_folder_plans_nothing_and_writes_no_events(tmp_path):
    engine = {"label": "a", "engine": "vllm-cpu", "knobs": {"dummy_weights": True}}
    cfg = parse_config({"name": "s", "model": {"path": "tiny-llama"}, "engines": [engine]})
    session = EngineSession(cfg.engines[0], cfg, tmp_path)
    assert session.handle is None and session.engine_pid is None and session.steps.units == {}
    session.steps.begin("a", "sweep", 1)  # no run folder: nothing is written
    assert not (tmp_path / "logs").exists()
    assert session.reset_prefix_cache() == "the engine has no prefix-cache reset endpoint"
