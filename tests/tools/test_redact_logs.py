"""An archived run keeps no machine path and no secret in its logs (``runner.redact_logs``)."""

import gzip
from pathlib import Path

from helpers.core.paths import REPO_ROOT
from helpers.tools.runner import CHECK_LOG, archive_check, redact_logs


def test_the_archived_preflight_loses_the_repository_path_and_the_home(tmp_path):
    run = tmp_path / "run"
    home = Path.home()
    line = f"✓ random weights 'lmd': 1.0 GiB to write to {home}/big/tiny-llama-abc before the start"
    archive_check(run, f"✓ model: {REPO_ROOT}/playbook/models/tiny-llama: config.json\n{line}")
    text = (run / CHECK_LOG).read_text(encoding="utf-8")
    assert "✓ model: ./playbook/models/tiny-llama: config.json" in text and "to write to ~/big/tiny-llama-abc" in text
    assert str(REPO_ROOT) not in text and f"{home}/" not in text


def test_engine_and_client_logs_lose_the_repository_path_the_home_and_the_secrets(tmp_path):
    run = tmp_path / "run"
    engine = run / "logs" / "SGLang-0.5.16.log"
    client = run / "crosscheck" / "vLLM-0.26.0" / "vllm-bench-x1.log"
    for f in (engine, client):
        f.parent.mkdir(parents=True)
    home = Path.home()
    model = f"{REPO_ROOT}/playbook/models/llama-3.1-8b"
    engine.write_text(f"server_args=ServerArgs(model_path='{model}', api_key='s3cr3t-key')\n"
                      f"cache at {home}/.cache/vllm/torch_compile_cache/rank_0_0\n", encoding="utf-8")  # fmt: skip
    client.write_text(f"tokenizer {REPO_ROOT}/playbook/models/llama-3.1-8b\n", encoding="utf-8")
    kept = run / "engines" / "vLLM-0.26.0.json"  # not a log: left alone
    kept.parent.mkdir()
    kept.write_text(f'{{"path": "{REPO_ROOT}"}}', encoding="utf-8")
    redact_logs(run, ["s3cr3t-key"])
    text = engine.read_text(encoding="utf-8")
    assert "model_path='./playbook/models/llama-3.1-8b'" in text and "s3cr3t-key" not in text
    assert "cache at ~/.cache/vllm/torch_compile_cache/rank_0_0" in text and str(REPO_ROOT) not in text
    assert client.read_text(encoding="utf-8") == "tokenizer ./playbook/models/llama-3.1-8b\n"
    assert str(REPO_ROOT) in kept.read_text(encoding="utf-8")


def test_no_archived_run_holds_this_machines_repository_path():
    # the GPU host ran the playbook from a copy at the same path as this machine's checkout
    reports = REPO_ROOT / "reports"

    def text(p: Path) -> str:
        if p.suffix == ".gz":  # the cross-check client's raw results
            with gzip.open(p, "rt", encoding="utf-8", errors="replace") as f:
                return f.read()
        return p.read_text(encoding="utf-8", errors="replace")

    kinds = {".log", ".json", ".html", ".ipynb", ".md", ".txt", ".yaml", ".jsonl", ".gz"}
    files = [p for p in sorted(reports.rglob("*")) if p.is_file() and p.suffix in kinds]
    assert len(files) > 100
    found = [str(p.relative_to(reports)) for p in files if str(REPO_ROOT) + "/" in text(p)]
    assert not found, found[:10]
