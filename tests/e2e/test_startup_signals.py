"""A signal during torchfit's start-up imports (issue 21, class 8): before `cli.main` has
installed its handlers, SIGTERM and SIGHUP used to kill torchfit by their default action
(exit -15 / -1, no message); on a loaded host that window is a tenth of a second. Now
`python -m torchfit` turns them into the same interruption as later (exit 130, one line).

Deterministic: inotify tells the test the instant torchfit opens the files of
torchfit.cli to import them, and the signal is sent then."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import torchfit.cli

IN_OPEN = 0x20
CLI = Path(torchfit.cli.__file__).parent


class _Inotify:
    def __init__(self, paths: list[Path]) -> None:
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            pytest.skip("no inotify here")
        for p in paths:
            if p.exists():
                self.libc.inotify_add_watch(self.fd, os.fsencode(p), IN_OPEN)

    def wait_open(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        data = os.read(self.fd, 65536)
        return len(data) >= struct.calcsize("iIII")

    def close(self) -> None:
        os.close(self.fd)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_attack3_a_signal_during_the_start_up_imports_is_exit_130(sig: signal.Signals) -> None:
    # Compiled once beforehand, so the child opens the .pyc files (and the watch sees it).
    subprocess.run([sys.executable, "-m", "torchfit", "--help"], capture_output=True, check=True, timeout=60)
    watch = _Inotify([CLI, CLI / "__pycache__"])
    try:
        proc = subprocess.Popen([sys.executable, "-m", "torchfit", "resolve", "torch==2.13.0", "--variant", "cpu"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert watch.wait_open(30), "torchfit never opened torchfit/cli"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        watch.close()
    assert proc.returncode == 130, (proc.returncode, err)
    assert f"interrupted by {sig.name}" in err and "Traceback" not in err
