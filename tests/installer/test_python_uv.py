"""A Python the host lacks comes from uv's managed Pythons, served by a site mirror (issue 35).

Real processes only: a python-build-standalone-style `install_only` tarball made from
pyenv's 3.11.7 (its RUNPATH made $ORIGIN-relative, as python-build-standalone's are), a
downloads JSON naming it by python-build-standalone's URL with its sha256, and uv's own
mirror setting (UV_PYTHON_INSTALL_MIRROR=file://...) pointing that URL at the local tree.
The host shows no Python 3.11: PATH holds only a fake `pyenv` that records its calls and
fails (and no gcc, cc or make), PYENV_ROOT is an empty directory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import CPU_ARGS, needs_uv, run_tf
from tests.support.pythons import build_python_mirror
from tests.support.servers import http_server, reply

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


@pytest.fixture(scope="session")
def python_mirror() -> dict[str, str]:
    """A site's mirror of uv's Pythons (tests/support/pythons.py)."""
    return build_python_mirror()


def _hidden_host(tmp: Path, fake_pyenv: bool = True) -> dict[str, str]:
    """A host with no Python 3.11 and no compiler: PATH is a fake pyenv alone (it logs and fails),
    or nothing."""
    fake = tmp / "bin"
    fake.mkdir()
    calls = tmp / "pyenv-calls"
    if fake_pyenv:
        (fake / "pyenv").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexit 1\n')
        (fake / "pyenv").chmod(0o755)
    (tmp / "pyenv-root").mkdir()
    return {"PATH": str(fake), "PYENV_ROOT": str(tmp / "pyenv-root"),
            "UV_PYTHON_INSTALL_DIR": str(tmp / "uv-pythons"), "HOME": str(tmp / "home")}


def _pyenv_builds(tmp: Path) -> list[str]:
    calls = tmp / "pyenv-calls"
    lines = calls.read_text().splitlines() if calls.exists() else []
    return [ln for ln in lines if ln.startswith("install") and ln != "install --list"]


@needs_uv
def test_a_missing_python_comes_from_the_sites_uv_mirror(tmp_path: Path, python_mirror: dict[str, str],
                                                         torch_index: str, state_home: Path) -> None:
    env = _hidden_host(tmp_path)
    for tool in ("gcc", "cc", "make", "python3.11"):
        assert shutil.which(tool, path=env["PATH"]) is None
    env |= {"UV_PYTHON_INSTALL_MIRROR": python_mirror["mirror"],
            "UV_PYTHON_DOWNLOADS_JSON_URL": python_mirror["json"]}
    # resolve says who provides the missing Python
    res = run_tf("resolve", *CPU_ARGS, "--torch-index-url", torch_index, "--json", state=state_home, env=env)
    assert res.returncode == 0, res.stderr
    plan: dict[str, Any] = json.loads(res.stdout)
    print("resolve:", plan["python_version"], plan["python_source"], plan["why"]["python"])
    assert (plan["python_version"], plan["python_source"]) == ("3.11.7", "uv")
    assert "UV_PYTHON_INSTALL_MIRROR=" + python_mirror["mirror"] in plan["why"]["python"]

    prefix = tmp_path / "env"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix), "--json",
                  state=state_home, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    seconds = out["timings"]["python"]
    print(f"uv-managed Python 3.11.7 from the local mirror: {seconds:.2f} s")
    assert seconds < 60
    assert out["plan"]["python_source"] == "uv" and out["runtime"]["torch"] == "2.13.0+cpu"
    assert _pyenv_builds(tmp_path) == [], "pyenv was asked to build"
    # the env's interpreter is uv's, from the mirror's tarball
    base = (prefix / "pyvenv.cfg").read_text()
    assert str(tmp_path / "uv-pythons") in base, base
    code = "import torch, sys; print(torch.__version__, sys.version_info[:3])"
    ran = subprocess.run([str(prefix / "bin/python"), "-c", code], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0] == "2.13.0+cpu"


@needs_uv
def test_offline_with_no_mirror_and_no_pyenv_is_one_line_naming_both_ways(
        tmp_path: Path, torch_index: str, state_home: Path) -> None:
    env = _hidden_host(tmp_path, fake_pyenv=False) | {"UV_OFFLINE": "1"}
    prefix = tmp_path / "env"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix),
                  "--offline", state=state_home, env=env, timeout=300)
    print(proc.stderr)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("torchfit: error:")]
    assert len(errors) == 1, proc.stderr
    line = errors[0]
    assert "Python 3.11" in line and "uv is offline" in line and "no pyenv" in line, line
    assert "UV_PYTHON_INSTALL_MIRROR" in proc.stderr and "pyenv" in proc.stderr
    assert not prefix.exists()


@needs_uv
def test_an_offline_install_keeps_uv_offline_for_the_python_too(
        tmp_path: Path, python_mirror: dict[str, str], torch_index: str, state_home: Path) -> None:
    """Issue 35, item 4: `uv python install` ran without --offline under torchfit's --offline. A
    site mirror of uv's Pythons over http (uv's own UV_PYTHON_INSTALL_MIRROR) is never asked:
    uv says it is offline, and the refusal says so."""
    env = _hidden_host(tmp_path, fake_pyenv=False)
    with http_server(lambda h: reply(h, 404)) as srv:
        env |= {"UV_PYTHON_INSTALL_MIRROR": srv.url, "UV_PYTHON_DOWNLOADS_JSON_URL": python_mirror["json"]}
        proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(tmp_path / "env"),
                      "--offline", state=state_home, env=env, timeout=300)
    assert srv.seen == [], f"uv fetched from the mirror under --offline: {srv.seen}"
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("torchfit: error:")]
    assert len(errors) == 1 and "uv is offline" in errors[0], proc.stderr
    assert not (tmp_path / "env").exists()


@needs_uv
def test_a_forced_lock_takes_uvs_python_not_a_pyenv_build(
        tmp_path: Path, python_mirror: dict[str, str], cpu_env: dict[str, Any], state_home: Path) -> None:
    """Issue 35, item 4: `install --lock --force` on a host the lock contradicts labelled a missing
    Python "pyenv" (and so built it) where uv's managed Pythons provide it: the label is now what
    will really be used (compat.provider.find_python_choice), and pyenv is never asked."""
    env = _hidden_host(tmp_path) | {"UV_PYTHON_INSTALL_MIRROR": python_mirror["mirror"],
                                    "UV_PYTHON_DOWNLOADS_JSON_URL": python_mirror["json"]}
    # glibc 2.17 contradicts the lock's manylinux_2_28 torch: --force installs it anyway (the real glibc runs it)
    proc = run_tf("install", "--lock", str(cpu_env["prefix"] / "pylock.toml"), "--force", "--assume", "glibc=2.17",
                  "--prefix", str(tmp_path / "env"), "--json", state=state_home, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--force: installing" in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert out["plan"]["python_source"] == "uv", out["plan"]
    assert _pyenv_builds(tmp_path) == [], "pyenv was asked to build"
    assert str(tmp_path / "uv-pythons") in (tmp_path / "env" / "pyvenv.cfg").read_text()
