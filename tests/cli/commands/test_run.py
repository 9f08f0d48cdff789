"""`torchfit run` (cli/commands/run.py): bad input is exit 2, one line, no traceback."""

from __future__ import annotations

from pathlib import Path

from tests.installer.conftest import one_line_error, run_tf


def test_run_bad_input(tmp_path: Path) -> None:
    assert "give a command" in one_line_error(run_tf("run", "--env", str(tmp_path), state=tmp_path))
    assert "not an env made by torchfit" in one_line_error(
        run_tf("run", "--env", str(tmp_path), "--", "true", state=tmp_path))
    assert "no such directory" in one_line_error(
        run_tf("run", "--env", str(tmp_path / "nope"), "--", "true", state=tmp_path))
