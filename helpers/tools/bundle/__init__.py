"""Offline install bundles: engine wheels packed into checked parts for a host without network.

``build_bundle`` resolves and downloads a spec's wheels for the target Python/platform, leaves out
what the target's ``pip freeze`` already has, installs them into one folder per layer, slims,
packs with ``tar | xz``, splits into parts and writes ``manifest.json`` and a POSIX ``install.sh``.
``verify_parts`` checks a bundle's parts against its manifest. The CLI wires in with
``add_bundle_arguments(subparser)`` and ``bundle_command(args)``.
"""

from helpers.core.errors import BundleError
from helpers.tools.bundle.archive import join_parts, split_file, verify_parts
from helpers.tools.bundle.build import build_bundle, resplit_bundle
from helpers.tools.bundle.cli import add_bundle_arguments, bundle_command
from helpers.tools.bundle.manifest import Manifest, read_manifest

__all__ = [
    "BundleError",
    "Manifest",
    "add_bundle_arguments",
    "build_bundle",
    "bundle_command",
    "join_parts",
    "read_manifest",
    "resplit_bundle",
    "split_file",
    "verify_parts",
]
