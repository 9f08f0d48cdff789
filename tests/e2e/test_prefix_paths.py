"""Odd prefixes (issue 21, class 4), through the real CLI: what cannot work is refused up
front (exit 2, one line, the path escaped, nothing made beside it); what can work works (the
env's #! scripts start, activate puts its bin/ first) and nothing raw reaches the terminal."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import CPU_ARGS, Tf
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
