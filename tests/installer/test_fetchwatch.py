"""install's progress (installer/fetchwatch.py, progress.Progress.files/advance, cli/ui/progress.py;
issue 26, item 5): the total, the percent and the package awaited from the lock's sizes, as
plain step lines in order off a terminal and as a rich bar on one. Real installs of the CPU torch
2.13.0 wheel with uv."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.installer.conftest import CPU_ARGS, CPU_WHEEL, needs_uv, run_tf, tf_env
from tests.support.cli import run_cli_pty
from torchfit.installer.fetchwatch import dist_size
from torchfit.lock.model import Artifact, LockedDist

pytestmark = needs_uv
STEPS = ["venv", "resolve", "install", "pin", "check", "lock", "swap"]


def test_a_local_wheel_without_a_size_in_the_lock_counts_its_file(tmp_path: Path) -> None:
    wheel = tmp_path / "a-1.0-py3-none-any.whl"
    wheel.write_bytes(b"x" * 1234)
    d = LockedDist("a", "1.0", (Artifact("wheel", "0" * 64, wheel.as_uri(), None, wheel.name),))
    assert dist_size(d) == 1234
    assert dist_size(LockedDist("b", "1", (Artifact("wheel", "0" * 64, "https://h/b.whl", None, "b.whl", 7),))) == 7


def _steps(stderr: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"^torchfit: \[([a-z-]+)\]", stderr, re.M)))


@pytest.mark.slow
def test_a_cold_install_says_its_total_and_percent_in_order(tmp_path: Path, torch_index: str,
                                                            state_home: Path) -> None:
    """An empty uv cache: the install step names its packages and total (torch's own 191.8 MB
    counted), then reaches 100%, all between its step line and its done line, steps in order."""
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(tmp_path / "env"),
                  state=state_home, UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    assert proc.returncode == 0, proc.stderr
    # venv runs beside resolve and check beside pin, their lines said from one thread: one order
    events = re.findall(r"^torchfit: \[([a-z]+)\] (done in|(?!done in|still)\S)", proc.stderr, re.M)
    order = [f"{step} {'done' if what == 'done in' else 'start'}" for step, what in events if step in STEPS]
    order = list(dict.fromkeys(order))
    assert order == ["venv start", "resolve start", "venv done", "resolve done", "install start", "install done",
                     "check start", "pin start", "pin done", "check done", "lock start", "lock done",
                     "swap start", "swap done"], order
    lines = proc.stderr.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("torchfit: [install] 10 packages, the resolved"))
    total = lines[start + 1]
    assert re.fullmatch(r"torchfit: \[install\] 10 packages, 2\d\d\.\d MB in all: torch 2\.13\.0\+cpu "
                        r"\(191\.8 MB\), .* and 7 more", total), total
    end = next(i for i, ln in enumerate(lines) if ln.startswith("torchfit: [install] done in"))
    between = lines[start + 2:end]
    # every file fetched, the step not done: the linking phase says so, never "100%" (issue 35)
    assert between and between[-1].startswith("torchfit: [install] linking: every package fetched"), between
    assert not any("100%" in ln for ln in lines), proc.stderr
    assert all(ln.startswith("torchfit: [install] ") for ln in between), between


@pytest.mark.slow
def test_a_terminal_gets_a_bar(tmp_path: Path, torch_index: str, state_home: Path) -> None:
    if not CPU_WHEEL.is_file():
        pytest.skip("no CPU wheel")
    code, shown = run_cli_pty("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix",
                              str(tmp_path / "env"), cols=160, timeout=900, base_env=tf_env(state_home))
    assert code == 0, shown[-3000:]
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)  # rich's colours and cursor moves
    assert re.search(r"\[install\] 10 packages, 2\d\d\.\d MB in all", shown), shown[-3000:]
    # rich's bar: the percent and bytes of the total, redrawn in place (then cleared: transient)
    assert re.search(r"  \[install\] .*━.* \d+% .*/2\d\d\.\d MB", shown), shown[-3000:]
    assert "torchfit: [install] done in" in shown


@pytest.mark.slow
def test_the_bar_reaches_no_100_before_the_step_is_done_and_lines_stay_above_it(
        tmp_path: Path, torch_index: str, state_home: Path) -> None:
    """Issue 35, item 4: the bar sat at 100% for ~5 s while uv linked, and step lines were written
    into the bar's (or a ticker's) line. A cold uv cache: once every file is fetched the bar shows
    the linking phase (no percent); every `torchfit: [` line starts a line of its own."""
    if not CPU_WHEEL.is_file():
        pytest.skip("no CPU wheel")
    code, shown = run_cli_pty("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix",
                              str(tmp_path / "env"), cols=200, timeout=900,
                              base_env=tf_env(state_home, UV_CACHE_DIR=str(tmp_path / "uv-cache")))
    assert code == 0, shown[-3000:]
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)  # rich's colours and cursor moves
    frames = [seg for seg in re.split(r"[\r\n]", plain) if "━" in seg]
    assert frames, shown[-3000:]
    assert not [f for f in frames if "100%" in f], [f for f in frames if "100%" in f][:3]
    assert "linking: every package fetched" in plain, plain[-3000:]
    glued = [seg for seg in re.split(r"[\r\n]", plain) if "torchfit: [" in seg and not seg.startswith("torchfit: [")]
    assert glued == [], glued
