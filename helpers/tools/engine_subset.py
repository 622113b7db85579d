"""``playbook run CONFIG --engines LABEL...``: measure only some of a config's engine configurations.

The notebooks read the config from a file, so the subset is written as a config of its own into a
private temporary folder for the length of the run (it may hold the same environment values as the
original file, so it never goes into the run folder, whose ``config.yaml`` stays the masked copy).
Engine labels are checked first: an unknown one fails before anything starts, naming the allowed ones.
A resume with ``--engines`` adds to the run folder: the config the notebooks read, and the folder's
``config.yaml``, keep the engine configurations that earlier attempts archived (``with_archived_engines``);
step 5 measures only the named ones (``helpers.run.rerender.MEASURE_ONLY_ENV``) and rebuilds the others from
what they stored, so every attempt's report, a re-render from points and the calibration
(``helpers.environment.calibration``) cover every engine whose results are in the folder.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.launchers.config_check import load_config


def select_engines(cfg: PlaybookConfig, labels: list[str], source: str = "--engines") -> PlaybookConfig:
    """``cfg`` with only the engine configurations labelled ``labels`` (in the config's order)."""
    known = [e.label for e in cfg.engines]
    unknown = [x for x in labels if x not in known]
    if unknown:
        raise ConfigError(
            f"{source}: unknown engine label(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(map(repr, known))}"
        )
    return cfg.model_copy(update={"engines": [e for e in cfg.engines if e.label in labels]})


def with_archived_engines(cfg: PlaybookConfig, archived: Path) -> PlaybookConfig:
    """``cfg`` with the engine configurations of ``archived`` (a run folder's ``config.yaml``) that it lacks.

    The archived ones come first, in their order, each replaced by ``cfg``'s configuration of the same label;
    ``cfg``'s other ones follow. A missing or unreadable ``archived`` leaves ``cfg`` as it is.
    """
    if not archived.is_file():
        return cfg
    try:
        earlier = load_config(archived).engines
    except ConfigError:
        return cfg
    mine = {e.label: e for e in cfg.engines}
    merged = [mine.pop(e.label, e) for e in earlier]
    return cfg.model_copy(update={"engines": merged + list(mine.values())})


@contextmanager
def config_file(cfg: PlaybookConfig, original: str | Path, subset: bool) -> Iterator[Path]:
    """The config file the notebooks read: ``original`` as is, or (``subset``) ``cfg`` written to a private file.

    ``subset``: engines chosen (``--engines``) or fields set (``--set``) on the command line.
    """
    if not subset:
        yield Path(original).resolve()
        return
    with tempfile.TemporaryDirectory(prefix="playbook-engines-") as tmp:  # mode 0700, removed afterwards
        path = Path(tmp) / Path(original).name
        path.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        yield path
