"""export/uvlock.py: a pylock.toml without --lock is locked by uv, found where install finds it (#21 of issue 13)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.cli import clean_env, run_clean


def test_export_finds_uv_beside_torchfit(tmp_path: Path) -> None:
    """Defect #21 of the 2026-11 attack (issue 13)."""
    beside = Path(sys.executable).parent / "uv"
    if not os.access(beside, os.X_OK):
        pytest.skip("uv is not installed beside this Python")
    env = clean_env(PATH="/usr/bin:/bin")  # no uv on PATH
    wheel_dir = tmp_path / "empty"
    wheel_dir.mkdir()
    proc = run_clean("export", "--format", "pylock", "torch==2.13.0", "--assume", "gpu=none", "--python", "3.11",
              "--torch-index-url", wheel_dir.as_uri(), env=env, timeout=180)
    assert "needs uv" not in proc.stderr, proc.stderr
