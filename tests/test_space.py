"""space.py: a TMPDIR full to the last byte, on a real tmpfs. Python's tempfile passes over it
without a word (to /tmp); torchfit says it is full instead, naming it (issue 25, listed as partial
in round 3), in every command that makes temporary files.

torchfit.space (issue 21, class 1): a child's "no space" line gives the path that ran out,
whatever the path holds (hypothesis over paths, in uv's and pip's wordings); an OSError with a
relative file name (opened beside a directory descriptor) is placed in its directory."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.support.cli import ROOT, run_cli
from tests.support.mounts import fill, tmpfs
from torchfit.space import Place, from_oserror, space_error_in

SEGMENT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/`'\"\n"),
                  min_size=1, max_size=12)
PATHS = st.lists(SEGMENT, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


def test_verify_with_a_tmpdir_full_to_the_last_byte_names_it(tmp_path: Path) -> None:
    where = tmp_path / "tmp"
    # Python's fallback for a TMPDIR it cannot write is $TEMP, then /tmp (tempfile's candidate
    # list): $TEMP is a folder of this test's own, so what lands there is this run's alone, where
    # /tmp also holds what the other tests of the run (xdist workers) and other runs write.
    fallback = tmp_path / "fallback"
    fallback.mkdir()
    with tmpfs(where, size="256k"):
        fill(where)
        out = run_cli("verify", "--python", sys.executable, "--json",
                      env={"TMPDIR": str(where), "TEMP": str(fallback)})
        assert out.returncode == 1, out.stderr
        data = json.loads(out.stdout)
        assert data["reference"] == "disk-full" and data["role"] == "TMPDIR" and data["path"] == str(where), data
        assert "not moved to" in data["error"] and "Traceback" not in out.stderr
        assert sorted(os.listdir(where)) == ["fill", "fill2"]
    # Nothing went to Python's fallback instead.
    assert os.listdir(fallback) == []


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


@given(path=PATHS, quota=st.booleans())
def test_attack3_a_childs_no_space_line_names_its_path(path: str, quota: bool) -> None:
    why = "Disk quota exceeded (os error 122)" if quota else "No space left on device (os error 28)"
    lines = [
        f"error: Failed to install: torch\n  cause: failed to write to file `{path}`: {why}",
        f"ERROR: Could not install packages due to an OSError: [Errno {122 if quota else 28}] "
        f"{why.split(' (')[0]}: '{path}'",
    ]
    if not any(ch.isspace() for ch in path):  # uv's bare form: a path ends at a space
        lines.append(f"  cause: failed to copy file from /cache/a to {path}: {why}")
    for text in lines:
        assert space_error_in("Prepared 10 packages\n" + text + "\n") == (path, quota), text


def test_attack3_no_space_line_means_none() -> None:
    assert space_error_in("error: Failed to download torch: HTTP 404\n/tmp/x") is None


def test_attack3_a_relative_file_name_is_placed_in_its_directory(tmp_path: Path) -> None:
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), ".torchfit-owner")
    err = from_oserror(exc, "verify: its work directory", [Place("TMPDIR", str(tmp_path), "fix")], path=str(tmp_path))
    assert err.path == str(tmp_path / ".torchfit-owner") and err.role == "TMPDIR" and err.exit_code == 1
    assert err.to_json()["reference"] == "disk-full"
