"""`index.newer` over deepspeed's recorded PyPI page (tests/data/projects/pypi/deepspeed), served
as a PEP 691 index on 127.0.0.1 over real HTTP (issue 33): which release a wheels-only answer
passed over, and the page's `versions` (PEP 700) deciding whether its files are read at all."""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from tests.support.servers import http_server, reply
from torchfit.compat.tags import target_tags
from torchfit.index.client import IndexClient
from torchfit.index.newer import find_passed, maybe_newer
from torchfit.index.project import SourcePackages

PAGE = Path(__file__).resolve().parents[1] / "data" / "projects" / "pypi" / "deepspeed" / "index.json"
TAGS = target_tags("3.11", "x86_64", (2, 36))


@pytest.fixture()
def index() -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []

    def answer(h: http.server.BaseHTTPRequestHandler) -> None:
        asked.append(h.path)
        base = f"http://{h.headers['Host']}"
        if h.path == "/simple/deepspeed/":
            page = json.loads(PAGE.read_text())
            for f in page["files"]:  # files here, and the recorded METADATA as PEP 658 files
                f["url"] = f"{base}/files/{f['filename']}"
                if (PAGE.parent / (f["filename"] + ".metadata")).is_file():
                    f["core-metadata"] = True
            reply(h, 200, json.dumps(page).encode(), Content_Type="application/vnd.pypi.simple.v1+json")
        elif h.path.startswith("/files/") and (PAGE.parent / h.path.removeprefix("/files/")).is_file():
            reply(h, 200, (PAGE.parent / h.path.removeprefix("/files/")).read_bytes(), Content_Type="text/plain")
        else:
            reply(h, 404)

    with http_server(answer) as srv:
        yield f"{srv.url}/simple", asked


def test_the_recorded_page_passes_over_its_newest_release_for_the_2020_dev_wheel(
        index: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    url, asked = index
    reader = SourcePackages(IndexClient(), [url], [], "x86_64")
    got = find_passed(reader, {"deepspeed": Version("0.3.1.dev5")}, TAGS, "3.11", {})
    assert [(p.name, str(p.chosen), str(p.newer), p.unasked_pre, p.abi) for p in got] == [
        ("deepspeed", "0.3.1.dev5", "0.19.8", True, None)]  # its METADATA says torch (>=1.2): not ABI-bound
    assert "/files/deepspeed-0.3.1.dev5-py3-none-any.whl.metadata" in asked


def test_a_page_whose_versions_list_nothing_newer_is_not_read_for_its_files(
        index: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    url, asked = index
    reader = SourcePackages(IndexClient(), [url], [], "x86_64")
    assert not maybe_newer(reader, "deepspeed", Version("0.19.8"), None)
    assert maybe_newer(reader, "deepspeed", Version("0.18.0"), None)
    assert find_passed(reader, {"deepspeed": Version("0.19.8")}, TAGS, "3.11", {}) == []
    assert asked and set(asked) == {"/simple/deepspeed/"}
    assert "deepspeed" not in reader._files  # its files never parsed: `versions` said enough
    assert json.loads(PAGE.read_text())["versions"][-1]  # the recorded page has PEP 700's versions
