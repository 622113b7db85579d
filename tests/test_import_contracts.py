"""The layers of ARCHITECTURE.md, enforced by import-linter: the contracts in ``pyproject.toml`` pass, and break.

``lint-imports`` runs as CI runs it (the venv's interpreter, the repository's ``pyproject.toml``). Each
planted violation runs it on a copy of ``helpers/`` with one import added, under the same contracts, and
the contract that guards against it must be named BROKEN: a contract that cannot fail proves nothing.
"""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers.core.paths import REPO_ROOT

PYPROJECT = REPO_ROOT / "pyproject.toml"
SETTINGS = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
NAMES = {c["id"]: c["name"] for c in SETTINGS["contracts"]}
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(cwd: Path) -> tuple[int, str]:
    """``lint-imports`` on the ``helpers`` package found in ``cwd``: exit status and output, whitespace folded."""
    res = subprocess.run(
        [sys.executable, "-c", LINT, "--config", str(PYPROJECT), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return res.returncode, " ".join((res.stdout + res.stderr).split())


def planted(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of ``helpers/`` (code only) with ``line`` appended to ``module`` (a path under helpers/)."""
    shutil.copytree(REPO_ROOT / "helpers", tmp_path / "helpers", ignore=shutil.ignore_patterns("__pycache__", "data"))
    target = tmp_path / "helpers" / module
    assert target.is_file(), module
    target.write_text(target.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    return tmp_path


def test_type_checking_imports_count():
    assert "exclude_type_checking_imports" not in SETTINGS
    assert SETTINGS["root_package"] == "helpers"


def test_the_contracts_pass():
    rc, out = lint_imports(REPO_ROOT)
    assert rc == 0, out
    assert f"Contracts: {len(NAMES)} kept, 0 broken." in out
    for name in NAMES.values():
        assert f"{name} KEPT" in out


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("core/text.py", "import helpers.tools.cli  # noqa", "foundations"),
        (
            "core/text.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import helpers.tools.cli",
            "foundations",
        ),
        ("core/config_engines.py", "from helpers.engines import ENGINES  # noqa", "registries"),
        ("benchmark/sla.py", "from helpers.cost import records  # noqa", "layers"),
        ("workload/profile.py", "def later():\n    from helpers.decision import records  # noqa", "layers"),
        ("engines/vllm.py", "from helpers.launchers import LAUNCHERS  # noqa", "layers"),
        ("cost/records.py", "import helpers.benchmark.view  # noqa", "views"),
        ("core/paths.py", "import helpers.core.config  # noqa", "acyclic"),
    ],
    ids=[
        "foundations",
        "type-checking",
        "registries",
        "layers",
        "function-level",
        "engines-launchers",
        "views",
        "circle",
    ],
)
def test_a_planted_violation_breaks_its_contract(tmp_path, module, line, contract):
    rc, out = lint_imports(planted(tmp_path, module, line))
    assert rc != 0, out
    assert f"{NAMES[contract]} BROKEN" in out, out[-2000:]
    assert "0 broken" not in out
