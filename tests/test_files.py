"""torchfit.files: every file torchfit writes is whole or not at all (write_atomic), and its
own state is never written through a planted link (private_dir, create_private, open_private).

Real conditions: a real tmpfs filled to the last byte, a real second user planting files."""

from __future__ import annotations

import os
import stat
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.mounts import as_user, fill, second_user, shared_dir, tmpfs
from torchfit.files import (
    PrivateDirError,
    create_private,
    open_private,
    private_dir,
    write_atomic,
    write_private,
)


def test_attack3_write_atomic_on_a_full_tmpfs_keeps_the_old_file(tmp_path: Path) -> None:
    """A full disk: the old file keeps its bytes and mode, no temporary file is left (82c371b's
    writers truncated the file first, then died with ENOSPC half-way)."""
    with tmpfs(tmp_path / "fs", "64k") as fs:
        target = fs / "out.txt"
        target.write_text("the old content\n")
        target.chmod(0o640)
        fill(fs)
        with pytest.raises(OSError) as err:
            write_atomic(str(target), "x" * 20000)
        assert err.value.errno == 28  # ENOSPC
        assert target.read_text() == "the old content\n"
        assert stat.S_IMODE(target.stat().st_mode) == 0o640
        assert sorted(p.name for p in fs.iterdir()) == ["fill", "fill2", "out.txt"]


def test_attack3_write_atomic_with_no_inode_left_keeps_the_old_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", "1m", inodes=3) as fs:
        target = fs / "out.txt"
        target.write_text("old\n")
        for i in range(5):  # use up the inodes
            try:
                (fs / f"f{i}").write_text("")
            except OSError:
                break
        with pytest.raises(OSError):
            write_atomic(str(target), "new\n")
        assert target.read_text() == "old\n"


def test_attack3_write_atomic_keeps_mode_owner_and_the_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old")
    real.chmod(0o604)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomic(str(link), "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o604
    fresh = tmp_path / "fresh.txt"
    old = os.umask(0o027)
    try:
        write_atomic(str(fresh), "a")
    finally:
        os.umask(old)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640  # 0666 less the umask, as open() gives
    if os.geteuid() == 0:
        user = second_user()
        os.chown(real, user.pw_uid, user.pw_gid)
        write_atomic(str(real), "again")
        assert real.stat().st_uid == user.pw_uid  # root rewriting a user's file keeps it theirs


def test_attack3_write_atomic_writes_a_fifo_or_device_in_place(tmp_path: Path) -> None:
    write_atomic("/dev/null", "discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_atomic(str(fifo), "through the pipe")
        assert os.read(rfd, 100) == b"through the pipe"
    finally:
        os.close(rfd)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(IsADirectoryError):
        write_atomic(str(tmp_path), "x")


@settings(max_examples=60, deadline=None)
@given(name=st.text(string.ascii_letters + string.digits + " .-_'\"$\\\n\t:é", min_size=1, max_size=40),
       data=st.binary(max_size=2000))
def test_attack3_write_atomic_any_name_round_trips(tmp_path_factory: pytest.TempPathFactory, name: str,
                                                   data: bytes) -> None:
    if name in (".", ".."):
        return
    directory = tmp_path_factory.mktemp("names")
    target = directory / name
    target.write_bytes(b"previous")
    write_atomic(str(target), data)
    assert target.read_bytes() == data
    assert [p.name for p in directory.iterdir()] == [name]  # no temporary file left


def test_attack3_private_dir_refuses_another_users_directory_and_planted_files(tmp_path: Path) -> None:
    user = second_user()
    with shared_dir() as shared:
        theirs = shared / "state"
        as_user(user, "mkdir", "-m", "0755", str(theirs))
        with pytest.raises(PrivateDirError, match="belongs to uid"):
            private_dir(str(theirs))
        (tmp_path / "linkdir").symlink_to(theirs)
        with pytest.raises(PrivateDirError, match="symbolic link"):
            private_dir(str(tmp_path / "linkdir"))
    # Ours but writable by the group: refused too.
    group = tmp_path / "group"
    group.mkdir()
    group.chmod(0o775)
    with pytest.raises(PrivateDirError, match="writable by others"):
        private_dir(str(group))
    # Ours: files planted in it are refused, never written through.
    mine = tmp_path / "mine"
    dfd = private_dir(str(mine))
    try:
        assert stat.S_IMODE(mine.stat().st_mode) == 0o700
        victim = tmp_path / "victim"
        victim.write_text("precious")
        (mine / "log").symlink_to(victim)
        with pytest.raises(FileExistsError):
            create_private(dfd, "log")
        with pytest.raises(PrivateDirError, match="not a regular file"):
            open_private(dfd, "log")
        os.mkfifo(mine / "fifo")
        with pytest.raises(PrivateDirError, match="not a regular file"):
            open_private(dfd, "fifo")  # O_NONBLOCK: refused at once, never waited on
        write_private(dfd, "log", b"record")  # replaces the link itself
        assert victim.read_text() == "precious"
        assert not (mine / "log").is_symlink() and (mine / "log").read_bytes() == b"record"
    finally:
        os.close(dfd)


def test_write_beside_never_follows_or_replaces_what_is_not_torchfits(tmp_path: Path) -> None:
    """files.write_beside/open_beneath/open_existing (issue 34): a symlink, a FIFO (refused at once,
    never waited on), a directory at the target or a symlinked directory on the way is refused
    naming the path; a hard-linked file is never opened to be written in place; a different file
    is refused where only the same may be; no temporary file is left."""
    from torchfit.files import NotOurs, open_beneath, open_existing, write_beside, write_into

    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "link").symlink_to(victim)
    os.mkfifo(out / "fifo")
    (out / "dir").mkdir()
    os.link(victim, out / "hard")
    (out / "sub").symlink_to(tmp_path)
    dfd = open_beneath(str(out))
    try:
        for name, kind in (("link", "a symbolic link"), ("fifo", "a FIFO"), ("dir", "a directory")):
            with pytest.raises(NotOurs, match=f"{out / name}: {kind} is there"):
                write_beside(dfd, name, b"x", where=str(out / name))
        with pytest.raises(NotOurs, match="a file with 2 hard links"):
            open_existing(dfd, "hard", str(out / "hard"), os.O_RDWR)
        assert write_beside(dfd, "hard", b"new", where="hard")  # renamed over the name: the other name keeps its bytes
        assert write_beside(dfd, "same", b"lock", where="same", differing="refuse")
        assert not write_beside(dfd, "same", b"lock", where="same", differing="refuse")  # the same: kept
        with pytest.raises(NotOurs, match="a different file is already there"):
            write_beside(dfd, "same", b"other", where="same", differing="refuse")
    finally:
        os.close(dfd)
    with pytest.raises(NotOurs, match=f"{out / 'sub'}: a symbolic link is there"):
        open_beneath(str(out), "sub/x")
    with pytest.raises(NotOurs, match="a symbolic link is there"):
        write_into(str(out / "link"), "x")
    assert victim.read_text() == "precious" and (out / "hard").read_bytes() == b"new"
    assert (out / "same").read_bytes() == b"lock" and not list(out.glob(".*torchfit-tmp"))
