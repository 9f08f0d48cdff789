"""host/_io.py, what every probe shares, with real files and real tools: a path under the fake
root, a read bounded to READ_LIMIT (a link to /dev/zero cannot fill the memory), and a tool's
failure turned into the one-line cause an "unknown, because ..." fact carries."""

from __future__ import annotations

import os
import time
from pathlib import Path

from torchfit.host._io import READ_LIMIT, _read, _run_tool, _under, _unknown
from torchfit.runner import Runner


def _tool(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_a_path_is_read_under_the_root_and_bounded(tmp_path: Path) -> None:
    assert _under(str(tmp_path), "/proc/driver/nvidia/version") == f"{tmp_path}/proc/driver/nvidia/version"
    assert _under("/", "/etc/os-release") == "/etc/os-release"
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "os-release").write_text("ID=ubuntu\n")
    assert _read(_under(str(tmp_path), "/etc/os-release")) == "ID=ubuntu\n"
    assert _read(str(tmp_path / "missing")) is None and _read(str(tmp_path)) is None  # a directory
    (tmp_path / "zero").symlink_to("/dev/zero")
    start = time.monotonic()
    assert len(_read(str(tmp_path / "zero")) or "") == READ_LIMIT
    assert time.monotonic() - start < 10


def test_a_tools_failure_is_one_line_of_cause(tmp_path: Path) -> None:
    runner = Runner()
    ok = _tool(tmp_path, "nvidia-smi", "echo 'Driver Version: 580.159.04'")
    res, cause = _run_tool(runner, [ok], timeout=10)
    assert cause is None and res is not None and "580.159.04" in res.stdout
    # nvidia-smi says its error on stdout, stderr empty (tests/data/h200-x2/query-gpu-bad-field.txt)
    bad = _tool(tmp_path, "smi-stdout", "echo 'Field \"bogus\" is not a valid field to query.'; echo second; exit 2")
    res, cause = _run_tool(runner, [bad], timeout=10)
    assert res is not None and res.returncode == 2
    assert cause == 'smi-stdout failed: Field "bogus" is not a valid field to query.'
    err = _tool(tmp_path, "ldd", "echo 'on stdout'; echo 'ldd: no such thing' >&2; exit 1")
    assert _run_tool(runner, [err], timeout=10)[1] == "ldd failed: ldd: no such thing"  # stderr first
    mute = _tool(tmp_path, "mute", "exit 3")
    assert _run_tool(runner, [mute], timeout=10)[1] == "mute failed with exit status 3"
    slow = _tool(tmp_path, "wedged", "sleep 30")
    start = time.monotonic()
    assert _run_tool(runner, [slow], timeout=0.5) == (None, "wedged timed out after 0.5 s")
    assert time.monotonic() - start < 10
    res, cause = _run_tool(runner, [str(tmp_path / "absent-tool")], timeout=10)
    assert res is None and cause is not None and "absent-tool" in cause
    assert _unknown(cause).startswith("unknown, because ") and os.linesep not in _unknown(cause)
