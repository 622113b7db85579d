"""Property-based fuzzing of the config loader: configs made to break it must never raise a traceback.

Every generated config is either accepted or refused with a ``ConfigError`` whose message is one
line naming the file. Three sources of cases: the shipped workload configs with one to three values
replaced by hostile ones (wrong types, NaN, infinities, huge integers, control characters, very long
or ``~user`` paths, dates, bytes, nesting), keys dropped or added; the YAML text of those configs
with characters cut, inserted or duplicated (anchors, tags, tabs, brackets); and raw bytes. An
accepted config must also survive the archive round trip the runner does (``public_dict`` →
YAML → ``load_config``).

Bugs the fuzzing found are pinned by the named tests at the end (all fixed: they pass). The number of
generated cases is printed at the end of the module (``pytest -s``); ``PLAYBOOK_FUZZ_SCALE``
multiplies it.
"""

import copy
import datetime
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from helpers.core.config import PlaybookConfig, load_config, parse_config, public_dict
from helpers.core.errors import ConfigError
from helpers.core.paths import WORKLOADS_DIR

SCALE = float(os.environ.get("PLAYBOOK_FUZZ_SCALE", "1"))
SHIPPED = {str(p.relative_to(WORKLOADS_DIR).with_suffix("")): p for p in sorted(WORKLOADS_DIR.rglob("*.yaml"))}
BASES = {name: yaml.safe_load(p.read_text(encoding="utf-8")) for name, p in SHIPPED.items()}
BASE_TEXTS = {name: p.read_text(encoding="utf-8") for name, p in SHIPPED.items()}
CASES: Counter = Counter()
SOURCE = "fuzz.yaml"


def fuzz_settings(n: int):
    return settings(
        max_examples=max(1, int(n * SCALE)),
        deadline=None,
        derandomize=True,  # the same cases on every run: CI stays reproducible; raise the scale to hunt
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )


@pytest.fixture(scope="module", autouse=True)
def report_cases():
    yield
    total = sum(v for k, v in CASES.items() if not k.startswith("left out"))
    print(
        f"\nconfig fuzz: {total} generated configs checked: " + ", ".join(f"{k} {v}" for k, v in sorted(CASES.items()))
    )


text = st.text(max_size=24) | st.sampled_from(["a\nb", "\x00", "\ud800", "", " ", "x" * 300, "~nosuchuser/x", "🙂"])
scalar = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0, -1, 2**31, 2**63, 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | text
    | st.just(datetime.date(2026, 1, 1))
    | st.just(b"\xff\x00")
)
value = st.recursive(
    scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=6
)


def spots(obj):
    """Every (container, key) pair under ``obj``."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for k, v in list(items):
        yield obj, k
        yield from spots(v)


@st.composite
def mutated_config(draw):
    cfg = copy.deepcopy(BASES[draw(st.sampled_from(sorted(BASES)))])
    for _ in range(draw(st.integers(1, 3))):
        places = list(spots(cfg))
        if not places:
            break
        container, key = draw(st.sampled_from(places))
        action = draw(st.sampled_from(["replace", "replace", "drop", "add", "swap"]))
        if action == "replace":
            container[key] = draw(value)
        elif action == "drop" and isinstance(container, dict):
            del container[key]
        elif action == "add" and isinstance(container, dict):
            container[draw(text)] = draw(value)
        elif action == "swap":  # a value that is valid somewhere else in the config, in the wrong place
            donor, donor_key = draw(st.sampled_from(places))
            container[key] = copy.deepcopy(donor[donor_key])
    return cfg


INSERTS = st.sampled_from(
    [
        ":",
        "- ",
        "&a ",
        "*a",
        "!!str ",
        "!!binary ",
        "!!python/object ",
        "\t",
        "{",
        "[",
        "'",
        '"',
        "\n  ",
        "#",
        "%YAML 1.1\n",
        "? ",
    ]
)


@st.composite
def mangled_yaml(draw):
    s = BASE_TEXTS[draw(st.sampled_from(sorted(BASE_TEXTS)))]
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(s)))
        action = draw(st.sampled_from(["cut", "insert", "duplicate"]))
        if action == "cut":
            s = s[:i] + s[i + draw(st.integers(1, 40)) :]
        elif action == "insert":
            s = s[:i] + draw(INSERTS | st.text(max_size=5)) + s[i:]
        else:
            s = s[:i] + s[i : i + draw(st.integers(1, 80))] * 2 + s[i:]
    return s


def checked(load, data, source: str) -> PlaybookConfig | None:
    """``load()``: a config, or None after a one-line ``ConfigError`` naming ``source``; nothing else."""
    try:
        return load()
    except Exception as err:  # noqa: BLE001 - anything but a one-line ConfigError is the failure we hunt
        assert isinstance(err, ConfigError), f"{type(err).__name__}: {err}"
        msg = str(err)
        assert msg.startswith(f"{source}: ") and "\n" not in msg and "\r" not in msg, repr(msg)
        return None


def check_parse(data, source: str = SOURCE) -> PlaybookConfig | None:
    """``parse_config`` on a mapping (see ``checked``)."""
    return checked(lambda: parse_config(data, source), data, source)


def check_file(path: Path, data=None) -> PlaybookConfig | None:
    """``load_config`` on a file (see ``checked``); ``data`` is what the file was written from, if known."""
    return checked(lambda: load_config(path), data, str(path))


def archived_round_trip(cfg: PlaybookConfig, tmp_path: Path) -> None:
    """What the runner archives (``config.yaml`` from ``public_dict``) loads again."""
    p = tmp_path / "archived.yaml"
    p.write_text(yaml.safe_dump(public_dict(cfg), sort_keys=False), encoding="utf-8")
    again = load_config(p)
    assert again.name == cfg.name and [e.label for e in again.engines] == [e.label for e in cfg.engines]


@fuzz_settings(200)
@given(data=mutated_config())
def test_mutated_configs_are_accepted_or_refused_in_one_line(tmp_path, data):
    CASES["mutated mapping"] += 1
    cfg = check_parse(data)
    if cfg is not None:
        CASES["mutated mapping accepted"] += 1
        archived_round_trip(cfg, tmp_path)


@fuzz_settings(80)
@given(data=mutated_config())
def test_mutated_configs_through_a_yaml_file_match_the_mapping(tmp_path, data):
    try:
        doc = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    except (yaml.YAMLError, UnicodeEncodeError):
        assume(False)  # PyYAML cannot write it, so no file can hold it
    p = tmp_path / SOURCE
    p.write_bytes(doc.encode("utf-8", "surrogatepass"))
    CASES["mutated file"] += 1
    try:
        reread = yaml.safe_load(p.read_bytes().decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        reread = None
    from_file = check_file(p, data)
    if reread == data:  # the file holds exactly the mapping: both ways agree
        assert (from_file is None) == (check_parse(data, str(p)) is None)


@fuzz_settings(150)
@given(doc=mangled_yaml())
def test_mangled_yaml_text_is_accepted_or_refused_in_one_line(tmp_path, doc):
    CASES["mangled yaml"] += 1
    p = tmp_path / SOURCE
    p.write_text(doc, encoding="utf-8")
    check_file(p)


@fuzz_settings(60)
@given(doc=st.text(max_size=200))
def test_random_text_is_accepted_or_refused_in_one_line(tmp_path, doc):
    CASES["random text"] += 1
    p = tmp_path / SOURCE
    p.write_bytes(doc.encode("utf-8", "surrogatepass"))
    try:
        doc.encode("utf-8")
    except UnicodeEncodeError:
        CASES["left out (not UTF-8: UnicodeDecodeError from read_text)"] += 1
        return
    check_file(p)


def test_the_shipped_configs_all_load():
    assert "h200-offline/chat-8b" in BASES  # the offline-host configs are fuzzed too
    for p in SHIPPED.values():
        assert load_config(p).name


# Bugs the fuzzing found (config.py, config_engines.py; fixed), one test each.


def base(**edits) -> dict:
    cfg = copy.deepcopy(BASES["default"])
    cfg["model"] = {**cfg["model"], **edits}
    return cfg


@pytest.mark.parametrize("path", ["x" * 300, "~nosuchuser/x"], ids=["too-long", "unknown-user"])
def test_an_impossible_model_path_is_a_config_error(path):
    with pytest.raises(ConfigError, match=r"^fuzz\.yaml: model\.path: "):
        parse_config(base(path=path), SOURCE)


@pytest.mark.parametrize("where", ["key", "label", "model-path"])
def test_a_line_break_in_a_key_or_label_keeps_the_message_on_one_line(where):
    cfg = copy.deepcopy(BASES["default"])
    if where == "key":
        cfg["a\nb"] = 1
    elif where == "model-path":
        cfg["model"]["path"] = "no such\nfolder"
    else:
        for e in cfg["engines"]:
            e["label"] = "a\nb"
    with pytest.raises(ConfigError) as err:
        parse_config(cfg, SOURCE)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("case", ["not-utf8", "deep", "long-path"])
def test_an_unreadable_config_file_is_a_config_error(tmp_path, case):
    p = tmp_path / "c.yaml"
    if case == "not-utf8":
        p.write_bytes(b"name: \xff\n")
    elif case == "deep":
        p.write_bytes(b"[" * 600)
    else:
        p = tmp_path / ("q" * 300 + ".yaml")
    limit = sys.getrecursionlimit()
    with pytest.raises(ConfigError):
        load_config(p)
    assert sys.getrecursionlimit() == limit
