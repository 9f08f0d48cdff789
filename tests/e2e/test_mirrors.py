"""Mirrors through the real CLI: a hung one bounds install and export and says what they wait
for (#7 of issue 13); plain http:// is refused unless allowed, and no token is sent over it (#13)."""

from __future__ import annotations

import base64
import contextlib
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    CPU_ARGS,
    UV_ON_PATH,
    Tf,
    install_args,
)
from tests.installer.conftest import leftovers, needs_uv
from tests.support.servers import http_server, reply

pytestmark = pytest.mark.filterwarnings("ignore")


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 bound and never listened on: every connection to it is refused (no race
    with another process taking a port closed after use)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def hint_of(err: str) -> str:
    return next(ln.strip() for ln in err.splitlines() if ln.strip().startswith("hint:"))


def test_install_against_an_unreachable_torch_index_names_the_flag_and_the_mirrors_page(
        tf: Tf, tmp_path: Path) -> None:
    """Issue 35, item 4: install said "check the network or the index URL" where `resolve -r` names
    --torch-index-url and `torchfit docs mirrors`; one hint now, index/client.UNREACHABLE_HINT."""
    with refusing_port() as port:
        code, out, err = tf.run("install", *CPU_ARGS, "--torch-index-url", f"https://127.0.0.1:{port}/whl/cpu",
                                "--prefix", str(tmp_path / "env"))
    assert code == 1 and out == "", err
    assert "[index-unavailable]" in err, err
    hint = hint_of(err)
    assert "--torch-index-url" in hint and "`torchfit docs mirrors`" in hint, err
    assert not (tmp_path / "env").exists()


@pytest.mark.slow
@needs_uv
def test_resolve_says_it_waits_while_uv_retries_an_unreachable_torch_index(tf: Tf, tmp_path: Path) -> None:
    """Issue 35, item 4: `resolve -r` said nothing for 11 s while uv retried a source that does not
    answer (uv 0.13.10: three retries, silent). Off a terminal a line now says what it waits for
    after a few seconds; the refusal's hint is install's (test above)."""
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.13.0\nnumpy\n")
    with refusing_port() as port:
        code, out, err = tf.run("resolve", "-r", str(req), "--variant", "cpu", "--python", "3.11",
                                "--torch-index-url", f"https://127.0.0.1:{port}/whl/cpu", env=UV_ON_PATH)
    assert code == 1 and out == "", err
    lines = err.splitlines()
    waiting = [i for i, ln in enumerate(lines) if ln.startswith("torchfit: [resolve] still waiting for uv")]
    error = next(i for i, ln in enumerate(lines) if ln.startswith("torchfit: error:"))
    assert waiting and waiting[0] < error, err
    assert "retries" in lines[waiting[0]], err
    hint = hint_of(err)
    assert "--torch-index-url" in hint and "`torchfit docs mirrors`" in hint, err


@pytest.mark.slow
@needs_uv
def test_install_against_a_hung_mirror_says_what_it_waits_for_and_ends(
        tf: Tf, tmp_path: Path, hung_server: str) -> None:
    """Defect #7 of the 2026-11 attack (issue 13)."""
    start = time.monotonic()
    run = tf.start(*install_args(hung_server + "/simple", tmp_path / "env", "--allow-insecure-index"),
                   env={"PIP_DEFAULT_TIMEOUT": "180", "TORCHFIT_STALL_TIMEOUT": "14"})
    seen = run.read_until("still waiting for", timeout=40)
    assert hung_server in seen.splitlines()[-1] and " since " in seen.splitlines()[-1]
    code, _, err = run.wait(90)
    assert code == 1, err
    assert "no progress for 14 s" in err
    assert time.monotonic() - start < 90
    assert run.left() == [] and leftovers(tmp_path) == []


@pytest.mark.slow
@needs_uv
def test_export_against_a_hung_mirror_says_what_it_waits_for(tf: Tf, hung_server: str) -> None:
    """Defect #7 of the 2026-11 attack (issue 13)."""
    run = tf.start("export", "--format", "pylock", *CPU_ARGS, "--assume", "gpu=none",
                   "--torch-index-url", hung_server + "/whl/{variant}", "--allow-insecure-index", env=UV_ON_PATH)
    seen = run.read_until("still waiting for uv pip compile", timeout=40)
    assert hung_server in seen
    run.signal(signal.SIGTERM)  # #11 and #25 as well: 130, no uv left, no temp dir
    code, _, err = run.wait(30)
    assert code == 130, err
    assert run.left() == [] and run.temp_dirs() == []


def test_export_refuses_plain_http_unless_allowed(tf: Tf) -> None:
    """Defect #13 of the 2026-11 attack (issue 13)."""
    args = ["export", "--format", "requirements", *CPU_ARGS, "--assume", "gpu=none",
            "--torch-index-url", "http://mirror.example/whl/{variant}"]
    code, out, err = tf.run(*args)
    assert code == 2 and "--allow-insecure-index" in err and out == "", err
    code, out, err = tf.run(*args, "--allow-insecure-index")
    assert code == 0 and "--index-url http://mirror.example/whl/cpu" in out, err


def test_matrix_check_sends_no_token_over_plain_http(tf: Tf) -> None:
    """Defect #13 of the 2026-11 attack (issue 13)."""
    with http_server(lambda h: reply(h, 404)) as srv:
        code, _, err = tf.run("matrix", "check", "--variant", "cpu", "--torch", "2.13.0", "--no-cache",
                              "--index-url", srv.url.replace("http://", "http://u:TOKEN@") + "/whl")
    assert code == 2 and "--allow-insecure-index" in err, err
    assert "TOKEN" not in err and srv.seen == []
    sent = "".join(h.get("Authorization") or "" for h in srv.headers)
    assert base64.b64encode(b"u:TOKEN").decode() not in sent
