"""Issue 17: ruff (I,B,UP,RUF,C4,TID251) over src/, tests/, scripts/ and bench/ (issue 28), and mypy strict over
the whole of src/torchfit with pyproject.toml's configuration (`strict = true`; the workers,
which run in the target's Python 3.6+, under their own override there)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SRC = str(ROOT / "src" / "torchfit")


def test_ruff_clean() -> None:
    trees = [SRC, *(str(ROOT / tree) for tree in ("tests", "scripts", "bench"))]
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *trees],
                         capture_output=True, text=True, cwd=ROOT)
    if "No module named ruff" in out.stderr:
        pytest.skip("ruff not installed (pip install -e '.[test]')")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict() -> None:
    if shutil.which("mypy") is None and subprocess.run([sys.executable, "-m", "mypy", "--version"],
                                                       capture_output=True).returncode != 0:
        pytest.skip("mypy not installed (pip install -e '.[test]')")
    out = subprocess.run([sys.executable, "-m", "mypy", SRC], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("Success: no issues found"), out.stdout
