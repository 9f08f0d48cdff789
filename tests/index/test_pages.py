"""index/pages.py: PEP 503 HTML and PEP 691 JSON project pages as download.pytorch.org and PyPI serve them,
the PEP 658/714 metadata attributes, and hypothesis garbage raising only IndexMalformed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.indexes import PT, PYPI, body
from torchfit.errors import IndexMalformed
from torchfit.index.pages import (
    parse_project_html,
    parse_project_json,
    parse_project_page,
)
from torchfit.matrixcheck.wheels import parse_wheel


def test_pep503_page_as_download_pytorch_org_writes_it() -> None:
    files = parse_project_html(body("download.pytorch.org/cu128-torch.html"), f"{PT}/cu128/torch/")
    f = next(x for x in files if x.filename == "torch-2.8.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert f.url.startswith(f"{PT}/cu128/torch-2.8.0%2Bcu128-cp311")  # absolute href, %2B kept
    assert set(f.hashes) == {"sha256"} and len(f.hashes["sha256"]) == 64
    assert f.metadata and "sha256" in f.metadata  # data-core-metadata (PEP 714)
    assert f.metadata_url == f"{PT}/cu128/torch-2.8.0%2Bcu128-cp311-cp311-manylinux_2_28_x86_64.whl.metadata"
    w = parse_wheel(f)
    assert w is not None and w.variant == "cu128" and w.arch == "x86_64" and str(w.glibc) == "2.28"
    assert w.pythons == {(3, 11)}
    root = next(x for x in files if "macosx" in x.filename)
    assert parse_wheel(root) is None  # another OS


def test_pep503_attributes() -> None:
    page = (
        '<html><body>'
        '<a href="a-1.0-py3-none-any.whl#sha256=AB" data-requires-python="&gt;=3.9" '
        'data-dist-info-metadata="sha256=11" data-core-metadata="sha256=22">a-1.0-py3-none-any.whl</a>'
        '<a href="a-1.1-py3-none-any.whl" data-dist-info-metadata="true" data-yanked="">x</a>'
        '<a href="a-1.2.tar.gz">a-1.2.tar.gz</a><a>no href</a>'
        '</body></html>'
    )
    f1, f2, f3 = parse_project_html(page, "https://h/simple/a/")
    assert f1.requires_python == ">=3.9" and f1.hashes == {"sha256": "AB"}
    assert f1.metadata == {"sha256": "22"}  # data-core-metadata wins (PEP 714)
    assert f2.metadata == {} and f2.yanked is True
    assert f3.metadata is None and f3.url == "https://h/simple/a/a-1.2.tar.gz"


def test_pep691_page_from_pypi() -> None:
    files = parse_project_json(body("pypi.org/torch.json"), f"{PYPI}/torch/")
    assert len(files) == 24 and all(f.url.startswith("https://files.pythonhosted.org/") for f in files)
    assert all(f.metadata is None for f in files)  # the recorded answer advertised none
    linux = [w for w in (parse_wheel(f) for f in files) if w and w.arch == "x86_64"]
    assert {p for w in linux for p in w.pythons} == {(3, 9), (3, 10), (3, 11), (3, 12), (3, 13)}  # no 3.13t


@pytest.mark.parametrize("key", ["core-metadata", "dist-info-metadata", "data-dist-info-metadata"])
def test_pep691_metadata_keys(key: str) -> None:
    doc = {"meta": {"api-version": "1.1"}, "name": "a",
           "files": [{"filename": "a-1.0-py3-none-any.whl", "url": "../../f/a.whl", "hashes": {},
                      key: {"sha256": "ff"}}]}
    (f,) = parse_project_json(json.dumps(doc), "https://h/simple/a/")
    assert f.metadata == {"sha256": "ff"} and f.url == "https://h/f/a.whl"


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_html_parser_garbage_raises_only_malformed(text: str) -> None:
    _parses_or_refuses(text)


def _parses_or_refuses(text: str) -> None:
    """A page is parsed, every file of it readable, or IndexMalformed: nothing else escapes."""
    try:
        files = parse_project_html(text, "https://h/simple/x/")
    except IndexMalformed:
        return
    for f in files:
        parse_wheel(f)
        f.metadata_url  # noqa: B018


html_bits = st.lists(st.sampled_from([
    "<a href=", '"', "'", "x-1.0-py3-none-any.whl", "#sha256=", "ab", "http://[", "//h:99999/", "data-core-metadata=",
    "data-dist-info-metadata=", "true", "sha256", "=", ">", "</a>", "<base href=", "data-yanked", " ", "%2B", "&gt;",
    "<!--", "-->", "<script>", "\x00",
]), max_size=40).map("".join)


@settings(max_examples=200, deadline=None)
@given(html_bits)
def test_html_parser_anchor_soup_raises_only_malformed(text: str) -> None:
    _parses_or_refuses(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.fixed_dictionaries({"meta": st.just({"api-version": "1.0"}),
                              "files": st.lists(st.dictionaries(
                                  st.sampled_from(["filename", "url", "hashes", "core-metadata", "yanked",
                                                   "requires-python", "dist-info-metadata"]),
                                  json_values, max_size=7), max_size=3)})
       | json_values)
def test_json_parser_garbage_raises_only_malformed(doc: object) -> None:
    try:
        parse_project_page(json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json", "https://h/x/")
    except IndexMalformed:
        pass
