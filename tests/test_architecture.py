"""The shape of ``helpers/``: no import cycles, small modules, lazy imports only for heavy optional libraries.

The import graph is read from the source (``ast``), so an import hidden inside a function counts as
an edge too; imports under ``if TYPE_CHECKING:`` do not (they never run).
"""

import ast
from pathlib import Path

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
MAX_LINES = 400
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
    """(imported module, line, at function level) for every import in ``path``, TYPE_CHECKING skipped."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_func: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, in_func)
                continue
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


def test_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_function_level_imports_are_heavy_optional_libraries_with_a_reason():
    bad = []
    for m, p in MODULES.items():
        lines = p.read_text(encoding="utf-8").splitlines()
        for target, line, lazy in imports(p):
            if not lazy:
                continue
            text, above = lines[line - 1], lines[line - 2].strip() if line > 1 else ""
            if target.startswith("helpers") or not (above.startswith("#") or "#" in text):
                bad.append(f"{m}:{line}: {text.strip()}")
    assert bad == []


def test_no_module_over_400_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_top_level_holds_packages():
    files = {p.name for p in HELPERS.glob("*.py")}
    assert files <= TOP_LEVEL_MODULES
    packages = {p.name for p in HELPERS.iterdir() if (p / "__init__.py").is_file()}
    assert {"core", "run", "model", "measure", "engines", "launchers", "workload", "environment", "benchmark",
            "cost", "decision", "rollout", "review", "report", "tools"} <= packages  # fmt: skip
