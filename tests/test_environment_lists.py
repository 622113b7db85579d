"""One pinned set: requirements.lock pins what pyproject.toml declares, and every install path uses it.

``make venv`` installs the lock then the project with ``--no-deps``; environment.yml (conda) installs the
lock; ``scripts/lock.py --check`` says whether the lock is the environment the tests run in.
"""

import re
import subprocess
import sys
import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from helpers.core.paths import REPO_ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def lock_pins() -> dict[str, str]:
    out = {}
    for ln in (REPO_ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        ln = ln.split("#")[0].strip()
        if not ln:
            continue
        m = PIN.match(ln)
        assert m, f"not an exact pin: {ln!r}"
        name = canonicalize_name(m[1])
        assert name not in out, f"pinned twice: {m[1]}"
        out[name] = m[2]
    return out


def conda_pip() -> list[str]:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text(encoding="utf-8"))
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one pip: list"
    return [str(x).strip() for x in pip[0]]


def test_every_declared_requirement_is_pinned():
    declared = PROJECT["dependencies"] + [r for extra in PROJECT["optional-dependencies"].values() for r in extra]
    pins = lock_pins()
    missing = [r for r in declared if canonicalize_name(Requirement(r).name) not in pins]
    assert missing == []
    assert {"guidellm", "papermill", "torch", "ray", "grpcio", "import-linter", "pytest"} <= set(pins)


def test_the_extras_a_user_installs():
    extras = PROJECT["optional-dependencies"]
    assert set(extras) == {"batch", "bundle", "dev"}
    assert [Requirement(r).name for r in extras["batch"]] == ["ray"]
    assert not any(Requirement(r).name == "ray" for r in PROJECT["dependencies"]), "ray is only the batch extra"
    assert "import-linter" in extras["dev"] and "pytest" in extras["dev"]


def test_the_lock_is_this_environment():
    res = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "lock.py"), "--check"], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr


def test_conda_installs_the_lock_and_the_package_editable():
    assert conda_pip() == ["-r requirements.lock", "-e ."]
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text(encoding="utf-8"))
    plain = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "pip" in plain
    assert any(d.startswith("python=3.1") for d in plain)


def test_the_makefile_installs_the_lock():
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert "-m pip install --quiet -r requirements.lock" in makefile
    assert "--no-deps -e ." in makefile


def test_nothing_outside_batch_runs_imports_ray():
    code = "import sys, helpers.tools.cli, helpers.tools.runner; print('ray' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert res.stdout.strip() == "False"
