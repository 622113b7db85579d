"""Tests of helpers.tools.bundle: split/join, manifest checks, freeze leave-outs, slimming, install.sh.

Everything runs offline: tiny wheels are written here, and pip runs with --no-index on them.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from helpers.tools.bundle import BundleError, build_bundle, join_parts, read_manifest, split_file, verify_parts
from helpers.tools.bundle.cli import add_bundle_arguments, bundle_command
from helpers.tools.bundle.spec import available_specs, expand_platforms, find_spec, layer_requirements, read_freeze
from helpers.tools.bundle.wheels import Target, make_pip, resolve


def make_wheel(folder: Path, name: str, version: str, files: dict[str, bytes], requires=()) -> Path:
    """Write a minimal valid py3-none-any wheel and return its path."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    content = dict(files)
    content[f"{info}/METADATA"] = meta.encode()
    content[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in content.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    content[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in content.items():
            zf.writestr(member, data)
    return path


PAYLOAD = {
    "alpha": {
        "alpha/__init__.py": b"VALUE = 'alpha'\n",
        "alpha/noise.bin": os.urandom(40_000),  # incompressible, so the archive spans several parts
        "alpha/big_unused.so": b"x" * 5000,
        "alpha/_C.cpython-311-x86_64-linux-gnu.so": b"old abi",
        "alpha/_C.cpython-312-x86_64-linux-gnu.so": b"target abi",
    },
    "beta": {"beta/__init__.py": b"VALUE = 'beta'\n"},
    "shadow": {"shadow/__init__.py": b"VALUE = 'carried shadow'\n"},
    "gamma": {"gamma/__init__.py": b"VALUE = 'gamma'\n", "gamma/tests/test_x.py": b"assert True\n"},
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build one small bundle from local wheels: two layers, a freeze, slim rules."""
    root = tmp_path_factory.mktemp("bundle")
    wheels = root / "wheels"
    wheels.mkdir()
    for name, files in PAYLOAD.items():
        make_wheel(wheels, name, "1.0", files)
    spec_dir = root / "spec"
    spec_dir.mkdir()
    (spec_dir / "site.txt").write_text("# the main set\nalpha==1.0\nbeta==1.0\ngamma==1.0\n")
    (spec_dir / "tiny-1.0.yaml").write_text(
        "name: tiny-1.0\nengine: tiny\nlayers:\n"
        "  - {name: first, requirements: ['shadow==1.0'], override_target: true}\n"
        "  - {name: site, requirements_file: site.txt}\n"
        "remove: ['alpha/big_unused.so', '*/tests']\n"
        "keep_target_abi_only: ['alpha/_C.cpython-*.so']\n"
        "env: {TINY_OFFLINE: '1'}\n"
    )
    freeze = root / "freeze.txt"
    freeze.write_text("beta==0.9\nshadow==2.0\nsomething-else @ file:///x.whl\n")
    out = root / "out"
    manifest = build_bundle(
        str(spec_dir / "tiny-1.0.yaml"),
        out,
        target_freeze=freeze,
        part_size=16 * 1024,
        wheel_dir=wheels,
        xz_level=1,
        isolated=True,
        index_args=["--no-index"],
    )
    return manifest, out / "tiny-1.0", wheels


def test_split_parts_reassemble_to_identical_bytes(tmp_path):
    data = os.urandom(300_001)
    src = tmp_path / "blob.tar.xz"
    src.write_bytes(data)
    parts = split_file(src, 100_000)
    assert [p.size for p in parts] == [100_000, 100_000, 100_000, 1]
    joined = b"".join((tmp_path / p.name).read_bytes() for p in parts)
    assert joined == data
    assert parts[1].sha256 == hashlib.sha256(data[100_000:200_000]).hexdigest()


def test_split_exact_multiple_makes_no_empty_part(tmp_path):
    src = tmp_path / "blob"
    src.write_bytes(b"a" * 200)
    parts = split_file(src, 100)
    assert [p.size for p in parts] == [100, 100]
    assert not (tmp_path / "blob.002").exists()


def test_manifest_records_layers_leave_outs_and_slim(built):
    manifest, folder, _ = built
    assert manifest.pythonpath == ["first", "site"]
    assert [p.name for p in manifest.layers[0].packages] == ["shadow"]  # carried despite the target's 2.0
    assert [p.name for p in manifest.layers[1].packages] == ["alpha", "gamma"]
    beta = [x for x in manifest.left_out if x.name == "beta"]
    assert beta and beta[0].version == "0.9" and "target already has" in beta[0].reason
    assert "site/alpha/big_unused.so" in manifest.removed
    assert "site/alpha/_C.cpython-311-x86_64-linux-gnu.so" in manifest.removed
    assert "site/gamma/tests" in manifest.removed
    assert len(manifest.parts) >= 3 and all(p.size <= 16 * 1024 for p in manifest.parts)
    assert read_manifest(folder / "manifest.json") == manifest
    assert sorted(x.name for x in folder.iterdir()) == sorted(
        ["manifest.json", "install.sh", *(p.name for p in manifest.parts)]
    )


def test_parts_join_to_the_archive_sha(built, tmp_path):
    manifest, folder, _ = built
    verify_parts(folder / "manifest.json")
    archive = join_parts(folder, tmp_path / "whole.tar.xz")
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == manifest.archive.sha256
    assert archive.stat().st_size == manifest.archive.size


def _copy(folder: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(folder, dst)
    return dst


def test_tampered_part_is_refused(built, tmp_path):
    manifest, folder, _ = built
    copy = _copy(folder, tmp_path)
    victim = copy / manifest.parts[1].name
    data = bytearray(victim.read_bytes())
    data[100] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(BundleError, match=rf"part {manifest.parts[1].name} is damaged"):
        verify_parts(copy / "manifest.json")
    proc = subprocess.run(["sh", str(copy / "install.sh"), str(tmp_path / "dest")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"part {manifest.parts[1].name} is damaged" in proc.stderr
    assert not (tmp_path / "dest").exists()


def test_missing_or_short_part_is_refused(built, tmp_path):
    manifest, folder, _ = built
    copy = _copy(folder, tmp_path)
    last = copy / manifest.parts[-1].name
    last.write_bytes(last.read_bytes()[:-1])
    with pytest.raises(BundleError, match=rf"part {manifest.parts[-1].name} has"):
        verify_parts(copy)
    (copy / manifest.parts[0].name).unlink()
    with pytest.raises(BundleError, match=rf"part {manifest.parts[0].name} is missing"):
        verify_parts(copy)
    proc = subprocess.run(["sh", str(copy / "install.sh"), str(tmp_path / "d")], capture_output=True, text=True)
    assert proc.returncode == 1 and f"part {manifest.parts[0].name} is missing" in proc.stderr


def test_install_script_unpacks_identical_files(built, tmp_path):
    manifest, folder, wheels = built
    dest = tmp_path / "far side"  # a space, to check quoting
    env = {"PATH": os.environ["PATH"]}
    proc = subprocess.run(["sh", "install.sh", str(dest)], cwd=folder, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line == f"export PYTHONPATH='{dest}'/first:'{dest}'/site TINY_OFFLINE=1"
    assert (dest / "env.sh").read_text().strip() == line
    for layer, name in [("site", "alpha"), ("site", "gamma"), ("first", "shadow")]:
        with zipfile.ZipFile(next(wheels.glob(f"{name}-1.0-*.whl"))) as zf:
            for member in zf.namelist():
                if member.endswith("RECORD") or "/tests/" in member:
                    continue
                target = dest / layer / member
                if member in ("alpha/big_unused.so", "alpha/_C.cpython-311-x86_64-linux-gnu.so"):
                    assert not target.exists()
                else:
                    assert target.read_bytes() == zf.read(member), member
    assert not (dest / "site" / "beta").exists()
    assert not (dest / "site" / "gamma" / "tests").exists()
    # the printed PYTHONPATH works, and `first` wins
    shadow = subprocess.run(
        ["sh", "-c", f"{line}; python3 -c 'import shadow, alpha; print(shadow.VALUE, alpha.VALUE)'"],
        capture_output=True,
        text=True,
    )
    assert shadow.stdout.strip() == "carried shadow alpha"
    # a second run replaces the folders cleanly
    (dest / "site" / "stale.txt").write_text("old")
    again = subprocess.run(["sh", str(folder / "install.sh"), str(dest)], capture_output=True, text=True)
    assert again.returncode == 0 and not (dest / "site" / "stale.txt").exists()


def test_resolve_leaves_out_what_the_target_has_in_a_fitting_version(tmp_path):
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(
        wheels,
        "app",
        "1.0",
        {"app/__init__.py": b""},
        requires=["lib>=2", "util", "extra-dep; python_version<'3'"],
    )
    for version in ("1.5", "2.0", "3.0"):
        make_wheel(wheels, "lib", version, {"lib/__init__.py": b""})
    make_wheel(wheels, "util", "1.0", {"util/__init__.py": b""})
    target = Target(python="3.12", platforms=tuple(expand_platforms(["manylinux_2_17_x86_64"])))
    pip = make_pip(target, tmp_path / "cache", isolated=True, index_args=["--no-index", "--find-links", str(wheels)])
    got = dict(resolve(["app==1.0"], {"util": "1.0", "lib": "1.5"}, target, pip))
    assert got == {"app": "1.0", "lib": "3.0"}  # util fits on the target; lib 1.5 does not


def test_unpinned_line_without_resolve_is_an_error(tmp_path):
    spec = tmp_path / "x.yaml"
    spec.write_text("name: x\nengine: x\nlayers: [{name: site, requirements: ['alpha>=1']}]\n")
    with pytest.raises(BundleError, match="'alpha>=1' is not pinned"):
        build_bundle(str(spec), tmp_path / "out", wheel_dir=tmp_path / "w", isolated=True, index_args=["--no-index"])


def test_expand_platforms_lists_every_glibc_tag():
    plats = expand_platforms(["manylinux_2_39_x86_64"])
    assert plats[0] == "manylinux_2_39_x86_64" and plats[-1] == "any"
    assert {f"manylinux_2_{n}_x86_64" for n in range(5, 40)} <= set(plats)
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(plats)
    assert "manylinux_2_4_x86_64" not in plats
    assert expand_platforms(["linux_x86_64"]) == ["linux_x86_64", "any"]


def test_shipped_specs_match_the_h200_recipe():
    specs = available_specs()
    assert {"vllm-0.26.0", "sglang-0.5.16", "playbook-runtime"} <= set(specs)
    vllm = find_spec("vllm")
    pins = layer_requirements(vllm, vllm.layers[0])
    assert "vllm==0.26.0" in pins and "flashinfer-python==0.6.14" in pins and len(pins) == 70
    sglang = find_spec("sglang")
    assert [layer.name for layer in sglang.layers] == ["first", "site"]
    first = layer_requirements(sglang, sglang.layers[0])
    assert sorted(first) == ["tokenizers==0.22.2", "transformers==5.12.1"]
    assert "sglang==0.5.16" in layer_requirements(sglang, sglang.layers[1])
    assert find_spec("runtime").layers[0].resolve
    with pytest.raises(BundleError, match="choose one of"):
        find_spec("no-such-engine")


def test_read_freeze_normalizes_names(tmp_path):
    freeze = tmp_path / "f.txt"
    freeze.write_text("Foo_Bar==1.2\n# comment\n-e git+https://x#egg=y\nbaz @ file:///b.whl\n")
    assert read_freeze(freeze) == {"foo-bar": "1.2", "baz": ""}


def test_cli_verify_reports_a_damaged_part(built, tmp_path, capsys):
    import argparse

    manifest, folder, _ = built
    copy = _copy(folder, tmp_path)
    (copy / manifest.parts[0].name).write_bytes(b"junk")
    parser = add_bundle_arguments(argparse.ArgumentParser())
    assert bundle_command(parser.parse_args(["--verify", str(copy / "manifest.json")])) == 1
    assert manifest.parts[0].name in capsys.readouterr().err
    assert bundle_command(parser.parse_args(["--verify", str(folder / "manifest.json")])) == 0


def test_requirement_file_makes_an_adhoc_bundle(tmp_path):
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(wheels, "beta", "1.0", {"beta/__init__.py": b"VALUE = 1\n"})
    make_wheel(wheels, "gamma", "1.0", {"gamma/__init__.py": b"VALUE = 2\n"})
    req = tmp_path / "reqs.txt"
    req.write_text("beta==1.0\n")
    manifest = build_bundle(
        "my-engine-9.9",
        tmp_path / "out",
        requirements=[req],
        extra=["gamma==1.0"],
        target_freeze=None,
        wheel_dir=wheels,
        xz_level=0,
        isolated=True,
        index_args=["--no-index"],
    )
    assert manifest.name == "my-engine-9.9" and manifest.pythonpath == ["site"]
    assert manifest.packages() == {"beta": "1.0", "gamma": "1.0"}
    assert len(manifest.parts) == 1
    verify_parts(tmp_path / "out" / "my-engine-9.9")


def test_resolved_bundle_carries_unfitting_target_versions(tmp_path):
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(wheels, "app", "1.0", {"app/__init__.py": b""}, requires=["lib>=2", "util"])
    for version in ("1.5", "3.0"):
        make_wheel(wheels, "lib", version, {"lib/__init__.py": b""})
    make_wheel(wheels, "util", "1.0", {"util/__init__.py": b""})
    req, freeze = tmp_path / "r.txt", tmp_path / "freeze.txt"
    req.write_text("app==1.0\n")
    freeze.write_text("util==1.0\nlib==1.5\n")
    manifest = build_bundle(
        "resolved-1",
        tmp_path / "out",
        requirements=[req],
        resolve_deps=True,
        target_freeze=freeze,
        wheel_dir=wheels,
        xz_level=0,
        isolated=True,
        index_args=["--no-index", "--find-links", str(wheels)],
    )
    assert manifest.packages() == {"app": "1.0", "lib": "3.0"}
    assert any("lib==3.0" in note for note in manifest.notes)


def test_resplit_keeps_the_archive_and_install_still_works(built, tmp_path):
    from helpers.tools.bundle import resplit_bundle

    manifest, folder, _ = built
    copy = _copy(folder, tmp_path)
    again = resplit_bundle(copy / "manifest.json", 7000)
    assert again.archive == manifest.archive
    assert len(again.parts) > len(manifest.parts) and all(p.size <= 7000 for p in again.parts)
    assert sorted(x.name for x in copy.iterdir()) == sorted(
        ["manifest.json", "install.sh", *(p.name for p in again.parts)]
    )
    proc = subprocess.run(["sh", str(copy / "install.sh"), str(tmp_path / "d")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "d" / "site" / "alpha" / "noise.bin").read_bytes() == PAYLOAD["alpha"]["alpha/noise.bin"]
