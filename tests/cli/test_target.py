"""cli.target.target_python: the one rule verify and doctor pick their interpreter by (issue 17:
verify preferred bin/python and expanded no `~`, doctor preferred bin/python3,
expanded `~` and followed the active env), and --log read through inputs.read_text_file."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from torchfit.cli.target import Target, target_python
from torchfit.errors import BadInput
from torchfit.inputs import read_text_file


def _args(env: str | None = None, python: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(env=env, python=python)


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    return path


def test_env_python_first_then_python3_with_tilde_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _venv(tmp_path / "env")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert target_python(_args(env="~/env"), {}) == Target(str(env / "bin" / "python"), str(env), "--env")
    (env / "bin" / "python").unlink()  # an env with bin/python3 only (a Debian-style prefix)
    assert target_python(_args(env="~/env"), {}).python == str(env / "bin" / "python3")


def test_the_active_env_then_python3_on_path(tmp_path: Path) -> None:
    env = _venv(tmp_path / "env")
    target = target_python(_args(), {"VIRTUAL_ENV": str(env), "PATH": ""})
    assert target == Target(str(env / "bin" / "python"), str(env), "the active env ($VIRTUAL_ENV)")
    target = target_python(_args(), {"CONDA_PREFIX": str(tmp_path / "gone"), "PATH": str(env / "bin")})
    assert target == Target(str(env / "bin" / "python3"), None, "python3 on PATH")
    assert target_python(_args(), {"PATH": str(tmp_path)}) == Target(None, None, "none found")


@pytest.mark.parametrize("args, message", [
    (_args(env="/nonexistent/env"), "--env /nonexistent/env: not a directory"),
    (_args(env="{tmp}"), "--env {tmp}: no bin/python or bin/python3 in it"),
    (_args(python="no-such-python-3x"), "--python no-such-python-3x: not found on PATH"),
    (_args(python="/nonexistent/python"), "--python /nonexistent/python: not found"),
    (_args(python="{tmp}/notes.txt"), "--python {tmp}/notes.txt: not executable"),
])
def test_a_name_that_is_no_interpreter_is_bad_input(tmp_path: Path, args: argparse.Namespace, message: str) -> None:
    (tmp_path / "notes.txt").write_text("not a program\n")
    args = argparse.Namespace(**{k: v.format(tmp=tmp_path) if v else v for k, v in vars(args).items()})
    with pytest.raises(BadInput) as info:
        target_python(args, {"PATH": os.defpath})
    assert info.value.message.startswith(message.format(tmp=tmp_path))


def test_verify_and_doctor_pick_the_same_interpreter(tmp_path: Path) -> None:
    """The commands themselves, for `--env ~/env` of an env with bin/python3 only: verify used to
    refuse the `~` it does not expand (an `--env=~/env` the shell leaves alone)."""
    env = _venv(tmp_path / "env")
    (env / "bin" / "python").unlink()
    home = {"HOME": str(tmp_path)}
    verify = run_cli("verify", "--env=~/env", "--json", "--no-bandwidth", env=home, timeout=300)
    doctor = run_cli("doctor", "--env=~/env", "--json", env=home, timeout=300)
    assert json.loads(verify.stdout)["python"] == str(env / "bin" / "python3"), verify.stderr
    assert json.loads(doctor.stdout)["python"] == str(env / "bin" / "python3"), doctor.stderr


def test_a_log_is_read_from_its_end_and_bytes_that_are_not_utf8_are_kept_as_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n" + b"x" * 100 + b"\nRuntimeError: NCCL error \xff\n")
    assert read_text_file(str(log), "--log", limit=40, tail=True) == "x" * 12 + "\nRuntimeError: NCCL error \ufffd\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"from a pipe\n")))
    assert read_text_file("-", "--log", limit=40, tail=True) == "from a pipe\n"
    with pytest.raises(BadInput, match=r"--log .*: is a directory"):
        read_text_file(str(tmp_path), "--log", limit=40, tail=True)


# --- attack round 3 (issue 21, class 2): a damaged env is a broken state, not bad input -------


def _damage(env: Path, how: str) -> None:
    for name in ("python", "python3"):
        exe = env / "bin" / name
        if exe.is_symlink() or exe.exists():
            exe.unlink()
        if how == "dangling":
            exe.symlink_to("/nonexistent/python3.11")
        elif how == "loop":
            exe.symlink_to(name)
        elif how == "not executable":
            exe.write_text("#!/bin/sh\n")
            exe.chmod(0o644)


@pytest.mark.parametrize("how", ["missing", "dangling", "loop", "not executable"])
@pytest.mark.parametrize("command", ["verify", "doctor", "run"])
def test_attack3_a_damaged_env_is_exit_1_naming_what_is_broken_and_how_to_rebuild(
        tmp_path: Path, how: str, command: str) -> None:
    """verify, doctor and run on an env whose bin/python is missing, a dangling symlink, a
    symlink loop or not executable: exit 1 (a broken env, not bad input), what is broken,
    how to rebuild; `run` no longer runs the command with the system's python."""
    env = _venv(tmp_path / "env")
    (env / "bin" / "torchfit-env").write_text("# torchfit install's env script\n")
    (env / "pylock.toml").write_text("# the env's lock\n")
    _damage(env, how)
    marker = tmp_path / "ran"
    argv = {"run": ["run", "--env", str(env), "--", "python", "-c", f"open({str(marker)!r}, 'w')"]}.get(
        command, [command, "--env", str(env)])
    res = run_cli(*argv, timeout=120)
    assert res.returncode == 1, (res.returncode, res.stderr)
    assert "is a broken environment" in res.stderr and "Traceback" not in res.stderr, res.stderr
    expect = {"missing": "bin/python is missing", "dangling": "dangling symlink to /nonexistent/python3.11",
              "loop": "symlink loop", "not executable": "not executable"}[how]
    said = " ".join(res.stderr.split())  # the message wraps at 80 columns, where a long tmp path lands
    assert expect in said, res.stderr
    assert f"torchfit install --lock {env / 'pylock.toml'} --prefix {env} --force" in said, res.stderr
    assert not marker.exists()  # the command never ran under another python


def test_attack3_a_directory_that_is_no_env_stays_bad_input(tmp_path: Path) -> None:
    res = run_cli("verify", "--env", str(tmp_path), timeout=120)
    assert res.returncode == 2 and "no bin/python or bin/python3" in res.stderr
