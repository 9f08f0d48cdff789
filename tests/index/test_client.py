"""The index client: fetching pages (content negotiation, 404), retries, the conditional cache, PEP 658
metadata with its hash checked, file redirects checked hop by hop."""

from __future__ import annotations

import json

import pytest
import requests

from tests.support.indexes import PT, PYPI, body
from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.client import ACCEPT_SIMPLE, IndexClient
from torchfit.index.pages import (
    project_url,
)


def client(**kw) -> IndexClient:  # type: ignore[no-untyped-def]
    kw.setdefault("backoff", 0)
    kw.setdefault("timeout", 5)
    return IndexClient(**kw)


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
            assert check_file_redirects(client(use_cache=False), ["https://127.0.0.1:9/x.whl", plain + "/f"]) == 0


def test_file_redirects_ask_a_host_that_does_not_answer_once_not_per_file() -> None:
    """Issue 34, T1: `install --lock` of a lock of 4,000 files on a host that did not answer asked
    each file in turn (retries and all) and ran past 120 s; a host that does not answer one probe
    is not asked again (uv reports it). A real server on 127.0.0.1 that accepts and never answers."""
    import time

    from tests.support.servers import serve
    from torchfit.index.client import REDIRECT_CHECK_WORKERS, check_file_redirects

    with serve() as hung:
        https = hung.replace("http://", "https://")
        c = client(use_cache=False, timeout=0.5, retries=1)
        start = time.monotonic()
        assert check_file_redirects(c, [f"{https}/p{i}-1-py3-none-any.whl" for i in range(400)]) == 0
        took = time.monotonic() - start
    # each of the first probes at once waits out its attempts; none after them (before: 400 x 2 attempts)
    assert c.requests_made <= REDIRECT_CHECK_WORKERS * 2, c.requests_made
    assert took < 10, took


def test_a_page_fresh_in_the_cache_is_read_without_importing_requests(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """issue 37: requests (urllib3, charset_normalizer, idna: ~100 ms of CPU to import) is loaded at
    the first request that goes out; a planning run whose pages are all fresh in the cache
    (Cache-Control max-age, PyPI's 600 s) never loads it. Two real processes, one real server."""
    import subprocess
    import sys

    from tests.support.servers import http_server, reply

    page = b'<html><body><a href="x-1.0-py3-none-any.whl">x-1.0-py3-none-any.whl</a></body></html>'
    with http_server(lambda req: reply(req, 200, page, Content_Type="text/html", ETag='"1"',
                                       Cache_Control="max-age=600")) as server:
        code = (
            "import sys\n"
            "from torchfit.index.client import ACCEPT_SIMPLE, IndexClient\n"
            f"client = IndexClient(cache_dir={str(tmp_path / 'http')!r}, honor_max_age=True, allow_insecure=True)\n"
            f"got = client.get({server.url + '/simple/x/'!r}, ACCEPT_SIMPLE)\n"
            "print(len(got.body), 'requests' in sys.modules)\n"
        )
        runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
                for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert [r.stdout.split() for r in runs] == [[str(len(page)), "True"], [str(len(page)), "False"]]
    assert server.seen == ["/simple/x/"]  # the second run asked nothing


def test_a_response_closed_unread_takes_its_deadline_timer_along() -> None:
    """The redirect check closes each response unread: its deadline timer (a thread) was left
    running to the deadline, and it could take the signals the main thread held back (the swap's
    SIGTERM, tests/e2e/test_signals.py). A real server on 127.0.0.1; the timer ends with close()."""
    from tests.support.servers import http_server, reply

    with http_server(lambda req: reply(req, 200, b"x" * 100)) as server:
        c = client(use_cache=False, timeout=30, retries=0)
        resp = c._send(server.url + "/f", {"Accept": "*/*"}, stream=True)
        _, timer = resp._torchfit_deadline
        assert timer.is_alive()
        resp.close()
        timer.join(5)
        assert not timer.is_alive()
