"""Bundle specs: which wheels go into an offline install bundle, in which folders, and what is slimmed.

A spec is a YAML file in ``helpers/data/bundles/`` (or any path). Each spec has one or more
*layers*: a layer is one folder of the unpacked bundle, filled from a pip requirements file, and
the layers' order is the ``PYTHONPATH`` order on the far side. Specs are found by name or by the
engine they serve (``vllm`` -> ``vllm-0.26.0``); nothing branches on an engine's name.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.core.errors import BundleError
from helpers.core.paths import DATA_DIR

BUNDLE_DATA_DIR = DATA_DIR / "bundles"
DEFAULT_TARGET_FREEZE = BUNDLE_DATA_DIR / "h200-host-pip-freeze.txt"
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(==\s*([^\s;#]+))?")


class LayerSpec(BaseModel):
    """One folder of the bundle: its requirements and how it is treated."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="Folder name inside the bundle.")
    requirements: list[str] = Field(
        default_factory=list, description="Requirement lines (pins), after any requirements file."
    )
    requirements_file: str | None = Field(
        default=None, description="A pip requirements file, relative to the spec's folder."
    )
    resolve: bool = Field(
        default=False,
        description="Resolve dependencies with pip against the target; false: the list is complete.",
    )
    override_target: bool = Field(
        default=False, description="Carry these even where the target has the package (shadows it)."
    )


class BundleSpec(BaseModel):
    """A whole bundle: layers in PYTHONPATH order, slim rules and environment for the far side."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="Bundle name; the output folder's name.")
    engine: str = Field(description="The engine (or 'runtime') this bundle serves; CLI lookup key.")
    description: str = ""
    layers: list[LayerSpec] = Field(min_length=1)
    exclude: list[str] = Field(
        default_factory=list, description="Package names never carried (dropped after resolving)."
    )
    remove: list[str] = Field(
        default_factory=list,
        description="Slim: glob patterns, relative to a layer folder, of files/folders deleted.",
    )
    keep_target_abi_only: list[str] = Field(
        default_factory=list,
        description="Slim: globs of per-CPython builds (``*.cpython-3NN-*``); those of other versions go.",
    )
    env: dict[str, str] = Field(default_factory=dict, description="Variables exported beside PYTHONPATH.")
    source_dir: Path | None = Field(default=None, exclude=True, description="Folder the spec came from.")


def normalize_name(name: str) -> str:
    """Return the PEP 503 normalized form of a distribution name (``Foo_Bar`` -> ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pin(line: str, where: str = "<requirements>") -> tuple[str, str | None]:
    """Return ``(normalized name, version or None)`` of one requirement line."""
    m = _PIN.match(line)
    if not m:
        raise BundleError(f"{where}: cannot read the requirement {line.strip()!r}")
    return normalize_name(m.group(1)), m.group(4)


def read_requirement_lines(path: Path) -> list[str]:
    """Return the requirement lines of a pip requirements file (comments and blanks dropped)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the requirements file ({exc.strerror})") from exc
    lines = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            if line.startswith("-"):
                raise BundleError(f"{path}: pip options are not supported in bundle requirements: {line!r}")
            lines.append(line)
    return lines


def layer_requirements(spec: BundleSpec, layer: LayerSpec) -> list[str]:
    """Return all requirement lines of ``layer``: its file's lines, then its inline ones."""
    lines: list[str] = []
    if layer.requirements_file:
        base = spec.source_dir or BUNDLE_DATA_DIR
        lines += read_requirement_lines(base / layer.requirements_file)
    return lines + list(layer.requirements)


def read_freeze(path: Path) -> dict[str, str]:
    """Read a ``pip freeze`` file into ``{normalized name: version}`` (``name @ url`` lines get ``""``)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the target's pip freeze ({exc.strerror})") from exc
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("-e "):
            continue
        if " @ " in line:
            found[normalize_name(line.split(" @ ", 1)[0])] = ""
            continue
        name, version = parse_pin(line, f"{path}:{number}")
        found[name] = version or ""
    return found


def load_spec(path: Path) -> BundleSpec:
    """Load and validate one spec YAML file."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BundleError(f"{path}: cannot read the bundle spec ({exc})") from exc
    try:
        spec = BundleSpec.model_validate(data)
    except ValidationError as exc:
        raise BundleError(f"{path}: invalid bundle spec:\n{exc}") from exc
    spec.source_dir = Path(path).resolve().parent
    return spec


def available_specs(data_dir: Path = BUNDLE_DATA_DIR) -> dict[str, BundleSpec]:
    """Return the shipped specs by name."""
    return {s.name: s for s in (load_spec(p) for p in sorted(Path(data_dir).glob("*.yaml")))}


def find_spec(engine: str, data_dir: Path = BUNDLE_DATA_DIR) -> BundleSpec:
    """Return the spec named ``engine``, the only spec for that engine, or the spec at that path."""
    as_path = Path(engine)
    if as_path.suffix in (".yaml", ".yml") and as_path.is_file():
        return load_spec(as_path)
    specs = available_specs(data_dir)
    if engine in specs:
        return specs[engine]
    matches = [s for s in specs.values() if s.engine == engine]
    if len(matches) == 1:
        return matches[0]
    choices = ", ".join(sorted(specs)) or "none"
    what = "several bundles" if matches else "no bundle"
    raise BundleError(f"{what} for {engine!r} in {data_dir}; choose one of: {choices}")


def adhoc_spec(name: str, base: BundleSpec | None = None) -> BundleSpec:
    """Return a one-layer spec called ``name`` with ``base``'s slim rules and env (if given)."""
    return BundleSpec(
        name=name,
        engine=base.engine if base else name,
        description=f"ad-hoc bundle {name}",
        layers=[LayerSpec(name="site")],
        exclude=list(base.exclude) if base else [],
        remove=list(base.remove) if base else [],
        keep_target_abi_only=list(base.keep_target_abi_only) if base else [],
        env=dict(base.env) if base else {},
        source_dir=Path.cwd(),
    )


def expand_platforms(platforms: list[str]) -> list[str]:
    """Expand ``manylinux_2_N_ARCH`` into every ``manylinux_2_M_ARCH`` (5 <= M <= N) plus aliases and ``any``.

    pip matches ``--platform`` tags exactly, so a wheel tagged ``manylinux_2_17`` is only found when
    that exact tag is passed; a target with glibc 2.N runs all of them.
    """
    out: list[str] = []
    for plat in platforms:
        m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", plat)
        if not m:
            out.append(plat)
            continue
        top, arch = int(m.group(1)), m.group(2)
        out += [f"manylinux_2_{n}_{arch}" for n in range(top, 4, -1)]
        aliases = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        out += [f"{alias}_{arch}" for floor, alias in aliases.items() if top >= floor]
    out.append("any")
    return list(dict.fromkeys(out))
