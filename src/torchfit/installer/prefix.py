"""Building an env without ever breaking what exists at PREFIX.

- `PrefixLock`: `fcntl.flock` on `PREFIX.lock` beside PREFIX, so a second install
  into the same PREFIX waits (`--wait`) or fails clearly (`PrefixBusy`).
- `TempEnv`: the env is built beside PREFIX under a temporary name
  (`.NAME.torchfit-PID-XXXX`, same filesystem, so the final rename is atomic) and
  removed on any failure, Ctrl-C, SIGTERM or SIGHUP (`interrupts_raise`).
- `relocate`: a venv records its own path (activate scripts, script shebangs,
  pyvenv.cfg); those are rewritten from the temporary path to PREFIX before the swap.
- `swap_into_place`: `renameat2(RENAME_EXCHANGE)` swaps the finished env with the old
  one atomically (two renames where the filesystem lacks it); the old env keeps
  working until that instant, then is removed.
- `InstallLog`: every step's command and output, redacted, appended as it happens.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import secrets
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from types import FrameType

from torchfit.errors import BadInput, TorchfitError
from torchfit.redact import redact

TEMP_MARK = ".torchfit-"
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class PrefixBusy(TorchfitError):
    """Another torchfit install holds PREFIX.lock (exit 1)."""

    reference = "prefix-locked"


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, delivered like Ctrl-C so the same cleanup runs (exit 130)."""


# --- signals ------------------------------------------------------------------------------


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise `Interrupted` (a KeyboardInterrupt) in the main thread.

    Their default action kills torchfit on the spot, leaving a half-built env and a
    pip or uv that runs on in its own session. As exceptions they unwind through the
    runner (which kills the child's process group) and `TempEnv` (which removes the
    temporary env).
    """

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(f"interrupted by {signal.Signals(signum).name}")

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread: leave signals alone
            pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP back while the filesystem is between two states."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def kill_child_groups() -> list[int]:
    """SIGKILL the process groups of this process's children that lead their own session.

    The runner starts pip, uv and pyenv in their own session and kills that group when
    interrupted while it waits; a Ctrl-C landing in the instant between fork and
    Popen returning escapes it (the child has exec'd, the runner never got its pid).
    After an interruption the install calls this so that no child outlives it
    (Linux: children found through /proc).
    """
    me = os.getpid()
    killed: list[int] = []
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:  # pragma: no cover - no /proc
        return killed
    for entry in entries:
        pid = int(entry)
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                fields = fh.read().rpartition(")")[2].split()
            state, ppid, pgid = fields[0], int(fields[1]), int(fields[2])
        except (OSError, ValueError, IndexError):
            continue
        if ppid != me or pgid != pid:
            continue
        if state != "Z":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            killed.append(pid)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
    return killed


# --- the PREFIX lock -----------------------------------------------------------------------


def lock_path_for(prefix: str) -> str:
    return prefix.rstrip(os.sep) + ".lock"


class PrefixLock:
    """An exclusive `flock` on PREFIX.lock, held for the whole install.

    The file holds the owner's pid for the message a waiting install prints. It is
    unlinked on release while still locked; an acquirer that locked a file someone
    has since unlinked (inode changed) starts again, so two installs never both
    believe they own PREFIX.
    """

    def __init__(self, prefix: str, wait: float = 0.0, on_wait: Callable[[str], None] | None = None) -> None:
        self.prefix = prefix
        self.path = lock_path_for(prefix)
        self.wait = wait
        self.on_wait = on_wait
        self.fd: int | None = None

    def __enter__(self) -> PrefixLock:
        deadline = time.monotonic() + max(self.wait, 0.0)
        announced = False
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise BadInput(f"cannot create {self.path} ({exc.strerror}): is the directory writable?") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                holder = self._holder()
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
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # unlinked by its previous owner after we opened it: retry
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            self.fd = fd
            return self

    def _holder(self) -> str:
        try:
            with open(self.path, encoding="utf-8") as fh:
                pid = fh.read().strip()
        except OSError:
            return ""
        return f" (pid {pid})" if pid.isdigit() else ""

    def __exit__(self, *exc: object) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self.fd)
        self.fd = None


# --- the temporary env ---------------------------------------------------------------------


def temp_name(prefix: str) -> str:
    parent, name = os.path.split(prefix.rstrip(os.sep))
    return os.path.join(parent, f".{name}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(3)}")


def find_stale_temps(prefix: str) -> list[str]:
    """Temporary envs of earlier installs into PREFIX that died (only call under the lock)."""
    parent, name = os.path.split(prefix.rstrip(os.sep))
    start = f".{name}{TEMP_MARK}"
    try:
        entries = os.listdir(parent or ".")
    except OSError:
        return []
    return sorted(os.path.join(parent, e) for e in entries if e.startswith(start))


def remove_tree(path: str) -> None:
    """rm -rf, with signals held back so that a second Ctrl-C cannot leave half of it."""
    with signals_deferred():
        shutil.rmtree(path, ignore_errors=True)
        if os.path.lexists(path) and not os.path.isdir(path):
            with contextlib.suppress(OSError):
                os.unlink(path)


class TempEnv:
    """The directory an env is built in; removed unless `commit` moved it to PREFIX."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.path = temp_name(prefix)
        self.committed = False

    def __enter__(self) -> TempEnv:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self.committed:
            return
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            kill_child_groups()  # first: a stray pip would keep writing into the tree
        remove_tree(self.path)


# --- relocation and the swap ----------------------------------------------------------------


def relocate(env_dir: str, final: str) -> list[str]:
    """Rewrite the temporary path to PREFIX in the env's bin/ scripts and pyvenv.cfg.

    venv and uv write the env's absolute path into activate scripts, console-script
    shebangs (`#!/path/bin/python`, or pip's `exec` form for long paths) and
    pyvenv.cfg. The temporary name is longer than PREFIX (a leading "." and a
    suffix), so a shebang that fitted the kernel's limit still fits. Symlinks
    (bin/python) are left alone: they point at the base interpreter.
    """
    old, new = env_dir.encode(), final.encode()
    changed = []
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
        if old not in data:
            continue
        mode = os.stat(path).st_mode
        tmp = path + ".torchfit-new"
        with open(tmp, "wb") as fh:
            fh.write(data.replace(old, new))
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, path)
        changed.append(path)
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


def swap_into_place(built: str, prefix: str) -> None:
    """Make `built` the env at PREFIX; an old env there works until this instant.

    PREFIX absent: one rename. PREFIX present: an atomic exchange, then the old env
    (now at the temporary name) is removed; without RENAME_EXCHANGE, two renames,
    undone if the second fails.
    """
    with signals_deferred():
        if not os.path.lexists(prefix):
            os.rename(built, prefix)
            return
        if _exchange(built, prefix):
            old = built
        else:
            old = temp_name(prefix)
            os.rename(prefix, old)
            try:
                os.rename(built, prefix)
            except OSError:
                os.rename(old, prefix)
                raise
    remove_tree(old)


# --- the log -----------------------------------------------------------------------------------


def state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "torchfit", "logs")


class InstallLog:
    """The install's log: each step's command, exit code, time and output, redacted.

    Written as it happens to the state directory ($XDG_STATE_HOME/torchfit/logs), so
    it survives a failure; on success it is moved into PREFIX.
    """

    def __init__(self, label: str) -> None:
        directory = state_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.path: str | None = os.path.join(directory, f"install-{label}-{stamp}-{os.getpid()}.log")
        try:
            os.makedirs(directory, exist_ok=True)
            with open(self.path, "w", encoding="utf-8"):
                pass
        except OSError:
            self.path = None  # no writable home: log to nowhere rather than fail the install

    def write(self, text: str) -> None:
        if self.path is None:
            return
        with contextlib.suppress(OSError), open(self.path, "a", encoding="utf-8") as fh:
            fh.write(redact(text.rstrip("\n")) + "\n")

    def step(self, name: str, argv: list[str] | tuple[str, ...], code: int | None, seconds: float,
             stdout: str, stderr: str) -> None:
        self.write(f"\n== {name}: {' '.join(argv)}\n== exit {code} after {seconds:.1f} s")
        if stdout.strip():
            self.write(stdout)
        if stderr.strip():
            self.write("-- stderr --\n" + stderr)

    def move_into(self, directory: str, name: str = "torchfit-install.log") -> str | None:
        if self.path is None:
            return None
        dest = os.path.join(directory, name)
        try:
            shutil.move(self.path, dest)
        except OSError:
            return None
        self.path = dest
        return dest
