"""space.py: a TMPDIR full to the last byte, on a real tmpfs. Python's tempfile passes over it
without a word (to /tmp); torchfit says it is full instead, naming it (issue 25, listed as partial
in round 3), in every command that makes temporary files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.cli import ROOT, run_cli
from tests.support.mounts import fill, tmpfs


def _ours_in(directory: str) -> set[str]:
    return {p for p in os.listdir(directory) if p.startswith("torchfit-")}


def test_verify_with_a_tmpdir_full_to_the_last_byte_names_it(tmp_path: Path) -> None:
    where = tmp_path / "tmp"
    before = _ours_in(tempfile.gettempdir())
    with tmpfs(where, size="256k"):
        fill(where)
        out = run_cli("verify", "--python", sys.executable, "--json", env={"TMPDIR": str(where)})
        assert out.returncode == 1, out.stderr
        data = json.loads(out.stdout)
        assert data["reference"] == "disk-full" and data["role"] == "TMPDIR" and data["path"] == str(where), data
        assert "not moved to" in data["error"] and "Traceback" not in out.stderr
        assert sorted(os.listdir(where)) == ["fill", "fill2"]
    # Nothing went to Python's fallback instead.
    assert _ours_in(tempfile.gettempdir()) <= before


def test_temp_root_is_tmpdir_when_it_has_room_and_when_it_does_not_exist(tmp_path: Path) -> None:
    code = "from torchfit.space import temp_root; print(temp_root())"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    roomy = subprocess.run([sys.executable, "-c", code], env=dict(env, TMPDIR=str(tmp_path)), capture_output=True,
                           text=True, check=True)
    assert roomy.stdout.strip() == str(tmp_path)
    # A TMPDIR that does not exist is Python's usual choice, not judged here.
    gone = subprocess.run([sys.executable, "-c", code], env=dict(env, TMPDIR=str(tmp_path / "nope")),
                          capture_output=True, text=True, check=True)
    assert gone.stdout.strip() and gone.returncode == 0
