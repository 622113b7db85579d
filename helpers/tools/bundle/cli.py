"""The ``playbook bundle`` subcommand: argument definitions and the command itself."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helpers.core.errors import PlaybookError
from helpers.tools.bundle.archive import verify_parts
from helpers.tools.bundle.build import DEFAULT_PART_SIZE, DEFAULT_PLATFORM, build_bundle, resplit_bundle
from helpers.tools.bundle.manifest import Manifest
from helpers.tools.bundle.spec import DEFAULT_TARGET_FREEZE, available_specs

BUNDLES_DIR = ".bundles"
REPO_MARKERS = (".git", "pyproject.toml")


def default_out(cwd: Path | None = None) -> Path:
    """``.bundles`` of the repository holding the current directory, else of the current directory itself.

    Not the repository the playbook was installed from: a second clone that shares a venv builds its
    bundles in its own tree.
    """
    here = Path(cwd or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if any((d / m).exists() for m in REPO_MARKERS):
            return d / BUNDLES_DIR
    return here / BUNDLES_DIR


def _size(text: str) -> int:
    """Parse ``60M``, ``47000000``, ``1G`` (binary units) into bytes."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 60M or 47000000)") from exc


def add_bundle_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``bundle`` subcommand's arguments to ``parser`` and return it."""
    parser.add_argument(
        "engine",
        nargs="?",
        help="bundle spec name (vllm-0.26.0), engine (vllm, sglang, runtime) or spec YAML path; "
        "with --requirement, any new bundle name",
    )
    parser.add_argument("--list", action="store_true", help="list the shipped bundle specs and exit")
    parser.add_argument("--python", default="3.12", help="target Python version (default 3.12)")
    parser.add_argument(
        "--platform",
        action="append",
        dest="platforms",
        help=f"target platform tag, repeatable; manylinux_2_N means every glibc tag up to N "
        f"(default {DEFAULT_PLATFORM})",
    )
    parser.add_argument(
        "--target-freeze",
        type=Path,
        default=DEFAULT_TARGET_FREEZE,
        help="the target's `pip freeze`; its packages are left out "
        "(default: the H200 host's, helpers/data/bundles/h200-host-pip-freeze.txt)",
    )
    parser.add_argument("--no-target-freeze", action="store_true", help="assume the target has nothing installed")
    parser.add_argument(
        "--requirement",
        "-r",
        action="append",
        type=Path,
        dest="requirements",
        help="pip requirements file replacing the spec's list (repeatable)",
    )
    parser.add_argument("--extra", action="append", help="extra requirement (name==version), repeatable")
    resolve = parser.add_mutually_exclusive_group()
    resolve.add_argument(
        "--resolve",
        dest="resolve_deps",
        action="store_true",
        default=None,
        help="resolve dependencies (else each spec layer decides)",
    )
    resolve.add_argument(
        "--no-resolve",
        dest="resolve_deps",
        action="store_false",
        help="take the requirement lists as complete",
    )
    parser.add_argument("--name", help="bundle name (default: the spec's)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output root (default: .bundles in the repository holding the current directory, else in it)",
    )
    parser.add_argument(
        "--part-size", type=_size, default=DEFAULT_PART_SIZE, help=f"part size (default {DEFAULT_PART_SIZE // 2**20}M)"
    )
    parser.add_argument("--no-slim", dest="slim", action="store_false", help="keep every file")
    parser.add_argument("--xz-threads", type=int, default=2, help="xz -T (default 2)")
    parser.add_argument("--xz-level", type=int, default=9, choices=range(0, 10), help="xz level (default 9)")
    parser.add_argument("--keep-stage", action="store_true", help="keep the staged folder after packing")
    parser.add_argument("--verify", type=Path, metavar="MANIFEST", help="only check a built bundle's parts")
    parser.add_argument(
        "--resplit", type=Path, metavar="MANIFEST", help="re-cut a built bundle to --part-size (no recompressing)"
    )
    return parser


def _summary(manifest: Manifest, where: Path) -> str:
    """Return a short human summary of a built bundle."""
    lines = [
        f"bundle {manifest.name}: {sum(len(layer.packages) for layer in manifest.layers)} packages, "
        f"staged {manifest.staged_bytes / 2**20:.0f} MiB -> {manifest.archive.size / 2**20:.1f} MiB "
        f"in {len(manifest.parts)} parts ({where})",
        "far side: sh install.sh DEST   (prints: export PYTHONPATH="
        + ":".join(f"DEST/{p}" for p in manifest.pythonpath)
        + ")",
        "timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in manifest.timings_s.items()),
    ]
    lines += [f"  left out: {x.name} {x.version or ''} ({x.reason})" for x in manifest.left_out]
    return "\n".join(lines)


def bundle_command(args: argparse.Namespace) -> int:
    """Run ``playbook bundle`` from parsed arguments; return the exit status."""
    try:
        if args.list:
            for name, spec in available_specs().items():
                print(f"{name:24} engine={spec.engine:10} {spec.description}")
            return 0
        if args.verify:
            verify_parts(args.verify)
            print(f"{args.verify}: all parts present and intact")
            return 0
        if args.resplit:
            manifest = resplit_bundle(args.resplit, args.part_size)
            print(f"{args.resplit}: {len(manifest.parts)} parts of at most {args.part_size} bytes")
            return 0
        if not args.engine:
            print("playbook bundle: give an ENGINE (or --list)", file=sys.stderr)
            return 2
        args.out = args.out or default_out()
        manifest = build_bundle(
            args.engine,
            args.out,
            python=args.python,
            platforms=args.platforms,
            target_freeze=None if args.no_target_freeze else args.target_freeze,
            part_size=args.part_size,
            slim=args.slim,
            extra=args.extra,
            requirements=args.requirements,
            resolve_deps=args.resolve_deps,
            name=args.name,
            xz_level=args.xz_level,
            xz_threads=args.xz_threads,
            keep_stage=args.keep_stage,
            log=lambda msg: print(msg, file=sys.stderr, flush=True),
        )
    except PlaybookError as exc:
        print(f"playbook bundle: error: {exc}", file=sys.stderr)
        return 1
    print(_summary(manifest, args.out / manifest.name))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the bundle command standalone: ``python -m helpers.tools.bundle ...``."""
    parser = add_bundle_arguments(argparse.ArgumentParser(prog="playbook bundle", description=__doc__))
    return bundle_command(parser.parse_args(argv))
