"""Where the space ran out: a full filesystem (ENOSPC) or a quota (EDQUOT) as `DiskFull`.

A write that fails for lack of space names the step, the path it wrote, the filesystem
that path is on (its mount point, what is free of its size, blocks or inodes) and what
that place is to torchfit (the env's filesystem, TMPDIR, uv's cache, the logs), so the
fix is plain; never "a broken stdout" and never a traceback.

`disk_full` builds the error from an OSError (or a child's message, `space_error_in`)
and the places the step writes (`Place`): the path of the error when it has one, else the
fullest of those places.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from torchfit.errors import DiskFull

NO_SPACE = frozenset((errno.ENOSPC, errno.EDQUOT))

# How a child (uv, pip, tar) says it: Rust's io::Error and Python's OSError wording.
_CHILD_SAYS = re.compile(r"No space left on device|Disk quota exceeded|os error (?:28|122)\b|\[Errno (?:28|122)\]")
# A path in such a line: quoted (pip's '...', uv's `...`) may hold spaces; bare, it ends at one.
_PATH = re.compile(r"""`(/[^`\n]+)`|'(/[^'\n]+)'|"(/[^"\n]+)"|(?:^|\s)(/[^\s'"`]+)""")


class Place(NamedTuple):
    """A directory a step writes under, and what it is to the user ("TMPDIR")."""

    role: str
    path: str
    fix: str  # how to give it room, or move it


def is_no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


def space_error_in(text: str) -> tuple[str | None, bool] | None:
    """In a child's output: (the path of the line that says it ran out of space, quota?),
    or None when no line says so."""
    for line in reversed(text.splitlines()):
        found = _CHILD_SAYS.search(line)
        if found:
            # A quoted path is taken whole; a bare one loses the colon uv puts after it ("PATH: No space").
            paths = [q1 or q2 or q3 or (bare[:-1] if bare.endswith(":") else bare)
                     for q1, q2, q3, bare in _PATH.findall(line)]
            quota = "quota" in found.group(0).lower() or "122" in found.group(0)
            return (paths[-1] if paths else None), quota
    return None


def existing(path: str) -> str:
    """`path` or its nearest ancestor that exists (what statvfs can look at)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def mount_point(path: str) -> str:
    path = os.path.realpath(existing(path))
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def _under(path: str, root: str) -> bool:
    path, root = os.path.realpath(existing(path)), os.path.realpath(existing(root))
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _avail(path: str) -> tuple[int, int]:
    """(free bytes, free inodes) for an unprivileged writer; huge when unknown."""
    try:
        st = os.statvfs(existing(path))
    except OSError:
        return 1 << 62, 1 << 62
    return st.f_bavail * st.f_frsize, (st.f_favail if st.f_files else 1 << 62)


def disk_full(step: str, path: str | None, places: Sequence[Place] = (), *, quota: bool = False,
              needed: int | None = None, needed_what: str = "") -> DiskFull:
    """The DiskFull of `step`: `path` (where the write went, when known) placed among
    `places`; without a path, the fullest of `places` (the one with the least room)."""
    # The most specific place holding the path (uv's cache may sit inside the prefix's parent).
    holding = [p for p in places if path and _under(path, p.path)]
    place = max(holding, key=lambda p: len(os.path.realpath(existing(p.path))), default=None)
    if path is None and places:
        place = min(places, key=lambda p: min(_avail(p.path)[0], _avail(p.path)[1] * 4096))
    where = path or (place.path if place else tempfile.gettempdir())
    target = existing(where)
    try:
        st = os.statvfs(target)
        sizes: Mapping[str, int | None] = {
            "free": st.f_bavail * st.f_frsize, "size": st.f_blocks * st.f_frsize,
            "inodes_free": st.f_favail if st.f_files else None, "inodes": st.f_files or None}
    except OSError:
        sizes = {"free": None, "size": None, "inodes_free": None, "inodes": None}
    return DiskFull(step, where, mount_point(where), role=place.role if place else None,
                    fix=place.fix if place else None, quota=quota, needed=needed, needed_what=needed_what,
                    **sizes)


def from_oserror(exc: OSError, step: str, places: Sequence[Place] = (), *, path: str | None = None,
                 needed: int | None = None, needed_what: str = "") -> DiskFull:
    """`disk_full` for an OSError of ENOSPC/EDQUOT (its own filename first, then `path`).

    A relative filename (a file opened beside a directory descriptor) is taken inside `path`."""
    name = exc.filename if isinstance(exc.filename, str) else None
    if name and not os.path.isabs(name):
        name = os.path.join(path, name) if path else None
    return disk_full(step, name or path, places, quota=exc.errno == errno.EDQUOT, needed=needed,
                     needed_what=needed_what)


_TMPDIR_FIX = "free space there, or point TMPDIR at a filesystem with room"


def temp_root() -> str:
    """The directory torchfit's temporary files go in (tempfile.gettempdir()), refusing the
    move Python makes without a word when $TMPDIR is full.

    Python tries $TMPDIR with a 4-byte write and, when that fails for any reason, takes
    /tmp, /var/tmp or the working directory instead (tempfile._get_default_tempdir). For
    a TMPDIR full to the last byte that is the wrong answer: the user named it (on a
    cluster, because /tmp is small or shared), the children torchfit starts (uv, pip,
    torchrun) inherit it and fail there anyway, and a TMPDIR with a few bytes left is
    already refused as DiskFull. So a full or over-quota $TMPDIR is DiskFull too, naming
    it: one answer for one condition. Only this case is judged; a TMPDIR that does not
    exist is Python's usual choice.
    """
    chosen = tempfile.gettempdir()
    asked = os.environ.get("TMPDIR")
    if not asked or not os.path.isdir(asked) or os.path.realpath(asked) == os.path.realpath(chosen):
        return chosen
    probe = os.path.join(asked, f".torchfit-tmpdir-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, b"blat")  # what Python's own probe writes
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        if exc.errno not in NO_SPACE:
            return chosen
        raise from_oserror(exc, f"temporary files (not moved to {chosen} in its place)",
                           [Place("TMPDIR", asked, _TMPDIR_FIX)], path=asked) from None
    return chosen


def tmpdir_place() -> Place:
    return Place("TMPDIR", temp_root(), _TMPDIR_FIX)


def uv_cache_place(environ: Mapping[str, str]) -> Place:
    """uv's cache as uv finds it: UV_CACHE_DIR, else $XDG_CACHE_HOME/uv, else ~/.cache/uv."""
    path = environ.get("UV_CACHE_DIR") or os.path.join(
        environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "uv")
    return Place("uv's cache", path, "free space there (`uv cache prune`), or point UV_CACHE_DIR at a "
                                     "filesystem with room")


def prefix_place(prefix: str, option: str = "--prefix") -> Place:
    return Place(f"the env's filesystem ({option})", os.path.dirname(os.path.abspath(prefix)),
                 f"free space there, or install to a {option} on a filesystem with room"
                 if option == "--prefix" else "free space there")


def require_room(directory: str, nbytes: int, step: str, places: Sequence[Place]) -> None:
    """Room for `nbytes` in `directory` now, or DiskFull before anything starts (a worker
    whose log cannot be written fails without a word). Nothing is left there."""
    probe = os.path.join(directory, f".torchfit-room-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, nbytes)
            except OSError as exc:
                if exc.errno in NO_SPACE:
                    raise
                os.write(fd, b"\0" * nbytes)  # a filesystem without fallocate
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        if exc.errno not in NO_SPACE:
            raise
        raise from_oserror(exc, step, places, path=directory, needed=nbytes, needed_what="needs at least") from exc


def full_place(path: str, places: Sequence[Place] = (), below: int = 64 << 10) -> DiskFull | None:
    """DiskFull for `path` when its filesystem is (nearly) full now: less than `below` bytes
    or no inode left. For a child that failed without a word: was it the space?"""
    free, inodes = _avail(path)
    if free >= below and inodes > 0:
        return None
    return disk_full("writing its report", path, places or [tmpdir_place()])


def state_place(path: str) -> Place:
    return Place("torchfit's logs ($XDG_STATE_HOME)", path,
                 "free space there, or point XDG_STATE_HOME at a filesystem with room")


def tree_bytes(path: str) -> int:
    """The space a directory tree takes on disk (allocated blocks; symlinks not followed)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total
