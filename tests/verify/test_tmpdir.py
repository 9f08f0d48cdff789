"""verify with a full TMPDIR (issue 21, class 1), on a real tmpfs: DiskFull naming TMPDIR, exit 1,
before any worker starts; never "a broken stdout" (82c371b), never a misleading "is it a Python
3.8+ interpreter?"; and no work directory left there."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.mounts import tmpfs


def test_attack3_verify_with_a_full_tmpdir(tmp_path: Path) -> None:
    where = tmp_path / "tmp"
    # Room for Python's own probe of TMPDIR (a few bytes), not for verify's workers.
    with tmpfs(where, size="256k"):
        with open(where / "fill", "wb") as fh:
            fh.write(b"\0" * (256 - 16) * 1024)
        out = run_cli("verify", "--python", sys.executable, "--json", env={"TMPDIR": str(where)})
        assert out.returncode == 1, out.stderr
        data = json.loads(out.stdout)
        assert data["reference"] == "disk-full" and data["role"] == "TMPDIR" and data["mount"] == str(where), data
        assert data["needed_bytes"] and "stdout" not in out.stderr and "Traceback" not in out.stderr
        assert "TMPDIR" in out.stderr and str(where) in out.stderr
        assert sorted(os.listdir(where)) == ["fill"]  # no torchfit-verify-* left


def test_attack3_verify_with_a_tmpdir_out_of_inodes(tmp_path: Path) -> None:
    where = tmp_path / "tmp"
    with tmpfs(where, size="1m", inodes=8):
        for i in range(16):  # every inode but the few Python's TMPDIR probe leaves
            try:
                (where / f"f{i}").touch()
            except OSError:
                break
        os.unlink(where / "f0")
        out = run_cli("verify", "--python", sys.executable, env={"TMPDIR": str(where)})
        assert out.returncode == 1, out.stderr
        assert "[disk-full]" in out.stderr and "TMPDIR" in out.stderr, out.stderr
        assert not [p for p in os.listdir(where) if p.startswith("torchfit-")]

