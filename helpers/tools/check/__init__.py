"""``playbook check CONFIG``: a preflight in seconds that says, before any engine starts, what would fail.

One line per check, ✓ or ✗ with the fix (``lines``): the config validates; the model folder has a
tokenizer, and weights where real ones are asked for; each configuration's launcher has its engine at
the expected version (``engines``: the interpreter imports it, the image is present, the endpoint
answers); GPUs are visible with the free memory the memory plan needs, ports the config fixes are
free, and the disk has room for the run folder (``host``). Nothing is started but the interpreters
asked for their engine's version.

The rule ``playbook run`` follows (it runs the check first, unless ``--no-check``): a ✗ that concerns
the whole run (the config, the model folder's tokenizer, the disk, the loopback interface) stops it
before any notebook; a ✗ of one configuration (its engine missing or at another version, an image not
pulled, an endpoint that does not answer, no GPU or not enough of its memory, a fixed port in use)
is printed as "that configuration will be a failed row", and the run goes on: step 5 records that
row with its reason, as it always has, and the other configurations are measured.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.core.paths import REPORTS_DIR
from helpers.launchers.config_check import load_config, parse_config
from helpers.tools.check.engines import check_engines
from helpers.tools.check.host import check_disk, check_gpus, check_model, check_ports, read_gpus
from helpers.tools.check.lines import Check, CheckReport
from helpers.tools.engine_subset import select_engines

STAND_IN_MODEL = "tiny-llama"
"""A shipped model folder the rest of a config is validated with when its own model folder is missing."""
DEFAULT_MIN_FREE_GIB = 1.0

__all__ = ["Check", "CheckReport", "check_config", "check_loaded", "DEFAULT_MIN_FREE_GIB"]


def _validate(path: Path, engines: list[str] | None) -> tuple[PlaybookConfig | None, list[Check]]:
    """The config, validated, and its line; a missing model folder is the model's line, the rest still checked."""
    try:
        cfg = load_config(path)
    except ConfigError as err:
        msg = str(err)
        if f"{path}: model.path: " not in msg:
            return None, [Check("config", False, msg, "correct the field named")]
        data = copy.deepcopy(yaml.safe_load(path.read_text(encoding="utf-8")))
        data["model"]["path"] = STAND_IN_MODEL
        try:
            cfg = parse_config(data, str(path))
        except ConfigError as other:
            return None, [Check("config", False, str(other), "correct the field named")]
        why = msg.split(": model.path: ", 1)[1]
        fix = "give a folder with config.json and a tokenizer (`playbook setup-model smollm2` makes the real one)"
        checks = [Check("config", True, f"{path} validates, but for its model folder"), Check("model", False, why, fix)]
        return (select_engines(cfg, engines) if engines else cfg), checks
    if engines:
        cfg = select_engines(cfg, engines)
    n = len(cfg.engines)
    return cfg, [Check("config", True, f"{path} validates ({cfg.name!r}, {n} engine configuration{'s' * (n != 1)})")]


def check_loaded(
    cfg: PlaybookConfig,
    run_dir: Path = REPORTS_DIR,
    min_free_gib: float = DEFAULT_MIN_FREE_GIB,
    engines: bool = True,
    timeout_s: float = 120.0,
    model: bool = True,
) -> list[Check]:
    """Every check past validation of an already valid config; ``engines`` False: model and disk only."""
    checks = check_model(cfg) if model else []
    if engines:
        checks += check_engines(cfg, timeout_s)
        checks += check_gpus(cfg, *read_gpus())
        checks += check_ports(cfg)
    checks.append(check_disk(run_dir, min_free_gib))
    return checks


def check_config(
    path: str | Path,
    engines: list[str] | None = None,
    run_dir: Path = REPORTS_DIR,
    min_free_gib: float = DEFAULT_MIN_FREE_GIB,
    timeout_s: float = 120.0,
) -> CheckReport:
    """``playbook check``: validate the config at ``path`` (only the ``engines`` labels, if given), then check it."""
    path = Path(path)
    cfg, checks = _validate(path, engines)
    if cfg is not None:
        model_ok = all(c.ok for c in checks)
        checks += check_loaded(cfg, run_dir, min_free_gib, timeout_s=timeout_s, model=model_ok)
        if not model_ok:  # the stand-in model was planned: drop what was computed from it
            checks = [c for c in checks if not c.name.startswith("GPU memory")]
    return CheckReport(checks)
