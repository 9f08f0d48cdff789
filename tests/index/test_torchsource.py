"""index/torchsource.py: a torch source whose page links its files on another host (a mirrored
PyTorch page that kept upstream's absolute URLs) is said, one warning line naming the host, by
resolve and install (issue 26, item 1). Real `torchfit resolve` subprocesses, the page as a
file:// tree and over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_clean
from tests.support.wheels import serve_dir

WHEEL = "torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
RESOLVE = ("resolve", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--assume", "gpu=none", "--json")


def _tree(root: Path, href: str) -> Path:
    page = root / "simple" / "torch"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="{href}#sha256={"a" * 64}">{WHEEL.replace("%2B", "+")}</a>\n')
    return root / "simple"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with serve_dir(tmp_path) as url:
        yield url, tmp_path


def _warnings(res: object) -> list[str]:
    out = json.loads(res.stdout)  # type: ignore[attr-defined]
    assert out["ok"] is True, out
    return [w for w in out["warnings"] if "links its files on" in w]


def test_a_file_tree_linking_upstream_is_said(tmp_path: Path) -> None:
    simple = _tree(tmp_path, f"https://download.pytorch.org/whl/cpu/{WHEEL}")
    res = run_clean(*RESOLVE, "--torch-index-url", simple.as_uri())
    (line,) = _warnings(res)
    assert "download.pytorch.org" in line and simple.as_uri() in line


def test_an_http_mirror_linking_upstream_is_said_and_its_own_links_are_not(served: tuple[str, Path]) -> None:
    base, root = served
    _tree(root / "off", f"https://download.pytorch.org/whl/cpu/{WHEEL}")
    _tree(root / "own", f"/own/files/{WHEEL}")
    off = run_clean(*RESOLVE, "--torch-index-url", f"{base}/off/simple", "--allow-insecure-index",
                    env=None)
    (line,) = _warnings(off)
    assert "on download.pytorch.org" in line
    own = run_clean(*RESOLVE, "--torch-index-url", f"{base}/own/simple", "--allow-insecure-index")
    assert _warnings(own) == []
