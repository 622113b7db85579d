"""The far side's installer: a POSIX ``sh`` script that checks, joins and unpacks a bundle's parts.

It needs ``sh``, ``sha256sum``, ``xz``, ``tar``, ``cat``, ``wc`` and ``cut`` — no Python — and
carries the sizes and sha256s itself, so the manifest need not travel. Usage on the far side::

    sh install.sh DEST        # prints the ``export PYTHONPATH=...`` line (also written to DEST/env.sh)
"""

from __future__ import annotations

import re
import shlex

from helpers.core.errors import BundleError
from helpers.tools.bundle.manifest import Manifest

_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")

_HEAD = """\
#!/bin/sh
# Offline installer for the bundle {name} ({n_parts} parts), made by `playbook bundle`.
# Needs sh, sha256sum, xz and tar; no Python. Put the parts beside this script, then:
#     sh install.sh DEST
# It checks every part's size and sha256, joins them, checks the whole archive's sha256,
# unpacks it into DEST and prints the line to paste (also written to DEST/env.sh).
set -eu
name={name}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
fail() {{ echo "install.sh ($name): error: $*" >&2; exit 1; }}
[ "$#" -eq 1 ] && [ -n "$1" ] || {{ echo "usage: sh $0 DEST" >&2; exit 2; }}
for tool in sha256sum xz tar cat wc cut; do
  command -v "$tool" >/dev/null 2>&1 || fail "needs $tool on PATH"
done
check() {{
  [ -f "$here/$1" ] || fail "part $1 is missing (expected in $here)"
  size=$(wc -c < "$here/$1" | tr -d ' ')
  [ "$size" = "$2" ] || fail "part $1 has $size bytes, expected $2 (incomplete copy?)"
  sum=$(sha256sum "$here/$1" | cut -d ' ' -f 1)
  [ "$sum" = "$3" ] || fail "part $1 is damaged: sha256 $sum, expected $3"
}}
"""

_TAIL = """\
joined() {{ cat {part_paths}; }}
sum=$(joined | sha256sum | cut -d ' ' -f 1)
[ "$sum" = {archive_sha} ] || fail "the joined parts have sha256 $sum, expected {archive_sha}"
mkdir -p "$1"
dest=$(CDPATH= cd -- "$1" && pwd)
tmp="$dest/.unpack.$$"
rm -rf "$tmp"
mkdir "$tmp"
if ! joined | xz -dc | tar -xf - -C "$tmp"; then rm -rf "$tmp"; fail "unpacking into $dest failed"; fi
for layer in {layers}; do
  [ -d "$tmp/$layer" ] || {{ rm -rf "$tmp"; fail "the archive lacks the folder $layer"; }}
  rm -rf "${{dest:?}}/$layer"
  mv "$tmp/$layer" "$dest/$layer"
done
rmdir "$tmp"
line="export PYTHONPATH={pythonpath}{env}"
echo "$line" > "$dest/env.sh"
echo "$line"
"""


def render_install_script(manifest: Manifest) -> str:
    """Return the text of ``install.sh`` for ``manifest``."""
    names = [manifest.name, *manifest.pythonpath, *(p.name for p in manifest.parts)]
    for value in names:
        if not _SAFE.match(value):
            raise BundleError(f"bundle {manifest.name}: {value!r} is not a safe file name for install.sh")
    for key in manifest.env:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise BundleError(f"bundle {manifest.name}: {key!r} is not a valid environment variable name")
    text = _HEAD.format(name=manifest.name, n_parts=len(manifest.parts))
    for part in manifest.parts:
        text += f"check {part.name} {part.size} {part.sha256}\n"
    pythonpath = ":".join(f"'$dest'/{layer}" for layer in manifest.pythonpath)
    env = "".join(f" {key}={_dq(shlex.quote(val))}" for key, val in manifest.env.items())
    text += _TAIL.format(
        part_paths=" ".join(f'"$here/{p.name}"' for p in manifest.parts),
        archive_sha=manifest.archive.sha256,
        layers=" ".join(manifest.pythonpath),
        pythonpath=pythonpath,
        env=env,
    )
    return text


def _dq(text: str) -> str:
    """Escape ``text`` for use inside a double-quoted sh string."""
    return re.sub(r'(["\\$`])', r"\\\1", text)
