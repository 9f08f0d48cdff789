"""Building an env without ever breaking what exists at PREFIX, on hostile ground.

The directory beside PREFIX may be writable by others (a group-writable
/shared/envs): nothing there is trusted by name.

- `PrefixLock`: `fcntl.flock` on `PREFIX.lock`, opened relative to the parent
  directory's fd with `O_NOFOLLOW`: a planted symlink, FIFO, hard link or another
  user's file is refused, never truncated. A second install into the same PREFIX
  waits (`--wait`) or fails clearly (`PrefixBusy`).
- `TempEnv`: the env is built beside PREFIX (same filesystem, so the swap is
  atomic) in `.NAME.torchfit-PID-HEX/env`; the directory is made with `mkdir`
  (exclusive) and carries a marker file `.torchfit-owner` (pid, process start
  time, boot id, a random token) that proves torchfit made it and which run.
  Only a marked directory whose run is dead is ever removed as stale.
- `relocate`: a venv records its own path (activate scripts, shebangs, pyvenv.cfg,
  in shell-quoted forms too); every form is rewritten to PREFIX, and any reference
  to the temporary path that survives fails the install.
- `swap_into_place`: `renameat2(RENAME_EXCHANGE)`; signals are held over it and the
  outcome is reported exactly: a signal pending *before* the exchange cancels it
  (PREFIX unchanged), one that arrives after it is reported as late (PREFIX replaced).
- `InstallLog`: every step's command and output, redacted; a write failure is
  reported once, never silently dropped.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import secrets
import signal
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from torchfit.errors import BadInput, EnvInUse, PrefixBusy, RelocationFailed
from torchfit.interrupts import Interrupted, signals_deferred, take_pending
from torchfit.owned import (
    TreeNotRemoved,
    make_marked_dir,
    mark_existing,
    owner_alive,
    read_marker,
    remove_marked,
    remove_tree,
)
from torchfit.redact import redact
from torchfit.runner import kill_stray_children

TEMP_MARK = ".torchfit-"
ENV_SUBDIR = "env"


# --- the PREFIX lock -----------------------------------------------------------------------


def lock_path_for(prefix: str) -> str:
    return prefix.rstrip(os.sep) + ".lock"


class PrefixLock:
    """An exclusive `flock` on PREFIX.lock, held for the whole install.

    The file is opened relative to the parent directory's fd with O_NOFOLLOW, and
    must be a regular file of ours with one link: a symlink (to /etc/passwd), a FIFO,
    a hard link or another user's file is refused with exit 2, never written. It
    holds the owner's pid for the message a waiting install prints, and is unlinked
    on release while still locked (only if it is still the same inode); an acquirer
    that locked a file someone has since unlinked starts again.
    """

    def __init__(self, prefix: str, wait: float = 0.0, on_wait: Callable[[str], None] | None = None) -> None:
        self.prefix = prefix
        self.path = lock_path_for(prefix)
        self.wait = wait
        self.on_wait = on_wait
        self.fd: int | None = None
        self.dfd: int | None = None
        self.ino: int | None = None

    def _refuse(self, why: str) -> BadInput:
        return BadInput(f"{self.path} {why}; torchfit never writes through it (anyone who can write "
                        f"beside {self.prefix} could have planted it): remove it and retry")

    def _open(self, dfd: int, name: str) -> int:
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         0o600, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._refuse("is a symbolic link") from None
            if exc.errno in (errno.EISDIR, errno.ENXIO):
                raise self._refuse("is not a regular file") from None
            raise BadInput(f"cannot create {self.path} ({exc.strerror}): is the directory writable?") from None
        st = os.fstat(fd)
        why = None
        if not stat.S_ISREG(st.st_mode):
            why = "is not a regular file"
        elif st.st_nlink != 1:
            why = f"has {st.st_nlink} hard links"
        elif st.st_uid != os.geteuid():
            why = f"belongs to uid {st.st_uid}, not to you"
        if why:
            os.close(fd)
            raise self._refuse(why)
        return fd

    def __enter__(self) -> PrefixLock:
        deadline = time.monotonic() + max(self.wait, 0.0)
        announced = False
        parent, name = os.path.split(self.path)
        try:
            dfd = os.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise BadInput(f"cannot open {parent} ({exc.strerror})") from None
        try:
            while True:
                fd = self._open(dfd, name)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    os.close(fd)
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    holder = self._holder(dfd, name)
                    if time.monotonic() >= deadline:
                        raise PrefixBusy(
                            f"another torchfit install{holder} is building {self.prefix} (it holds {self.path})",
                            hint="wait for it to finish, or pass --wait SECONDS to queue behind it",
                        ) from None
                    if not announced and self.on_wait:
                        self.on_wait(f"waiting for another torchfit install{holder} into {self.prefix}")
                        announced = True
                    time.sleep(0.2)
                    continue
                ino = os.fstat(fd).st_ino
                try:
                    same = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_ino == ino
                except FileNotFoundError:
                    same = False
                if not same:  # unlinked (or replaced) by someone after we opened it: retry
                    os.close(fd)
                    continue
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self.fd, self.dfd, self.ino = fd, dfd, ino
                return self
        except BaseException:
            if self.dfd is None:
                os.close(dfd)
            raise

    @staticmethod
    def _holder(dfd: int, name: str) -> str:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        except OSError:
            return ""
        try:
            pid = os.read(fd, 32).decode("ascii", "replace").strip()
        except OSError:
            return ""
        finally:
            os.close(fd)
        return f" (pid {pid})" if pid.isdigit() else ""

    def __exit__(self, *exc: object) -> None:
        if self.fd is None or self.dfd is None:
            return
        name = os.path.basename(self.path)
        with contextlib.suppress(OSError):
            if os.stat(name, dir_fd=self.dfd, follow_symlinks=False).st_ino == self.ino:
                os.unlink(name, dir_fd=self.dfd)
        os.close(self.fd)
        os.close(self.dfd)
        self.fd = self.dfd = None


# --- the temporary env ---------------------------------------------------------------------


def temp_name(prefix: str) -> str:
    parent, name = os.path.split(prefix.rstrip(os.sep))
    return os.path.join(parent, f".{name}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(3)}")


@dataclass
class TempScan:
    """The `.NAME.torchfit-*` entries beside PREFIX, sorted by what may be done with them."""

    stale: list[str] = field(default_factory=list)  # marked, ours, their run is dead: removable
    running: list[str] = field(default_factory=list)  # marked, their run is alive: left alone
    unproven: list[str] = field(default_factory=list)  # no valid marker: never touched


def scan_temps(prefix: str) -> TempScan:
    """Classify the temporary directories of installs into PREFIX (call under the lock)."""
    parent, name = os.path.split(prefix.rstrip(os.sep))
    start = f".{name}{TEMP_MARK}"
    out = TempScan()
    try:
        entries = sorted(os.listdir(parent or "."))
    except OSError:
        return out
    for entry in entries:
        if not entry.startswith(start):
            continue
        path = os.path.join(parent, entry)
        marker = read_marker(path)
        if marker is None:
            out.unproven.append(path)
        elif owner_alive(marker):
            out.running.append(path)
        else:
            out.stale.append(path)
    return out


def find_stale_temps(prefix: str) -> list[str]:
    """Temporary envs that a dead torchfit run provably made beside PREFIX."""
    return scan_temps(prefix).stale


class TempEnv:
    """The directory an env is built in; removed unless the swap moved it to PREFIX.

    `root` (`.NAME.torchfit-PID-HEX`) holds the marker and `path` (root/env) the
    env itself, so the marker never travels into PREFIX.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.root = temp_name(prefix)
        self.path = os.path.join(self.root, ENV_SUBDIR)
        self.committed = False
        self.token: str | None = None

    def __enter__(self) -> TempEnv:
        for _ in range(5):
            try:
                self.token = str(make_marked_dir(self.root, self.prefix)["token"])
                break
            except FileExistsError:
                self.root = temp_name(self.prefix)
                self.path = os.path.join(self.root, ENV_SUBDIR)
        else:  # pragma: no cover - five random names taken
            raise OSError(errno.EEXIST, "cannot create a temporary directory", self.root)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            kill_stray_children()  # first: a stray pip would keep writing into the tree
        # Committed: root/env is PREFIX now (or holds the old env, already removed).
        with contextlib.suppress(TreeNotRemoved):  # a mount inside: swap_into_place said so
            remove_marked(self.root, self.token)


# --- the old env's users ---------------------------------------------------------------------


def wait_unused(prefix: str, wait: float, on_wait: Callable[[str], None] | None = None,
                after_build: bool = False, *, action: str = "Replacing it now would break them "
                "(a library they load later would be gone)", fix: str | None = None) -> None:
    """Return once no process uses the env at PREFIX (its python, its libraries, a cwd in it).

    Replacing an env removes its files: a process that has imported torch from it
    keeps its mapped libraries but fails on the next one it loads (`Cannot load
    .../libtorch_cpu.so`), so no env in use is replaced. With `wait` > 0 this waits
    that long for them to end; then, or at once, EnvInUse names them (exit 1).
    """
    from torchfit.host.procs import find_users

    if not os.path.isdir(prefix):
        return
    deadline = time.monotonic() + max(wait, 0.0)
    announced = False
    while True:
        users = find_users(prefix)
        if not users.procs:
            if users.unreadable and on_wait is not None and not announced:
                on_wait(f"{users.unreadable} process(es) of other users could not be checked for use of {prefix}")
            return
        if time.monotonic() >= deadline:
            break
        if on_wait is not None and not announced:
            on_wait(f"waiting for {len(users.procs)} process(es) using {prefix} to end: "
                    + "; ".join(u.describe() for u in users.procs[:3]))
            announced = True
        time.sleep(0.5)
    n = len(users.procs)
    head = "; ".join(u.describe() for u in users.procs[:5]) + (f"; and {n - 5} more" if n > 5 else "")
    done = "the new env was built and discarded; " if after_build else ""
    waited = f" after waiting {wait:g} s" if wait > 0 else ""
    raise EnvInUse(
        f"{prefix} is in use by {n} process(es){waited}: {head}. {action}; {done}{prefix} was not changed",
        [(u.pid, u.command) for u in users.procs],
        hint=fix or ("end those processes, or give a longer --wait" if wait > 0 else
                     "end those processes, or pass --wait SECONDS to wait for them to finish"),
    )


def check_in_use(prefix: str, replacing: str | None, *, allow: bool, wait: float, command: str, fix: str,
                 info: Callable[[str], None], warn: Callable[[str], None]) -> None:
    """The one in-use check of a command that changes an env in place (`add`, `doctor --fix`).

    New packages do not disturb the processes using PREFIX; replacing installed ones
    (`replacing` names them) does: a module they import later is the new version's, or
    gone. That waits for them (`wait` s) or is refused (EnvInUse, exit 1) unless `allow`
    (--allow-in-use), which only says what it does."""
    from torchfit.host.procs import find_users

    if replacing is None or allow:
        users = find_users(prefix)
        if users.procs:
            head = "; ".join(u.describe() for u in users.procs[:3])
            warn(f"{len(users.procs)} process(es) use {prefix} ({head}): "
                 + ("adding new packages does not disturb them" if replacing is None else
                    "--allow-in-use: the packages they may import later are replaced now"))
        return
    wait_unused(prefix, wait, info, action=f"`{command}` would replace {replacing} under them", fix=fix)


# --- relocation and the swap ----------------------------------------------------------------


def _forms(old: str, new: str) -> list[tuple[bytes, bytes]]:
    """How a path may appear in a script: as is, and as shells quote it.

    uv writes an apostrophe as `'"'"'` inside single quotes, POSIX style gives
    `'\''`; a double-quoted form escapes backslash, `"`, `$` and backquote.
    """
    pairs = [(old, new)]
    if "'" in old or "'" in new:
        for q in ("'\"'\"'", "'\\''"):
            pairs.append((old.replace("'", q), new.replace("'", q)))
    dq = str.maketrans({"\\": "\\\\", '"': '\\"', "$": "\\$", "`": "\\`"})
    if old.translate(dq) != old or new.translate(dq) != new:
        pairs.append((old.translate(dq), new.translate(dq)))
    return [(a.encode(), b.encode()) for a, b in pairs]


def relocate(env_dir: str, final: str) -> list[str]:
    """Rewrite the temporary path to PREFIX in the env's bin/ scripts and pyvenv.cfg.

    venv and uv write the env's absolute path into activate scripts, console-script
    shebangs (`#!/path/bin/python`, or the `exec` form for long paths or spaces) and
    pyvenv.cfg, in shell-quoted forms when the path holds an apostrophe. Every form
    is rewritten; then a file that still names the temporary directory (its unique
    `.NAME.torchfit-PID-HEX` component) fails the install rather than leave an env
    whose `activate` points at a deleted directory. Symlinks (bin/python) are left
    alone: they point at the base interpreter.
    """
    forms = _forms(env_dir, final)
    unique = os.path.basename(os.path.dirname(env_dir.rstrip(os.sep)))
    if TEMP_MARK not in unique:  # not built in a TempEnv (a plain directory)
        unique = os.path.basename(env_dir.rstrip(os.sep))
    needle = unique.encode() if TEMP_MARK in unique else b""
    changed = []
    leftover = []
    candidates = [os.path.join(env_dir, "pyvenv.cfg")]
    bindir = os.path.join(env_dir, "bin")
    with contextlib.suppress(FileNotFoundError):
        candidates += [os.path.join(bindir, n) for n in sorted(os.listdir(bindir))]
    for path in candidates:
        try:
            if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > (4 << 20):
                continue
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        new = data
        for a, b in forms:
            new = new.replace(a, b)
        if needle and needle in new:
            leftover.append(path)
        if new == data:
            continue
        mode = os.stat(path).st_mode
        tmp = path + ".torchfit-new"
        with open(tmp, "wb") as fh:
            fh.write(new)
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, path)
        changed.append(path)
    if leftover:
        raise RelocationFailed(
            f"{len(leftover)} file(s) of the env still name the temporary directory after relocation: "
            + ", ".join(os.path.basename(p) for p in leftover[:5]),
            hint="please report this with the prefix path; a path without quotes or backslashes avoids it",
        )
    return changed


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276}


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover
        return False
    fn = getattr(libc, "renameat2", None)
    ab, bb = os.fsencode(a), os.fsencode(b)
    if fn is not None:
        rc = fn(_AT_FDCWD, ab, _AT_FDCWD, bb, _RENAME_EXCHANGE)
    else:  # glibc < 2.28 (CentOS 7) has the system call but no wrapper
        nr = _SYS_RENAMEAT2.get(platform.machine())
        if nr is None:
            return False
        rc = libc.syscall(nr, _AT_FDCWD, ab, _AT_FDCWD, bb, _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)


@dataclass
class SwapOutcome:
    """What the swap did: `exchanged` once PREFIX holds the new env; `late` names the
    signals that arrived after that instant (while the old env was being removed)."""

    exchanged: bool = False
    late: list[str] = field(default_factory=list)
    kept: str | None = None  # why the old env was not removed (and where it stays)


def swap_into_place(built: str, prefix: str, on_exchanged: Callable[[], None] | None = None) -> SwapOutcome:
    """Make `built` the env at PREFIX; an old env there works until this instant.

    Signals are held from start to end. One already pending before the exchange
    cancels it: `Interrupted` is raised and PREFIX is unchanged. After the exchange
    (`on_exchanged` is called at once, signals still held) the old env, now at
    `built`, is marked as ours and removed; signals that arrived meanwhile are
    consumed and returned in `late`, never delivered as the interruption of an
    install that has already happened. PREFIX absent: one rename. Without
    RENAME_EXCHANGE: two renames, undone if the second fails.
    """
    outcome = SwapOutcome()
    old: str | None = None
    with signals_deferred() as held:
        if take_pending(held):
            name = signal.Signals(held[0]).name
            raise Interrupted(f"interrupted by {name} before the swap", held[0])
        if not os.path.lexists(prefix):
            os.rename(built, prefix)
        elif _exchange(built, prefix):
            old = built
        else:
            old = temp_name(prefix)
            os.rename(prefix, old)
            try:
                os.rename(built, prefix)
            except OSError:
                os.rename(old, prefix)
                raise
        outcome.exchanged = True
        if on_exchanged is not None:
            on_exchanged()
        if old is not None:
            if old != built:
                mark_existing(old, prefix)
            try:
                remove_tree(old)
            except TreeNotRemoved as exc:
                # A mount appeared inside the old env after the up-front check: its files stay.
                outcome.kept = f"the old env stays at {old}: {exc.strerror}; unmount it, then remove {old}"
        outcome.late = [signal.Signals(s).name for s in take_pending([])]
    return outcome


# --- the log -----------------------------------------------------------------------------------


def state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "torchfit", "logs")


class InstallLog:
    """The install's log: each step's command, exit code, time and output, redacted.

    Written as it happens to the state directory ($XDG_STATE_HOME/torchfit/logs), so
    it survives a failure; on success it is moved into PREFIX. The directory must be
    ours and writable by nobody else, and the log is a new file there (O_EXCL,
    O_NOFOLLOW, torchfit.files) written through the fd it was created with: a symlink
    planted in its place is refused, never written through. When the log cannot be
    written, `on_error` says why once and the install continues without it.
    """

    def __init__(self, label: str, on_error: Callable[[str], None] | None = None) -> None:
        from torchfit.files import PrivateDirError, create_private, private_dir

        directory = state_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"install-{label}-{stamp}-{os.getpid()}.log"
        self.path: str | None = os.path.join(directory, name)
        self.on_error = on_error
        self.error: str | None = None  # why the log is incomplete (disk full, ...), once known
        self._fd: int | None = None
        self._dfd: int | None = None
        self._name = name
        try:
            self._dfd = private_dir(directory)
            self._fd = create_private(self._dfd, name, 0o666, os.O_RDWR | os.O_APPEND)
        except PrivateDirError as exc:
            self._failed(exc, f"the log directory is not safe to write: {exc.strerror}")
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                self._failed(exc, f"{self.path} exists already (planted? torchfit never writes through it)")
            else:
                self._failed(exc)

    def _failed(self, exc: OSError, why: str | None = None) -> None:
        """Say once, through `on_error`, that the log cannot be written, and stop writing it."""
        if self.error is None:
            self.error = f"cannot write the install log {self.path} ({why or exc.strerror or exc})"
            if self.on_error is not None:
                self.on_error(self.error + "; continuing without it")
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            with contextlib.suppress(OSError):
                os.unlink(self._name, dir_fd=self._dfd)  # an empty or truncated log would mislead
        self._close_dir()
        self.path = None

    def _close_dir(self) -> None:
        if self._dfd is not None:
            os.close(self._dfd)
            self._dfd = None

    def write(self, text: str) -> None:
        if self._fd is None:
            return
        data = (redact(text.rstrip("\n")) + "\n").encode("utf-8", "replace")
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            self._failed(exc)

    def step(self, name: str, argv: list[str] | tuple[str, ...], code: int | None, seconds: float,
             stdout: str, stderr: str) -> None:
        self.write(f"\n== {name}: {' '.join(argv)}\n== exit {code} after {seconds:.1f} s")
        if stdout.strip():
            self.write(stdout)
        if stderr.strip():
            self.write("-- stderr --\n" + stderr)

    def move_into(self, directory: str, name: str = "torchfit-install.log") -> str | None:
        """Copy the log into `directory` (the new env: ours) as a new file, then remove it here."""
        if self._fd is None or self.path is None:
            return None
        dest = os.path.join(directory, name)
        out = None
        try:
            out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
            offset = 0
            while chunk := os.pread(self._fd, 1 << 20, offset):
                offset += len(chunk)
                while chunk:
                    chunk = chunk[os.write(out, chunk):]
        except OSError as exc:
            if self.on_error is not None:
                self.on_error(f"cannot move the install log into {directory} ({exc.strerror or exc}); "
                              f"it stays at {self.path}")
            if out is not None:
                with contextlib.suppress(OSError):
                    os.unlink(dest)  # a partial copy
            return self.path
        finally:
            if out is not None:
                os.close(out)
        with contextlib.suppress(OSError):
            os.unlink(self._name, dir_fd=self._dfd)
        os.close(self._fd)
        self._fd = None
        self._close_dir()
        self.path = dest
        return dest
