"""cli.main, the one boundary: a full disk on stdout is one line and exit 2, a closed pipe exit 0
(defect #23 of the 2026-11 attack, issue 13)."""

from __future__ import annotations

import pytest

from tests.support.cli import clean_env, run_cli, start_cli


@pytest.mark.parametrize("args", [["resolve", "--assume", "gpu=none"], ["detect", "--json"],
                                  ["matrix", "show", "--json"], ["matrix", "show"]])
def test_d23_full_disk_on_stdout_is_not_a_bug(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = run_cli(*args, stdout=full, base_env=clean_env(), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert "No space left on device" in proc.stderr


@pytest.mark.parametrize("args", [["resolve", "--assume", "gpu=none"], ["matrix", "show"], ["detect"]])
def test_d23_closed_pipe_exits_0(args: list[str]) -> None:
    proc = start_cli(*args, base_env=clean_env(), text=False)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"Exception ignored" not in err

