"""Step 12: measured engine versions against the dated file the review maintains, not against the config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.core.config import load_config, parse_config
from helpers.core.errors import ConfigError
from helpers.review.versions import CONFIG_SOURCE, latest_versions, load_engine_versions, version_currency

RUN = Path(__file__).resolve().parents[2] / "reports" / "h200-20261129-chat-8b"


def _cfg(current=None):
    return parse_config({"name": "chat-8b", "model": {"path": "tiny-llama"},
                         "engines": [{"label": "x", "engine": "vllm", "launcher": {"python": "python3"}}],
                         "review": {"current_versions": current or {}}})  # fmt: skip


def test_the_dated_file_names_every_engine_with_a_date_and_source():
    known = load_engine_versions()
    assert {"vllm", "sglang", "trtllm"} <= set(known)
    for v in known.values():
        assert v.version and v.date and v.source


def test_versions_are_compared_with_the_dated_file_and_the_source_is_shown():
    """The archived run measured vLLM 0.26.0 and SGLang 0.5.16; the file knows newer releases."""
    summary = json.loads((RUN / "summary.json").read_text())
    known = load_engine_versions()
    df = version_currency(summary, _cfg(), latest_versions(_cfg())).set_index("engine")
    assert df.loc["vllm", "current version"] == known["vllm"].version
    assert df.loc["vllm", "status"] == "stale"  # 0.26.0 measured, the file lists a later release
    assert "PyPI" in df.loc["vllm", "source"] and known["vllm"].date in df.loc["vllm", "source"]


def test_the_config_still_overrides_and_says_so():
    summary = json.loads((RUN / "summary.json").read_text())
    cfg = load_config(RUN / "config.yaml")  # the archived config lists the measured versions as current
    df = version_currency(summary, cfg, latest_versions(cfg)).set_index("engine")
    assert set(df["status"]) == {"current"} and set(df["source"]) == {CONFIG_SOURCE}


def test_a_bad_entry_names_the_file_and_engine(tmp_path):
    p = tmp_path / "engine_versions.yaml"
    p.write_text("vllm: {version: '1.0', sauce: x}\n")
    with pytest.raises(ConfigError, match="engine_versions.yaml: vllm"):
        load_engine_versions(p)
