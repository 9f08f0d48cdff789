"""The overall deadline of an index request, against real servers on 127.0.0.1 that hang:
one accepts and never answers, one sends headers and then a byte at a time forever. The
per-attempt timeout alone would let both run for minutes (retries; a read that never
times out because a byte keeps arriving)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.cli import run_cli
from tests.support.servers import serve
from torchfit.errors import IndexUnavailable
from torchfit.index.client import DEADLINE_ENV, IndexClient, default_deadline
from torchfit.progress import Progress


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts, reads the request, never answers."""
    def handler(conn: socket.socket, stop: threading.Event) -> None:
        stop.wait()
    with serve(handler) as url:
        yield url


@pytest.fixture
def trickle_server() -> Iterator[str]:
    """Answers 200 with a body that arrives one byte every 0.2 s, forever."""
    def handler(conn: socket.socket, stop: threading.Event) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10000000\r\n\r\n")
            while not stop.wait(0.2):
                conn.sendall(b"<")
        except OSError:
            pass
    with serve(handler) as url:
        yield url


class Lines(Progress):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str) -> None:
        self.lines.append(text)


def test_a_silent_index_fails_at_the_deadline_not_after_every_retry(silent_server: str) -> None:
    # 4 attempts of 2 s each would take 8+ s; the deadline stops it at 3 s.
    client = IndexClient(timeout=2, retries=3, backoff=0.1, use_cache=False, deadline=3)
    start = time.monotonic()
    with pytest.raises(IndexUnavailable, match=r"within 3 s \(the overall deadline") as err:
        client.project_page(silent_server + "/simple", "torch")
    took = time.monotonic() - start
    assert 2.9 <= took < 5, took
    assert err.value.kind == "timeout"


def test_a_trickling_body_fails_at_the_deadline(trickle_server: str) -> None:
    # Every read gets a byte within the 1 s per-attempt timeout: only the deadline ends it.
    client = IndexClient(timeout=1, retries=0, use_cache=False, deadline=2)
    start = time.monotonic()
    with pytest.raises(IndexUnavailable, match="overall deadline"):
        client.project_page(trickle_server + "/simple", "torch")
    assert time.monotonic() - start < 4


def test_a_long_wait_is_visible_naming_the_url_and_since_when(silent_server: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torchfit.index.client.NOTICE_EVERY_S", 0.5)
    lines = Lines()
    client = IndexClient(timeout=30, retries=0, use_cache=False, deadline=1.8, progress=lines)
    with pytest.raises(IndexUnavailable):
        client.project_page(silent_server + "/simple", "torch")
    waits = [x for x in lines.lines if x.startswith("waiting for ")]
    assert waits, lines.lines
    assert "/simple/torch/" in waits[0] and " since " in waits[0] and "gives up after 1.8 s" in waits[0]


def test_the_deadline_default_and_its_environment_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    assert default_deadline(30) == 300 and default_deadline(60) == 600
    for bad in ("nan", "inf", "-1", "0", "abc"):
        monkeypatch.setenv(DEADLINE_ENV, bad)
        assert default_deadline(30) == 300
    monkeypatch.setenv(DEADLINE_ENV, "2.5")
    assert default_deadline(30) == 2.5 and IndexClient(use_cache=False).deadline == 2.5


def test_matrix_check_against_a_silent_mirror_ends_at_the_deadline(silent_server: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The real command, as a process: exit 1 with the deadline named, well before the retries' 40 s."""
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "src"), XDG_CACHE_HOME=str(tmp_path),
               **{DEADLINE_ENV: "2"})
    start = time.monotonic()
    res = run_cli("matrix", "check", "--torch", "2.13.0", "--variant", "cpu",
                  "--index-url", silent_server + "/whl/{variant}", "--allow-insecure-index", "--timeout", "10",
                  base_env=env, timeout=120)
    took = time.monotonic() - start
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert "overall deadline" in res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert took < 30, took
