"""The index client: PEP 691/503 parsing, PEP 658/714 metadata, retries, the conditional cache."""

from __future__ import annotations

import json

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.indexes import PT, PYPI, body
from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.client import ACCEPT_SIMPLE, IndexClient
from torchfit.index.pages import (
    parse_project_html,
    parse_project_json,
    parse_project_page,
    project_url,
)
from torchfit.index.wheelmeta import wheel_metadata
from torchfit.matrixcheck.wheels import parse_pins, parse_wheel


def client(**kw) -> IndexClient:  # type: ignore[no-untyped-def]
    kw.setdefault("backoff", 0)
    kw.setdefault("timeout", 5)
    return IndexClient(**kw)


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


def test_wheel_tags_and_glibc_floors() -> None:
    from torchfit.index.pages import IndexFile

    def w(name: str):  # type: ignore[no-untyped-def]
        return parse_wheel(IndexFile(name, f"https://h/whl/cpu/{name}"))

    legacy = w("torch-2.0.0-cp311-cp311-manylinux1_x86_64.whl")
    assert str(legacy.glibc) == "2.5"  # the tag's floor; the matrix knows the real one (2.17)
    multi = w("m-1.0-cp311-cp311-manylinux2014_aarch64.manylinux_2_17_aarch64.whl")
    assert multi.arch == "aarch64" and str(multi.glibc) == "2.17"
    plain = w("torch-2.0.1+cu118-cp38-cp38-linux_x86_64.whl")
    assert plain.glibc is None and plain.variant == "cu118" and plain.pythons == {(3, 8)}
    unlabeled = w("torch-2.8.0-cp311-cp311-manylinux_2_28_aarch64.whl")
    assert unlabeled.variant == "cpu"  # from its directory, /whl/cpu/
    anyw = w("torchaudio-2.11.1-py3-none-any.whl")
    assert anyw.covers((3, 14), "aarch64") and anyw.arch == "any"
    assert w("torch-2.8.0-cp313-cp313t-manylinux_2_28_x86_64.whl") is None  # free-threaded only
    assert w("torch-2.8.0.tar.gz") is None and w("garbage.whl") is None


def test_pins_follow_markers() -> None:
    meta = body("pypi.org/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata")
    assert parse_pins(meta) == {"cudnn": "9.10.2.21", "nccl": "2.27.3"}
    assert parse_pins(meta, "aarch64") == {}  # the 2.8.0 pins are marked platform_machine == "x86_64"
    assert parse_pins("Metadata-Version: 2.1\nName: x\n") == {}


def test_content_negotiation(rsps) -> None:
    rsps.add("GET", f"{PYPI}/torch/", body=body("pypi.org/torch.json"),
             content_type="application/vnd.pypi.simple.v1+json")
    page = client(use_cache=False).project_page(PYPI, "Torch")
    assert page is not None and page.format == "pep691" and page.project == "torch"
    assert rsps.calls[0].request.headers["Accept"] == ACCEPT_SIMPLE
    assert project_url(PYPI, "Torch_Vision") == f"{PYPI}/torch-vision/"


def test_404_is_no_page(rsps) -> None:
    rsps.add("GET", f"{PT}/cu999/torch/", status=404)
    assert client(use_cache=False).project_page(f"{PT}/cu999", "torch") is None


def test_retry_then_give_up_with_a_clear_message(rsps) -> None:
    slept: list[float] = []
    for _ in range(3):
        rsps.add("GET", f"{PT}/cpu/torch/", status=503)
    c = client(use_cache=False, retries=2, backoff=0.5, sleep=slept.append)
    with pytest.raises(IndexUnavailable) as info:
        c.project_page(f"{PT}/cpu", "torch")
    assert info.value.message == f"{PT}/cpu/torch/: HTTP 503 Service Unavailable (3 attempts)"
    assert slept == [0.5, 1.0]  # exponential backoff


def test_retry_after_is_honoured(rsps) -> None:
    slept: list[float] = []
    rsps.add("GET", f"{PT}/cpu/torch/", status=429, headers={"Retry-After": "7"})
    rsps.add("GET", f"{PT}/cpu/torch/", body=body("download.pytorch.org/cpu-torch.json"),
             content_type="application/vnd.pypi.simple.v1+json")
    assert client(use_cache=False, sleep=slept.append).project_page(f"{PT}/cpu", "torch")
    assert slept == [7.0]


def test_timeout_message(rsps) -> None:
    rsps.add("GET", f"{PT}/cpu/torch/", body=requests.exceptions.ConnectTimeout("x"))
    with pytest.raises(IndexUnavailable) as info:
        client(use_cache=False, retries=0).project_page(f"{PT}/cpu", "torch")
    assert "connection timed out after 5 s (1 attempt)" in info.value.message
    assert info.value.kind == "connect"


def test_conditional_cache(rsps, tmp_path) -> None:
    url = f"{PT}/cpu/torch/"
    page = body("download.pytorch.org/cpu-torch.json")
    ctype = "application/vnd.pypi.simple.v1+json"
    rsps.add("GET", url, body=page, content_type=ctype, headers={"ETag": '"v1"', "Last-Modified": "Sat, 29 Nov 2026 10:00:00 GMT"})
    rsps.add("GET", url, status=304)
    c = client(cache_dir=tmp_path / "c")
    first = c.project_page(f"{PT}/cpu", "torch")
    second = c.project_page(f"{PT}/cpu", "torch")
    assert first and second and second.from_cache and second.files == first.files
    sent = rsps.calls[1].request.headers
    assert sent["If-None-Match"] == '"v1"' and sent["If-Modified-Since"].startswith("Sat, 29 Nov")
    meta = json.loads(next((tmp_path / "c").glob("*.json")).read_text())
    assert meta["etag"] == '"v1"' and meta["url"] == url


def test_cache_never_stores_credentials(rsps, tmp_path) -> None:
    url = "https://u:t0psecret@mirror.example.com/simple/torch/"
    rsps.add("GET", url, body="<html></html>", content_type="text/html", headers={"ETag": "x"})
    client(cache_dir=tmp_path / "c").project_page("https://u:t0psecret@mirror.example.com/simple", "torch")
    for f in (tmp_path / "c").iterdir():
        assert b"t0psecret" not in f.read_bytes()


def test_metadata_hash_is_checked_and_pins_the_cache(rsps, tmp_path) -> None:
    from torchfit.index.pages import IndexFile

    meta = body("download.pytorch.org/torch-2.8.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl.metadata")
    import hashlib

    good = hashlib.sha256(meta.encode()).hexdigest()
    f = IndexFile("t.whl", "https://h/t.whl#sha256=00", metadata={"sha256": good})
    rsps.add("GET", "https://h/t.whl.metadata", body=meta)
    c = client(cache_dir=tmp_path / "c")
    assert c.core_metadata(f) == meta
    assert c.core_metadata(f) == meta  # from the cache, no second request: the hash pins it
    assert len(rsps.calls) == 1
    bad = IndexFile("u.whl", "https://h/u.whl", metadata={"sha256": "0" * 64})
    rsps.add("GET", "https://h/u.whl.metadata", body=meta)
    with pytest.raises(IndexMalformed, match="does not match the sha256"):
        c.core_metadata(bad)


def test_unadvertised_metadata_is_probed_once(rsps) -> None:
    from torchfit.index.pages import IndexFile

    rsps.add("GET", "https://h/t.whl.metadata", status=404)
    c = client(use_cache=False)
    assert c.core_metadata(IndexFile("t.whl", "https://h/t.whl")) is None
    assert c.core_metadata(IndexFile("t.whl", "https://h/t.whl"), probe=False) is None
    assert len(rsps.calls) == 1


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_html_parser_garbage_raises_only_malformed(text: str) -> None:
    try:
        files = parse_project_html(text, "https://h/simple/x/")
    except IndexMalformed:
        return
    for f in files:
        parse_wheel(f)


html_bits = st.lists(st.sampled_from([
    "<a href=", '"', "'", "x-1.0-py3-none-any.whl", "#sha256=", "ab", "http://[", "//h:99999/", "data-core-metadata=",
    "data-dist-info-metadata=", "true", "sha256", "=", ">", "</a>", "<base href=", "data-yanked", " ", "%2B", "&gt;",
    "<!--", "-->", "<script>", "\x00",
]), max_size=40).map("".join)


@settings(max_examples=200, deadline=None)
@given(html_bits)
def test_html_parser_anchor_soup_raises_only_malformed(text: str) -> None:
    try:
        files = parse_project_html(text, "https://h/simple/x/")
    except IndexMalformed:
        return
    for f in files:
        parse_wheel(f)
        f.metadata_url  # noqa: B018


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


def _zip_with_metadata(metadata: str, *, noise: int = 0) -> bytes:
    """A wheel-shaped zip; `noise` incompressible bytes after METADATA push it out of the last 64 KiB."""
    import io
    import os
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch-2.8.0.dist-info/METADATA", metadata)
        zf.writestr("torch/_lib.so", os.urandom(noise))
        zf.writestr("torch-2.8.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return buf.getvalue()


def _serve_ranges(rsps, url: str, blob: bytes, honour: bool = True) -> None:  # type: ignore[no-untyped-def]
    import re as _re

    def answer(request):  # type: ignore[no-untyped-def]
        spec = request.headers.get("Range", "")
        m = _re.match(r"bytes=(\d*)-(\d*)$", spec)
        if not honour or not m:
            return 200, {}, blob
        a, b = m.groups()
        start, end = (len(blob) - int(b), len(blob) - 1) if not a else (int(a), int(b) if b else len(blob) - 1)
        start = max(start, 0)
        return 206, {"Content-Range": f"bytes {start}-{end}/{len(blob)}"}, blob[start:end + 1]

    rsps.add_callback("GET", url, callback=answer)


@pytest.mark.parametrize("noise", [0, 300_000])
def test_metadata_by_range_requests(rsps, tmp_path, noise: int) -> None:
    from torchfit.index.pages import IndexFile

    meta = body("pypi.org/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata")
    url = "https://files.example/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    _serve_ranges(rsps, url, _zip_with_metadata(meta, noise=noise))
    f = IndexFile(url.rsplit("/", 1)[1], url + "#sha256=" + "c" * 64, hashes={"sha256": "c" * 64})
    c = client(cache_dir=tmp_path / "c")
    text = wheel_metadata(c, f)
    assert text == meta and parse_pins(text) == {"cudnn": "9.10.2.21", "nccl": "2.27.3"}
    calls = len(rsps.calls)
    assert calls == (1 if not noise else 3)  # the tail; then the local header and METADATA when outside it
    assert wheel_metadata(c, f) == meta
    assert len(rsps.calls) == calls  # cached under the wheel's sha256


def test_metadata_by_range_needs_range_support(rsps) -> None:
    from torchfit.index.pages import IndexFile

    url = "https://files.example/t-1.0-py3-none-any.whl"
    _serve_ranges(rsps, url, _zip_with_metadata("Name: t\n"), honour=False)
    assert wheel_metadata(client(use_cache=False), IndexFile("t-1.0-py3-none-any.whl", url)) is None


# --- attack round 3 (issue 21, class 2): the HTTP cache opens regular files only -------------


def test_attack3_a_fifo_in_the_http_cache_is_a_miss_never_a_hang(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real server on 127.0.0.1; the cached body and record of its page replaced by FIFOs:
    the next fetch asks the server again and answers, where it waited in open() forever."""
    import os
    import threading

    from tests.support.servers import http_server, reply

    page = b'<html><body><a href="torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl">t</a></body></html>'
    with http_server(lambda h: reply(h, 200, page, Content_Type="text/html", ETag='"v1"')) as srv:
        base = f"{srv.url}/simple"
        cache = tmp_path / "c"
        assert client(cache_dir=cache).project_page(base, "torch").files
        stored = sorted(cache.iterdir())
        assert {p.suffix for p in stored} == {".body", ".json"}
        for p in stored:
            p.unlink()
            os.mkfifo(p, 0o600)
        result: list[object] = []
        fetch = threading.Thread(target=lambda: result.append(client(cache_dir=cache).project_page(base, "torch")),
                                 daemon=True)
        fetch.start()
        fetch.join(timeout=30)
        assert result, "the fetch blocked on a FIFO in the HTTP cache"
        assert len(srv.seen) == 2 and result[0].files  # type: ignore[attr-defined]


def test_file_redirects_checked_hop_by_hop_over_real_tls(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """check_file_redirects (issue 25): a wheel URL of an https mirror that answers 302 to plain
    http is refused, naming the file and the hop; an https hop passes; --allow-insecure-index
    asks nothing; a host that does not answer is left to the installer."""
    from tests.support.tls import make_certs, redirecting_index
    from tests.support.wheels import make_wheel, serve_dir
    from torchfit.index.client import check_file_redirects

    certs = make_certs(tmp_path / "tls")
    wheel = make_wheel(tmp_path / "files", "purelib", "1.0")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certs["ca"])  # how torchfit is told to trust a mirror's CA
    pair = (certs["cert"], certs["key"])
    with serve_dir(tmp_path) as plain, serve_dir(tmp_path / "bad", redirecting_index(
            tmp_path / "bad", wheel, plain), tls=pair) as bad:
        with serve_dir(tmp_path, redirecting_index(tmp_path / "good", wheel, bad + "/ok"), tls=pair) as good:
            url = f"{bad}/files/{wheel.name}"
            with pytest.raises(IndexUnavailable) as err:
                check_file_redirects(client(use_cache=False), [url, f"{good}/files/{wheel.name}"])
            assert err.value.kind == "redirect" and err.value.url == url
            assert f"plain http ({plain}/files/{wheel.name})" in err.value.why
            # https -> https (the good mirror sends /files/X to bad's /ok/files/X: a 404, not a refusal)
            assert check_file_redirects(client(use_cache=False), [f"{good}/files/{wheel.name}"] * 2) == 1
            assert check_file_redirects(client(allow_insecure=True), [url]) == 0
            assert check_file_redirects(client(use_cache=False), ["https://127.0.0.1:9/x.whl", plain + "/f"]) == 1
