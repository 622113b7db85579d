"""The committed notebooks stay thin and clean: no outputs, literal parameters, short cells, helpers only."""

import ast
import re

import nbformat
import pytest

from helpers.core.paths import PLAYBOOK_DIR
from helpers.report.notebook import STEP_TITLES
from helpers.tools.runner import notebooks

NOTEBOOKS = notebooks()
MAX_CELL_LINES = 6


def load(path):
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def lines(cell) -> list[str]:
    return [ln for ln in cell.source.splitlines() if ln.strip()]


def parse(source: str) -> ast.Module:
    """Parse a notebook cell; top-level ``await`` is allowed there."""
    return compile(source, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def parameters_cell(nb):
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell must be tagged 'parameters'"
    return tagged[0]


def test_the_playbook_has_its_seven_notebooks_in_order():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_valid_and_committed_without_outputs(path):
    nb = load(path)
    nbformat.validate(nb)
    for cell in code_cells(nb):
        assert cell.outputs == [], f"{path.name}: a code cell has outputs"
        assert cell.execution_count is None, f"{path.name}: a code cell has an execution count"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_are_literal_assignments(path):
    cell = parameters_cell(load(path))
    assert cell.cell_type == "code"
    tree = ast.parse(cell.source)
    names = set()
    for node in tree.body:
        assert isinstance(node, ast.Assign | ast.AnnAssign), f"{path.name}: not an assignment: {ast.dump(node)}"
        assert isinstance(node.value, ast.Constant), f"{path.name}: not a literal: {ast.unparse(node)}"
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    # the runner injects exactly these two (helpers.tools.runner.execute)
    assert {"config_path", "run_dir"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_carry_a_help_comment(path):
    for ln in lines(parameters_cell(load(path))):
        assert "#" in ln, f"{path.name}: parameter without a help comment: {ln!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_cells_are_thin(path):
    for cell in code_cells(load(path)):
        n = len(lines(cell))
        assert n <= MAX_CELL_LINES, f"{path.name}: a code cell has {n} lines:\n{cell.source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_imports_only_from_helpers(path):
    for cell in code_cells(load(path)):
        tree = parse(cell.source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            for m in mods:
                assert m == "helpers" or m.startswith("helpers."), f"{path.name}: imports {m!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_function_or_class_definitions(path):
    for cell in code_cells(load(path)):
        tree = parse(cell.source)
        for node in ast.walk(tree):
            assert not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.For | ast.While), (
                f"{path.name}: logic belongs in helpers/: {ast.unparse(node)[:80]}"
            )


def test_every_step_has_exactly_one_anchored_heading():
    ids = []
    for path in NOTEBOOKS:
        for cell in load(path).cells:
            if cell.cell_type == "markdown":
                ids += [int(n) for n in re.findall(r'id="step-(\d+)"', cell.source)]
    assert sorted(ids) == sorted(STEP_TITLES), f"step anchors found: {sorted(ids)}"


def test_no_stray_notebooks():
    stray = sorted(p.name for p in PLAYBOOK_DIR.glob("*.ipynb") if p not in NOTEBOOKS)
    assert not stray, f"notebooks the runner would not run: {stray}"
