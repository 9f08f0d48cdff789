"""Nothing lost: a killed pip or uv, Ctrl-C, SIGTERM and a second install into the same
PREFIX, with real processes and real signals. After each, PREFIX is absent (or the
old env is intact and working) and no temporary env or lock file is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.installer.conftest import (
    CPU_ARGS,
    is_pip_install,
    is_uv_install,
    leftovers,
    needs_uv,
    pid_alive,
    run_tf,
    start_tf,
    wait_for_child,
)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


def _install_args(index: str, prefix: Path, *extra: str) -> list[str]:
    return ["install", *CPU_ARGS, "--torch-index-url", index, "--prefix", str(prefix), *extra]


def _old_env(prefix: Path) -> None:
    """A working env at PREFIX with a marker, standing for the user's previous env."""
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    (prefix / "MARKER").write_text("old env\n")


def _assert_old_env_works(prefix: Path) -> None:
    assert (prefix / "MARKER").read_text() == "old env\n"
    res = subprocess.run([str(prefix / "bin" / "python"), "-c", "print(6 * 7)"], capture_output=True, text=True,
                         timeout=60)
    assert res.stdout.strip() == "42"


def test_sigkill_of_the_pip_child_leaves_prefix_absent(tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    proc = start_tf(*_install_args(torch_index, prefix, "--installer", "pip"), state=tmp_path)
    child, _ = wait_for_child(proc, is_pip_install)
    os.kill(child, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "install step 'install-family' failed (exit -9)" in err
    assert "the full log:" in err
    assert not prefix.exists()
    assert leftovers(tmp_path) == [], leftovers(tmp_path)


def test_sigkill_of_the_pip_child_keeps_the_old_env(tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    _old_env(prefix)
    proc = start_tf(*_install_args(torch_index, prefix, "--installer", "pip", "--force"), state=tmp_path)
    child, _ = wait_for_child(proc, is_pip_install)
    os.kill(child, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    _assert_old_env_works(prefix)
    assert leftovers(tmp_path) == []


def test_ctrl_c_mid_install_kills_pip_and_cleans_up(tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    _old_env(prefix)
    proc = start_tf(*_install_args(torch_index, prefix, "--installer", "pip", "--force"), state=tmp_path)
    child, _ = wait_for_child(proc, is_pip_install)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "was not changed" in err
    assert not pid_alive(child), "the runner must not leave pip running"
    _assert_old_env_works(prefix)
    assert leftovers(tmp_path) == []


@needs_uv
def test_sigterm_mid_uv_install_cleans_up(tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    # A cold uv cache makes the family step take seconds (unpacking 190 MB), long enough to hit.
    proc = start_tf(*_install_args(torch_index, prefix), state=tmp_path, UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    child, _ = wait_for_child(proc, is_uv_install)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "SIGTERM" in err
    assert not pid_alive(child)
    assert not prefix.exists()
    assert leftovers(tmp_path) == []


@needs_uv
def test_sigkill_of_the_uv_child(tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    proc = start_tf(*_install_args(torch_index, prefix), state=tmp_path, UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    child, _ = wait_for_child(proc, is_uv_install)
    os.kill(child, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "(exit -9)" in err
    assert not prefix.exists() and leftovers(tmp_path) == []


def test_second_install_into_the_same_prefix_is_refused(tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    first = start_tf(*_install_args(torch_index, prefix, "--installer", "pip"), state=tmp_path)
    try:
        wait_for_child(first, is_pip_install)
        second = run_tf(*_install_args(torch_index, prefix), state=tmp_path, timeout=120)
        assert second.returncode == 1, second.stderr
        assert f"another torchfit install (pid {first.pid})" in second.stderr
        assert "[prefix-locked]" in second.stderr and "--wait" in second.stderr
        start = time.monotonic()
        waited = run_tf(*_install_args(torch_index, prefix, "--wait", "1.5"), state=tmp_path, timeout=120)
        assert waited.returncode == 1 and time.monotonic() - start >= 1.5
        assert "waiting for another torchfit install" in waited.stderr
        # the refused installs touched nothing: the first one's temporary env is still there
        assert any(".env.torchfit-" in name for name in leftovers(tmp_path))
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=300)
    assert first.returncode == 130
    assert not prefix.exists() and leftovers(tmp_path) == []


def test_stale_temp_env_of_a_killed_torchfit_is_removed(tmp_path: Path, torch_index: str) -> None:
    """SIGKILL of torchfit itself cannot clean up; the next install into PREFIX does (under the lock)."""
    prefix = tmp_path / "env"
    proc = start_tf(*_install_args(torch_index, prefix, "--installer", "pip"), state=tmp_path)
    child, _ = wait_for_child(proc, is_pip_install)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    # pip runs in its own session and outlives a SIGKILLed torchfit; end it here.
    os.kill(child, signal.SIGKILL)
    stale = [n for n in leftovers(tmp_path) if ".torchfit-" in n]
    assert stale  # (and env.lock, no longer locked: the kernel dropped the flock)
    again = run_tf(*_install_args(torch_index, tmp_path / "other"), state=tmp_path)
    assert again.returncode == 0, again.stderr  # another PREFIX: the stale env is not its business
    assert stale[0] in leftovers(tmp_path)
    fixed = run_tf("install", "--lock", str(tmp_path / "other" / "pylock.toml"), "--prefix", str(prefix),
                   state=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert f"removing {tmp_path / stale[0]}" in fixed.stderr
    assert leftovers(tmp_path) == []
