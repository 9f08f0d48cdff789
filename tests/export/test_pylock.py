"""export/pylock.py, `--format pylock`: a PEP 751 pylock.toml every package of which names its index,
files and hashes; real uv (and, online, pip>=26) installs from it (--dry-run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.export.conftest import TORCH, LocalIndex, export, need_uv, uv_env
from torchfit._backports import tomllib


def test_pylock_is_accepted_by_uv(capsys, tmp_path: Path, facts_file: Path, local_index: LocalIndex,
                                  uv_venv: Path) -> None:
    uv = need_uv()
    lock_path = tmp_path / "pylock.toml"
    text = export(capsys, facts_file, local_index, "pylock", lock_path)
    doc = tomllib.loads(text)
    assert doc["lock-version"] == "1.0" and doc["requires-python"] == "==3.11.*"
    assert doc["environments"] == ["sys_platform == 'linux' and platform_machine == 'x86_64'"]
    pkgs = {p["name"]: p for p in doc["packages"]}
    torch = pkgs["torch"]
    assert torch["version"] == "2.13.0+cpu" and torch["index"] == local_index.variant
    (wheel,) = torch["wheels"]
    assert wheel["url"].endswith(TORCH.replace("+", "%2B")) and len(wheel["hashes"]["sha256"]) == 64
    if local_index.real:  # the closure, each dependency from the default index
        assert {"sympy", "mpmath", "networkx", "jinja2"} <= set(pkgs)
        assert all(p["index"] == local_index.pypi for n, p in pkgs.items() if n != "torch")
    assert doc["tool"]["torchfit"]["plan"]["variant"] == "cpu"
    run = subprocess.run([uv, "pip", "install", "--dry-run", "--no-progress", "-r", str(lock_path)],
                         capture_output=True, text=True, timeout=300, env=uv_env(uv_venv))
    assert run.returncode == 0, run.stderr
    assert "+ torch==2.13.0+cpu" in run.stderr


@pytest.mark.online
def test_pylock_is_accepted_by_a_newer_pip(capsys, tmp_path: Path, facts_file: Path, local_index: LocalIndex) -> None:
    """pip installs from pylock.toml since 26 (experimental); this machine's pip is older, so fetch one."""
    need_uv()
    venv = tmp_path / "pip-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    got = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--isolated",
                          "--index-url", "https://pypi.org/simple", "pip>=26"],
                         capture_output=True, text=True, timeout=300)
    if got.returncode != 0:
        pytest.skip(f"no pip>=26 from PyPI: {got.stderr.strip()[-200:]}")
    lock_path = tmp_path / "pylock.toml"  # pip reads only files named pylock.toml / pylock.NAME.toml
    export(capsys, facts_file, local_index, "pylock", lock_path)
    run = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--isolated", "--dry-run",
                          "--no-cache-dir", "-r", str(lock_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "torch-2.13.0+cpu" in run.stdout
