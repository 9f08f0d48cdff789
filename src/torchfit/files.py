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
- `write_beside` / `write_into` (with `open_beneath`, `open_existing`, `new_beside`, `commit`):
  every file torchfit writes into a directory it does not own outright (a pack, export's build
  context, a modulefile): no symlink followed (the directories inside opened with O_NOFOLLOW too),
  the bytes in a new O_EXCL file beside the target, the rename the commit point; a symlink, a
  directory, a FIFO or a hard-linked file already at the target is refused (`NotOurs`, exit 2)
  naming the path, never written through or replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from torchfit.errors import BadInput

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
    import tempfile  # (random, bisect, hashlib's sha512) only where a file is written: not on a cache read

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


# --- files torchfit writes into a directory it does not own outright ------------------------------


class NotOurs(BadInput):
    """Where torchfit would write, something it did not make is there (a symbolic link, a
    directory, a FIFO, a file another name shares, or a different file where only the same one
    may be): refused naming the path, and nothing was followed, replaced or written."""


def _kind(st: os.stat_result) -> str:
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return f"a file with {st.st_nlink} hard links"
    return "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"


def _refuse(where: str, what: str) -> NotOurs:
    return NotOurs(f"{where}: {what} is there, which torchfit did not make; move it away (it was left as it is)")


def open_beneath(root: str, rel: str = "", *, create: bool = True) -> int:
    """An O_DIRECTORY fd of `root`/`rel`. `root` is the directory the user named (followed: theirs
    to name); each component of `rel` is made when missing (and `create`) and opened relative to
    its parent with O_NOFOLLOW, so a symlink planted inside is refused (NotOurs), never entered."""
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    where = root
    for part in [p for p in rel.split("/") if p]:
        where = os.path.join(where, part)
        if part in (".", ".."):
            os.close(dfd)
            raise NotOurs(f"{where}: not a directory name torchfit writes into")
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=dfd)
            sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                os.close(dfd)
                raise
            st = os.stat(part, dir_fd=dfd, follow_symlinks=False)
            os.close(dfd)
            raise _refuse(where, _kind(st)) from None
        os.close(dfd)
        dfd = sub
    return dfd


def existing_file(dfd: int, name: str, where: str) -> os.stat_result | None:
    """What is at `name` in `dfd`, never followed: None when nothing, the stat of a regular file,
    NotOurs (naming `where`) for anything else."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(where, _kind(st))
    return st


def open_existing(dfd: int, name: str, where: str, flags: int = os.O_RDONLY) -> int:
    """Open the regular file `name` in `dfd` (O_NOFOLLOW, never blocking on a FIFO), refused
    (NotOurs) unless it is a regular file no other name shares: writing into it in place (a
    download resumed) then never reaches a file outside."""
    try:
        fd = os.open(name, flags | _NOFOLLOW, dir_fd=dfd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise
        raise _refuse(where, _kind(os.stat(name, dir_fd=dfd, follow_symlinks=False))) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise _refuse(where, _kind(st))
    os.set_blocking(fd, True)
    return fd


def new_beside(dfd: int, name: str) -> tuple[int, str]:
    """A new temporary file beside `name` in `dfd` (O_EXCL, O_NOFOLLOW: nothing planted is ever
    opened), for `commit` to rename over `name`; (fd, its name)."""
    for _ in range(5):
        tmp = f".{name[:200]}.{os.urandom(6).hex()}.torchfit-tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=dfd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "cannot make a temporary file", name)  # pragma: no cover


def commit(dfd: int, tmp: str, name: str, where: str) -> None:
    """The commit point: `tmp` renamed over `name` (a rename replaces a name, never follows it),
    unless what is at `name` now is not a regular file (NotOurs; `tmp` removed)."""
    try:
        existing_file(dfd, name, where)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    with contextlib.suppress(OSError):
        os.fsync(dfd)


def write_beside(dfd: int, name: str, data: bytes, *, where: str, differing: str = "replace") -> bool:
    """`name` in directory `dfd` holds `data` afterwards, written whole through a new O_EXCL file
    beside it and renamed (`commit`); nothing planted is followed. What is already there: not a
    regular file -> NotOurs naming `where`; a regular file with other bytes -> replaced
    (`differing="replace"`, a file of torchfit's own tree) or refused (`differing="refuse"`: one
    torchfit may only find identical). False when the same bytes were there (nothing written)."""
    st = existing_file(dfd, name, where)
    if st is not None and differing == "refuse":
        if st.st_size == len(data):
            fd = open_existing(dfd, name, where)
            with os.fdopen(fd, "rb") as fh:
                if fh.read(len(data) + 1) == data:
                    return False
        raise NotOurs(f"{where}: a different file is already there; torchfit does not replace it: "
                      "move it away or write elsewhere (nothing was written)")
    fd, tmp = new_beside(dfd, name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            if st is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    commit(dfd, tmp, name, where)
    return True


def write_into(path: str, data: str | bytes, *, differing: str = "replace") -> bool:
    """`write_beside` by path: the file `path` in the directory the user named (that directory
    followed, the file itself never)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    directory, name = os.path.split(os.path.abspath(path))
    dfd = open_beneath(directory, create=False)
    try:
        return write_beside(dfd, name, raw, where=path, differing=differing)
    finally:
        os.close(dfd)
