"""Whether each engine configuration's launcher can start its engine here, asked without starting one.

* ``python``: the interpreter exists, and run with the launcher's ``PYTHONPATH`` and environment (as the
  engine would be) it imports the engine's package, finds its server module and reports the version.
* ``docker``: ``docker image inspect`` finds the image (its tag stands for the version).
* ``endpoint``: ``GET <url>/v1/models`` answers within a few seconds and lists the served model.

The version is compared with the configuration's ``version`` when it sets one. Configurations that share
an interpreter, ``PYTHONPATH`` and environment are asked once; different ones side by side.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
from packaging.version import InvalidVersion, Version

from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.paths import repo_relative, resolve_repo_path
from helpers.engines import EngineAdapter, get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.endpoint import api_key
from helpers.launchers.python import interpreter
from helpers.tools.check.lines import Check
from helpers.tools.engine_setup import RECIPES
from helpers.tools.engine_setup import interpreter as setup_interpreter

MARK = "PLAYBOOK-CHECK "
# Run by the engine's interpreter (any Python 3.8+): import the package, find the server module without
# running it, read the version from the distribution (else the package's __version__); one JSON line.
# What to ask comes on stdin, so that the probe's command line never names an engine's module.
PROBE = r"""
import importlib, importlib.util, json, sys
asked = json.loads(sys.stdin.read())
module, dists = asked["module"], asked["dists"]
out = {"python": sys.version.split()[0]}
pkg = None
try:
    pkg = importlib.import_module(module.split(".")[0])
    out["entry"] = importlib.util.find_spec(module) is not None
except BaseException as err:
    out["error"] = (type(err).__name__ + ": " + str(err)).splitlines()[0][:300]
try:
    import importlib.metadata as md
    for d in dists:
        try:
            out["version"] = md.version(d)
            break
        except md.PackageNotFoundError:
            pass
except ImportError:
    pass
if "error" not in out and "version" not in out and getattr(pkg, "__version__", None):
    out["version"] = str(pkg.__version__)
print("PLAYBOOK-CHECK " + json.dumps(out), flush=True)
"""
ENDPOINT_TIMEOUT_S = 3.0
DOCKER_TIMEOUT_S = 15.0


def same_version(expected: str, found: str) -> bool:
    """Whether ``found`` is the version ``expected`` names: equal, or equal but for a local part or a ``v``."""
    try:
        want, got = Version(expected), Version(found)
    except InvalidVersion:
        return expected.lstrip("v") == found.lstrip("v")
    return want == got or (not want.local and want.public == got.public)


def _with_version(spec: EngineSpec, found: str | None, what: str, where: str) -> Check:
    """The check of a launcher that has the engine: ✓, or ✗ when it is not the configuration's ``version``."""
    name = f"engine {spec.label!r}"
    if spec.version is None:
        return Check(name, True, f"{what} ({f'version {found}' if found else 'version not known'})")
    if found is not None and same_version(spec.version, found):
        return Check(name, True, f"{what} (version {found}, as expected)")
    return Check(
        name,
        False,
        f"{what}, but version {found or 'not known'} where {spec.version} is expected",
        f"install {spec.version} in {where}, or set version to the one you mean to measure",
        (spec.label,),
    )


def _python_fix(adapter: EngineAdapter, spec: EngineSpec, missing: bool = False) -> str:
    """How to get the engine where the launcher looks: the set-up command where there is one, else its hint.

    ``missing``: the interpreter itself does not exist. Folders of ``launcher.pythonpath`` that do not exist
    are named first (an offline host's bundles unpack there: ``scripts/gpu_host.sh install``).
    """
    gone = [p for p in spec.launcher.pythonpath if not resolve_repo_path(p).is_dir()]
    first = f"launcher.pythonpath {', '.join(gone)} does not exist (unpack the bundle there); " if gone else ""
    own = spec.launcher.python and interpreter(spec.launcher) == setup_interpreter(adapter.name)
    if adapter.name in RECIPES and own:
        return f"{first}playbook setup-engine {adapter.name}"
    engine = adapter.display_name or adapter.name
    how = f" ({adapter.install_hint})" if adapter.install_hint else ""
    if missing:
        return f"{first}set launcher.python to an interpreter that has {engine}{how}"
    where = "launcher.python" if spec.launcher.python else "this environment (the section has no launcher.python)"
    return f"{first}install {engine} into {where}{how}, or point launcher.python at one that has it"


def probe_env(adapter: EngineAdapter, spec: EngineSpec) -> dict[str, str]:
    """The environment the engine would start with: this one, the adapter's, the launcher's; its folders first."""
    env = {**os.environ, **adapter.env(spec), **spec.launcher.env}
    folders = [str(resolve_repo_path(p)) for p in spec.launcher.pythonpath]
    if folders:
        inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
        env["PYTHONPATH"] = os.pathsep.join(folders + inherited)
    return env


def ask_interpreter(python: str, module: str, dists: list[str], env: dict[str, str], timeout_s: float) -> dict:
    """Run ``PROBE`` with ``python``: ``{"python", "entry", "version"}`` or ``{"error": ...}``."""
    try:
        r = subprocess.run(
            [python, "-c", PROBE],
            input=json.dumps({"module": module, "dists": dists}),
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no answer in {timeout_s:.0f} s"}
    except OSError as err:
        return {"error": f"cannot run it ({err.strerror or err})"}
    for line in reversed(r.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    last = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
    return {"error": f"it exited with code {r.returncode}: {last[:300]}"}


def check_python(adapter: EngineAdapter, spec: EngineSpec, answer: dict, python: str) -> Check:
    """The check of a python launcher from the interpreter's ``answer`` (``ask_interpreter``)."""
    name, row = f"engine {spec.label!r}", (spec.label,)
    top = (adapter.module or "").split(".")[0]
    fix = _python_fix(adapter, spec)
    if "error" in answer:
        return Check(name, False, f"{python} cannot import {top}: {answer['error']}", fix, row)
    if not answer.get("entry"):
        return Check(name, False, f"{python} imports {top} but has no {adapter.module}", fix, row)
    where = f"{python}'s environment"
    return _with_version(spec, answer.get("version"), f"{python} imports {top}", where)


def check_docker(adapter: EngineAdapter, spec: EngineSpec) -> Check:
    """The check of a docker launcher: the image is present here (``docker image inspect``)."""
    name, row = f"engine {spec.label!r}", (spec.label,)
    image = spec.launcher.image or adapter.default_image or ""
    docker = shutil.which("docker")
    if docker is None:
        fix = "install Docker with the NVIDIA container toolkit, or use the python launcher"
        return Check(name, False, "docker is not installed here", fix, row)
    try:
        r = subprocess.run(
            [docker, "image", "inspect", "--format", "{{.Id}}", image],
            capture_output=True,
            text=True,
            timeout=DOCKER_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return Check(name, False, f"docker does not answer ({err})", "start the Docker daemon", row)
    said = (r.stderr.strip().splitlines() or [""])[-1][:200]
    if r.returncode != 0 and "no such image" not in said.lower():  # "Cannot connect to the Docker daemon ..."
        fix = "start the Docker daemon (systemctl start docker), or use the python launcher"
        return Check(name, False, f"image {image}: no Docker engine answers ({said})", fix, row)
    if r.returncode != 0:
        return Check(name, False, f"image {image} is not present here ({said})", f"docker pull {image}", row)
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else None
    return _with_version(spec, tag, f"image {image} is present", "an image of that tag")


def check_endpoint(adapter: EngineAdapter, spec: EngineSpec, served: str, timeout_s: float) -> Check:
    """The check of an endpoint: ``/v1/models`` answers, with the API key if one is named, and lists ``served``."""
    name, row = f"engine {spec.label!r}", (spec.label,)
    url = (spec.launcher.url or "").rstrip("/") + "/v1/models"
    key = api_key(spec.launcher)
    try:
        r = httpx.get(url, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=timeout_s)
    except httpx.HTTPError as err:
        fix = "start the server, or correct launcher.url"
        return Check(name, False, f"{url}: no answer in {timeout_s:g} s ({type(err).__name__})", fix, row)
    if r.status_code in (401, 403):
        var = spec.launcher.api_key_env or "the variable named by launcher.api_key_env"
        fix = f"export {var} with the server's key"
        return Check(name, False, f"{url}: HTTP {r.status_code} (the API key is missing or wrong)", fix, row)
    if r.status_code != 200:
        fix = "check launcher.url: the base URL of an OpenAI-compatible server"
        return Check(name, False, f"{url}: HTTP {r.status_code}", fix, row)
    try:
        ids = [str(m.get("id")) for m in r.json().get("data", [])]
    except (ValueError, AttributeError):
        ids = []
    if ids and served not in ids:
        fix = f"set model.served_name to the one you mean ({', '.join(ids[:5])})"
        return Check(name, False, f"{url} serves {', '.join(ids[:5])}, not {served!r}", fix, row)
    return Check(name, True, f"{url} answers, serving {served!r}" if ids else f"{url} answers")


def _by_interpreter(cfg: PlaybookConfig, spec: EngineSpec, answers: dict) -> Check:
    """A python launcher's check, from its interpreter's answer (asked by ``check_engines``)."""
    adapter, python = get_engine(spec.engine), str(interpreter(spec.launcher))
    shown = repo_relative(python)
    answer = answers.get(_probe_key(adapter, spec))
    if answer is None:
        what = "launcher.python" if spec.launcher.python else "this environment's interpreter"
        fix = _python_fix(adapter, spec, missing=True)
        return Check(f"engine {spec.label!r}", False, f"{shown} ({what}) does not exist", fix, (spec.label,))
    return check_python(adapter, spec, answer.result(), shown)


PROBES: dict[str, Callable[[PlaybookConfig, EngineSpec, dict], Check]] = {
    "python": _by_interpreter,
    "docker": lambda cfg, spec, _answers: check_docker(get_engine(spec.engine), spec),
    "endpoint": lambda cfg, spec, _answers: check_endpoint(
        get_engine(spec.engine), spec, get_engine(spec.engine).served_model_name(cfg.model), ENDPOINT_TIMEOUT_S
    ),
}
"""The check of each launcher kind; a kind without one here is asked its own ``readiness`` (step 4's)."""


def _readiness(cfg: PlaybookConfig, spec: EngineSpec, _answers: dict) -> Check:
    """A launcher kind with no probe here: what its ``readiness`` says."""
    adapter = get_engine(spec.engine)
    state, _version, detail = LAUNCHERS[spec.launcher.kind].readiness(adapter, spec)
    return Check(f"engine {spec.label!r}", state == "ready", detail, adapter.install_hint, (spec.label,))


def _probe_key(adapter: EngineAdapter, spec: EngineSpec) -> tuple:
    """What decides an interpreter's answer: the interpreter, the module, the distributions, the environment."""
    env = probe_env(adapter, spec)
    return (str(interpreter(spec.launcher)), adapter.module, _dists(adapter), tuple(sorted(env.items())))


def _dists(adapter: EngineAdapter) -> tuple[str, ...]:
    """Distribution names the engine's version is read from, in order."""
    return tuple(d for d in (adapter.package, adapter.name) if d)


def check_engines(cfg: PlaybookConfig, timeout_s: float = 120.0) -> list[Check]:
    """One check per engine configuration, in the config's order; each interpreter asked once, side by side."""
    jobs: dict[tuple, Callable[[], dict]] = {}
    for spec in cfg.engines:
        adapter = get_engine(spec.engine)
        if spec.launcher.kind != "python" or not interpreter(spec.launcher).exists():
            continue
        key = _probe_key(adapter, spec)
        env = dict(key[3])
        jobs.setdefault(key, lambda k=key, e=env: ask_interpreter(k[0], k[1] or "", list(k[2]), e, timeout_s))
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(jobs)))) as pool:
        answers = {key: pool.submit(job) for key, job in jobs.items()}
        return [PROBES.get(spec.launcher.kind, _readiness)(cfg, spec, answers) for spec in cfg.engines]
