"""The one place torchfit starts a subprocess.

Every external command (nvidia-smi, pyenv, pip, uv, torchrun, the verify
workers) goes through `Runner.run`: an argv list (never `shell=True`), always a
timeout, the child in its own process group so that a timeout kills everything
it started, and every message passed through `redact`. A probe that needs a
different PATH (a test's fake nvidia-smi) gets a `Runner(env_overrides=...)`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torchfit._backports import FROZEN
from torchfit.errors import ProbeFailed
from torchfit.redact import redact


def _fmt_seconds(seconds: float) -> str:
    return f"{seconds:g} s"


def _argv_text(argv: Sequence[str]) -> str:
    return redact(" ".join(argv))


class ToolMissing(ProbeFailed):
    """The executable named by argv[0] is not on PATH (or not executable)."""

    reference = "tool-missing"

    def __init__(self, argv: Sequence[str], why: str = "not found on PATH") -> None:
        super().__init__(argv, None, why)
        self.message = f"{redact(argv[0]) if argv else '(empty argv)'} {why}"
        self.args = (self.message,)


class ToolTimeout(ProbeFailed):
    """The command ran past its timeout; its whole process group was killed."""

    reference = "tool-timeout"

    def __init__(
        self, argv: Sequence[str], timeout: float, stdout: str = "", stderr: str = ""
    ) -> None:
        super().__init__(argv, None, redact(stderr))
        self.timeout = timeout
        self.stdout = redact(stdout)
        self.message = f"{_argv_text(argv)} timed out after {_fmt_seconds(timeout)}"
        self.args = (self.message,)


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
            err = ProbeFailed(self.argv, self.returncode, redact(self.stderr or self.stdout))
            err.message = redact(err.message)
            err.args = (err.message,)
            raise err
        return self


class Runner:
    """Runs argv lists with a timeout; the environment is os.environ + overrides.

    `env_overrides` (given once, e.g. a test's PATH) and the per-call `env` are
    laid over the current `os.environ`, in that order. `kill_grace` is how long a
    timed-out process group gets between SIGTERM and SIGKILL.
    """

    def __init__(
        self, env_overrides: Mapping[str, str] | None = None, *, kill_grace: float = 2.0
    ) -> None:
        self.env_overrides = dict(env_overrides or {})
        self.kill_grace = kill_grace

    def environ(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a child gets."""
        merged = dict(os.environ)
        merged.update(self.env_overrides)
        if env:
            merged.update(env)
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
        cwd: str | os.PathLike[str] | None = None,
        input: str | None = None,
    ) -> RunResult:
        """Run `argv` to completion or until `timeout` seconds pass.

        A non-zero exit is a result, not an error. Raises ToolMissing when argv[0]
        cannot be found or executed, ToolTimeout when the timeout passes (after
        killing the child's whole process group).
        """
        if timeout is None or not timeout > 0:
            # A programming error, not a host fact: every command needs a bound.
            raise ValueError(f"Runner.run needs a positive timeout, got {timeout!r}")
        argv = tuple(str(a) for a in argv)
        if not argv:
            raise ToolMissing(argv, "(empty argv)")
        child_env = self.environ(env)
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
            proc = subprocess.Popen(
                list(argv),
                executable=exe,  # the child still sees argv[0] as given
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                cwd=cwd,
                # Own session = own process group: on timeout we can kill the tool
                # and everything it spawned (nvidia-smi helpers, pip's builds).
                start_new_session=True,
                encoding="utf-8",
                errors="replace",
            )
        except FileNotFoundError:
            if cwd is not None and not os.path.isdir(cwd):
                bad_cwd = ProbeFailed(argv, None, f"working directory {cwd} does not exist")
                bad_cwd.message = redact(bad_cwd.message)
                bad_cwd.args = (bad_cwd.message,)
                raise bad_cwd from None
            raise ToolMissing(
                argv, "not found" if os.sep in argv[0] else "not found on PATH"
            ) from None
        except PermissionError:
            raise ToolMissing(argv, "is not executable") from None
        except OSError as exc:
            raise ToolMissing(argv, f"could not be started: {redact(str(exc))}") from None
        try:
            stdout, stderr = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            out, err = self._kill_group(proc)
            raise ToolTimeout(argv, timeout, out, err) from None
        except BaseException:
            # KeyboardInterrupt (exit 130) must not leave a wedged tool behind.
            self._kill_group(proc)
            raise
        return RunResult(argv, proc.returncode, stdout, stderr, time.monotonic() - start)

    def _kill_group(self, proc: subprocess.Popen[str]) -> tuple[str, str]:
        """SIGTERM the child's process group, then SIGKILL it; return what it printed."""
        for sig, wait in ((signal.SIGTERM, self.kill_grace), (signal.SIGKILL, self.kill_grace)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                out, err = proc.communicate(timeout=wait)
                return out or "", err or ""
            except subprocess.TimeoutExpired:
                continue
        # A grandchild that left our group (setsid) may still hold the pipes open;
        # stop waiting for it rather than hang torchfit.
        for stream in (proc.stdout, proc.stderr, proc.stdin):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
        return "", ""
