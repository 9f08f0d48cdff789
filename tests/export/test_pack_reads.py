"""`torchfit pack` reads every file a lock names bounded (issue 34): a local `path` or `file://`
is a regular file only, read from the lock's directory when relative (PEP 751) and never past
the lock's `size`; a download stops at that size; plain http:// is refused without
--allow-insecure-index, before any request (no credential goes out); a directory where a file
of the pack goes, or a full output filesystem, is one line naming that path and that filesystem.
Real files, FIFOs, HTTP servers on 127.0.0.1 and a real tmpfs (as root) throughout."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import bad_input, clean_env, run_clean
from tests.support.servers import RangeFiles, http_server

WHL = "alpha-1.0-py3-none-any.whl"


def _entry(data: bytes, *, url: str | None = None, path: str | None = None, size: int | None = None,
           name: str = "alpha", whl: str = WHL) -> str:
    """A [[packages]] entry: `name` 1.0 whose one wheel `whl` is at `url` or `path`, with the
    sha256 of `data` and `size` (default: len(data); -1: none)."""
    size = len(data) if size is None else size
    where = f'url = "{url}"' if url is not None else f'path = "{path}"'
    sized = f"size = {size}, " if size >= 0 else ""
    return (f'[[packages]]\nname = "{name}"\nversion = "1.0"\nwheels = [{{ name = "{whl}", {where}, {sized}'
            f'hashes = {{ sha256 = "{hashlib.sha256(data).hexdigest()}" }} }}]\n\n')


def _lock(*entries: str) -> str:
    return ('lock-version = "1.0"\ncreated-by = "torchfit"\nrequires-python = "==3.11.*"\n' + "".join(entries)
            + '[tool.torchfit]\nschema = 1\n[tool.torchfit.plan]\nok = true\npython = "3.11"\n'
              'torch = "2.13.0"\nvariant = "cpu"\n')


def _pack(lock: Path, out: Path, *more: str, timeout: float = 60, cwd: Path | None = None,
          **env: str) -> subprocess.CompletedProcess[str]:
    return run_clean("pack", "--no-torchfit", "--lock", str(lock), "-o", str(out), *more, timeout=timeout,
                     env=clean_env(XDG_CACHE_HOME=str(lock.parent / "cache"), **env),
                     **({"cwd": cwd} if cwd else {}))


def _bytes_under(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


# --- P2: a local path is a regular file, read up to the lock's size ---------------------------


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
def test_a_local_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """`/dev/zero` once filled the output filesystem in 0.2 s and a FIFO held pack forever: each
    is one line naming the package and the path, nothing written."""
    where = {"dev-zero": "/dev/zero", "fifo": str(tmp_path / "pipe.whl"), "directory": str(tmp_path / "d.whl")}[kind]
    if kind == "fifo":
        os.mkfifo(where)
    elif kind == "directory":
        os.mkdir(where)
    lock = tmp_path / "pylock.toml"
    lock.write_text(_lock(_entry(b"x" * 1000, path=where)))
    out = tmp_path / "pack"
    line = bad_input(_pack(lock, out, timeout=30))  # the FIFO: subprocess.TimeoutExpired before
    assert "alpha 1.0" in line and where in line and "not a regular file" in line, line
    assert _bytes_under(out) < 4096  # the marker only


def test_a_local_file_longer_than_the_lock_says_is_refused_unread(tmp_path: Path) -> None:
    """A sparse 8 GiB file where the lock says 1000 bytes: refused by its size before a byte is
    copied (it would fill the output filesystem)."""
    big = tmp_path / "big.whl"
    with open(big, "wb") as fh:
        fh.truncate(8 << 30)
    lock = tmp_path / "pylock.toml"
    lock.write_text(_lock(_entry(b"y" * 1000, path=str(big))))
    out = tmp_path / "pack"
    line = bad_input(_pack(lock, out))
    assert "alpha 1.0" in line and str(big) in line and "8589934592 bytes" in line and "1000" in line, line
    assert _bytes_under(out) < 4096


# --- P5: a relative path is the lock's directory's --------------------------------------------


def test_a_relative_path_is_read_from_the_locks_directory(tmp_path: Path) -> None:
    """PEP 751: a relative `path` is relative to the lock file, wherever pack runs from."""
    data = os.urandom(5000)
    site = tmp_path / "site"
    (site / "wheels").mkdir(parents=True)
    (site / "wheels" / WHL).write_bytes(data)
    lock = site / "pylock.toml"
    lock.write_text(_lock(_entry(data, path=f"wheels/{WHL}")))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = _pack(lock, tmp_path / "pack", cwd=elsewhere)
    assert res.returncode == 0, res.stderr  # internal error: FileNotFoundError before
    assert (tmp_path / "pack" / "wheels" / WHL).read_bytes() == data


def test_a_missing_local_file_is_one_line_naming_the_package_and_path(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(_lock(_entry(b"z", path="gone/alpha-1.0-py3-none-any.whl")))
    line = bad_input(_pack(lock, tmp_path / "pack"))
    assert "alpha 1.0" in line and str(tmp_path / "gone" / WHL) in line and "no such file" in line, line


# --- P3: a download stops at the lock's size ---------------------------------------------------


class Endless:
    """An `answer` that sends zeros in 64 KiB blocks until the client hangs up (or 256 MiB),
    with a Content-Length of that much when `declared`; `sent` counts what it wrote."""

    def __init__(self, declared: bool) -> None:
        self.declared, self.sent = declared, 0

    def __call__(self, request: http.server.BaseHTTPRequestHandler) -> None:
        request.send_response(200)
        if self.declared:
            request.send_header("Content-Length", str(256 << 20))
        request.end_headers()
        block = b"\0" * (1 << 16)
        try:
            while self.sent < (256 << 20):
                request.wfile.write(block)
                self.sent += len(block)
        except OSError:  # the client hung up
            pass


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "close-delimited"])
def test_a_download_longer_than_the_locks_size_stops_there(tmp_path: Path, declared: bool) -> None:
    """A body longer than the lock's `size` (declared or not): refused at that size; the .part
    holds no more than it, and the server is hung up on long before 256 MiB."""
    body = Endless(declared)
    with http_server(body) as server:
        lock = tmp_path / "pylock.toml"
        lock.write_text(_lock(_entry(b"w" * 100_000, url=f"{server.url}/{WHL}")))
        out = tmp_path / "pack"
        res = _pack(lock, out, "--allow-insecure-index")
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert "more than 100000 bytes" in res.stderr and "the lock" in res.stderr, res.stderr[-2000:]
    assert _bytes_under(out) <= 100_000 + 4096
    assert body.sent < (64 << 20), body.sent


# --- P6: plain http is refused before any request ----------------------------------------------


def test_plain_http_is_refused_before_a_credential_goes_out(tmp_path: Path) -> None:
    data = os.urandom(3000)
    with http_server(RangeFiles({WHL: data})) as server:
        url = server.url.replace("http://", "http://u:S3CRET@") + f"/{WHL}"
        lock = tmp_path / "pylock.toml"
        lock.write_text(_lock(_entry(data, url=url)))
        line = bad_input(_pack(lock, tmp_path / "pack"))
        assert "--allow-insecure-index" in line and "plain http://" in line and "S3CRET" not in line, line
        assert server.seen == []  # the server got Authorization: Basic dTpTM0NSRVQ= before
        # asked for: fetched, the user accepted plain http; the secret still never printed
        res = _pack(lock, tmp_path / "pack", "--allow-insecure-index")
        assert res.returncode == 0 and "S3CRET" not in res.stderr + res.stdout, res.stderr
        assert (tmp_path / "pack" / "wheels" / WHL).read_bytes() == data
        sent = [h.get("Authorization") for h in server.headers]
        assert sent == ["Basic " + base64.b64encode(b"u:S3CRET").decode()]


# --- P9: something else where a file of the pack goes -------------------------------------------


@pytest.mark.parametrize("where", [WHL, WHL + ".part"])
def test_a_directory_where_a_packs_file_goes_is_one_line(tmp_path: Path, where: str) -> None:
    data = os.urandom(2000)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / WHL).write_bytes(data)
    lock = tmp_path / "pylock.toml"
    lock.write_text(_lock(_entry(data, url=(tmp_path / "src" / WHL).as_uri())))
    out = tmp_path / "pack"
    assert _pack(lock, out).returncode == 0
    (out / "wheels" / WHL).unlink()
    (out / "wheels" / where).mkdir()
    (out / "wheels" / where / "mine.txt").write_text("the user's")
    line = bad_input(_pack(lock, out))  # internal error: IsADirectoryError before
    assert str(out / "wheels" / where) in line and "directory" in line, line
    assert (out / "wheels" / where / "mine.txt").read_text() == "the user's"


# --- P4: a full output filesystem is named, not TMPDIR ------------------------------------------


def test_a_full_output_filesystem_is_named_not_tmpdir(tmp_path: Path) -> None:
    """-o on a 1 MiB tmpfs, a 3 MB wheel, TMPDIR elsewhere with room: the line names the pack's
    filesystem and the file it wrote (before: TMPDIR and its fix)."""
    from tests.support.mounts import tmpfs

    data = os.urandom(3_000_000)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / WHL).write_bytes(data)
    lock = tmp_path / "pylock.toml"
    lock.write_text(_lock(_entry(data, url=(tmp_path / "src" / WHL).as_uri())))
    (tmp_path / "tmp").mkdir()
    with tmpfs(tmp_path / "small", "1m") as small:
        res = _pack(lock, small / "pack", TMPDIR=str(tmp_path / "tmp"))
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert "no space left on device" in res.stderr, res.stderr
        assert f"{small / 'pack' / 'wheels' / WHL}.part (on {small}, the pack's filesystem (-o)" in res.stderr, \
            res.stderr
        assert "TMPDIR" not in res.stderr, res.stderr
