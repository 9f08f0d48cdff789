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

from tests.support.envs import CACHE, locked


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
    """A real second user (made with useradd once), for files another user plants. Made under a
    file lock: two pytest-xdist workers of a fresh machine would both run useradd, and the one
    that lost ("user already exists", or /etc/passwd locked) skipped its test."""
    need_root()
    with locked(CACHE / f".lock-useradd-{name}"):
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


SYSTEM_PYTHON = "/usr/bin/python3"
# torchfit's imports, copied where another user may read them (this venv's interpreter and
# site-packages may live under /root, which that user cannot enter).
TORCHFIT_DEPS = ("packaging", "resolvelib", "rich", "pygments", "markdown_it", "mdurl", "requests", "urllib3", "idna",
                 "charset_normalizer", "certifi", "elftools")


def readable_torchfit(base: Path, src: Path | None = None) -> str:
    """This checkout's torchfit (or the one in `src`) and its imports copied under `base` (a
    directory every user may enter), readable by all; the PYTHONPATH that runs it with SYSTEM_PYTHON. Skips the test when
    SYSTEM_PYTHON is not this interpreter's version (charset_normalizer's extension is built for it)."""
    import importlib
    import shutil
    import sys

    out = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                         text=True, check=False).stdout.split()
    if out != [str(v) for v in sys.version_info[:2]]:
        pytest.skip(f"{SYSTEM_PYTHON} is not a Python {sys.version_info[0]}.{sys.version_info[1]}")
    site = base / "site"
    site.mkdir()
    for name in TORCHFIT_DEPS:
        package = Path(importlib.import_module(name).__file__ or "").parent
        shutil.copytree(package, site / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(src or Path(__file__).resolve().parents[2] / "src", base / "src",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "a+rX", str(site), str(base / "src")], check=True)
    return f"{base / 'src'}{os.pathsep}{site}"


def as_nobody(pythonpath: str, *args: str, home: Path, timeout: float = 120,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m torchfit ARGS` as uid 65534 (setpriv, no groups) with SYSTEM_PYTHON, in a bare
    environment (plus `env`)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": pythonpath, "LANG": "C.UTF-8", **(env or {})}
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "env", "-i",
                           *(f"{k}={v}" for k, v in env.items()), SYSTEM_PYTHON, "-m", "torchfit", *args],
                          capture_output=True, text=True, timeout=timeout, cwd="/")
