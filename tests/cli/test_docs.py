"""docs/cli.md is generated from --help: the docs and the CLI say the same thing."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_cli_reference_is_current() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
