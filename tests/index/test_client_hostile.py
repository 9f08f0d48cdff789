"""Attack round 3 (issue 21, class 3): hostile servers, against real servers on 127.0.0.1.

A gzip-bombed page, a server that ignores Range and sends a huge body, redirects from
https to plain http, redirect loops. Memory is measured in a child process (its peak
resident set, VmHWM of its own image: `ru_maxrss` keeps the forking pytest's, 1.4 GB late
in the slow tier), so the rest of the test run does not blur it.
"""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.servers import Answer, HttpServer, http_server, reply
from tests.support.tls import make_certs
from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.client import IndexClient

ROOT = Path(__file__).resolve().parents[2]
PAGE = b'<html><body><a href="torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl">t</a></body></html>'


@pytest.fixture
def servers() -> Iterator[Callable[..., HttpServer]]:
    with contextlib.ExitStack() as stack:
        def make(handle: Answer, tls: tuple[str, str] | None = None) -> HttpServer:
            return stack.enter_context(http_server(handle, tls=tls, http11=True))

        yield make


def _in_child(code: str) -> dict[str, Any]:
    """Run `code` (it sets `result`) in a fresh interpreter; its result and peak RSS (MiB)."""
    wrapper = ("import json\n"
               "def _hwm_kib():  # this process image's own peak RSS (VmHWM); ru_maxrss keeps the forking parent's\n"
               "    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
               "result = None\n" + code
               + "\nprint(json.dumps({'result': result, "
                 "'peak_mib': _hwm_kib() / 1024}))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=240, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


# --- bounded memory -------------------------------------------------------------------------


@pytest.mark.slow
def test_attack3_a_gzip_bombed_index_page_stops_at_the_body_limit(servers: Callable[..., HttpServer]) -> None:
    """3 GiB of zeros as ~3 MB of concatenated gzip members (one stream to urllib3): the
    client stops at MAX_BODY_BYTES, with the URL and the reason, in bounded memory."""
    member = gzip.compress(b"\0" * (16 << 20), compresslevel=9)
    bomb = member * 192
    srv = servers(lambda h: reply(h, 200, bomb, Content_Type="text/html", Content_Encoding="gzip"))
    got = _in_child(
        "from torchfit.index.client import IndexClient\n"
        "from torchfit.errors import TorchfitError\n"
        "try:\n"
        f"    IndexClient(use_cache=False, retries=0).project_page({srv.url + '/simple'!r}, 'torch')\n"
        "    result = 'read it all'\n"
        "except TorchfitError as exc:\n"
        "    result = exc.message\n")
    assert "/simple/torch/" in got["result"] and "decompressed" in got["result"], got
    assert got["peak_mib"] < 400, got


@pytest.mark.slow
def test_attack3_a_server_that_ignores_range_on_a_huge_body_costs_no_memory(
        servers: Callable[..., HttpServer], tmp_path: Path) -> None:
    """A 'wheel' URL answered 200 (not 206) with 512 MiB: spooled to disk a block at a time
    (it was kept in memory twice: MemoryError on a big wheel)."""
    size = 512 << 20

    def whole(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(size))
        h.end_headers()
        block = b"\0" * (1 << 20)
        try:
            for _ in range(size >> 20):
                h.wfile.write(block)
        except OSError:
            pass

    srv = servers(whole)
    got = _in_child(
        "import tempfile\n"
        f"tempfile.tempdir = {str(tmp_path)!r}\n"
        "from torchfit.index.client import IndexClient\n"
        "from torchfit.index.wheelmeta import HttpRangeSource\n"
        "from torchfit.errors import TorchfitError\n"
        f"src = HttpRangeSource(IndexClient(use_cache=False, retries=0), {srv.url + '/t.whl'!r})\n"
        "try:\n"
        "    src.open()\n"
        "    result = [src.whole_file, src.size]\n"
        "except TorchfitError as exc:\n"
        "    result = exc.message\n")
    assert got["result"] == [True, size], got
    assert got["peak_mib"] < 300, got


def test_attack3_a_body_over_the_limit_is_refused_by_its_content_length(servers: Callable[..., HttpServer]) -> None:
    srv = servers(lambda h: reply(h, 200, b"x" * 1000, Content_Type="text/html"))
    client = IndexClient(use_cache=False, retries=0)
    resp = client._send(srv.url + "/simple/torch/", {}, stream=True)
    with pytest.raises(IndexMalformed, match="1000 bytes"):
        client.body(resp, srv.url + "/simple/torch/", limit=999)


# --- redirects ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def trust(certs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The test CA as the CA bundle (requests reads these over a session's `verify`)."""
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.setenv(var, certs["ca"])
    return certs


def _tls_client(certs: dict[str, str], **kw: Any) -> IndexClient:
    session = requests.Session()
    session.verify = certs["ca"]
    return IndexClient(use_cache=False, retries=0, session=session, **kw)


def test_attack3_https_redirected_to_plain_http_is_refused(servers: Callable[..., HttpServer],
                                                           trust: dict[str, str]) -> None:
    certs = trust
    plain = servers(lambda h: reply(h, 200, PAGE, Content_Type="text/html"))
    secure = servers(lambda h: reply(h, 302, Location=plain.url + h.path), tls=(certs["cert"], certs["key"]))
    with pytest.raises(IndexUnavailable, match="redirected from https to plain http") as info:
        _tls_client(certs).project_page(secure.url + "/simple", "torch")
    assert secure.url in info.value.message and "--allow-insecure-index" in (info.value.hint or "")
    assert plain.seen == []  # never asked
    # With --allow-insecure-index the hop is followed.
    page = _tls_client(certs, allow_insecure=True).project_page(secure.url + "/simple", "torch")
    assert page is not None and page.files and plain.seen == ["/simple/torch/"]


def test_redirect_credentials_stay_with_their_own_host(servers: Callable[..., HttpServer]) -> None:
    auths: list[str | None] = []

    def other(h: http.server.BaseHTTPRequestHandler) -> None:
        auths.append(h.headers.get("Authorization"))
        reply(h, 200, PAGE, Content_Type="text/html")

    target = servers(other)
    target_url = target.url.replace("127.0.0.1", "localhost")  # another host name, same machine
    first: list[str | None] = []

    def redirect(h: http.server.BaseHTTPRequestHandler) -> None:
        first.append(h.headers.get("Authorization"))
        reply(h, 301, Location=target_url + h.path)

    start = servers(redirect)
    # plain http: credentials go out at all only with --allow-insecure-index (the next test)
    page = IndexClient(use_cache=False, retries=0, allow_insecure=True).project_page(
        start.url.replace("://", "://user:s3cret@") + "/simple", "torch")
    assert page is not None and page.files
    assert first and first[0] and first[0].startswith("Basic ")  # its own host got them
    assert auths == [None]


def test_no_credential_goes_over_plain_http_without_allow_insecure(servers: Callable[..., HttpServer],
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the URL's user:password nor ~/.netrc's entry for the host travels in clear unless
    the client was told --allow-insecure-index (requests adds both by itself when no auth is
    given: `pack` sent `Authorization: Basic` over http://, issue 34)."""
    import base64

    srv = servers(lambda h: reply(h, 200, b"wheel bytes"))
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login n password NETRC\n")
    (tmp_path / ".netrc").chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))  # requests reads ~/.netrc (the user's file, not torchfit's code)
    monkeypatch.delenv("NETRC", raising=False)
    url = srv.url.replace("http://", "http://u:S3CRET@") + "/x.whl"
    for allowed, first in ((False, url), (False, srv.url + "/y.whl"), (True, url)):
        with open(tmp_path / "got", "wb") as fh:
            IndexClient(use_cache=False, retries=0, allow_insecure=allowed).download(first, fh)
    sent = [h.get("Authorization") for h in srv.headers]
    assert sent == [None, None, "Basic " + base64.b64encode(b"u:S3CRET").decode()], sent


@pytest.mark.parametrize("shape", ["self", "pair", "chain"])
def test_attack3_redirect_loops_and_chains_fail_with_the_url(servers: Callable[..., HttpServer], shape: str) -> None:
    box: dict[str, str] = {}

    def loop(h: http.server.BaseHTTPRequestHandler) -> None:
        n = int(h.path.rsplit("/", 1)[-1] or 0) if h.path.rsplit("/", 1)[-1].isdigit() else 0
        nxt = {"self": h.path, "pair": "/a" if h.path != "/a" else "/b", "chain": f"/hop/{n + 1}"}[shape]
        reply(h, 302, Location=box["url"] + nxt)

    srv = servers(loop)
    box["url"] = srv.url
    with pytest.raises(IndexUnavailable) as info:
        IndexClient(use_cache=False, retries=0).project_page(srv.url + "/simple", "torch")
    assert "/simple/torch/" in info.value.message
    assert ("redirect loop" in info.value.message) if shape != "chain" else ("more than 10 redirects" in info.value.message)
    assert len(srv.seen) <= 11


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1:70/"])
def test_attack3_a_redirect_to_another_scheme_is_refused(servers: Callable[..., HttpServer], target: str) -> None:
    srv = servers(lambda h: reply(h, 302, Location=target))
    with pytest.raises(IndexUnavailable, match="not an http"):
        IndexClient(use_cache=False, retries=0).project_page(srv.url + "/simple", "torch")
