"""The one place torchfit starts a subprocess, and the guarantee that none outlives it.

Every external command (nvidia-smi, pyenv, pip, uv, torchrun, the verify
workers) goes through `Runner.run` (run to completion) or `spawn` (a watched
child the caller polls): an argv list (never `shell=True`), the child in its own
process group so that a timeout kills everything it started, and every message
passed through `redact`. A probe that needs a different PATH (a test's fake
nvidia-smi) gets a `Runner(env_overrides=...)`. `exec_replace` is for `torchfit
run`, which becomes its command.

Every child dies with torchfit:

- on Linux each child is started with `PR_SET_PDEATHSIG(SIGKILL)` (prctl in the
  forked child, before exec), so a SIGKILLed torchfit takes its children with it;
  a child whose parent died before the prctl exits at once;
- what the children start is covered by a watchdog process (below): each child is a
  PR_SET_CHILD_SUBREAPER, so its descendants stay its descendants, and when torchfit
  dies by any means the watchdog kills the registered groups and their descendants;
- every live child is registered; `kill_all()` kills their process groups, and
  `torchfit.cli.main` calls it after any command (and on SIGINT/SIGTERM/SIGHUP,
  which `interrupts.interrupts_raise` turns into a KeyboardInterrupt: exit 130);
- `kill_stray_children()` catches a child that exec'd in the instant between
  fork and Popen returning (found through /proc).

Waits are bounded and visible: `run` takes a timeout (always), an optional
`stall` (no I/O from the child's process group for that long: killed, `ToolStalled`)
and an `on_wait(elapsed_s, io_bytes)` callback called about every second, which
the progress display turns into a line naming what is awaited and since when.
A child's exit ends the wait: DRAIN_S later the runner stops reading pipes that a
process the child left behind (a daemon) still holds, and kills that process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from torchfit._backports import FROZEN
from torchfit.background import no_fork
from torchfit.errors import ProbeFailed, ToolMissing, ToolStalled, ToolTimeout
from torchfit.interrupts import SIGNALS
from torchfit.proctree import descendants, find_pids_with, group_activity, pipe_holders
from torchfit.redact import has_credentials, redact

# --- every child dies with torchfit ------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _load_prctl() -> Callable[..., int] | None:
    # Resolved in the parent, never in a forked child (no dlopen after fork): by
    # _child_setup, on the first spawn. ctypes is imported here, not at start-up.
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - not glibc/musl
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return fn


_prctl_cache: list[Callable[..., int] | None] = []


def _prctl() -> Callable[..., int] | None:
    if not _prctl_cache:  # two threads may both load it: the same function, harmless
        _prctl_cache.append(_load_prctl())
    return _prctl_cache[0]


def _child_setup(parent: int) -> Callable[[], None]:
    """The preexec_fn of every child: die with `parent` (Linux), or now if it is gone.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends; torchfit's
    runner waits for its child in the thread that started it, so the two coincide.
    """

    prctl = _prctl()

    def setup() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # Orphaned descendants are re-parented to the child, not to init, so the
            # watchdog still finds a grandchild that setsid()s and double-forks.
            prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if os.getppid() != parent:  # torchfit died between fork and prctl
            os._exit(137)

    return setup


_live: dict[int, subprocess.Popen[str]] = {}
_live_lock = threading.Lock()


# --- the watchdog: grandchildren die with torchfit too ----------------------------------
#
# PDEATHSIG reaches only the child itself. What the child starts (pip's build backend, a uv
# helper, torchrun's workers) would be orphaned by a SIGKILLed torchfit. So the first spawn
# starts one watchdog per torchfit process: `python -I -S -c _WATCHDOG`, in its own session
# (a `kill -9 -PGID` of torchfit's group spares it), reading a pipe whose only writer is
# torchfit. spawn() tells it "+PGID" (a group torchfit started), release() "-PGID". While a
# group is registered it records, twice a second, the group's members and their descendants
# by parent (a grandchild that setsid()s stays one: each child is started as a
# PR_SET_CHILD_SUBREAPER, so an orphaned descendant is re-parented to it, not to init).
# When the pipe reaches EOF (torchfit is gone, by any death) it SIGKILLs the registered
# groups, every descendant it saw (same start time: no pid reuse), and exits. When torchfit
# ends normally nothing is registered any more and it just exits.

_WATCHDOG = r"""
import os, select, signal, sys
def scan():
    procs = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open("/proc/%s/stat" % e) as fh:
                    f = fh.read().rpartition(")")[2].split()
                procs[int(e)] = (int(f[1]), int(f[2]), f[19], f[0])
            except (OSError, ValueError, IndexError):
                pass
    return procs
def tree(groups, procs):
    found = {p for p, v in procs.items() if v[1] in groups and p != me}
    kids = {}
    for p, v in procs.items():
        kids.setdefault(v[0], []).append(p)
    todo = list(found)
    while todo:
        for k in kids.get(todo.pop(), ()):
            if k not in found and k != me:
                found.add(k); todo.append(k)
    return found
def kill(groups, seen):
    procs = scan()  # the tree first: a killed parent re-parents its children away
    doomed = [p for p in tree(groups, procs) | set(seen)
              if p in procs and (p not in seen or seen[p] == procs[p][2])]
    for g in groups:
        try: os.killpg(g, signal.SIGKILL)
        except OSError: pass
    for p in doomed:
        try: os.kill(p, signal.SIGKILL)
        except OSError: pass
me = os.getpid()
signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)
fd = sys.stdin.fileno(); groups = set(); seen = {}; buf = b""
while True:
    r, _, _ = select.select([fd], [], [], 0.5 if groups else None)
    if r:
        data = os.read(fd, 4096)
        if not data:
            break
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            try: g = int(line[1:])
            except ValueError: continue
            if line[:1] == b"+": groups.add(g)
            elif g in groups:
                groups.discard(g); seen = {}
    if groups:
        procs = scan()
        seen = {p: t for p, t in seen.items() if p in procs and procs[p][2] == t}
        seen.update((p, procs[p][2]) for p in tree(groups, procs))
for _ in range(2):
    kill(groups, seen)
"""

_watchdog_fd: list[int] = []      # the write end; empty until the first spawn
_watchdog_pid: list[int] = []
_watchdog_lock = threading.Lock()


def _watchdog_send(message: str) -> None:
    """Tell the watchdog about a group; start it first (once per process, lazily)."""
    with _watchdog_lock:
        if not _watchdog_fd:
            if _watchdog_pid or not sys.platform.startswith("linux"):
                return  # could not be started once: PDEATHSIG alone
            _start_watchdog()
            if not _watchdog_fd:
                return
        with contextlib.suppress(OSError):  # full pipe (EAGAIN) or the watchdog died
            os.write(_watchdog_fd[0], message.encode() + b"\n")


def _start_watchdog() -> None:
    read, write = os.pipe()  # both non-inheritable: no child but the watchdog gets them
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, "torchfit-watchdog"],
            stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, env={}, cwd="/")  # no secrets, no mount held
    except OSError:
        os.close(write)
        _watchdog_pid.append(0)
        return
    finally:
        os.close(read)
    os.set_blocking(write, False)  # never block torchfit on a slow watchdog
    _watchdog_pid.append(proc.pid)
    _watchdog_fd.append(write)
    # Not waited for: it outlives this process by design (a few milliseconds).
    proc.returncode = 0  # keep subprocess's __del__ from listing it as still running


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog, once started (None before the first spawn)."""
    return _watchdog_pid[0] if _watchdog_pid and _watchdog_pid[0] else None


# What spawn()'s callers pass and catch, so they need not import subprocess themselves.
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
TimeoutExpired = subprocess.TimeoutExpired


def spawn(argv: Sequence[str], **popen: object) -> subprocess.Popen[str]:
    """Start a watched child: its own session/process group, PDEATHSIG, registered.

    Keyword arguments go to `subprocess.Popen` (stdout, env, cwd, ...). The caller
    waits for it (or `kill_tree`s it) and then calls `release`; whatever is still
    registered when torchfit ends is killed by `kill_all`.
    """
    if "preexec_fn" in popen or "start_new_session" in popen or "process_group" in popen:
        raise ValueError("spawn() sets the child's session and death signal itself")
    with no_fork():  # the preexec_fn runs the at-fork hooks: never beside a thread's import of logging
        proc: subprocess.Popen[str] = subprocess.Popen(  # type: ignore[call-overload]
            list(argv), start_new_session=True, preexec_fn=_child_setup(os.getpid()), **popen)
    with _live_lock:
        _live[proc.pid] = proc
    _watchdog_send(f"+{proc.pid}")
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    """Forget a child that has been waited for."""
    with _live_lock:
        known = _live.pop(proc.pid, None) is not None
    if known:
        _watchdog_send(f"-{proc.pid}")


def live_children() -> list[subprocess.Popen[str]]:
    """The registered children not yet released (running or not yet waited for)."""
    with _live_lock:
        return list(_live.values())


def _killpg(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _signal_all(proc: subprocess.Popen[str], tree: dict[int, str], sig: int) -> None:
    """`sig` to the child's process group and to every process it started: `tree` (its
    descendants seen earlier, grown by those seen now) where each is still the same process
    (same start time: no pid reuse)."""
    _killpg(proc.pid, sig)
    if proc.poll() is None:
        tree.update(descendants(proc.pid))
    for pid, started in tree.items():
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
                if fh.read().rpartition(")")[2].split()[19] != started:
                    continue
        except (OSError, IndexError):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_tree(proc: subprocess.Popen[str], grace: float = 2.0) -> None:
    """SIGTERM the child's process group and every process it started, SIGKILL them after
    `grace` s; reap; release."""
    tree = descendants(proc.pid) if proc.poll() is None else {}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal_all(proc, tree, sig)
        if proc.poll() is None and sig == signal.SIGTERM and grace > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
    # The group may hold members after the leader exits: SIGKILL it once more.
    _signal_all(proc, tree, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=max(grace, 1.0))
    release(proc)


def kill_all(grace: float = 0.5, strays: bool = True) -> list[int]:
    """Kill every registered child's process group (torchfit is ending); return their pids.

    `strays`: also children that lead their own session but were never registered
    (a signal between fork and registration); only right for a process that owns all
    its children (the CLI), so `main` passes it after an interruption only.
    """
    procs = live_children()
    trees = {proc.pid: descendants(proc.pid) if proc.poll() is None else {} for proc in procs}
    for proc in procs:
        _signal_all(proc, trees[proc.pid], signal.SIGTERM)
    end = time.monotonic() + grace
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, end - time.monotonic()))
    for proc in procs:
        _signal_all(proc, trees[proc.pid], signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        release(proc)
    return [p.pid for p in procs] + (kill_stray_children() if strays else [])


def _signal_tree(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid and pid != os.getpgid(0):
            os.killpg(pid, sig)  # a group leader (torchrun, each worker): its children too
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_marked(marker: str, proc: subprocess.Popen[str] | None = None, grace: float = 3.0) -> bool:
    """SIGTERM, then SIGKILL after `grace`, `proc` (its whole group when it leads one) and
    every live process whose command line holds `marker` (a unique work path: torchrun's
    workers live in sessions of their own). True when anything was signalled."""
    signalled = False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = set(find_pids_with(marker))
        if proc is not None and proc.poll() is None:
            pids.add(proc.pid)
        if not pids:
            break
        signalled = True
        for pid in pids:
            _signal_tree(pid, sig)
        end = time.monotonic() + grace
        while time.monotonic() < end:
            if proc is not None:
                proc.poll()
            if not find_pids_with(marker) and (proc is None or proc.poll() is not None):
                break
            time.sleep(0.05)
    return signalled


def kill_stray_children() -> list[int]:
    """SIGKILL the process groups of this process's children that lead their own session.

    A signal landing between fork and Popen returning leaves a child (already
    exec'd) that nobody registered; it is found through /proc (Linux).
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
        if ppid != me or pgid != pid or pid == watchdog_pid():
            continue
        if state != "Z":
            _killpg(pid, signal.SIGKILL)
            killed.append(pid)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
    return killed


def exec_replace(path: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Become `argv` (torchfit run): flush, restore default signal actions, execve.

    No child is left: this process *is* the command from here on, with its own exit
    status and signals.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    kill_all(grace=0.2)
    for sig in SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)
    os.execve(path, list(argv), dict(env))


@dataclass(**FROZEN)
class RunResult:
    """What a finished command did. Output is text (UTF-8, undecodable bytes replaced)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def check(self) -> RunResult:
        """Return self when the command succeeded, else raise ProbeFailed (redacted)."""
        if self.returncode != 0:
            raise ProbeFailed(self.argv, self.returncode, redact(self.stderr or self.stdout))
        return self


class Runner:
    """Runs argv lists with a timeout; the environment is os.environ + overrides.

    `env_overrides` (given once, e.g. a test's PATH) and the per-call `env` are
    laid over the current `os.environ`, in that order. `kill_grace` is how long a
    timed-out process group gets between SIGTERM and SIGKILL.
    """

    def __init__(
        self, env_overrides: Mapping[str, str] | None = None, *, kill_grace: float = 2.0,
        unset: Iterable[str] = (),
    ) -> None:
        self.env_overrides = dict(env_overrides or {})
        self.kill_grace = kill_grace
        self.unset = tuple(unset)  # never inherited by any child of this runner (index_variables())

    def environ(self, env: Mapping[str, str] | None = None, unset: Iterable[str] = ()) -> dict[str, str]:
        """The environment a child gets: os.environ, the overrides, `env`, less `unset` (and the runner's)."""
        merged = dict(os.environ)
        merged.update(self.env_overrides)
        if env:
            merged.update(env)
        for name in (*self.unset, *unset):
            merged.pop(name, None)
        return merged

    def which(self, name: str, env: Mapping[str, str] | None = None) -> str | None:
        """Where `name` is on the child's PATH (not necessarily this process's PATH)."""
        return shutil.which(name, path=self.environ(env).get("PATH", os.defpath))

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        unset: Iterable[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        input: str | None = None,
        stall: float | None = None,
        on_wait: Callable[[float, int], None] | None = None,
        on_line: Callable[[str, str], None] | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> RunResult:
        """Run `argv` to completion or until `timeout` seconds pass.

        A non-zero exit is a result, not an error. Raises ToolMissing when argv[0]
        cannot be found or executed, ToolTimeout when the timeout passes (after
        killing the child's whole process group), ToolStalled when `stall` is given
        and the group did no I/O for that many seconds. `on_wait(elapsed_s, io_bytes)`
        is called about once a second while the command runs. `unset`: variables the
        child must not inherit (pip's `unset_environ`). `on_line(stream, line)` ("stdout" or
        "stderr", without its newline) sees each complete line while the command runs
        (within about a quarter second of its arrival, in the order of each stream), and the
        last lines once it ended; the result still holds the whole output. `on_start()` is
        called once the child has started (work of the caller's that can run beside it).
        """
        if timeout is None or not timeout > 0:
            # A programming error, not a host fact: every command needs a bound.
            raise ValueError(f"Runner.run needs a positive timeout, got {timeout!r}")
        argv = tuple(str(a) for a in argv)
        if not argv:
            raise ToolMissing(argv, "(empty argv)")
        child_env = self.environ(env, unset)
        exe = argv[0]
        if os.sep not in exe:
            # Look the tool up on the child's PATH ourselves: a clear ToolMissing
            # instead of whatever FileNotFoundError text the platform gives.
            found = shutil.which(exe, path=child_env.get("PATH", os.defpath))
            if found is None:
                raise ToolMissing(argv)
            exe = found
        start = time.monotonic()
        try:
            proc = spawn(
                argv,
                executable=exe,  # the child still sees argv[0] as given
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                cwd=cwd,
                encoding="utf-8",
                errors="replace",
            )
        except FileNotFoundError:
            if cwd is not None and not os.path.isdir(cwd):
                raise ProbeFailed(argv, None, f"working directory {cwd} does not exist") from None
            raise ToolMissing(
                argv, "not found" if os.sep in argv[0] else "not found on PATH"
            ) from None
        except PermissionError:
            raise ToolMissing(argv, "is not executable") from None
        except OSError as exc:
            raise ToolMissing(argv, f"could not be started: {redact(str(exc))}") from None
        try:
            if on_start is not None:
                on_start()
            lines = _LineFeed(on_line) if on_line is not None else None
            stdout, stderr = self._watch(proc, argv, input, timeout, stall, on_wait, start, lines)
            if lines is not None:
                lines.feed(*(_partial_output(proc) if _has_partial(proc) else (stdout, stderr)), final=True)
        except subprocess.TimeoutExpired:
            out, err = self._kill_group(proc)
            if lines is not None:
                lines.feed(*(_partial_output(proc) if _has_partial(proc) else (out, err)), final=True)
            raise ToolTimeout(argv, timeout, out, err) from None
        except ToolStalled:
            raise
        except BaseException:
            # KeyboardInterrupt (exit 130) must not leave a wedged tool behind.
            self._kill_group(proc)
            raise
        finally:
            if proc.returncode is not None:
                release(proc)
        return RunResult(argv, proc.returncode, stdout, stderr, time.monotonic() - start)

    def _watch(self, proc: subprocess.Popen[str], argv: tuple[str, ...], input: str | None,
               timeout: float, stall: float | None, on_wait: Callable[[float, int], None] | None,
               start: float, lines: _LineFeed | None = None) -> tuple[str, str]:
        """communicate() in one-second slices: report progress, detect a stall, and stop
        waiting on the pipes DRAIN_S after the child itself exited (a daemon it left holds them)."""
        last_io, last_change = -1, time.monotonic()
        first = True
        exited_at: float | None = None
        slice_s = 0.25 if lines is not None else 1.0
        while True:
            now = time.monotonic()
            remaining = start + timeout - now
            if remaining <= 0:
                raise subprocess.TimeoutExpired(list(argv), timeout)
            try:
                # Retrying communicate() after TimeoutExpired loses no output (Python docs).
                return proc.communicate(input=input if first else None, timeout=min(slice_s, remaining))
            except subprocess.TimeoutExpired:
                first = False
            if lines is not None:
                lines.feed(*_partial_output(proc))
            if proc.poll() is not None:
                exited_at = exited_at if exited_at is not None else time.monotonic()
                if time.monotonic() - exited_at >= DRAIN_S:
                    return self._drain(proc)
            if stall is None and on_wait is None:
                continue
            io, stopped = group_activity(proc.pid)
            now = time.monotonic()
            if io != last_io or stopped:
                # A stopped child (SIGSTOP, Ctrl-Z) waits on whoever stopped it, not on an
                # index: its time is not a stall (the timeout still bounds the step).
                last_io, last_change = io, now
            if on_wait is not None:
                on_wait(now - start, max(io, 0))
            if stall is not None and now - last_change >= stall:
                out, err = self._kill_group(proc)
                raise ToolStalled(argv, stall, now - start, out, err)

    def _drain(self, proc: subprocess.Popen[str]) -> tuple[str, str]:
        """The child exited but its pipes are still open: a process it started (a daemon,
        maybe in a session of its own) inherited them. Kill its group and every process
        holding the pipes, then read what is left (bounded); the output so far is kept."""
        _killpg(proc.pid, signal.SIGKILL)
        for pid in pipe_holders([s for s in (proc.stdout, proc.stderr) if s is not None]):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=DRAIN_S)
        except subprocess.TimeoutExpired:  # a holder we may not kill (another user's)
            out, err = _partial_output(proc)
            for stream in (proc.stdout, proc.stderr, proc.stdin):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        return out or "", err or ""

    def _kill_group(self, proc: subprocess.Popen[str]) -> tuple[str, str]:
        """SIGTERM the child's process group and every process it started (a daemon that left the
        group: setsid), then SIGKILL them; return what it printed."""
        tree = descendants(proc.pid) if proc.poll() is None else {}
        try:
            for sig, wait in ((signal.SIGTERM, self.kill_grace), (signal.SIGKILL, self.kill_grace)):
                _signal_all(proc, tree, sig)
                try:
                    out, err = proc.communicate(timeout=wait)
                    _signal_all(proc, tree, signal.SIGKILL)  # what ignored the SIGTERM its parent died of
                    return out or "", err or ""
                except subprocess.TimeoutExpired:
                    continue
            # A grandchild that left our group (setsid) may still hold the pipes open;
            # stop waiting for it rather than hang torchfit.
            for stream in (proc.stdout, proc.stderr, proc.stdin):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.kill_grace)
            return "", ""
        finally:
            if proc.returncode is not None:
                release(proc)


# How long the runner still reads a child's pipes after the child itself exited: what it
# wrote is in the pipe already; a writer left after that is a descendant holding the pipe.
DRAIN_S = 2.0


class _LineFeed:
    """Hands `on_line` each complete line of a running command's output once: it is given
    the whole output so far (communicate keeps it) and remembers how far it got."""

    def __init__(self, on_line: Callable[[str, str], None]) -> None:
        self.on_line = on_line
        self.done = {"stdout": 0, "stderr": 0}

    def feed(self, stdout: str, stderr: str, *, final: bool = False) -> None:
        for name, text in (("stdout", stdout or ""), ("stderr", stderr or "")):
            start = self.done[name]
            end = len(text) if final else text.rfind("\n", start) + 1
            if end <= start:
                continue
            self.done[name] = end
            for line in text[start:end].splitlines():
                self.on_line(name, line)


def _has_partial(proc: subprocess.Popen[str]) -> bool:
    return bool(getattr(proc, "_fileobj2output", None))


def _partial_output(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """What communicate() had read before it was abandoned (CPython keeps it per stream)."""
    chunks = getattr(proc, "_fileobj2output", None) or {}
    out = []
    for stream in (proc.stdout, proc.stderr):
        data = b"".join(chunks.get(stream, [])) if stream is not None else b""
        out.append(data.decode("utf-8", errors="replace"))
    return out[0], out[1]


# --- limits and tools every step that runs one shares ----------------------------------

# A step whose processes read and write nothing for this long is waiting on an index that
# does not answer (uv and pip retry a silent mirror for 12-18 minutes): it is killed.
STALL_S = 120.0
STALL_ENV = "TORCHFIT_STALL_TIMEOUT"


# Where the user's package sources, and their credentials, live in the environment:
# pip's and uv's index settings and torchfit's own. Only an installer step needs them.
INDEX_VARIABLES = frozenset({
    "TORCHFIT_TORCH_INDEX_URL", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST",
    "PIP_CLIENT_CERT", "PIP_CONFIG_FILE", "UV_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS", "UV_CONFIG_FILE", "UV_PUBLISH_URL", "UV_PUBLISH_TOKEN", "UV_PUBLISH_USERNAME",
    "UV_PUBLISH_PASSWORD", "TWINE_PASSWORD", "TWINE_USERNAME", "TWINE_REPOSITORY_URL",
})


def index_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The variables of `environ` (os.environ) a child that installs nothing must not inherit.

    The env's own Python (install's check, verify's ranks, doctor's worker) and the
    tools doctor runs need no package source: the index settings (INDEX_VARIABLES),
    uv's per-index credentials (UV_INDEX_<NAME>_USERNAME/_PASSWORD) and any variable
    whose value is a URL carrying a credential (`redact`'s rule) stay with torchfit.
    Pass the answer as `Runner.run(unset=...)`, or build a spawned child's env with
    `without_index_variables`.
    """
    env = os.environ if environ is None else environ
    return [k for k, v in env.items()
            if k in INDEX_VARIABLES or k.startswith("UV_INDEX_") or has_credentials(v)]


def without_index_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `environ` (os.environ) less `index_variables`: a whole environment for `spawn`."""
    env = dict(os.environ if environ is None else environ)
    for name in index_variables(env):
        del env[name]
    return env


STALL_MAX = 1e7


def parse_stall(raw: object) -> float | None:
    """The one reading of a stall limit, wherever it is given ($TORCHFIT_STALL_TIMEOUT, a
    configuration file's `stall-timeout`: cli/settings.py checks both with it): a finite number
    of seconds > 0 and < STALL_MAX, else None."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if 0 < value < STALL_MAX else None


def stall_timeout() -> float:
    """$TORCHFIT_STALL_TIMEOUT, else STALL_S. The command line refuses a value parse_stall does
    not take before any step runs (cli/settings.stall_setting), so the limit `torchfit config`
    shows is this one."""
    return parse_stall(os.environ.get(STALL_ENV, "")) or STALL_S
