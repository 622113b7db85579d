"""A stand-in for ``python -m lmdeploy serve api_server`` for TurboMind's start failures (error paths only).

``FAKE_LMDEPLOY_MODE``:

* ``no_cudart``: LMDeploy 0.18.0 building TurboMind whose extension cannot load its CUDA 12 runtime:
  ``AsyncEngine._build_turbomind`` raises ``RuntimeError: TurboMind was requested but its native module is
  unavailable.`` from the ``ImportError`` that ``lmdeploy/turbomind/__init__.py`` kept (the dynamic loader's
  own words for a missing ``libcudart.so.12``); exits 1.
* ``fallback``: logs 0.18.0's ``archs.py`` warning (``Fallback to pytorch engine because turbomind is not
  built.``), then serves like ``fake_openai_server`` (an engine that became healthy as the wrong backend).

``--backend`` is parsed with LMDeploy's choices, so an unknown one exits 2 with argparse's own message.
"""

from __future__ import annotations

import argparse
import os
import sys

import fake_openai_server

MODE = os.environ.get("FAKE_LMDEPLOY_MODE", "no_cudart")
_LOG = "2026-12-01 09:12:03,441 - lmdeploy - "


def _no_cudart() -> None:
    """The traceback chain of a TurboMind build whose ``_turbomind`` could not load ``libcudart.so.12``."""
    err = sys.stderr
    print("Traceback (most recent call last):", file=err)
    print('  File "/tmp/pb/site/lmdeploy/turbomind/__init__.py", line 8, in <module>', file=err)
    print("    from . import _turbomind as _tm", file=err)
    print("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory", file=err)
    print("\nThe above exception was the direct cause of the following exception:\n", file=err)
    print("Traceback (most recent call last):", file=err)
    for i in range(40):  # the API server's frames push the cause above the row's log tail
        print(f'  File "/tmp/pb/site/lmdeploy/serve/frame_{i}.py", line {i + 1}, in build', file=err)
    print('  File "/tmp/pb/site/lmdeploy/serve/core/async_engine.py", line 208, in _build_turbomind', file=err)
    print("RuntimeError: TurboMind was requested but its native module is unavailable.", file=err, flush=True)
    sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    """``serve api_server MODEL --server-name H --server-port P --backend B ...`` (other flags ignored)."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:2] == ["serve", "api_server"]:
        args_in = args_in[2:]
    parser = argparse.ArgumentParser(prog="lmdeploy serve api_server")
    parser.add_argument("model_path")
    parser.add_argument("--server-name", default="0.0.0.0")
    parser.add_argument("--server-port", type=int, default=23333)
    parser.add_argument("--backend", default="turbomind", choices=["pytorch", "turbomind"])
    args, _unknown = parser.parse_known_args(args_in)
    if MODE == "no_cudart":
        _no_cudart()
    if MODE == "fallback" and args.backend == "turbomind":
        print(f"{_LOG}WARNING - archs.py:41 - Fallback to pytorch engine because turbomind is not built.", flush=True)
    fake_openai_server.main(["--host", args.server_name, "--port", str(args.server_port)])


if __name__ == "__main__":
    main()
