"""Which running processes use a directory (an env `install --force` would replace).

A process uses a directory when its executable, its working directory or its root
is inside it, when it has a file from it mapped (a shared library: `import torch`
maps libtorch_cpu.so) or open. All of it is read from /proc: `parse_maps` is pure,
`find_users` reads every /proc/PID it may. Processes of other users cannot be read
without privileges; they are counted, never guessed.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

_MAX_COMMAND = 160


@dataclass(frozen=True)
class ProcUse:
    """One process and how it uses the directory (the first way found)."""

    pid: int
    command: str
    how: str  # "runs bin/python", "works in it", "has lib/x.so mapped", "has x open"

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command}) {self.how}"


@dataclass
class Users:
    """The processes found using a directory, and how many could not be read."""

    procs: list[ProcUse] = field(default_factory=list)
    unreadable: int = 0


def parse_maps(text: str) -> list[str]:
    """The file paths of /proc/PID/maps (the sixth column; ' (deleted)' removed), in order, once each."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            path = parts[5]
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            seen.setdefault(path, None)
    return list(seen)


def _inside(path: str, root: str) -> bool:
    return path == root[:-1] or path.startswith(root)


def _command(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return "?"
    argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    text = " ".join(argv) or "?"
    return text if len(text) <= _MAX_COMMAND else text[: _MAX_COMMAND - 3] + "..."


def _argv0(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read(4096).split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    except OSError:
        return ""


def _use_of(pid: str, root: str) -> str | None:
    """How process `pid` uses `root` (a real path ending in '/'), None if it does not.
    PermissionError when its /proc entries are closed to us."""
    base = f"/proc/{pid}"
    for link, how in (("exe", "runs {}"), ("cwd", "works in it ({})"), ("root", "has it as its root ({})")):
        try:
            target = os.readlink(f"{base}/{link}")
        except FileNotFoundError:
            continue
        except PermissionError:
            raise
        except OSError:
            continue
        target = target.removesuffix(" (deleted)")
        if _inside(target, root):
            return how.format(os.path.relpath(target, root) if target != root[:-1] else ".")
    try:
        with open(f"{base}/maps", encoding="utf-8", errors="surrogateescape") as fh:
            maps = fh.read()
    except FileNotFoundError:
        return None
    for path in parse_maps(maps):
        if _inside(path, root):
            return f"has {os.path.relpath(path, root)} mapped"
    # A venv's bin/python is a symlink: /proc/PID/exe names the interpreter it points to, and a
    # python that imported nothing with a library maps nothing of the env. Its argv[0] names it.
    argv0 = _argv0(pid)
    if argv0 and os.sep in argv0:
        with contextlib.suppress(OSError):
            path = argv0 if os.path.isabs(argv0) else os.path.join(os.readlink(f"{base}/cwd"), argv0)
            # the directory resolved (the env reached through a symlink), the file itself not
            path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
            if _inside(path, root):
                return f"runs {os.path.relpath(path, root)}"
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"{base}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"{base}/fd/{fd}").removesuffix(" (deleted)")
                if _inside(target, root):
                    return f"has {os.path.relpath(target, root)} open"
    return None


def find_users(directory: str, exclude: frozenset[int] = frozenset()) -> Users:
    """Every process (but this one and `exclude`) that uses `directory`, by pid."""
    root = os.path.realpath(directory).rstrip(os.sep) + os.sep
    out = Users()
    skip = exclude | {os.getpid()}
    try:
        pids = sorted((e for e in os.listdir("/proc") if e.isdigit()), key=int)
    except OSError:
        return out
    for pid in pids:
        if int(pid) in skip:
            continue
        try:
            how = _use_of(pid, root)
        except PermissionError:
            out.unreadable += 1
            continue
        except OSError:
            continue  # it ended meanwhile
        if how is not None:
            out.procs.append(ProcUse(int(pid), _command(pid), how))
    return out
