"""lock.artifacts: the files a lock names, read bounded. Real files, a real FIFO and a real
character device; the CLI's refusals are in tests/export/test_pack_reads.py."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from torchfit.errors import BadInput
from torchfit.lock.artifacts import UNSIZED_LIMIT, copy_local, local_location, lock_dir, size_limit
from torchfit.lock.model import Artifact


def _art(**kw: object) -> Artifact:
    return Artifact("wheel", "0" * 64, **kw)  # type: ignore[arg-type]


def test_a_relative_path_is_the_locks_directorys(tmp_path: Path) -> None:
    root = lock_dir(str(tmp_path / "site" / "pylock.toml"))
    assert root == str(tmp_path / "site")
    assert local_location(_art(path="wheels/a.whl"), root) == str(tmp_path / "site" / "wheels" / "a.whl")
    assert local_location(_art(path="/abs/a.whl"), root) == "/abs/a.whl"
    assert local_location(_art(url="file:///x%20y/a%23b.whl"), root) == "/x y/a#b.whl"
    assert local_location(_art(url="https://h/a.whl"), root) is None


def test_the_limit_is_the_locks_size_else_the_ceiling() -> None:
    assert size_limit(_art(size=10)) == 10
    assert size_limit(_art(size=0)) == 0
    assert size_limit(_art()) == UNSIZED_LIMIT


def test_a_regular_file_is_copied_whole(tmp_path: Path) -> None:
    data = os.urandom(3 << 20)
    (tmp_path / "a.whl").write_bytes(data)
    out = io.BytesIO()
    n, sha = copy_local(_art(size=len(data)), str(tmp_path / "a.whl"), out, "alpha 1.0")
    import hashlib

    assert (n, sha, out.getvalue()) == (len(data), hashlib.sha256(data).hexdigest(), data)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "a.whl"
    os.mkfifo(fifo)
    done = threading.Event()
    errors: list[str] = []

    def copy() -> None:
        try:
            copy_local(_art(size=5), str(fifo), io.BytesIO(), "alpha 1.0")
        except BadInput as exc:
            errors.append(exc.message)
        done.set()

    threading.Thread(target=copy, daemon=True).start()
    assert done.wait(10), "copy_local waited on the FIFO"
    assert errors and "not a regular file (a FIFO)" in errors[0] and str(fifo) in errors[0]


def test_a_device_is_refused_before_a_byte_is_read() -> None:
    out = io.BytesIO()
    with pytest.raises(BadInput, match=r"alpha 1.0: /dev/zero: not a regular file \(a character device\)"):
        copy_local(_art(size=5), "/dev/zero", out, "alpha 1.0")
    assert out.getvalue() == b""


def test_a_file_longer_than_the_lock_says_is_not_copied(tmp_path: Path) -> None:
    (tmp_path / "a.whl").write_bytes(b"x" * 100)
    out = io.BytesIO()
    with pytest.raises(BadInput, match=r"100 bytes, more than 99, the size the lock gives it"):
        copy_local(_art(size=99), str(tmp_path / "a.whl"), out, "alpha 1.0")
    assert out.getvalue() == b""


def test_a_missing_or_unreadable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"alpha 1\.0: .*/gone\.whl: no such file"):
        copy_local(_art(), str(tmp_path / "gone.whl"), io.BytesIO(), "alpha 1.0")
    (tmp_path / "d.whl").mkdir()
    with pytest.raises(BadInput, match=r"not a regular file \(a directory\)"):
        copy_local(_art(), str(tmp_path / "d.whl"), io.BytesIO(), "alpha 1.0")
