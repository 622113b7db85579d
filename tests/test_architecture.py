"""The shape of ``helpers/``: no import cycles, small modules and functions, lazy imports only for heavy libraries.

The import graph is read from the source (``ast``), so an import hidden inside a function counts as
an edge too, and so does one under ``if TYPE_CHECKING:`` (a circle of types is still a circle; the
layers themselves are import-linter's contracts, ``tests/test_import_contracts.py``).
"""

import ast
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
MAX_LINES = 400
MAX_FUNCTION_LINES = 80
LONG_FUNCTIONS: set[str] = set()
"""Functions allowed over ``MAX_FUNCTION_LINES`` for now, each with the change that splits it (none)."""
LAZY_LIBRARIES = {
    "IPython": ("IPython",),
    "faker": ("faker",),
    "gguf": ("gguf",),
    "grafana_foundation_sdk": ("grafana_foundation_sdk", "grafana-foundation-sdk"),
    "guidellm": ("guidellm",),
    "jupyter_client": ("jupyter_client",),
    "kubernetes_validate": ("kubernetes_validate", "kubernetes-validate"),
    "matplotlib": ("matplotlib",),
    "nbconvert": ("nbconvert",),
    "nbformat": ("nbformat",),
    "papermill": ("papermill",),
    "pip": ("pip",),
    "pyarrow": ("pyarrow",),
    "pynvml": ("pynvml", "NVML"),
    "ray": ("ray",),
    "safetensors": ("safetensors",),
    "tokenizers": ("tokenizers",),
    "torch": ("torch",),
}
"""The heavy or optional libraries a function may import, and the names its comment may call each by.

A function-level import is of one of these, and its comment (on the line, or right above the imports it
stands in) names the library and says why, in more words than the name: ``# pynvml: NVML exists only on
GPU hosts``.
"""
# Top-level modules allowed beside the packages (everything else lives in a step or layer package).
TOP_LEVEL_MODULES = {"__init__.py"}


def module_name(path: Path) -> str:
    rel = path.relative_to(HELPERS.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in HELPERS.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at function level) for every import in ``path``, ``TYPE_CHECKING`` ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_func: bool) -> None:
        for child in ast.iter_child_nodes(node):
            func = in_func or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, in_func) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                for a in child.names:
                    full = f"{child.module}.{a.name}"
                    out.append((full if full in MODULES else child.module, child.lineno, in_func))
            visit(child, func)

    visit(tree, False)
    return out


def type_checking_lines(path: Path) -> set[int]:
    """The lines of imports under ``if TYPE_CHECKING:`` (they count as edges; they are not lazy imports)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for sub in node.body:
                lines.update(n.lineno for n in ast.walk(sub) if isinstance(n, ast.Import | ast.ImportFrom))
    return lines


def graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        for target, _line, _lazy in imports(p):
            if target in MODULES and target != m:
                g[m].add(target)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            strong(v)
    return found


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_type_checking_imports_are_edges(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from helpers.core import text\n")
    assert ("helpers.core.text", 3, False) in imports(planted)
    assert type_checking_lines(planted) == {3}


def test_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def reason(lines: list[str], line: int) -> str:
    """The comment of the import at ``line``: its own, and those above it across the imports it stands in."""
    said = [lines[line - 1]]
    i = line - 2
    while i >= 0 and lines[i].strip().startswith(("#", "import ", "from ")):
        said.append(lines[i])
        i -= 1
    return " ".join(t.split("#", 1)[1].strip() for t in said if "#" in t)


def lazy_import_problem(target: str, comment: str) -> str | None:
    """Why a function-level import of ``target`` with ``comment`` is refused, or None when it is allowed."""
    top = target.split(".")[0]
    if top == "helpers":
        return "a module of helpers is imported at the top (a circle is fixed by moving code, not by hiding it)"
    if top not in LAZY_LIBRARIES:
        return f"{top} is not a heavy optional library (LAZY_LIBRARIES)"
    names = [n for n in LAZY_LIBRARIES[top] if n.lower() in comment.lower()]
    if not names:
        return f"the comment does not name {top} (as one of {', '.join(LAZY_LIBRARIES[top])})"
    if len(comment.split()) < 4:
        return f"the comment names {names[0]} but not why it is imported lazily"
    return None


@pytest.mark.parametrize(
    ("target", "comment", "allowed"),
    [
        ("pynvml", "NVML exists only on GPU hosts", True),
        ("matplotlib.pyplot", "heavy; imported only where a figure is drawn", False),
        ("matplotlib.pyplot", "matplotlib", False),
        ("matplotlib.pyplot", "matplotlib is heavy: imported only where a figure is drawn", True),
        ("json", "json is heavy, they say", False),
        ("helpers.core.text", "helpers: a circle, imported lazily", False),
    ],
)
def test_the_lazy_import_rule(target, comment, allowed):
    assert (lazy_import_problem(target, comment) is None) == allowed


def test_function_level_imports_are_heavy_optional_libraries_with_a_reason():
    bad = []
    for m, p in MODULES.items():
        lines = p.read_text(encoding="utf-8").splitlines()
        for target, line, lazy in imports(p):
            if (
                lazy
                and line not in type_checking_lines(p)
                and (why := lazy_import_problem(target, reason(lines, line)))
            ):
                bad.append(f"{m}:{line}: {lines[line - 1].strip()}: {why}")
    assert bad == []


def test_no_module_over_400_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def long_functions(path: Path, module: str) -> dict[str, int]:
    """``module.function`` → lines, for every function (nested ones too) of ``path`` over the limit."""
    out = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                out[f"{module}.{node.name}"] = n
    return out


def test_no_function_over_80_lines():
    long = {k: n for m, p in MODULES.items() for k, n in long_functions(p, m).items() if k not in LONG_FUNCTIONS}
    assert long == {}


def test_the_function_length_check_counts_lines(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("def long():\n" + "    x = 1\n" * MAX_FUNCTION_LINES + "\n\ndef short():\n    pass\n")
    assert long_functions(planted, "m") == {"m.long": MAX_FUNCTION_LINES + 1}


def test_top_level_holds_packages():
    files = {p.name for p in HELPERS.glob("*.py")}
    assert files <= TOP_LEVEL_MODULES
    packages = {p.name for p in HELPERS.iterdir() if (p / "__init__.py").is_file()}
    assert {"core", "run", "model", "measure", "engines", "launchers", "workload", "environment", "benchmark",
            "cost", "decision", "rollout", "review", "report", "tools"} <= packages  # fmt: skip
