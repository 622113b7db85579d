"""The slow tier names real tests: an entry of ``tiers.py`` that names nothing would leave a slow test fast."""

import ast

import pytest
from tiers import SLOW_FILES, SLOW_TESTS, is_slow

from helpers.core.paths import REPO_ROOT


def test_every_slow_file_exists():
    assert sorted(f for f in SLOW_FILES if not (REPO_ROOT / f).is_file()) == []


def test_every_slow_test_is_a_test_function_of_its_file():
    missing = []
    for entry in SLOW_TESTS:
        path, name = entry.split("::")
        tree = ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))
        if name not in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}:
            missing.append(entry)
    assert missing == []


def test_is_slow_reads_files_tests_and_parameters():
    assert is_slow("tests/tools/test_cli.py::test_help_lists_the_commands")
    assert is_slow("tests/benchmark/test_quality.py::test_gate_threshold_in_points")
    assert is_slow("tests/model/test_gguf.py::test_transformers_runs_the_converted_folder[x]")
    assert not is_slow("tests/benchmark/test_quality.py::test_outcome_round_trips_through_json")


@pytest.mark.parametrize("marker", ["e2e", "engine", "slow"])
def test_the_markers_are_declared(pytestconfig, marker):
    assert any(m.startswith(f"{marker}:") for m in pytestconfig.getini("markers"))
