"""A signal in torchfit's last moments (its command done, the process leaving) must not kill
it by the default action: the command's exit code stands (issue 21 class 8; the CI run of
2026-12-01 saw doctor die of SIGTERM, exit -15, with its report already printed)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

LATE = """
import os, signal, sys
from torchfit.cli.main import main
sys.argv = ["torchfit", "matrix", "show", "--json"]
code = main()
os.kill(os.getpid(), signal.{sig})  # the command is done: the signal lands now
sys.stderr.write("still here\\n")
sys.exit(code)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_attack3_a_signal_after_the_command_leaves_its_exit_code(sig: str) -> None:
    proc = subprocess.run([sys.executable, "-c", LATE.format(sig=sig)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])
    assert "still here" in proc.stderr and proc.stdout.lstrip().startswith(("{", "[")), proc.stderr[-500:]


def test_a_library_caller_gets_its_own_handlers_back() -> None:
    """main(argv) inside another program: the caller's handler is back afterwards."""
    from torchfit.cli.main import main

    seen: list[int] = []
    old = signal.signal(signal.SIGHUP, lambda s, _f: seen.append(s))
    try:
        assert main(["matrix", "show", "--json"]) == 0
        handler = signal.getsignal(signal.SIGHUP)
        assert callable(handler) and handler is not signal.SIG_IGN
        handler(signal.SIGHUP, None)  # type: ignore[operator]
        assert seen == [signal.SIGHUP]
    finally:
        signal.signal(signal.SIGHUP, old)
