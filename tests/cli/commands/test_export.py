"""`torchfit export` (cli/commands/export.py): bad arguments and a file that is not a lock are exit 2, one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_main


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--format", "yaml"), "invalid choice"),
        (("--format", "requirements", "--lock", "/nonexistent.toml"), "cannot read"),
        (("--format", "requirements", "--lock", "LOCK", "--variant", "cpu"), "drop --variant"),
        (("--format", "requirements", "--torch-index-url", "ftp://x/y"), "not an http(s):// or file:// URL"),
    ],
)
def test_bad_input(capsys, tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\n[[packages]]\nname = "torch"\nversion = "2.13.0+cpu"\n')
    code, _, err = run_main(capsys, "export", *[str(lock) if a == "LOCK" else a for a in args])
    assert code == 2 and needle in err, err


def test_not_a_pylock(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "x.toml"
    bad.write_text('name = "not a lock"\n')
    code, _, err = run_main(capsys, "export", "--format", "uv", "--lock", str(bad))
    assert code == 2 and "not a PEP 751 lock" in err
