"""Which uv torchfit runs: `find_uv`, apart from `lock/uv.py` so that finding it costs no import.

`lock/uv.py` is the uv adapter (the project, the compile, the lock read), and importing it
loads the PEP 751 reader and writer, hashlib and urllib: ~20 ms that a command which only
probes the host (`resolve`, `detect`, issue 37) would pay for a path. This module needs the
runner alone; `lock/uv.py` re-exports `find_uv`.
"""

from __future__ import annotations

import os
import sys

from torchfit.runner import Runner


def find_uv(runner: Runner) -> str | None:
    """uv beside torchfit's own interpreter first, then on PATH.

    uv is a runtime dependency (the PyPI `uv` wheel): `pip install torchfit` puts
    its binary in the same bin/ as the interpreter running torchfit, which need
    not be on PATH (`~/.torchfit/bin/torchfit` run without activating). The wheel's
    own locator covers the other layouts pip can give it (--user, --prefix, --target).
    """
    beside = os.path.join(os.path.dirname(sys.executable), "uv")
    if os.access(beside, os.X_OK):
        return beside
    try:
        from uv import find_uv_bin  # the `uv` wheel's own locator

        wheel: str | None = find_uv_bin()
    except (ImportError, OSError):  # not installed; its UvNotFound is a FileNotFoundError
        wheel = None
    if wheel and os.access(wheel, os.X_OK):
        return wheel
    return runner.which("uv")
