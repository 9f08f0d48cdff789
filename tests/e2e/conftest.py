"""Fixtures for the end-to-end tests: real torchfit processes, tagged so that every process they
start (through any number of re-parentings) can be found afterwards in /proc, each with its
own TMPDIR so that the temporary directories it leaves can be counted."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.installer.conftest import cpu_wheel, torch_index  # noqa: F401  (fixtures)
from tests.support.cli import start_cli
from tests.support.servers import serve
from tests.verify.conftest import scan_tagged

ROOT = Path(__file__).resolve().parents[2]
CPU_ARGS = ("torch==2.13.0", "--variant", "cpu", "--python", "3.11")
# `export --format pylock` looks for uv on PATH only (defect #21, not this suite's): put the
# test venv's bin, where uv is installed, on it.
UV_ON_PATH = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}


class Run:
    """One tagged torchfit process, its own TMPDIR, and its stderr as it arrives."""

    def __init__(self, proc: subprocess.Popen[str], tag: str, tmp: Path) -> None:
        self.proc, self.tag, self.tmp = proc, tag, tmp
        self._reader: threading.Thread | None = None
        self._lines: list[str] = []
        self._got = threading.Condition()

    def wait(self, timeout: float = 120) -> tuple[int, str, str]:
        """Exit code, stdout, stderr (all of it); the process is killed when it outlives `timeout`."""
        try:
            if self._reader is not None:
                self.proc.wait(timeout=timeout)
                self._reader.join(timeout=10)
                out = self.proc.stdout.read() if self.proc.stdout else ""
                return self.proc.returncode, out or "", "".join(self._lines)
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"torchfit still running after {timeout} s (killed)") from None
        return self.proc.returncode, out, err

    def read_until(self, needle: str, timeout: float = 120) -> str:
        """Wait (at most `timeout` s) for a stderr line holding `needle`; return stderr so far."""
        if self._reader is None:

            def pump() -> None:
                assert self.proc.stderr is not None
                for line in self.proc.stderr:
                    with self._got:
                        self._lines.append(line)
                        self._got.notify_all()
                with self._got:
                    self._lines.append("")  # end of stream
                    self._got.notify_all()

            self._reader = threading.Thread(target=pump, daemon=True)
            self._reader.start()
        end = time.monotonic() + timeout
        with self._got:
            while True:
                text = "".join(self._lines)
                if needle in text:
                    return text
                if self._lines and self._lines[-1] == "" and self.proc.poll() is not None:
                    raise AssertionError(f"stderr ended before {needle!r}:\n{text}")
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{needle!r} did not appear within {timeout} s:\n{text}")
                self._got.wait(timeout=min(left, 0.5))

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:  # never a pid that was reaped (and maybe reused)
            os.kill(self.proc.pid, sig)

    def left(self, grace: float = 5.0) -> list[tuple[int, str]]:
        """Processes of this run still alive after `grace` seconds (tagged environment)."""
        end = time.monotonic() + grace
        found = scan_tagged(self.tag)
        while found and time.monotonic() < end:
            time.sleep(0.1)
            found = scan_tagged(self.tag)
        return found

    def temp_dirs(self) -> list[str]:
        return sorted(p.name for p in self.tmp.iterdir() if p.name.startswith("torchfit-"))


class Tf:
    """Starts `python -m torchfit ARGS` as a real, tagged process."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.state = tmp_path / "state"
        self.runs: list[Run] = []

    def cleanup(self) -> None:
        """Kill whatever a failed test left running (so a failure does not leak processes)."""
        for run in self.runs:
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait(timeout=10)
            for pid, _ in scan_tagged(run.tag):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def env(self, tmp: Path, tag: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        src = str(ROOT / "src")
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["XDG_STATE_HOME"] = str(self.state)
        env["TMPDIR"] = str(tmp)
        env["TORCHFIT_TEST_TAG"] = tag
        env.pop("TORCHFIT_TORCH_INDEX_URL", None)
        env.update(extra or {})
        return env

    def start(self, *args: str, env: dict[str, str] | None = None, tmp: Path | None = None,
              stdout: int = subprocess.PIPE) -> Run:
        tag = uuid.uuid4().hex
        tmp = tmp or self.tmp_path / f"tmp-{tag[:8]}"
        tmp.mkdir(parents=True, exist_ok=True)
        proc = start_cli(*args, stdout=stdout, base_env=self.env(tmp, tag, env), cwd=str(self.tmp_path))
        run = Run(proc, tag, tmp)
        self.runs.append(run)
        return run

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600,
            tmp: Path | None = None) -> tuple[int, str, str]:
        return self.start(*args, env=env, tmp=tmp).wait(timeout)


@pytest.fixture
def tf(tmp_path: Path) -> Iterator[Tf]:
    runner = Tf(tmp_path)
    try:
        yield runner
    finally:
        runner.cleanup()


@pytest.fixture
def hung_server() -> Iterator[str]:
    """http://127.0.0.1:PORT: accepts connections and never answers a byte."""
    with serve() as url:
        yield url


def wait_for_tagged(run: Run, needle: str, timeout: float = 120) -> int:
    """Wait until a process of `run` has `needle` in its command line; return its pid."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for pid, cmd in scan_tagged(run.tag):
            if needle in cmd and pid != run.proc.pid:
                return pid
        if run.proc.poll() is not None:
            raise AssertionError(f"torchfit ended ({run.proc.returncode}) before {needle!r} ran")
        time.sleep(0.05)
    raise AssertionError(f"no process {needle!r} within {timeout} s")


def hanging_torch_env(root: Path) -> Path:
    """A venv whose `import torch` sleeps forever (a hung import)."""
    env = root / "hang-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    pkg = env / "lib" / ver / "site-packages" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("import time\ntime.sleep(10**6)\n")
    return env


SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP, "SIGINT": signal.SIGINT, "SIGKILL": signal.SIGKILL}


def install_args(index: str, prefix: Path, *extra: str) -> list[str]:
    """`torchfit install` of the CPU torch from `index` into `prefix`."""
    return ["install", *CPU_ARGS, "--torch-index-url", index, "--prefix", str(prefix), *extra]


def mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")


def umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)
