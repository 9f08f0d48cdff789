"""`torchfit pack` and `install --offline --pack` (issue 26, item 1): a pack of the CPU env's lock
(the local torch 2.13.0 wheel and its dependencies), moved elsewhere, installed inside a network
namespace with no interface but loopback (`unshare -n`), an empty uv cache and no pip
configuration; the env imports torch and `verify --env` passes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import cpu_env, cpu_wheel, run_tf, state_home, tf_env, torch_index
from tests.support.cli import torchfit_argv

__all__ = ["cpu_env", "cpu_wheel", "state_home", "torch_index"]  # the installer's fixtures, used here
pytestmark = pytest.mark.slow


def test_a_pack_installs_offline_wherever_it_was_carried(cpu_env: dict[str, Any], tmp_path: Path,
                                                         state_home: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        pytest.skip("unshare -n (a network namespace) is not available here")
    lock = cpu_env["prefix"] / "pylock.toml"
    made = tmp_path / "made"
    proc = run_tf("pack", "--lock", str(lock), "-o", str(made), state=state_home, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    assert (made / "simple" / "torch" / "index.html").is_file() and (made / "README.txt").is_file()
    assert any(p.name.startswith("torch-2.13.0") for p in (made / "files").iterdir())
    # run again: resumed, nothing fetched; another lock's pack there is refused
    again = run_tf("pack", "--lock", str(lock), "-o", str(made), state=state_home)
    assert again.returncode == 0 and "0 fetched" in again.stderr, again.stderr
    other = tmp_path / "other.toml"
    other.write_text(lock.read_text() + "\n# another\n")
    refused = run_tf("pack", "--lock", str(other), "-o", str(made), state=state_home)
    assert refused.returncode == 2 and "a pack of another lock" in refused.stderr, refused.stderr
    # carried elsewhere, no absolute path inside
    carried = tmp_path / "site" / "pack"
    carried.parent.mkdir()
    shutil.move(str(made), str(carried))
    assert str(made) not in (carried / "simple" / "torch" / "index.html").read_text()
    prefix = tmp_path / "site" / "env"
    env = tf_env(state_home, PIP_CONFIG_FILE="/dev/null", PIP_FIND_LINKS="", UV_CACHE_DIR=str(tmp_path / "empty-uv"),
                 XDG_CACHE_HOME=str(tmp_path / "empty-cache"))
    argv = ["unshare", "-n", "--", *torchfit_argv("install", "--offline", "--pack", str(carried),
                                                   "--prefix", str(prefix), "--json")]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["ok"] is True
    ran = subprocess.run([str(prefix / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True, timeout=300)
    assert ran.stdout.strip() == "2.13.0+cpu", ran.stderr
    # the same namespace, its loopback up (a new one has it down): gloo's rendezvous runs on 127.0.0.1
    inner = " ".join(f"'{a}'" for a in torchfit_argv("verify", "--env", str(prefix), "--nproc", "1",
                                                     "--no-bandwidth", "--json"))
    verify = subprocess.run(["unshare", "-n", "--", "sh", "-c", f"ip link set lo up && exec {inner}"],
                            capture_output=True, text=True, env=env, timeout=600)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]


def test_a_file_that_differs_from_the_lock_is_refused(cpu_env: dict[str, Any], tmp_path: Path,
                                                      state_home: Path) -> None:
    text = (cpu_env["prefix"] / "pylock.toml").read_text()
    sha = next(line.split('"')[1] for line in text.splitlines() if "sha256 =" in line and "torch-2.13.0" not in line
               and len(line.split('"')) > 1 and len(line.split('"')[1]) == 64)
    bad = tmp_path / "pylock.toml"
    bad.write_text(text.replace(sha, "0" * 64, 1))
    proc = run_tf("pack", "--lock", str(bad), "-o", str(tmp_path / "p"), state=state_home, timeout=1800)
    assert proc.returncode == 2 and "is not the lock's" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not list((tmp_path / "p").rglob("*.part"))
