"""STYLE.md: ruff (I,B,UP,RUF,C4) and mypy --strict hold on compat/, the pure core."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

COMPAT = str(ROOT / "src" / "torchfit" / "compat")


def test_ruff_clean() -> None:
    out = subprocess.run([sys.executable, "-m", "ruff", "check", COMPAT], capture_output=True, text=True, cwd=ROOT)
    if "No module named ruff" in out.stderr:
        pytest.skip("ruff not installed (pip install -e '.[test]')")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict() -> None:
    if shutil.which("mypy") is None and subprocess.run([sys.executable, "-m", "mypy", "--version"],
                                                       capture_output=True).returncode != 0:
        pytest.skip("mypy not installed (pip install -e '.[test]')")
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", COMPAT], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
