"""The one way tests run the torchfit CLI: in a real subprocess, or in this process.

`run_cli` is `python -m torchfit ARGS` as a real subprocess that runs to its end (exit
codes, stdout and stderr exactly as a user sees them); `start_cli` starts the same command
and returns the running process, for tests that signal it or read it as it goes. Both build
the command with `torchfit_argv`. `run_clean` is `run_cli` in `clean_env()` (this tree's
src first on PYTHONPATH, no COLUMNS, no $TORCHFIT_TORCH_INDEX_URL) from the repository
root; `bad_input` asserts the bad-input contract (exit 2, one line, no traceback). `run_main` calls `torchfit.cli.main` in this process, for
tests whose HTTP is served by `responses` (which only sees requests made here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torchfit_argv(*args: str, python: str = sys.executable, via: list[str] | None = None) -> list[str]:
    """`[*via, python, -m, torchfit, *args]`: `via` is a wrapper (setpriv, `torchfit run`)."""
    return [*(via or []), python, "-m", "torchfit", *args]


def _env(env: dict[str, str] | None, base_env: dict[str, str] | None) -> dict[str, str]:
    full_env = dict(os.environ if base_env is None else base_env)
    full_env.update(env or {})
    return full_env


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
            base_env: dict[str, str] | None = None, python: str = sys.executable,
            via: list[str] | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run `python -m torchfit ARGS` to its end; `env` is laid over `base_env` (default
    os.environ). stdout and stderr are captured (as text) unless `kw` says otherwise."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("text", True)
    return subprocess.run(torchfit_argv(*args, python=python, via=via), env=_env(env, base_env),
                          timeout=timeout, **kw)


def start_cli(*args: str, env: dict[str, str] | None = None, base_env: dict[str, str] | None = None,
              python: str = sys.executable, via: list[str] | None = None,
              **kw: Any) -> subprocess.Popen[str]:
    """Start `python -m torchfit ARGS` and return the running process (stdout and stderr piped
    unless `kw` says otherwise); the caller waits for it."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("text", True)
    return subprocess.Popen(torchfit_argv(*args, python=python, via=via), env=_env(env, base_env), **kw)


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """torchfit's `main` in this process (so `responses` sees its requests): (code, out, err)."""
    from torchfit.cli.main import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def run_cli_pty(*args: str, cols: int = 80, env: dict[str, str] | None = None, timeout: float = 120,
                base_env: dict[str, str] | None = None) -> tuple[int, str]:
    """`python -m torchfit ARGS` on a real terminal (a pty `cols` wide, stdin, stdout and
    stderr all on it, as a user at a terminal runs it): (exit code, everything it showed)."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    try:
        master, slave = pty.openpty()
    except OSError as exc:  # a container without /dev/ptmx
        pytest.skip(f"no pseudo-terminal here: {exc}")
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    proc = subprocess.Popen(torchfit_argv(*args), stdin=slave, stdout=slave, stderr=slave,
                            env=_env(env, base_env), start_new_session=True)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has gone
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ with this tree's src first on PYTHONPATH, no COLUMNS and no
    $TORCHFIT_TORCH_INDEX_URL (what the user's shell may set), then `extra`."""
    env = dict(os.environ)
    src = os.path.join(ROOT, "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("COLUMNS", None)
    env.pop("TORCHFIT_TORCH_INDEX_URL", None)
    env.update(extra)
    return env


def run_clean(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
              **kw: Any) -> subprocess.CompletedProcess[str]:
    """`run_cli` in `env` (default `clean_env()`), from the repository root unless `cwd=`."""
    return run_cli(*args, base_env=env or clean_env(), timeout=timeout, cwd=str(kw.pop("cwd", ROOT)), **kw)


def bad_input(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit 2, one line on stderr, no traceback; returns the line."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert lines[0].startswith("torchfit: error:")
    return lines[0]


def timed_stderr(proc: subprocess.Popen[str], timeout: float = 400) -> tuple[list[tuple[float, str]], float, str]:
    """Read a `start_cli` process to its end: (each stderr line with the monotonic time it came,
    the time the process ended, its whole stdout), for tests of what it says as it goes."""
    import threading
    import time

    got: list[tuple[float, str]] = []
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else ""), daemon=True)
    reader.start()
    assert proc.stderr is not None
    for line in proc.stderr:
        got.append((time.monotonic(), line.rstrip("\n")))
    proc.wait(timeout=timeout)
    ended = time.monotonic()
    reader.join(10)
    return got, ended, "".join(out)
