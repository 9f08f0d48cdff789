"""Full disks and exhausted inodes during `install` (issue 21, class 1), on real tmpfs mounts.

A filesystem a few KB or a few inodes short of the env, a uv cache with no room: the
install ends with DiskFull (exit 1, `disk-full`): the step, the path, the filesystem and
what is left on it, what that place is (the env's filesystem, uv's cache) and how to make
room; never "a broken stdout" (82c371b said that, exit 2), never a traceback; and nothing
is left on the filesystem that ran out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.conftest import Tf, install_args, mount_tmpfs, tf, umount  # noqa: F401  (tf: a fixture)
from tests.installer.conftest import CPU_ARGS, needs_uv, run_tf
from tests.support.mounts import tmpfs
from tests.support.wheels import make_wheel

pytestmark = [pytest.mark.slow, needs_uv]


def _used(where: Path) -> tuple[int, int]:
    st = os.statvfs(where)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree


@pytest.fixture(scope="module")
def env_needs(tmp_path_factory: pytest.TempPathFactory, torch_index: str, state_home: Path) -> tuple[int, int]:
    """(bytes, inodes) an install of the CPU env takes on a tmpfs: measured by making one."""
    where = tmp_path_factory.mktemp("measure")
    with tmpfs(where, size="2g"):
        proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(where / "env"),
                      state=state_home)
        assert proc.returncode == 0, proc.stderr
        return _used(where)


def _disk_full(proc: object, mount: Path, role: str) -> dict[str, object]:
    out, err, code = proc.stdout, proc.stderr, proc.returncode  # type: ignore[attr-defined]
    assert code == 1, (code, err)
    assert "Traceback" not in err and "stdout" not in err and "internal error" not in err, err
    data = json.loads(out)
    assert data["reference"] == "disk-full" and data["ok"] is False, data
    assert data["mount"] == str(mount) and data["role"] == role, data
    assert str(mount) in err and "[disk-full]" in err and "hint:" in err, err
    return data


@pytest.mark.parametrize("short", ["bytes", "inodes"])
def test_attack3_install_onto_a_filesystem_just_short(tmp_path: Path, torch_index: str, state_home: Path,
                                                      env_needs: tuple[int, int], short: str) -> None:
    need, inodes = env_needs
    where = tmp_path / "fs"
    size = f"{need - 24 * 1024}" if short == "bytes" else "2g"
    with tmpfs(where, size=size, inodes=inodes - 3 if short == "inodes" else None):
        proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(where / "env"),
                      "--json", state=state_home)
        data = _disk_full(proc, where, "the env's filesystem (--prefix)")
        if short == "inodes":
            assert "no free inodes" in str(data["error"]) and data["free_inodes"] == 0, data
        else:
            assert "no space left" in str(data["error"]), data
        assert data["written_bytes"], data  # how far the env had grown: at least that much more is needed
        assert os.listdir(where) == [], os.listdir(where)  # nothing left behind


def test_attack3_install_with_a_full_uv_cache(tmp_path: Path, torch_index: str, state_home: Path) -> None:
    cache = tmp_path / "uv-cache"
    with tmpfs(cache, size="40m"):
        proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(tmp_path / "env"),
                      "--json", state=state_home, UV_CACHE_DIR=str(cache))
        data = _disk_full(proc, cache, "uv's cache")
        assert "UV_CACHE_DIR" in str(data["hint"]), data
    assert not (tmp_path / "env").exists()
    assert [p for p in os.listdir(tmp_path) if p not in ("uv-cache", "xdg-cache")] == []


def test_attack3_add_onto_a_full_env_filesystem(tmp_path: Path, torch_index: str, state_home: Path) -> None:
    links = tmp_path / "links"
    make_wheel(links, "bigpkg", "1.0", files={"bigpkg/__init__.py": b"", "bigpkg/blob.bin": os.urandom(4 << 20)})
    where = tmp_path / "fs"
    with tmpfs(where, size="2g"):
        env = where / "env"
        proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(env), state=state_home)
        assert proc.returncode == 0, proc.stderr
        lock = (env / "pylock.toml").read_bytes()
        with open(where / "fill", "wb") as fh:  # leave 1 MB: not enough for the 4 MB package
            free = os.statvfs(where).f_bavail * os.statvfs(where).f_frsize
            fh.write(b"\0" * (free - (1 << 20)))
        proc = run_tf("add", "bigpkg", "--env", str(env), "--find-links", str(links), "--json", state=state_home)
        data = _disk_full(proc, where, "the env's filesystem (--env)")
        assert (env / "pylock.toml").read_bytes() == lock  # the lock as it was
        assert not list((env / "lib").glob("python3*/site-packages/bigpkg*"))  # nothing of it left
        assert data["step"] == "install step 'install'", data


@pytest.mark.slow
@needs_uv
# --- #24 of issue 13: the install log is never silently empty ----------------------------------


def test_install_log_on_a_full_filesystem_is_reported(tf: Tf, tmp_path: Path, torch_index: str) -> None:  # noqa: F811
    """Defect #24 of the 2026-11 attack (issue 13)."""
    state = tmp_path / "fullstate"
    mount_tmpfs(state, "64k")
    try:
        (state / "torchfit" / "logs").mkdir(parents=True)
        fd = os.open(state / "filler", os.O_WRONLY | os.O_CREAT, 0o600)  # fill it up
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        prefix = tmp_path / "env"
        code, _, err = tf.run(*install_args(torch_index, prefix), env={"XDG_STATE_HOME": str(state)})
        assert code == 0, err
        assert "cannot write the install log" in err
        log = prefix / "torchfit-install.log"
        assert not log.exists() or log.stat().st_size > 0
        assert f"log:   {log}" not in err or log.stat().st_size > 0
    finally:
        umount(state)
