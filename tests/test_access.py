"""access.py on a shared machine, with a real second user (uid 65534 through setpriv): who may
replace an env (install --force) is said before anything is built."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mounts import SYSTEM_PYTHON, as_nobody, need_root, readable_torchfit, shared_dir

NOBODY = 65534


def _install(base: Path, prefix: Path) -> tuple[str, ...]:
    """install --force of PREFIX, from a torch source that serves nothing (an empty directory):
    whatever the check lets through stops at planning, nothing is built."""
    empty = base / "empty-index"
    empty.mkdir(exist_ok=True)
    return ("install", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--offline",
            "--torch-index-url", str(empty), "--force", "--prefix", str(prefix))


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Path, str]]:
    """(a directory every user may enter, the PYTHONPATH that runs this checkout as another user)."""
    need_root()
    with shared_dir(0o755) as base:
        yield base, readable_torchfit(base)


def _env_in(parent: Path, owner: int = 0) -> Path:
    prefix = parent / "env"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    (prefix / "pylock.toml").touch()
    if owner:
        subprocess.run(["chown", "-R", f"{owner}:{owner}", str(prefix)], check=True)
    return prefix


def _scratch(base: Path, name: str, mode: int) -> Path:
    where = base / name
    where.mkdir()
    where.chmod(mode)
    return where


def test_install_force_over_root_env_in_sticky_directory_is_refused_up_front(world: tuple[Path, str]) -> None:
    """A mode-1777 directory: only root may rename root's env there. Before, a whole new env was
    built beside it and the swap failed (EPERM, exit 1), and again on the next try."""
    base, pythonpath = world
    prefix = _env_in(_scratch(base, "sticky", 0o1777))
    for _ in range(2):  # the same command again: the same refusal, nothing left behind
        start = time.monotonic()
        res = as_nobody(pythonpath, *_install(base, prefix), home=base)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2, res.stderr
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        assert "owned by root:root" in lines[0] and "is sticky" in lines[0] and "may not replace it" in lines[0]
        assert time.monotonic() - start < 20
        assert sorted(p.name for p in prefix.parent.iterdir()) == ["env"]
    assert (prefix / "pylock.toml").is_file()


def test_install_force_over_env_with_a_directory_this_user_cannot_empty(world: tuple[Path, str]) -> None:
    """Not sticky, but the old env's directories are root's 0755: the rename would work and the
    removal of the old tree would not; refused before building."""
    base, pythonpath = world
    prefix = _env_in(_scratch(base, "open", 0o777))
    res = as_nobody(pythonpath, *_install(base, prefix), home=base)
    assert res.returncode == 2, res.stderr
    assert f"{prefix} is drwxr-xr-x (0755), owned by root:root" in res.stderr
    assert "may not remove files from it" in res.stderr


def test_install_force_over_own_env_in_sticky_directory_goes_on(world: tuple[Path, str]) -> None:
    """The user's own env in /tmp-like space is theirs to replace: no refusal (the install then
    stops at the index that does not exist, which is not this check)."""
    base, pythonpath = world
    prefix = _env_in(_scratch(base, "mine", 0o1777), owner=NOBODY)
    res = as_nobody(pythonpath, *_install(base, prefix), home=base)
    assert "cannot be replaced" not in res.stderr, res.stderr
    assert os.path.isdir(prefix)
