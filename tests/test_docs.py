"""The docs: they build with ``mkdocs build --strict`` (a broken link, a missing anchor or a page left out of
the nav fails), the generated reference pages are not stale, the README is short and its links resolve, and
every measurement page is linked from the docs' index of them and from ``reports/index.html``."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

from helpers.core.paths import MEASUREMENTS_DIR, REPO_ROOT, REPORTS_DIR
from helpers.report.index import measurement_pages, measurements_html

LINK = re.compile(r"\]\(([^)\s]+)\)")
HREF = re.compile(r"href='([^']+)'")


def test_the_docs_build_with_no_broken_link(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    built = {p.parent.name for p in (tmp_path / "site" / "measurements").glob("*/index.html")}
    assert built == {p.stem for p in MEASUREMENTS_DIR.glob("*.md") if p.name != "index.md"}


def test_a_broken_link_fails_the_build(tmp_path):
    """The strictness the build relies on: a copy of the docs with one link to a missing page is refused."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(REPO_ROOT / "docs"), str(docs)], check=True)
    (docs / "index.md").write_text((docs / "index.md").read_text() + "\n[gone](guides/no-such-page.md)\n")
    cfg = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())
    cfg["docs_dir"] = str(docs)
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(cfg))
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(tmp_path / "mkdocs.yml"),
            "-d",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode != 0 and "guides/no-such-page.md" in res.stderr


def test_the_generated_reference_pages_are_not_stale():
    res = subprocess.run(
        [sys.executable, "scripts/docs_reference.py", "--check"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr


def _relative_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(path.read_text(encoding="utf-8")) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_short_and_its_links_and_those_beside_it_resolve():
    readme = REPO_ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 250
    for doc in ("README.md", "CHANGELOG.md", "ARCHITECTURE.md"):
        for target in _relative_links(REPO_ROOT / doc):
            assert (REPO_ROOT / target.split("#")[0]).exists(), f"{doc}: {target} does not exist"


def test_every_measurement_page_is_linked_from_the_docs_index_and_from_reports_index():
    pages = {p.name for _t, p in measurement_pages()}
    assert "2026-12-03-h200-chat-70b-fp8.md" in pages and "index.md" not in pages
    assert pages <= set(_relative_links(MEASUREMENTS_DIR / "index.md")), "a page the measurements index misses"
    committed = HREF.findall((REPORTS_DIR / "index.html").read_text(encoding="utf-8"))
    linked = [h for h in committed if h.startswith("../docs/measurements/")]
    assert {Path(h).name for h in linked} == pages, "reports/index.html is stale: write_index(REPORTS_DIR)"
    assert all((REPORTS_DIR / h).is_file() for h in linked)


def test_the_links_follow_the_reports_folder(tmp_path):
    elsewhere = tmp_path / "runs"
    elsewhere.mkdir()
    for href in HREF.findall(measurements_html(elsewhere)):
        assert (elsewhere / href).resolve().is_file(), href
    pages = measurement_pages()
    newest = max(p.name[:10] for _t, p in pages if p.name[:4].isdigit())
    titles = [t for t, _p in pages]
    assert titles[0].startswith(newest) and titles[-1] == "Predicted vs measured SLA capacity"  # newest first
