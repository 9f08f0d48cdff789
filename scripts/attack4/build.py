"""Round 4, building code during a plan (issue 25): an sdist uv builds to read its metadata,
whose build leaves a child (setsid, double fork) holding its pipes; `--no-build`."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Box, Case
from _plan_common import CPU, error_line, stand_in_torch

from tests.support.wheels import hostile_sdist

STALL = {"TORCHFIT_STALL_TIMEOUT": "5"}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _pids(marker: Path) -> list[int]:
    return [int(p) for p in marker.read_text().split()] if marker.exists() else []


def _reap(box: Box, marker: Path) -> None:
    box.on_exit(lambda: [os.kill(p, signal.SIGKILL) for p in _pids(marker) if _alive(p)])


def _resolve_hostile(box: Box, *extra: str, daemon: bool = True) -> tuple[object, Path]:
    marker = box.work / "pids"
    _reap(box, marker)
    hostile_sdist(box.work / "links", marker, daemon=daemon)
    torch = stand_in_torch(box)
    res = box.tf("resolve", "--offline", *CPU, "--torch-index-url", torch.as_uri(), "--find-links",
                 str(box.work / "links"), "hangpkg", *extra, env=STALL, timeout=90)
    return res, marker


def daemon_outlives_resolve(box: Box) -> str | None:
    res, marker = _resolve_hostile(box)
    time.sleep(1)
    left = [p for p in _pids(marker) if _alive(p)]
    if res.timed_out:  # type: ignore[attr-defined]
        return "resolve did not end within 90 s (stall limit 5 s)"
    return f"the build's child {left} outlived torchfit" if left else None


def build_not_said(box: Box) -> str | None:
    res, _ = _resolve_hostile(box, daemon=False)
    err = res.err  # type: ignore[attr-defined]
    if "hangpkg 1.0 has no wheel: building it to read its metadata" not in err:
        return "resolve built hangpkg without saying so first"
    return None


def stall_message(box: Box) -> str | None:
    res, _ = _resolve_hostile(box)
    line = error_line(res.err)  # type: ignore[attr-defined]
    if "no compatible set" in line or "made no progress" not in line or len(line) > 300:
        return f"not one clear line: {line[:200]}"
    return None


def no_build_runs_code(box: Box) -> str | None:
    res, marker = _resolve_hostile(box, "--no-build", daemon=False)
    if marker.exists():
        return "resolve --no-build ran hangpkg's build backend"
    return None if res.code == 1 else f"exit {res.code}: {error_line(res.err)}"  # type: ignore[attr-defined]


def no_build_add(box: Box) -> str | None:
    marker = box.work / "pids"
    _reap(box, marker)
    hostile_sdist(box.work / "links", marker, daemon=False)
    env = box.copy_env()
    res = box.tf("add", "hangpkg", "--env", str(env), "--no-build", "--find-links", str(box.work / "links"),
                 env=STALL, timeout=180)
    if marker.exists():
        return "add --no-build ran hangpkg's build backend"
    if res.code == 2 and "unrecognized arguments" in res.err:
        return "add has no --no-build"
    return None if res.code != 0 else "add --no-build added a package that has no wheel"


def daemon_outlives_add(box: Box) -> str | None:
    marker = box.work / "pids"
    _reap(box, marker)
    hostile_sdist(box.work / "links", marker, daemon=True)
    env = box.copy_env()
    res = box.tf("add", "hangpkg", "--env", str(env), "--find-links", str(box.work / "links"), env=STALL, timeout=120)
    time.sleep(1)
    left = [p for p in _pids(marker) if _alive(p)]
    if res.timed_out:
        return "add did not end within 120 s (stall limit 5 s)"
    return f"the build's child {left} outlived torchfit add" if left else None


CASES = [
    Case("4-build-daemon-resolve", 7, "a build's setsid'd child holding the pipe: killed with uv (resolve)",
         daemon_outlives_resolve),
    Case("4-build-daemon-add", 7, "a build's setsid'd child holding the pipe: killed with uv (add)",
         daemon_outlives_add),
    Case("4-build-said-first", 5, "resolve says which package it builds before building it", build_not_said),
    Case("4-build-stall-line", 5, "a stalled uv step ends with one clear line, not 'no compatible set'",
         stall_message),
    Case("4-build-no-build-resolve", 6, "resolve --no-build runs no package's code", no_build_runs_code),
    Case("4-build-no-build-add", 6, "add --no-build runs no package's code", no_build_add),
]
