"""`torchfit docs [NAME]` (cli/commands/docs.py): --help sends readers to pages an installed
copy has, and the wheel ships them (issue 28, item 4)."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.cli import bad_input, run_cli


def test_docs_lists_and_prints_the_pages() -> None:
    listing = run_cli("docs")
    assert listing.returncode == 0, listing.stderr
    names = [line.split()[0] for line in listing.stdout.splitlines()]
    assert {"install", "doctor", "cluster", "mirrors", "projects", "troubleshooting"} <= set(names)
    page = run_cli("docs", "install")
    assert page.returncode == 0 and page.stdout == (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    assert run_cli("docs", "docs/doctor.md").stdout.startswith("# `torchfit doctor`")
    line = bad_input(run_cli("docs", "nope"))
    assert "no page 'nope'" in line and "install" in line


def test_help_names_no_docs_path_and_every_page_it_names_exists() -> None:
    """docs/cli.md is every --help text (scripts/gen_cli_docs.py): no docs/*.md path in it, and each
    `torchfit docs NAME` it names is a page."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert not re.findall(r"docs/[\w-]+\.md", text)
    named = set(re.findall(r"torchfit docs ([\w-]+)", text))
    assert named >= {"install", "doctor", "cluster", "mirrors", "projects"}, named
    assert {p.stem for p in (ROOT / "docs").glob("*.md")} >= named


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None and not (ROOT / ".venv" / "bin" / "uv").exists(), reason="no uv")
def test_the_wheel_ships_the_docs_and_schemas(tmp_path: Path) -> None:
    uv = shutil.which("uv") or str(ROOT / ".venv" / "bin" / "uv")
    proc = subprocess.run([uv, "build", "--wheel", "--no-config", "-o", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("torchfit-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"torchfit/docs/install.md", "torchfit/docs/doctor.md", "torchfit/docs/schemas/doctor.schema.json"} <= names
