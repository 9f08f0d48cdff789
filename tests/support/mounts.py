"""Real system conditions for tests run as root (CI runs as root): a tmpfs of a given size,
a bind mount, a second user. Each skips the test, with the reason, where it cannot be made."""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (mount, useradd); CI runs as root")


@contextlib.contextmanager
def mounted(argv: list[str], where: Path) -> Iterator[Path]:
    need_root()
    res = subprocess.run(["mount", *argv, str(where)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount here: {res.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def tmpfs(where: Path, size: str = "64k", inodes: int | None = None) -> contextlib.AbstractContextManager[Path]:
    """A real tmpfs of `size` (and `inodes`) at `where`, unmounted at the end."""
    where.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
    return mounted(["-t", "tmpfs", "-o", opts, "tmpfs"], where)


def bind(source: Path, where: Path) -> contextlib.AbstractContextManager[Path]:
    """`mount --bind source where`, unmounted at the end."""
    where.mkdir(parents=True, exist_ok=True)
    return mounted(["--bind", str(source)], where)


def fill(directory: Path) -> None:
    """Fill the filesystem of `directory` to the last byte (a file `fill` in it)."""
    for name, chunk in (("fill", 4096), ("fill2", 1)):  # then the last partial block
        with open(directory / name, "wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * chunk)


def second_user(name: str = "tfattacker") -> pwd.struct_passwd:
    """A real second user (made with useradd once), for files another user plants."""
    need_root()
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    res = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot add a user: {res.stderr.strip()}")
    return pwd.getpwnam(name)


def as_user(user: pwd.struct_passwd, *argv: str) -> None:
    """Run argv as `user` (runuser), asserting it succeeded."""
    res = subprocess.run(["runuser", "-u", user.pw_name, "--", *argv], capture_output=True, text=True, check=False)
    assert res.returncode == 0, (argv, res.stderr)


@contextlib.contextmanager
def shared_dir(mode: int = 0o1777) -> Iterator[Path]:
    """A directory under /tmp that other users can reach (pytest's tmp_path is 0700), removed at the end."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="tf-shared-", dir="/tmp"))
    path.chmod(mode)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
