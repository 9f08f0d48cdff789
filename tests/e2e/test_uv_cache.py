"""Attack round 3 (issue 21, class 2): a file damaged in uv's cache.

uv links files from its cache into every env it builds, so one file whose bytes no longer
match its wheel's RECORD breaks the env built earlier from that cache and every env built
later. The install's check imports torch for real and fails (exit 1: it said "created"
while `import torch` failed); verify and doctor name the file that differs from RECORD
and the fix (`uv cache clean torch`, then reinstall). Real installs with uv, into a
private, cold uv cache.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.installer.conftest import CPU_ARGS, have_uv, run_tf


@pytest.mark.slow
@pytest.mark.skipif(not have_uv(), reason="uv is not installed")
def test_attack3_a_damaged_file_in_uvs_cache_fails_the_install_and_is_named(
        tmp_path: Path, torch_index: str) -> None:
    cache, state = tmp_path / "uv-cache", tmp_path / "state"
    env = {"UV_CACHE_DIR": str(cache)}
    first = tmp_path / "first"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(first),
                  state=state, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    damaged = sorted(cache.glob("archive-v0/*/torch/__init__.py"))
    assert damaged, "uv's cache holds no unpacked torch"
    damaged[0].write_bytes(b"")  # in place: the env linked from it shares the file

    second = tmp_path / "second"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(second),
                  state=state, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "`import torch` fails in the new env" in proc.stderr and "uv cache clean torch" in proc.stderr
    assert not second.exists()

    # the test's own TMPDIR: the failed verify keeps its work directory there for the reader
    verify = run_tf("verify", "--env", str(first), state=state, timeout=600, TMPDIR=str(tmp_path))
    assert verify.returncode == 1, verify.stderr[-3000:]
    assert re.search(r"differs? from its wheel's RECORD", verify.stdout + verify.stderr)  # "1 ... differs", "2 ... differ"
    assert "torch/__init__.py" in verify.stdout + verify.stderr

    doctor = run_tf("doctor", "--env", str(first), "--json", state=state, timeout=600)
    assert doctor.returncode == 1, doctor.stderr[-3000:]
    checks = {c["id"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["torch-import"]["status"] == "fail"
    files = checks["torch-files"]
    assert files["status"] == "fail" and "torch/__init__.py" in files["evidence"], files
    assert "uv cache clean torch" in files["fix"]
