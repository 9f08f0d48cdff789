"""Odd prefixes (issue 21, class 4), through the real CLI: what cannot work is refused up
front (exit 2, one line, the path escaped, nothing made beside it); what can work works (the
env's #! scripts start, activate puts its bin/ first) and nothing raw reaches the terminal.
The PREFIX's neighbours (#1, #3, #12, #18 of issue 13): a planted PREFIX.lock is refused and its
target untouched, quotes in PREFIX give a working env, a lookalike beside PREFIX is never
deleted, a PREFIX that is a mount point is refused before installing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    CPU_ARGS,
    Tf,
    install_args,
    mount_tmpfs,
    umount,
)
from tests.installer.conftest import needs_uv
from torchfit.inputs import shown

pytestmark = pytest.mark.filterwarnings("ignore")

RAW = ("\x1b", "\u202e", "\udcff", "\x07")


@pytest.mark.parametrize(("name", "escaped", "why"), [
    ("a\nb", "a\\nb", "newline"),
    ("a\tb", "a\\tb", "tab"),
    ("a:b", "a:b", "':'"),
    (os.fsdecode(b"caf\xe9\xff"), "caf\\xe9\\xff", "not UTF-8"),
    ("\x1b[31m" + "x" * 230, "\\x1b[31m" + "x" * 20, "bytes; this filesystem allows"),
])
def test_attack3_a_prefix_no_env_survives_is_refused_up_front(
        tf: Tf, tmp_path: Path, torch_index: str, name: str, escaped: str, why: str) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    code, out, err = tf.run("install", *CPU_ARGS, "--torch-index-url", torch_index,
                            "--prefix", os.path.join(str(parent), name), timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert escaped in lines[0] and why in lines[0], lines[0]
    assert not any(r in out + err for r in RAW)
    assert os.listdir(parent) == []  # no env, no temporary env, no PREFIX.lock


def test_attack3_run_refuses_an_env_whose_name_path_cannot_hold(tf: Tf, tmp_path: Path) -> None:
    env = tmp_path / "a:b"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "torchfit-env").write_text("")
    code, _, err = tf.run("run", "--env", str(env), "--", "python", "-c", "pass")
    assert code == 2 and "PATH" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
@pytest.mark.parametrize("name", ["\x1b[31mred\x1b[0m", "evil\u202etxt.exe"])
def test_attack3_a_prefix_with_terminal_controls_works_and_is_shown_escaped(
        tf: Tf, tmp_path: Path, torch_index: str, name: str) -> None:
    prefix = tmp_path / name
    code, out, err = tf.run("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix))
    assert code == 0, err
    assert not any(r in out + err for r in RAW), [ln for ln in err.splitlines() if any(r in ln for r in RAW)]
    assert f"created {shown(str(prefix))} " in err  # escaped: \x1b[31m, \u202e
    # the env works: its #! scripts start, and activate puts its bin/ first
    res = subprocess.run([str(prefix / "bin" / "torchrun"), "--help"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "usage" in res.stdout.lower(), res.stderr[-500:]
    act = subprocess.run(["bash", "-c", f"source {shell_quote(str(prefix / 'bin' / 'activate'))}; command -v python"],
                         capture_output=True, text=True, timeout=60)
    assert act.stdout.strip() == str(prefix / "bin" / "python"), act
    # the summary's `use:` line is a working shell command, copied as printed
    use = next(ln for ln in err.splitlines() if ln.strip().startswith("use:")).split("use:", 1)[1].split("   or")[0]
    act = subprocess.run(["bash", "-c", f"{use.strip()}; command -v python"], capture_output=True, text=True, timeout=60)
    assert act.stdout.strip() == str(prefix / "bin" / "python"), (use, act)


def shell_quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


def test_attack3_export_shows_the_file_it_wrote_escaped(tf: Tf, tmp_path: Path) -> None:
    out = tmp_path / "\x1b[2Jreq\u202etxt"
    code, _, err = tf.run("export", "--format", "requirements", *CPU_ARGS, "--assume", "gpu=none", "-o", str(out))
    assert code == 0 and out.is_file(), err
    assert not any(r in err for r in RAW) and f"wrote {shown(str(out))} " in err, err


@pytest.mark.parametrize("plant", ["symlink", "dangling-symlink", "hardlink"])
def test_planted_prefix_lock_is_refused_and_its_target_untouched(
        tf: Tf, tmp_path: Path, torch_index: str, plant: str) -> None:
    """Defect #1 of the 2026-11 attack (issue 13)."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    lock = tmp_path / "env.lock"
    if plant == "symlink":
        lock.symlink_to(victim)
    elif plant == "dangling-symlink":
        lock.symlink_to(tmp_path / "created-through-the-link")
    else:
        os.link(victim, lock)
    code, _, err = tf.run(*install_args(torch_index, tmp_path / "env"))
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "created-through-the-link").exists()
    assert code == 2, err
    assert ("symbolic link" if "symlink" in plant else "hard links") in err
    assert "Traceback" not in err and not (tmp_path / "env").exists()
    assert os.path.lexists(lock)  # the evidence stays for whoever investigates


@pytest.mark.slow
@needs_uv
def test_apostrophe_and_space_in_prefix_give_a_working_env(tf: Tf, tmp_path: Path, torch_index: str) -> None:
    """Defect #3 of the 2026-11 attack (issue 13)."""
    prefix = tmp_path / "o'brien" / "it's env"
    # --seed: pip in the env (no longer by default), a console script to run from the quoted prefix
    code, _, err = tf.run(*install_args(torch_index, prefix, "--installer", "uv", "--seed"))
    assert code == 0, err
    which = subprocess.run(["bash", "-c", 'source "$1/bin/activate"; command -v python', "_", str(prefix)],
                           capture_output=True, text=True, timeout=60)
    assert which.stdout.strip() == str(prefix / "bin" / "python"), which
    pip = subprocess.run([str(prefix / "bin" / "pip"), "--version"], capture_output=True, text=True, timeout=120)
    assert pip.returncode == 0 and str(prefix) in pip.stdout, pip
    stale = [p.name for p in (prefix / "bin").iterdir()
             if p.is_file() and not p.is_symlink() and b".torchfit-" in p.read_bytes()]
    assert stale == []


@pytest.mark.slow
def test_a_lookalike_directory_beside_prefix_is_never_deleted(
        tf: Tf, tmp_path: Path, torch_index: str) -> None:
    """Defect #12 of the 2026-11 attack (issue 13)."""
    backup = tmp_path / ".env.torchfit-mybackup"
    backup.mkdir()
    (backup / "a.txt").write_text("notes\n")
    forged = tmp_path / ".env.torchfit-99999999-abcdef"  # a marker copied from another directory
    forged.mkdir()
    (forged / ".torchfit-owner").write_text(json.dumps({"tool": "torchfit", "pid": 99999999, "name": "other"}))
    code, _, err = tf.run(*install_args(torch_index, tmp_path / "env"))
    assert code == 0, err
    assert (backup / "a.txt").read_text() == "notes\n" and forged.is_dir()
    assert f"leaving {backup} alone" in err


def test_prefix_that_is_a_mount_point_is_refused_before_installing(
        tf: Tf, tmp_path: Path, torch_index: str) -> None:
    """Defect #18 of the 2026-11 attack (issue 13)."""
    prefix = tmp_path / "env"
    mount_tmpfs(prefix, "16m")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
        start = time.monotonic()
        code, _, err = tf.run(*install_args(torch_index, prefix, "--force"))
        assert code == 2 and "mount point" in err, err
        assert "[venv]" not in err and time.monotonic() - start < 30
    finally:
        umount(prefix)
