"""Building an offline install bundle: resolve, download, stage, slim, pack, split, describe.

The result, in ``OUT_DIR/<name>/``: the parts ``<name>.tar.xz.000 ...`` (each at most ``part_size``
bytes), ``manifest.json`` and ``install.sh``. Wheels are cached in ``OUT_DIR/.wheels`` so a rebuild
downloads nothing it already has.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from helpers.core.errors import BundleError
from helpers.tools.bundle.archive import join_parts, pack, split_file, tree_bytes, verify_parts
from helpers.tools.bundle.install_script import render_install_script
from helpers.tools.bundle.manifest import (
    INSTALL_SCRIPT_NAME,
    FileInfo,
    LayerInfo,
    LeftOut,
    Manifest,
    PackageInfo,
    read_manifest,
)
from helpers.tools.bundle.spec import (
    BundleSpec,
    adhoc_spec,
    expand_platforms,
    find_spec,
    layer_requirements,
    normalize_name,
    parse_pin,
    read_freeze,
    read_requirement_lines,
)
from helpers.tools.bundle.wheels import Pip, Target, download, install, make_pip, resolve

DEFAULT_PLATFORM = "manylinux_2_39_x86_64"
# A device call carries at most 64 MiB, the repository's own files (~7 MiB now) included:
# 48 MiB parts leave room for it to grow.
DEFAULT_PART_SIZE = 48 * 2**20


def _pick_pins(
    spec: BundleSpec, layer_name: str, lines: list[str], installed: dict[str, str], override: bool
) -> tuple[list[tuple[str, str]], list[LeftOut]]:
    """Split pinned requirement lines into what to carry and what to leave out (and why)."""
    excluded = {normalize_name(n) for n in spec.exclude}
    keep: list[tuple[str, str]] = []
    left: list[LeftOut] = []
    for line in lines:
        name, version = parse_pin(line, f"bundle {spec.name}, layer {layer_name}")
        if version is None:
            raise BundleError(
                f"bundle {spec.name}, layer {layer_name}: {line!r} is not pinned (name==version); "
                "pin it or resolve the layer (--resolve)"
            )
        if name in excluded:
            left.append(LeftOut(name=name, version=version, reason="excluded by the spec (slim)"))
        elif name in installed and not override:
            have = installed[name]
            note = "same version" if have == version else f"wanted {version}"
            left.append(LeftOut(name=name, version=have, reason=f"the target already has it ({note})"))
        else:
            keep.append((name, version))
    return list(dict.fromkeys(keep)), left


def _slim(stage: Path, layer: str, spec: BundleSpec, abi: str) -> tuple[list[str], int]:
    """Delete the spec's ``remove`` globs and other-CPython builds of ``keep_target_abi_only`` globs."""
    root = stage / layer
    doomed: list[Path] = []
    for pattern in spec.remove:
        doomed += sorted(root.glob(pattern))
    for pattern in spec.keep_target_abi_only:
        doomed += [p for p in sorted(root.glob(pattern)) if f".cpython-{abi[2:]}-" not in p.name]
    removed, freed = [], 0
    for path in dict.fromkeys(doomed):
        if not path.exists() and not path.is_symlink():
            continue
        if path.is_dir() and not path.is_symlink():
            freed += tree_bytes(path)
            shutil.rmtree(path)
        else:
            freed += path.lstat().st_size
            path.unlink()
        removed.append(f"{layer}/{path.relative_to(root)}")
    return removed, freed


def _prepare_out(bundle_dir: Path) -> None:
    """Empty the bundle's output folder, refusing to touch a folder that is not a bundle."""
    if bundle_dir.exists():
        if any(bundle_dir.iterdir()) and not (bundle_dir / "manifest.json").is_file():
            raise BundleError(f"{bundle_dir} exists, is not empty and holds no manifest.json: not overwriting")
        shutil.rmtree(bundle_dir)
    bundle_dir.mkdir(parents=True)


class _Laps:
    """Seconds per build step, summed over the step's laps (the manifest's ``timings_s``)."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._clock = time.monotonic()

    def lap(self, step: str) -> None:
        """Add the time since the last lap to ``step``."""
        now = time.monotonic()
        self.timings[step] = round(self.timings.get(step, 0.0) + now - self._clock, 2)
        self._clock = now


class _Staged(BaseModel):
    """What staging the layers produced: the layers as carried, what was left out or slimmed away, notes."""

    model_config = ConfigDict(extra="forbid")

    layers: list[LayerInfo] = Field(default_factory=list)
    left_out: list[LeftOut] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    removed_bytes: int = 0
    notes: list[str] = Field(default_factory=list)


def _bundle_spec(engine: str, requirements: list[Path] | None, name: str | None, extra: list[str] | None) -> BundleSpec:
    """The spec to build: found by ``engine``, or made of ``requirements``; renamed, with ``extra`` lines added."""
    try:
        spec = find_spec(engine)
    except BundleError:
        if not requirements:
            raise
        spec = None
    if requirements:
        base = spec
        spec = adhoc_spec(name or engine, base)
        for req in requirements:
            spec.layers[0].requirements += read_requirement_lines(Path(req))
    assert spec is not None
    if name:
        spec = spec.model_copy(update={"name": name})
    if extra:
        spec.layers[-1].requirements = spec.layers[-1].requirements + list(extra)
    return spec


def _stage_layers(
    spec: BundleSpec,
    stage: Path,
    freeze: dict[str, str],
    target: Target,
    pip: Pip,
    wheel_dir: Path,
    resolve_deps: bool | None,
    slim: bool,
    laps: _Laps,
    say: Callable[[str], None],
) -> _Staged:
    """Resolve (where the layer asks), pick, download, install and slim each layer into ``stage``."""
    installed = dict(freeze)
    out = _Staged(notes=list(pip.notes))
    for layer in spec.layers:
        lines = layer_requirements(spec, layer)
        if resolve_deps if resolve_deps is not None else layer.resolve:
            say(f"[{spec.name}] resolving {layer.name}: {len(lines)} requirements")
            seen = {} if layer.override_target else installed
            pinned = [f"{n}=={v}" for n, v in resolve(lines, seen, target, pip)]
            out.notes.append(f"layer {layer.name}: resolved against the target (what it has is not listed)")
            shadowed = [p for p in pinned if parse_pin(p)[0] in installed]
            if shadowed:
                out.notes.append(f"layer {layer.name}: carried over the target's unfitting versions: {shadowed}")
            laps.lap("resolve")
            override = True  # pip already left out what the target has in a fitting version
        else:
            pinned, override = lines, layer.override_target
        pins, left = _pick_pins(spec, layer.name, pinned, installed, override)
        out.left_out += left
        say(f"[{spec.name}] {layer.name}: {len(pins)} wheels to carry, {len(left)} left out")
        wheels = download(pins, wheel_dir, target, pip)
        laps.lap("download")
        install([wheels[n] for n, _ in pins], stage / layer.name, target, pip)
        laps.lap("install")
        if slim:
            gone, freed = _slim(stage, layer.name, spec, target.abi)
            out.removed += gone
            out.removed_bytes += freed
            laps.lap("slim")
        packages = [
            PackageInfo(name=n, version=v, wheel=wheels[n].name, wheel_size=wheels[n].stat().st_size) for n, v in pins
        ]
        out.layers.append(LayerInfo(name=layer.name, packages=packages, installed_bytes=tree_bytes(stage / layer.name)))
        installed.update(dict(pins))
    return out


def _manifest(
    spec: BundleSpec,
    staged: _Staged,
    python: str,
    target: Target,
    archive: FileInfo,
    parts: list[FileInfo],
    part_size: int,
    timings: dict[str, float],
) -> Manifest:
    """The bundle's manifest: what it carries, layer by layer, what it left out, its archive and parts."""
    return Manifest(
        name=spec.name,
        engine=spec.engine,
        python=python,
        platforms=list(target.platforms),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        layers=staged.layers,
        pythonpath=[layer.name for layer in staged.layers],
        env=dict(spec.env),
        left_out=staged.left_out,
        removed=staged.removed,
        removed_bytes=staged.removed_bytes,
        staged_bytes=sum(layer.installed_bytes for layer in staged.layers),
        archive=archive,
        parts=parts,
        part_size=part_size,
        timings_s=timings,
        notes=staged.notes,
    )


def build_bundle(
    engine: str,
    out_dir: Path,
    python: str = "3.12",
    platforms: list[str] | None = None,
    target_freeze: Path | None = None,
    part_size: int = DEFAULT_PART_SIZE,
    slim: bool = True,
    extra: list[str] | None = None,
    requirements: list[Path] | None = None,
    resolve_deps: bool | None = None,
    name: str | None = None,
    wheel_dir: Path | None = None,
    xz_level: int = 9,
    xz_threads: int = 2,
    keep_stage: bool = False,
    isolated: bool = False,
    index_args: list[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> Manifest:
    """Build the offline bundle for ``engine`` into ``out_dir/<name>/`` and return its manifest.

    ``engine`` is a spec name (``vllm-0.26.0``), an engine with one spec (``vllm``, ``sglang``,
    ``runtime``) or a spec YAML path. ``requirements`` (pip requirement files) replace the spec's
    layers by one ``site`` layer (the spec's slim rules and env still apply; ``engine`` may then be
    any new name); ``extra`` lines are added to the last layer. ``target_freeze`` is the far side's
    ``pip freeze``: what it has is left out. ``resolve_deps`` forces (True) or forbids (False)
    resolving dependencies; None follows each layer. ``platforms`` default to ``manylinux_2_39_x86_64``
    (each ``manylinux_2_N`` means every glibc tag up to N). Wheels are cached in ``wheel_dir``
    (default ``out_dir/.wheels``); ``isolated``/``index_args`` go to pip (tests use local wheels).
    """
    say = log or (lambda _msg: None)
    out_dir = Path(out_dir)
    laps = _Laps()
    spec = _bundle_spec(engine, requirements, name, extra)
    target = Target(python=python, platforms=tuple(expand_platforms(platforms or [DEFAULT_PLATFORM])))
    wheel_dir = Path(wheel_dir or out_dir / ".wheels")
    wheel_dir.mkdir(parents=True, exist_ok=True)
    pip = make_pip(target, wheel_dir, isolated=isolated, index_args=index_args)
    freeze = read_freeze(target_freeze) if target_freeze else {}
    stage = out_dir / f".stage-{spec.name}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    laps.lap("prepare")
    staged = _stage_layers(spec, stage, freeze, target, pip, wheel_dir, resolve_deps, slim, laps, say)
    bundle_dir = out_dir / spec.name
    _prepare_out(bundle_dir)
    staged_bytes = sum(layer.installed_bytes for layer in staged.layers)
    say(f"[{spec.name}] packing {staged_bytes / 2**20:.0f} MiB with xz -{xz_level} -T{xz_threads}")
    archive_path = bundle_dir / f"{spec.name}.tar.xz"
    names = [layer.name for layer in staged.layers]
    archive = pack(stage, names, archive_path, level=xz_level, threads=xz_threads)
    laps.lap("pack")
    parts = split_file(archive_path, part_size)
    archive_path.unlink()
    laps.lap("split")
    manifest = _manifest(spec, staged, python, target, archive, parts, part_size, laps.timings)
    script = bundle_dir / INSTALL_SCRIPT_NAME
    script.write_text(render_install_script(manifest))
    script.chmod(0o755)
    manifest.write(bundle_dir)
    verify_parts(bundle_dir)
    laps.lap("verify")
    manifest.timings_s = laps.timings
    manifest.write(bundle_dir)
    if not keep_stage:
        shutil.rmtree(stage)
    say(f"[{spec.name}] {len(parts)} parts, {archive.size / 2**20:.1f} MiB in {bundle_dir}")
    return manifest


def resplit_bundle(manifest_path: Path, part_size: int) -> Manifest:
    """Re-cut a built bundle's parts to ``part_size`` without recompressing; rewrite manifest and install.sh.

    The parts are checked first; the archive's bytes and sha256 do not change.
    """
    manifest_path = Path(manifest_path)
    folder = manifest_path if manifest_path.is_dir() else manifest_path.parent
    manifest = read_manifest(folder)
    archive = folder / manifest.archive.name
    join_parts(folder, archive)
    for part in manifest.parts:
        (folder / part.name).unlink()
    manifest.parts = split_file(archive, part_size)
    manifest.part_size = part_size
    archive.unlink()
    (folder / INSTALL_SCRIPT_NAME).write_text(render_install_script(manifest))
    manifest.write(folder)
    verify_parts(folder)
    return manifest
