"""`LocalIndexClient`: a `file://` tree read from disk as a server would serve it (issue 35, for
`matrix check` of a site's mirror), and the plain `IndexClient`, which never reads the disk."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.client import IndexClient, LocalIndexClient


def _tree(root: Path) -> Path:
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "index.html").write_text('<a href="../files/torch-1.0-py3-none-any.whl">torch-1.0-py3-none-any.whl</a>')
    (root / "files").mkdir()
    (root / "files" / "torch-1.0-py3-none-any.whl.metadata").write_text("Name: torch\nVersion: 1.0\n")
    return root


def test_a_tree_on_disk_is_read_as_a_server_answers(tmp_path: Path) -> None:
    root = _tree(tmp_path / "mirror")
    client = LocalIndexClient(use_cache=False)
    page = client.project_page(f"file://{root}", "torch")
    assert page is not None and [f.filename for f in page.files] == ["torch-1.0-py3-none-any.whl"]
    assert page.files[0].url == f"file://{root}/files/torch-1.0-py3-none-any.whl"
    assert client.core_metadata(page.files[0]) == "Name: torch\nVersion: 1.0\n"
    assert client.project_page(f"file://{root}", "numpy") is None  # no page: a 404, as a server's
    # a body that is not the sha256 the page advertises is refused
    meta = root / "files" / "torch-1.0-py3-none-any.whl.metadata"
    good = hashlib.sha256(meta.read_bytes()).hexdigest()
    assert client.get(f"file://{meta}", expect_sha256=good).body == meta.read_bytes()
    with pytest.raises(IndexMalformed, match="sha256"):
        client.get(f"file://{meta}", expect_sha256="0" * 64)


def test_what_is_not_a_regular_file_is_refused_never_waited_on(tmp_path: Path) -> None:
    root = _tree(tmp_path / "mirror")
    fifo = root / "files" / "fifo.whl.metadata"
    os.mkfifo(fifo)
    with pytest.raises(IndexUnavailable, match="cannot read"):
        LocalIndexClient(use_cache=False).get(f"file://{fifo}")
    with pytest.raises(IndexMalformed):  # past the limit: refused, not read whole
        LocalIndexClient(use_cache=False).get(f"file://{root}/torch/index.html", limit=10)


def test_the_plain_client_never_reads_the_disk(tmp_path: Path) -> None:
    """A page of an http index may link a file:// URL: only a client told its index is local reads one."""
    root = _tree(tmp_path / "mirror")
    with pytest.raises(IndexUnavailable):
        IndexClient(use_cache=False, retries=0).get(f"file://{root}/torch/index.html")
