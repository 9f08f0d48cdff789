"""Shared machines (issue 21, class 7), with a real second user (useradd; runuser -u USER --):
an env built under umask 077 and used by a colleague is a permission problem, said as one
(who owns what, which mode, exit 1), not "not a venv" / "no bin/python"; and `install`
warns when the group that shares PREFIX's parent directory could not use the env it builds."""

from __future__ import annotations

import grp
import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import CPU_ARGS
from tests.support.mounts import need_root, second_user, shared_dir

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
# torchfit's imports, copied where the second user may read them (this venv's interpreter may
# live under /root, which that user cannot enter).
DEPS = ("packaging", "resolvelib", "rich", "pygments", "markdown_it", "mdurl", "requests", "urllib3", "idna",
        "charset_normalizer", "certifi", "elftools")


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Path, str]]:
    """(a directory every user may enter, the PYTHONPATH that runs this checkout's torchfit)."""
    need_root()
    if not os.access(SYSTEM_PYTHON, os.X_OK) or sys.version_info[:2] != _version(SYSTEM_PYTHON):
        pytest.skip(f"{SYSTEM_PYTHON} is not a Python {sys.version_info[0]}.{sys.version_info[1]} "
                    "(charset_normalizer's extension is built for this one)")
    with shared_dir(0o755) as base:
        site = base / "site"
        site.mkdir()
        for name in DEPS:
            src = Path(importlib.import_module(name).__file__ or "").parent
            shutil.copytree(src, site / name, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(ROOT / "src", base / "src", ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
        yield base, f"{base / 'src'}{os.pathsep}{site}"


def _version(python: str) -> tuple[int, int]:
    out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True,
                         check=False).stdout.split()
    return (int(out[0]), int(out[1])) if len(out) == 2 else (0, 0)


def _as(user: str, pythonpath: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": pythonpath, "LANG": "C.UTF-8"}
    return subprocess.run(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                           SYSTEM_PYTHON, "-m", "torchfit", *args], capture_output=True, text=True, timeout=120,
                          cwd="/")


def _private_env(where: Path) -> Path:
    """An env as `torchfit install` leaves it, made under umask 077 by root."""
    prefix = where / "env"
    subprocess.run(["bash", "-c", f"umask 077 && {SYSTEM_PYTHON} -m venv --without-pip '{prefix}' "
                    f"&& touch '{prefix}/bin/torchfit-env' '{prefix}/pylock.toml'"], check=True, timeout=120)
    return prefix


@pytest.mark.parametrize("command", [["verify", "--nproc", "1"], ["doctor"], ["run"]])
@pytest.mark.parametrize("opened", ["", "top", "top+bin"])
def test_attack3_an_env_of_another_user_is_a_permission_problem(
        world: tuple[Path, str], command: list[str], opened: str) -> None:
    base, pythonpath = world
    user = second_user("tfcolleague")
    with shared_dir(0o1777) as where:
        prefix = _private_env(where)
        if opened:  # the owner opened part of it: what is still closed is named
            prefix.chmod(0o755)
        if opened == "top+bin":
            (prefix / "bin").chmod(0o755)
        args = [command[0], "--env", str(prefix), *command[1:]] + (["--", "python", "-c", "pass"]
                                                                     if command[0] == "run" else [])
        res = _as(user.pw_name, pythonpath, *args, home=base)
    closed, mode, verb = {"": (prefix, "drwx------ (0700)", "enter"), "top": (prefix / "bin", "drwx------ (0700)", "enter"),
                          "top+bin": (prefix / "pyvenv.cfg", "-rw------- (0600)", "read")}[opened]
    err = res.stderr
    assert res.returncode == 1 and "Traceback" not in err, (res.returncode, err)
    assert f"permission denied: {closed} is {mode}, owned by root:root" in err, err
    assert "tfcolleague" in err and f"may not {verb} it" in err and "chmod -R g+rX" in err, err
    assert "not a venv" not in err and "not an env made by torchfit" not in err and "no bin/python" not in err


@pytest.mark.slow
def test_attack3_install_warns_when_the_shared_group_could_not_use_the_env(tmp_path: Path) -> None:
    need_root()
    subprocess.run(["groupadd", "-f", "tfteam"], check=True, capture_output=True)
    with shared_dir(0o2775) as team:
        os.chown(team, -1, grp.getgrnam("tfteam").gr_gid)
        team.chmod(0o2775)  # chown clears setgid
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), XDG_STATE_HOME=str(tmp_path / "state"))
        # a torch source the plan can read (a stand-in torch: the install fails at its build check,
        # after the warning this test is about)
        from tests.support.wheels import make_wheel, write_index

        index = write_index(tmp_path / "stand-in", [make_wheel(tmp_path / "wheels", "torch", "2.13.0+cpu",
                                                               tag="cp311-cp311-manylinux_2_28_x86_64")])
        argv = [sys.executable, "-m", "torchfit", "install", *CPU_ARGS, "--offline",
                "--torch-index-url", index.as_uri()]
        for mask, warned in (("077", True), ("067", True), ("027", False), ("002", False), ("022", False)):
            res = subprocess.run(["bash", "-c", f"umask {mask} && exec \"$@\"", "sh", *argv,
                                  "--prefix", str(team / f"env-{mask}")], capture_output=True,
                                 text=True, timeout=300, env=env)
            lines = [ln for ln in res.stderr.splitlines() if "umask" in ln]
            assert bool(lines) == warned, (mask, res.stderr[-800:])
            if warned:
                assert f"umask 0{mask}" in lines[0] and "group tfteam" in lines[0] and "drwxrwsr-x" in lines[0]
