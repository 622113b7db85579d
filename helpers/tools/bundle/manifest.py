"""The bundle manifest: what a bundle holds and how to check and unpack it, as JSON beside the parts."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.core.errors import BundleError

MANIFEST_NAME = "manifest.json"
INSTALL_SCRIPT_NAME = "install.sh"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PackageInfo(_Model):
    """One carried distribution."""

    name: str
    version: str
    wheel: str = Field(description="The wheel file it was installed from.")
    wheel_size: int


class LayerInfo(_Model):
    """One folder of the unpacked bundle, in PYTHONPATH order."""

    name: str
    packages: list[PackageInfo]
    installed_bytes: int = Field(description="Bytes in the folder after slimming.")


class LeftOut(_Model):
    """A requirement that was not carried, and why."""

    name: str
    version: str | None = None
    reason: str


class FileInfo(_Model):
    """A file's name, size and sha256."""

    name: str
    size: int
    sha256: str


class Manifest(_Model):
    """Everything about one bundle; written as ``manifest.json`` beside its parts."""

    format: int = 1
    name: str
    engine: str
    python: str
    platforms: list[str]
    created: str = Field(description="UTC time of the build, ISO 8601.")
    layers: list[LayerInfo]
    pythonpath: list[str] = Field(description="Layer folders, first to last, relative to the unpack folder.")
    env: dict[str, str] = Field(default_factory=dict)
    left_out: list[LeftOut] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list, description="Slimmed-away paths, layer-relative.")
    removed_bytes: int = 0
    staged_bytes: int = Field(description="Bytes of all layers as packed.")
    archive: FileInfo = Field(description="The whole .tar.xz that the parts concatenate to.")
    parts: list[FileInfo]
    part_size: int
    install_script: str = INSTALL_SCRIPT_NAME
    timings_s: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    def packages(self) -> dict[str, str]:
        """Return ``{name: version}`` of every carried package (first layer wins)."""
        out: dict[str, str] = {}
        for layer in self.layers:
            for pkg in layer.packages:
                out.setdefault(pkg.name, pkg.version)
        return out

    def write(self, folder: Path) -> Path:
        """Write ``manifest.json`` into ``folder`` and return its path."""
        path = Path(folder) / MANIFEST_NAME
        path.write_text(self.model_dump_json(indent=2) + "\n")
        return path


def read_manifest(path: Path) -> Manifest:
    """Load a manifest, naming the file when it is missing or invalid."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    try:
        return Manifest.model_validate_json(path.read_text())
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the bundle manifest ({exc.strerror})") from exc
    except ValidationError as exc:
        raise BundleError(f"{path}: invalid bundle manifest:\n{exc}") from exc
