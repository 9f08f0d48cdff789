"""installer/prefix.py under attack (issue 21, class 0 and 8): `install --force` never removes
what is not the env's (a bind mount inside it), never an env in use (a Python that imported
torch from it, a shell working in it), and its log is never written through a planted link.

All real: installs with uv from the local CPU wheel, a real bind mount, real processes using
the env, a real second user. Each test fails on 82c371b (which deleted the mounted files,
replaced the env under the running Python and wrote the log through any symlink)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.installer.conftest import (
    CPU_ARGS,
    is_uv_install,
    leftovers,
    needs_uv,
    run_tf,
    start_tf,
    wait_for_child,
)
from tests.support.mounts import as_user, bind, second_user, shared_dir

pytestmark = [pytest.mark.slow, needs_uv]

# A Python of the env that has imported torch (libtorch_cpu.so mapped) and lives on; after
# "go" on stdin it loads a torch submodule it had not loaded yet: that load is what broke
# (`Cannot load .../libtorch_cpu.so`, ModuleNotFoundError) once the env was replaced under it.
USER_CODE = """
import sys, torch
print("ready", flush=True)
sys.stdin.readline()
import torch.utils.benchmark
print("still works", torch.ones(2).sum().item(), flush=True)
"""


def _install(index: str, prefix: Path, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_tf("install", *CPU_ARGS, "--torch-index-url", index, "--prefix", str(prefix), *extra, state=state)


def _built(tmp_path: Path, index: str) -> Path:
    prefix = tmp_path / "env"
    res = _install(index, prefix, tmp_path / "state")
    assert res.returncode == 0, res.stderr
    return prefix


def _user(prefix: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([str(prefix / "bin" / "python"), "-c", USER_CODE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_attack3_install_force_over_a_bind_mount_keeps_the_mounted_files(tmp_path: Path, torch_index: str) -> None:
    prefix = _built(tmp_path, torch_index)
    data = tmp_path / "data"
    data.mkdir()
    (data / "checkpoint.pt").write_bytes(b"weeks of training")
    with bind(data, prefix / "data"):
        res = _install(torch_index, prefix, tmp_path / "state", "--force")
        assert res.returncode == 2, res.stderr
        assert f"has a mount point inside it at {prefix / 'data'}; unmount it first" in res.stderr
        assert (data / "checkpoint.pt").read_bytes() == b"weeks of training"
        assert (prefix / "pylock.toml").is_file()
        assert leftovers(tmp_path) == []


def test_attack3_install_force_refuses_an_env_in_use_and_waits_with_wait(tmp_path: Path, torch_index: str) -> None:
    prefix = _built(tmp_path, torch_index)
    before = (prefix / "pylock.toml").read_text()
    user = _user(prefix)
    try:
        res = _install(torch_index, prefix, tmp_path / "state", "--force", "--json")
        assert res.returncode == 1, res.stderr
        assert f"pid {user.pid} (" in res.stderr and "libtorch_cpu.so mapped" in res.stderr
        assert "[env-in-use]" in res.stderr and "--wait SECONDS" in res.stderr
        assert f"{prefix} was not changed" in res.stderr
        err = json.loads(res.stdout)
        assert err["reference"] == "env-in-use" and err["processes"][0]["pid"] == user.pid
        assert (prefix / "pylock.toml").read_text() == before and leftovers(tmp_path) == []
        # The promise holds: the running Python keeps working after the refusal.
        out, _ = user.communicate("go\n", timeout=120)
        assert user.returncode == 0 and "still works 2.0" in out
        # A shell working inside the env counts too; --wait waits for it to end.
        shell = subprocess.Popen(["sleep", "3"], cwd=prefix / "lib")
        start = time.monotonic()
        res = _install(torch_index, prefix, tmp_path / "state", "--force", "--wait", "60")
        assert res.returncode == 0, res.stderr
        assert f"waiting for 1 process(es) using {prefix} to end: pid {shell.pid} (sleep 3) works in it" in res.stderr
        assert shell.poll() == 0 and time.monotonic() - start >= 2
    finally:
        user.kill()


def test_attack3_a_user_arriving_during_the_build_stops_the_swap(tmp_path: Path, torch_index: str) -> None:
    """The installer child is stopped (SIGSTOP) while a Python starts using the old env, then
    continued (SIGCONT): the new env is built, then refused at the swap, the old one kept."""
    prefix = _built(tmp_path, torch_index)
    proc = start_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix), "--force",
                    state=tmp_path / "state", UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    user = None
    try:
        child, _ = wait_for_child(proc, is_uv_install)
        os.kill(child, signal.SIGSTOP)
        user = _user(prefix)
        os.kill(child, signal.SIGCONT)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 1, err
        assert f"pid {user.pid} (" in err and "the new env was built and discarded" in err
        out, _ = user.communicate("go\n", timeout=120)
        assert "still works 2.0" in out
        assert leftovers(tmp_path) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        if user is not None:
            user.kill()


def test_attack3_install_log_refuses_another_users_state_directory(tmp_path: Path, torch_index: str) -> None:
    """XDG_STATE_HOME on shared ground where another user made torchfit/logs and planted a
    symlink per log name: nothing is written through them, the install says why and goes on."""
    attacker = second_user()
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    with shared_dir() as shared:
        logs = shared / "torchfit" / "logs"
        as_user(attacker, "mkdir", "-p", "-m", "0777", str(logs))
        stamp = time.time()
        for dt in range(0, 240):
            name = time.strftime("%Y%m%d-%H%M%S", time.localtime(stamp + dt / 4))
            for pid in range(os.getpid(), os.getpid() + 400):  # the install's pid is near ours
                link = logs / f"install-env-{name}-{pid}.log"
                if not link.is_symlink():
                    os.symlink(victim, link)
            if dt > 8:
                break
        prefix = tmp_path / "env"
        res = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix),
                     state=shared)
        assert res.returncode == 0, res.stderr
        assert "cannot write the install log" in res.stderr and f"belongs to uid {attacker.pw_uid}" in res.stderr
        assert victim.read_text() == "root's file\n"
