"""environment.yml (conda) and requirements.txt (venv) pin the same packages at the same versions."""

import re

import yaml

from helpers.core.paths import REPO_ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> list[str]:
    lines = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]


def conda_pip() -> list[str]:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text(encoding="utf-8"))
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one pip: list"
    return [str(x).strip() for x in pip[0]]


def pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for ln in lines:
        if ln == "-e .":
            continue
        m = PIN.match(ln)
        assert m, f"not an exact pin: {ln!r}"
        assert _norm(m[1]) not in out, f"pinned twice: {m[1]}"
        out[_norm(m[1])] = m[2]
    return out


def test_every_requirement_is_pinned_exactly():
    assert pins(requirements())


def test_the_two_lists_agree():
    req, env = pins(requirements()), pins(conda_pip())
    only_req = {k: v for k, v in req.items() if env.get(k) != v}
    only_env = {k: v for k, v in env.items() if req.get(k) != v}
    assert not only_req and not only_env, f"requirements.txt only: {only_req}; environment.yml only: {only_env}"


def test_environment_installs_the_package_editable():
    assert "-e ." in conda_pip()


def test_environment_has_python_and_pip():
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text(encoding="utf-8"))
    plain = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "pip" in plain
    assert any(d.startswith("python=3.1") for d in plain)


def test_the_load_generator_is_pinned():
    assert "guidellm" in pins(requirements())
    assert "papermill" in pins(requirements())
