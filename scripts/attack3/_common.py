"""What every repro of the third attack campaign (issue 21) gets: a `Box` per case.

A case is `Case(id, klass, what, fn)`; `fn(box)` returns None when the defect is absent,
or one line saying what was seen. It checks behaviour only (exit codes, messages, files),
so it runs against any checkout's src/ (`box.src`): the runner passes 82c371b's to count
the defects before, and this checkout's to count them after.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests/support's one server
from tests.support.servers import Answer, http_server

TAG_VAR = "TORCHFIT_RERUN_TAG"


@dataclass(frozen=True)
class Case:
    id: str
    klass: int
    what: str
    fn: Callable[[Box], str | None]


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str
    seconds: float
    timed_out: bool
    left: tuple[str, ...] = ()  # processes of the run still alive 3 s after it ended

    @property
    def text(self) -> str:
        return self.out + self.err

    @property
    def traceback(self) -> bool:
        return any(line.startswith("Traceback (most recent call last)") for line in self.text.splitlines())


def tagged(tag: str) -> list[str]:
    """Command lines of live processes whose environment holds TAG_VAR=tag."""
    needle = f"{TAG_VAR}={tag}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found.append(f.read().replace(b"\0", b" ").decode(errors="replace")[:120])
        except OSError:
            continue
    return found


class Shared:
    """What the cases of one run share: the local torch index, one CPU torch env."""

    def __init__(self, root: Path, src: Path) -> None:
        self.root, self.src = root, src
        self._index: str | None = None
        self._cpu_env: Path | None = None

    def torch_index(self) -> str:
        if self._index is None:
            links = os.environ.get("PIP_FIND_LINKS") or subprocess.run(
                ["pip", "config", "get", "global.find-links"], capture_output=True, text=True).stdout.strip()
            wheels = sorted(Path(links.split()[0] if links else "/opt/wheels").glob("torch-2.13.0+cpu-*.whl"))
            if not wheels:
                sys.exit("rerun-attack3: no torch-2.13.0+cpu wheel in the pip find-links directory")
            whl = wheels[0]
            digest = hashlib.sha256(whl.read_bytes()).hexdigest()
            page = self.root / "mirror" / "simple" / "torch"
            page.mkdir(parents=True, exist_ok=True)
            href = f"{whl.parent.as_uri()}/{whl.name.replace('+', '%2B')}#sha256={digest}"
            (page / "index.html").write_text(f'<a href="{href}">{whl.name}</a>\n')
            self._index = (self.root / "mirror" / "simple").as_uri()
        return self._index


class Box:
    """One case's fresh directory, HOME and TMPDIR, and ways to run torchfit in them."""

    def __init__(self, shared: Shared, work: Path) -> None:
        self.shared, self.work, self.src = shared, work, shared.src
        for d in ("home", "tmp", "cache", "state", "config"):
            (work / d).mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TORCHFIT_", "VIRTUAL_ENV", "XDG_", "PYTEST", "PYTHON"))}
        env.update(HOME=str(work / "home"), TMPDIR=str(work / "tmp"), PYTHONPATH=str(self.src),
                   XDG_CACHE_HOME=str(work / "cache"), XDG_STATE_HOME=str(work / "state"),
                   XDG_CONFIG_HOME=str(work / "config"))
        self.env = env
        self._stops: list[Callable[[], None]] = []

    @property
    def torch_index(self) -> str:
        return self.shared.torch_index()

    def tf(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
           timeout: float = 120, input: str | None = None,
           during: Callable[[subprocess.Popen[str]], None] | None = None, **popen: Any) -> Result:
        """`python -m torchfit ARGS` from the checkout under test; killed after `timeout` s."""
        tag = uuid.uuid4().hex
        full = dict(self.env, **(env or {}))
        full[TAG_VAR] = tag
        start = time.monotonic()
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen([sys.executable, "-m", "torchfit", *args], env=full, cwd=str(cwd or self.work),
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                text=True, errors="replace", **popen)
        if during is not None:
            threading.Thread(target=during, args=(proc,), daemon=True).start()
        timed_out = False
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            out, err = proc.communicate()
        took = time.monotonic() - start
        left = tagged(tag)
        end = time.monotonic() + 3
        while left and time.monotonic() < end:
            time.sleep(0.2)
            left = tagged(tag)
        return Result(proc.returncode, out or "", err or "", round(took, 2), timed_out, tuple(left))

    def cpu_env(self) -> Path:
        """A torchfit-installed env (Python 3.11) with the local CPU torch 2.13.0, built once per run by the
        checkout under test; read-only for cases (copy it with `copy_env` to damage it)."""
        if self.shared._cpu_env is None:
            prefix = self.shared.root / "cpu-env"
            res = self.tf("install", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--torch-index-url",
                          self.torch_index, "--prefix", str(prefix), timeout=600)
            if res.code != 0:
                sys.exit(f"rerun-attack3: the CPU env could not be built:\n{res.err[-2000:]}")
            self.shared._cpu_env = prefix
        return self.shared._cpu_env

    def copy_env(self, name: str = "env") -> Path:
        """A private copy of `cpu_env()` under this case's directory (symlinks kept)."""
        dest = self.work / name
        shutil.copytree(self.cpu_env(), dest, symlinks=True)
        return dest

    def serve(self, handler: Callable[..., http.server.BaseHTTPRequestHandler] | None = None, *,
              answer: Answer | None = None, tls: tuple[str, str] | None = None) -> str:
        """A real HTTP server on 127.0.0.1 (https with `tls`, a (certificate, key) pair), the tests'
        (tests/support/servers.http_server: `handler`, or each GET answered by `answer`), stopped
        when the case ends; its URL."""
        stack = contextlib.ExitStack()
        url: str = stack.enter_context(http_server(answer, handler=handler, tls=tls)).url
        self._stops.append(stack.close)
        return url

    def tmpfs(self, name: str, opts: str) -> Path:
        """A tmpfs mounted (`mount -o opts`: size=, nr_inodes=) at a new directory NAME of the case's,
        unmounted when the case ends (needs root)."""
        where = self.work / name
        where.mkdir(exist_ok=True)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)]).returncode != 0:
            raise RuntimeError(f"cannot mount a tmpfs at {where} (needs root)")

        def unmount() -> None:
            subprocess.run(["umount", "-l", str(where)], check=False)

        self.on_exit(unmount)
        return where

    def on_exit(self, fn: Callable[[], None]) -> None:
        """Run `fn` when the case ends (unmount, userdel, ...), whatever happened."""
        self._stops.append(fn)

    def close(self) -> None:
        for stop in reversed(self._stops):
            with contextlib.suppress(Exception):
                stop()
        self._stops.clear()
