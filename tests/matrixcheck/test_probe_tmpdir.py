"""`matrix probe` downloading to a full TMPDIR (issue 21, class 1), on a real tmpfs and a real
server that ignores Range (the whole body is spooled there): DiskFull naming TMPDIR and the
wheel's size, exit 1; never "a broken stdout" (82c371b, exit 2); nothing left in TMPDIR."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.mounts import tmpfs
from tests.support.wheels import serve_dir

NAME = "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.mark.slow
def test_attack3_probe_spooling_to_a_full_tmpdir(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    size = 2 << 20
    (served / NAME).write_bytes(os.urandom(size))  # bigger than TMPDIR's room; never parsed
    where = tmp_path / "tmp"
    with tmpfs(where, size="256k"), serve_dir(served) as url:
        (where / "fill").write_bytes(b"\0" * (128 << 10))
        out = run_cli("matrix", "probe", f"{url}/{NAME}", "--json", "--no-cache", env={"TMPDIR": str(where)})
        assert out.returncode == 1, out.stderr
        data = json.loads(out.stdout)
        assert data["reference"] == "disk-full" and data["role"] == "TMPDIR" and data["mount"] == str(where), data
        assert data["needed_bytes"] == size, data
        assert "stdout" not in out.stderr and "Traceback" not in out.stderr and "TMPDIR" in out.stderr
        assert os.listdir(where) == ["fill"]
