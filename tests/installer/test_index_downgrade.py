"""Attack round 3 (issue 21, class 3): an https torch index that sends install to plain http.

uv 0.13.9 follows an https -> http redirect silently (measured: it read every project page
from the plain-http server), so torchfit reads the torch index itself first, each hop
checked, and refuses (exit 1) unless --allow-insecure-index. Real servers on 127.0.0.1,
TLS with a throwaway CA the torchfit process trusts (REQUESTS_CA_BUNDLE).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import CPU_ARGS, run_tf
from tests.support.servers import Answer, http_server, reply
from tests.support.tls import make_certs


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[str, list[str]]]]:
    with contextlib.ExitStack() as stack:
        def start(answer: Answer, tls: dict[str, str] | None = None) -> tuple[str, list[str]]:
            srv = stack.enter_context(http_server(answer, tls=(tls["cert"], tls["key"]) if tls else None))
            return srv.url, srv.seen

        yield start


def _install(tmp_path: Path, index: str, tls: dict[str, str], *extra: str) -> Any:
    trust = {"REQUESTS_CA_BUNDLE": tls["ca"], "CURL_CA_BUNDLE": tls["ca"], "SSL_CERT_FILE": tls["ca"]}
    return run_tf("install", *CPU_ARGS, "--torch-index-url", index, "--prefix", str(tmp_path / "work" / "env"),
                  *extra, state=tmp_path / "state", env=trust, timeout=300)


def test_attack3_install_refuses_an_https_index_that_redirects_to_http(
        tmp_path: Path, tls: dict[str, str], serve: Callable[..., tuple[str, list[str]]]) -> None:
    plain, asked = serve(lambda h: reply(h, 200, b"<html></html>", Content_Type="text/html"))
    secure, _ = serve(lambda h: reply(h, 302, Location=plain + h.path), tls)
    res = _install(tmp_path, secure + "/whl/cpu", tls)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "redirected from https to plain http" in res.stderr and "--allow-insecure-index" in res.stderr
    assert asked == []  # neither torchfit nor an installer asked the plain-http server
    assert not (tmp_path / "work" / "env").exists()


def test_attack3_install_refuses_an_https_index_listing_http_files(
        tmp_path: Path, tls: dict[str, str], serve: Callable[..., tuple[str, list[str]]]) -> None:
    plain, asked = serve(lambda h: reply(h, 404))
    page = f'<a href="{plain}/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl">t</a>'.encode()
    secure, _ = serve(lambda h: reply(h, 200, page, Content_Type="text/html"), tls)
    res = _install(tmp_path, secure + "/whl/cpu", tls)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "over plain http" in res.stderr
    assert asked == []
