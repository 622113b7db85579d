"""pip, driven for a target that is not this machine: resolve, download and install wheels.

The target's Python may differ from the one running the playbook (3.12 there, 3.11 here), and pip
evaluates environment markers with the interpreter it runs on. So pip runs on a Python of the target's
version where one exists here, with a copy of this environment's pip put first on ``PYTHONPATH``
(recent pip accepts ``--dry-run`` with ``--platform``; old ones do not), and always with explicit tag
options (``--python-version``, ``--implementation cp``, ``--abi``, ``--platform``).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from helpers.core.errors import BundleError
from helpers.tools.bundle.spec import normalize_name


@dataclass(frozen=True)
class Target:
    """The far side's interpreter and platform, as pip tag options."""

    python: str = "3.12"
    platforms: tuple[str, ...] = ("any",)

    @property
    def abi(self) -> str:
        """The CPython ABI tag, e.g. ``cp312``."""
        return "cp" + self.python.replace(".", "")

    def pip_args(self) -> list[str]:
        """Return pip's options that make it choose wheels for this target."""
        args = ["--python-version", self.python, "--implementation", "cp"]
        for abi in (self.abi, "abi3", "none"):
            args += ["--abi", abi]
        for plat in self.platforms:
            args += ["--platform", plat]
        return args

    def tags(self) -> set[Tag]:
        """Return every wheel tag this target accepts."""
        version = tuple(int(x) for x in self.python.split(".")[:2])
        plats = list(self.platforms)
        abis = [self.abi, "abi3", "none"]
        found = set(cpython_tags(version, abis=abis, platforms=plats))
        found |= set(compatible_tags(version, interpreter=self.abi, platforms=plats))
        return found


@dataclass
class Pip:
    """How to run pip for a target: interpreter, a private pip copy, and pip-wide options."""

    python: str
    tools_dir: Path
    isolated: bool = False
    index_args: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def run(self, args: list[str], extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``python -m pip ARGS``; raise BundleError with pip's output tail when it fails."""
        env = dict(os.environ, PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        paths = [str(self.tools_dir)] + ([str(extra_path)] if extra_path else [])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        cmd = [self.python, "-m", "pip"] + (["--isolated"] if self.isolated else []) + args
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
            raise BundleError(f"pip {args[0]} failed (exit {proc.returncode}):\n{tail}")
        return proc


def find_python(version: str) -> str | None:
    """Return an interpreter of Python ``version`` (``3.12``) found here, or None."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    candidates = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))
    candidates += [p for p in (shutil.which(f"python{version}"),) if p]
    for cand in reversed(candidates):
        probe = subprocess.run([cand, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True)
        if probe.returncode == 0:
            return cand
    return None


def make_pip(target: Target, cache_dir: Path, isolated: bool = False, index_args: list[str] | None = None) -> Pip:
    """Return a Pip for ``target``: a Python of its version if found here, else this one (noted)."""
    # the running environment's pip; copied so another interpreter can run it
    import pip

    tools = Path(cache_dir) / "_pip"
    src = Path(pip.__file__).parent
    stamp = tools / ".version"
    if not stamp.is_file() or stamp.read_text() != pip.__version__:
        shutil.rmtree(tools, ignore_errors=True)
        shutil.copytree(src, tools / "pip", ignore=shutil.ignore_patterns("__pycache__"))
        stamp.write_text(pip.__version__)
    python = find_python(target.python)
    notes = []
    if python is None:
        python = sys.executable
        notes.append(f"no Python {target.python} here: markers were evaluated for {sys.version.split()[0]}")
    return Pip(python=python, tools_dir=tools, isolated=isolated, index_args=list(index_args or []), notes=notes)


def wheel_key(path: Path) -> tuple[str, str]:
    """Return ``(normalized name, version)`` of a wheel file name."""
    try:
        name, version, _build, _tags = parse_wheel_filename(Path(path).name)
    except InvalidWheelFilename as exc:
        raise BundleError(f"{path}: not a wheel file name ({exc})") from exc
    return normalize_name(name), str(version)


def cached_wheels(wheel_dir: Path, target: Target) -> dict[tuple[str, str], Path]:
    """Return the wheels in ``wheel_dir`` that ``target`` accepts, by ``(name, version)``."""
    accepted = target.tags()
    found: dict[tuple[str, str], Path] = {}
    for path in sorted(Path(wheel_dir).glob("*.whl")):
        _n, _v, _b, tags = parse_wheel_filename(path.name)
        if tags & accepted:
            found.setdefault(wheel_key(path), path)
    return found


def download(pins: list[tuple[str, str]], wheel_dir: Path, target: Target, pip: Pip) -> dict[str, Path]:
    """Make sure a target wheel of every ``(name, version)`` is in ``wheel_dir``; return them by name.

    Wheels already there are reused; the rest come from one ``pip download --no-deps`` call.
    """
    wheel_dir.mkdir(parents=True, exist_ok=True)
    have = cached_wheels(wheel_dir, target)
    missing = [f"{n}=={v}" for n, v in pins if (n, v) not in have]
    if missing:
        pip.run(
            ["download", "--no-deps", "--only-binary=:all:", "-d", str(wheel_dir)]
            + target.pip_args()
            + pip.index_args
            + missing
        )
        have = cached_wheels(wheel_dir, target)
    out: dict[str, Path] = {}
    for name, version in pins:
        if (name, version) not in have:
            raise BundleError(f"no wheel of {name}=={version} for {target} in {wheel_dir} after pip download")
        out[name] = have[(name, version)]
    return out


def write_fake_site(site: Path, installed: dict[str, str]) -> None:
    """Write a ``.dist-info`` stub per ``{name: version}`` so pip treats them as installed."""
    site.mkdir(parents=True, exist_ok=True)
    for name, version in installed.items():
        if not version:
            continue
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def resolve(requirements: list[str], installed: dict[str, str], target: Target, pip: Pip) -> list[tuple[str, str]]:
    """Return the ``(name, version)`` pins pip would install for ``requirements`` on the target.

    ``installed`` (the target's freeze plus earlier layers) is presented to pip as installed
    packages, so what the target already has in a fitting version is not listed; the target's own
    packages are taken as consistent (their dependencies are not re-checked).
    """
    with tempfile.TemporaryDirectory(prefix="bundle-resolve-") as tmp:
        site, report = Path(tmp) / "site", Path(tmp) / "report.json"
        write_fake_site(site, installed)
        pip.run(
            ["install", "--dry-run", "--quiet", "--report", str(report), "--only-binary=:all:"]
            + target.pip_args()
            + pip.index_args
            + requirements,
            extra_path=site,
        )
        data = json.loads(report.read_text())
    return [(normalize_name(i["metadata"]["name"]), i["metadata"]["version"]) for i in data.get("install", [])]


def install(wheels: list[Path], dest: Path, target: Target, pip: Pip) -> None:
    """Unpack ``wheels`` into the folder ``dest`` as pip would for the target (no deps, no .pyc)."""
    if not wheels:
        dest.mkdir(parents=True, exist_ok=True)
        return
    args = ["install", "--no-index", "--no-deps", "--no-compile", "--target", str(dest)]
    pip.run(args + target.pip_args() + [str(w) for w in wheels])
