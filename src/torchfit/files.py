"""How torchfit writes a file: whole or not at all, and never through a planted link.

- `write_atomic`: every file torchfit writes for the user (`export -o`, `matrix
  update -o`, `matrix probe --output`, `detect --slurm -o`, a rewritten lock) and
  its own records. The bytes go to a temporary file beside the target, are flushed
  to disk, take the old file's mode (a new one: 0666 less the umask, or 0600 when
  private), and are renamed over the target; until that rename the old file is whole
  and in place, so a full disk, a signal or a crash never truncates it. A target
  that is not a regular file (/dev/stdout, a FIFO, /dev/null) is written in place:
  it cannot be renamed over and holds nothing to lose. A symlink is followed to
  the file it names, which is the one replaced (a dotfile linked into a repository
  stays a link).
- `private_dir` / `create_private` / `open_private`: torchfit's own state (the
  install logs, the HTTP cache) lives in a directory that must be ours and not
  writable by anyone else (checked on its fd, `PrivateDirError` says what is
  wrong); files in it are opened relative to that fd with O_NOFOLLOW (and O_EXCL
  when new, O_NONBLOCK always), so a symlink or FIFO planted there is refused,
  never written through or waited on. The same rules as PREFIX.lock
  (installer/prefix.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _umask() -> int:
    """The process umask, read without changing it (Linux /proc), else by the set-and-restore dance."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_atomic(path: str, data: str | bytes, *, private: bool = False) -> None:
    """Replace the file at `path` with `data`, whole or not at all (see the module docstring).

    Raises OSError (the target's directory missing or not writable, the disk full);
    then the old file is unchanged and no temporary file is left.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    target = os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path)
    try:
        old: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if old is not None and not stat.S_ISREG(old.st_mode):
        # A device, a FIFO, /dev/stdout: nothing on disk to lose, and no rename possible.
        fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        return
    directory, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".torchfit-tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
            if old is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))
                if old.st_uid != os.geteuid() or old.st_gid != os.getegid():
                    with contextlib.suppress(OSError):  # root rewriting a user's file keeps it theirs
                        os.fchown(fh.fileno(), old.st_uid, old.st_gid)
            elif not private:
                os.fchmod(fh.fileno(), 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a crash
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


# --- torchfit's own directories ---------------------------------------------------------------


class PrivateDirError(OSError):
    """A state or cache directory torchfit will not use, and why (one line)."""


def _judge_dir(path: str, st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def private_dir(path: str, create: bool = True) -> int:
    """An fd of directory `path` (created 0700 with its parents when missing), checked to be ours.

    The directory must be a real directory (not a symlink) owned by this user and
    writable by nobody else; the answer is an O_DIRECTORY fd to open files relative
    to, so a rename of the path after the check changes nothing. PrivateDirError says
    what is wrong.
    """
    if create:
        with contextlib.suppress(FileExistsError):
            os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise PrivateDirError(exc.errno, f"{path} is a symbolic link", path) from None
        raise
    # Judged on the descriptor: a directory swapped in after the check is never the one
    # used, so the parents need no judgement of their own.
    why = _judge_dir(path, os.fstat(dfd))
    if why is not None:
        os.close(dfd)
        raise PrivateDirError(errno.EPERM, why, path)
    return dfd


def _check_regular(fd: int, name: str) -> int:
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "is not a regular file"
    elif st.st_uid != os.geteuid():
        why = f"belongs to uid {st.st_uid}, not to you"
    elif st.st_nlink != 1:
        why = f"has {st.st_nlink} hard links"
    if why:
        os.close(fd)
        raise PrivateDirError(errno.EPERM, f"{name} {why}", name)
    return fd


def create_private(dfd: int, name: str, mode: int = 0o600, flags: int = os.O_WRONLY) -> int:
    """A new file `name` in directory `dfd` (O_EXCL, O_NOFOLLOW): a planted entry is an error."""
    return os.open(name, flags | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=dfd)


def open_private(dfd: int, name: str) -> int:
    """Open an existing file of ours in `dfd` for reading: a regular file with one link,
    never through a symlink and never blocking on a FIFO (PrivateDirError otherwise)."""
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symlink; a socket
            raise PrivateDirError(exc.errno, f"{name} is not a regular file", name) from None
        raise
    return _check_regular(fd, name)


def write_private(dfd: int, name: str, data: bytes) -> None:
    """Replace `name` in directory `dfd` whole: a new O_EXCL file beside it, renamed over it."""
    tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = create_private(dfd, tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
