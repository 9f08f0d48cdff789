"""Who made a directory: torchfit's owner marker, and removing only what it proves.

A directory torchfit creates (a temporary env beside PREFIX, a work directory in
$TMPDIR) carries `.torchfit-owner`: the pid, the kernel's start time of that pid,
the boot id and a random token. A directory is torchfit's only with a valid marker
written by this user, and a run is over only when that pid with that start time on
this boot is gone; nothing without that proof is ever deleted. It sits beside the
runner and owns the marked temporary directories (`owned_temp_dir`, `temp_dir`,
`sweep_temp_dirs`) that verify, doctor, export and install work in; installer/prefix.py
marks its temporary envs with it too.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Iterator

from torchfit.inputs import decode_json
from torchfit.interrupts import signals_deferred
from torchfit.space import temp_root

MARKER = ".torchfit-owner"


def _proc_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            fields = fh.read().rpartition(")")[2].split()
        return fields[19] if fields[0] != "Z" else None
    except (OSError, IndexError):
        return None


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:  # pragma: no cover - no /proc
        return ""


def owner_record(prefix: str, name: str) -> dict[str, object]:
    """What the marker of a temporary directory made by this run holds."""
    pid = os.getpid()
    return {"tool": "torchfit", "pid": pid, "start": _proc_start(pid), "boot": _boot_id(),
            "token": secrets.token_hex(16), "name": name, "prefix": prefix, "created": time.time()}


def read_marker(path: str) -> dict[str, object] | None:
    """The marker of directory `path` when it is a real directory of ours with a valid marker."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return None
    try:
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = os.open(MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        try:
            mst = os.fstat(fd)
            if not stat.S_ISREG(mst.st_mode) or mst.st_uid != os.geteuid() or mst.st_size > 4096:
                return None
            data = decode_json(os.read(fd, 4096))
        finally:
            os.close(fd)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    finally:
        os.close(dfd)
    if not isinstance(data, dict) or data.get("tool") != "torchfit":
        return None
    if data.get("name") != os.path.basename(path.rstrip(os.sep)):
        return None  # a marker copied from elsewhere proves nothing about this directory
    return data


def owner_alive(marker: dict[str, object]) -> bool:
    """Is the run that wrote `marker` still running (same pid, same start time, same boot)?"""
    if marker.get("boot") and marker.get("boot") != _boot_id():
        return False
    pid = marker.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    return _proc_start(pid) == marker.get("start")


def _write_marker(dfd: int, record: dict[str, object], exclusive: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(MARKER, flags, 0o644, dir_fd=dfd)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(record, fh)


def make_marked_dir(path: str, prefix: str) -> dict[str, object]:
    """mkdir `path` (exclusive: never an existing directory or a symlink) and mark it ours."""
    os.mkdir(path, 0o755)
    record = owner_record(prefix, os.path.basename(path))
    dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _write_marker(dfd, record, exclusive=True)
    except BaseException:
        # A marker that could not be written (a full disk): the directory is just made
        # and empty but for it; nothing is left behind.
        with contextlib.suppress(OSError):
            os.unlink(MARKER, dir_fd=dfd)
        with contextlib.suppress(OSError):
            os.rmdir(path)
        raise
    finally:
        os.close(dfd)
    return record


def mark_existing(path: str, prefix: str) -> None:
    """Mark a directory this run has just moved to `path` (the old env after the exchange)."""
    with contextlib.suppress(OSError):
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            _write_marker(dfd, owner_record(prefix, os.path.basename(path)), exclusive=False)
        finally:
            os.close(dfd)



def _unescape_mountinfo(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040 ...)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mount_points(text: str) -> list[str]:
    """The mount points listed in /proc/self/mountinfo's text (field 5 of each line)."""
    points = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            points.append(_unescape_mountinfo(fields[4]))
    return points


def mounts_under(path: str) -> list[str]:
    """Mount points strictly inside directory `path` (this process's mount namespace).

    A bind mount of the same filesystem has the same st_dev as its parent, so only
    the kernel's table tells it apart; without /proc every directory whose st_dev
    differs is found by the walk in `remove_tree` instead.
    """
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            points = parse_mount_points(fh.read())
    except OSError:
        return []
    root = os.path.realpath(path).rstrip(os.sep) + os.sep
    return sorted({p for p in points if p.startswith(root)})


class TreeNotRemoved(OSError):
    """`remove_tree` left part of a tree: a mount point (or another filesystem) inside it."""


def remove_tree(path: str) -> None:
    """rm -rf of a directory torchfit made, never leaving it: no symlink is followed and no
    mount point is crossed (a bind mount inside an env keeps every file of its own).

    Signals are held so a second Ctrl-C cannot leave half of it. A tree with a mount
    point inside is not touched at all (TreeNotRemoved names it); a directory on
    another device found during the walk (a mount that appeared meanwhile) is left
    with its contents, and the walk says so the same way. Other errors are ignored,
    like `rm -rf` (what could not be removed stays).
    """
    with signals_deferred():
        try:
            st = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode):
            with contextlib.suppress(OSError):
                os.unlink(path)
            return
        inside = mounts_under(path)
        if inside:
            raise TreeNotRemoved(errno.EBUSY, f"a mount point is inside it at {inside[0]}", path)
        root = os.path.realpath(path)
        try:
            dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        kept: list[str] = []
        try:
            if os.fstat(dfd).st_ino != st.st_ino:
                return  # replaced between the two looks: not the directory we judged
            _clear(dfd, root, st.st_dev, kept)
        finally:
            os.close(dfd)
        if kept:
            raise TreeNotRemoved(errno.EXDEV, f"another filesystem is mounted inside it at {kept[0]}", path)
        with contextlib.suppress(OSError):
            os.rmdir(path)


def _clear(dfd: int, where: str, dev: int, kept: list[str]) -> bool:
    """Remove everything in the directory open at `dfd` (path `where`) on device `dev`;
    True when it is empty now. Directories are opened relative to their parent's fd with
    O_NOFOLLOW, so a symlink swapped in during the walk is never entered."""
    empty = True
    try:
        names = os.listdir(dfd)
    except OSError:
        return False
    for name in names:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            empty = False
            continue
        if not stat.S_ISDIR(st.st_mode):
            try:
                os.unlink(name, dir_fd=dfd)
            except OSError:
                empty = False
            continue
        sub = os.path.join(where, name)
        if st.st_dev != dev:
            kept.append(sub)
            empty = False
            continue
        try:
            cfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except OSError:
            empty = False
            continue
        try:
            cst = os.fstat(cfd)
            if (cst.st_dev, cst.st_ino) != (st.st_dev, st.st_ino):
                empty = False  # swapped after the look: leave it
                continue
            try:
                done = _clear(cfd, sub, dev, kept)
            except RecursionError:
                done = False
        finally:
            os.close(cfd)
        if done:
            try:
                os.rmdir(name, dir_fd=dfd)
            except OSError:
                empty = False
        else:
            empty = False
    return empty


def remove_marked(path: str, token: str | None = None) -> bool:
    """Remove `path` only when its marker proves torchfit made it (and, given, the same token).

    TreeNotRemoved (a mount point inside) propagates: the caller says what was left.
    """
    marker = read_marker(path)
    if marker is None or (token is not None and marker.get("token") != token):
        return False
    remove_tree(path)
    return True


# --- temporary directories that say who made them ----------------------------------------


def owned_temp_dir(kind: str, base: str | None = None) -> str:
    """A new private directory `$TMPDIR/torchfit-KIND-XXXX` (or in `base`) carrying
    torchfit's owner marker.

    Directories of the same kind left by a run that was SIGKILLed (marker proves
    torchfit made them; that run is gone) are removed first; nothing without a
    valid marker is ever touched.
    """
    base = base or temp_root()
    sweep_temp_dirs(kind, base)
    for _ in range(5):
        path = os.path.join(base, f"torchfit-{kind}-{os.urandom(4).hex()}")
        try:
            make_marked_dir(path, path)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)
        return path
    raise OSError(f"cannot create a temporary directory in {base}")  # pragma: no cover


def sweep_temp_dirs(kind: str, base: str | None = None) -> list[str]:
    """Remove `torchfit-KIND-*` directories whose marker names a run that has ended."""
    base = base or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = os.listdir(base)
    except OSError:
        return removed
    for entry in entries:
        if not entry.startswith(f"torchfit-{kind}-"):
            continue
        path = os.path.join(base, entry)
        marker = read_marker(path)
        if marker is not None and not owner_alive(marker):
            with contextlib.suppress(TreeNotRemoved):  # a mount inside: left as it is
                remove_tree(path)
                removed.append(path)
    return removed


def hand_over(path: str) -> None:
    """A temporary directory this run keeps for the user (verify's worker logs, `--keep`): its
    marker goes, so no later run's sweep (`sweep_temp_dirs`) removes what was said to be kept;
    from now on it is the user's to remove."""
    with contextlib.suppress(OSError):
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.unlink(MARKER, dir_fd=dfd)
        finally:
            os.close(dfd)


def remove_owned_dir(path: str) -> bool:
    """Remove a directory made by `owned_temp_dir` (only when its marker is valid)."""
    return remove_marked(path)


@contextlib.contextmanager
def temp_dir(kind: str) -> Iterator[str]:
    """`owned_temp_dir` removed on exit, also on Ctrl-C, SIGTERM and SIGHUP (exit 130)."""
    path = owned_temp_dir(kind)
    try:
        yield path
    finally:
        with contextlib.suppress(TreeNotRemoved):  # a mount inside: left as it is
            remove_owned_dir(path)
