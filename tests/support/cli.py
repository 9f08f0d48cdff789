"""The one way tests run the torchfit CLI: in a real subprocess, or in this process.

`run_cli` is `python -m torchfit ARGS` as a real subprocess (the default: exit codes,
stdout and stderr exactly as a user sees them). `run_main` calls `torchfit.cli.main`
in this process, for tests whose HTTP is served by `responses` (which only sees
requests made here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
            base_env: dict[str, str] | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run `python -m torchfit ARGS`; `env` is laid over `base_env` (default os.environ)."""
    full_env = dict(os.environ if base_env is None else base_env)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "torchfit", *args],
        capture_output=True, text=True, env=full_env, timeout=timeout, **kw,
    )


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """torchfit's `main` in this process (so `responses` sees its requests): (code, out, err)."""
    from torchfit.cli import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
