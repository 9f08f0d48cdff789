"""Signals through the real CLI: every command interrupted dies cleanly (exit 130, no child
left, no temporary directory), a SIGKILLed install takes pip/uv with it, a signal after
install's swap is reported as late (#5, #10, #11, #25 of issue 13, one test or more each,
named after it); and SIGKILL, SIGTERM and SIGHUP at a random moment of install, doctor,
export and verify, after which the process table and the temporary directories are checked.

The moment is drawn from a seeded random generator (TORCHFIT_ATTACK_SEED, default
below; the seed and the moment are in every failure message, so a failure replays).
Every torchfit run is tagged through its environment (TORCHFIT_TEST_TAG), which all its
descendants inherit, so a survivor is found in /proc wherever it was re-parented; each
run has its own TMPDIR, so its temporary directories can be counted.

What must hold, whatever the moment:
- no process of the run is alive a few seconds after torchfit ended (SIGKILL included:
  PR_SET_PDEATHSIG takes the children with it);
- SIGTERM/SIGHUP: exit 130 (or the command's own code if it had already finished, also
  when the signal landed in its last moments, after its work: then its output is the whole
  of an undisturbed run's; or 0 for an install whose swap was already done, reported as
  such), no temporary directory;
- SIGKILL: every directory left is provably torchfit's (a marker naming the dead run),
  and the next run's sweep removes it; PREFIX is absent or a complete env, never half.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    CPU_ARGS,
    UV_ON_PATH,
    Run,
    Tf,
    hanging_torch_env,
    install_args,
    wait_for_tagged,
)
from tests.installer.conftest import is_pip_install, leftovers, needs_uv, wait_for_child

SEED = int(os.environ.get("TORCHFIT_ATTACK_SEED", "20261130"))
COMMANDS = ("install", "doctor", "export", "verify")
ATTACKS = ("SIGKILL", "SIGTERM", "SIGHUP")
# Roughly how long each command runs here: the random moment falls inside it.
DURATION = {"install": 6.0, "doctor": 4.0, "export": 5.0, "verify": 15.0}

pytestmark = pytest.mark.filterwarnings("ignore")


def _moment(command: str, attack: str) -> float:
    rng = random.Random(f"{SEED}-{command}-{attack}")
    return round(rng.uniform(0.05, DURATION[command]), 2)


def _start(tf: Tf, command: str, tmp_path: Path, torch_index: str, cpu_torch_env: Path, hung: str) -> Run:
    if command == "install":
        return tf.start("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(tmp_path / "env"))
    if command == "doctor":
        return tf.start("doctor", "--env", str(cpu_torch_env))
    if command == "export":
        # a mirror that never answers: uv pip compile waits on it for the whole window
        return tf.start("export", "--format", "pylock", *CPU_ARGS, "--assume", "gpu=none",
                        "--torch-index-url", hung + "/whl/{variant}", "--allow-insecure-index", env=UV_ON_PATH)
    return tf.start("verify", "--env", str(cpu_torch_env), "--nproc", "2", "--timeout", "120")


def _assert_sweepable(run: Run, tmp_path: Path, why: str) -> None:
    """After SIGKILL: every directory left is marked as the dead run's, and sweeping removes it."""
    from torchfit.installer.prefix import scan_temps
    from torchfit.owned import owner_alive, read_marker, sweep_temp_dirs

    for name in run.temp_dirs():
        marker = read_marker(str(run.tmp / name))
        assert marker is not None and not owner_alive(marker), f"{why}: {name} is not provably stale"
        sweep_temp_dirs(name.split("-")[1], str(run.tmp))
    assert run.temp_dirs() == [], why
    scan = scan_temps(str(tmp_path / "env"))
    assert scan.unproven == [] and scan.running == [], (why, scan)


def _shape(out: str) -> str:
    """Output with its numbers (timings, pids) blanked: two runs of one command compare equal."""
    return re.sub(r"\d+(\.\d+)?", "N", out)


def _undisturbed(tf: Tf, command: str, tmp_path: Path, torch_index: str, cpu_torch_env: Path,
                 hung: str) -> tuple[int, str]:
    """The exit code and stdout of the same command run to its end without a signal."""
    if command == "install":  # its finished case is judged above ("arrived after")
        raise AssertionError("install is not compared with a second run")
    code, out, _ = _start(tf, command, tmp_path, torch_index, cpu_torch_env, hung).wait(180)
    return code, out


@pytest.mark.slow
@needs_uv
@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("command", COMMANDS)
def test_signal_at_a_random_moment_leaves_nothing(
        tf: Tf, tmp_path: Path, torch_index: str, cpu_torch_env: Path, hung_server: str,
        command: str, attack: str) -> None:
    delay = _moment(command, attack)
    why = f"{command}, {attack} after {delay} s (TORCHFIT_ATTACK_SEED={SEED})"
    run = _start(tf, command, tmp_path, torch_index, cpu_torch_env, hung_server)
    time.sleep(delay)
    finished_before = run.proc.poll() is not None
    run.signal(getattr(signal, attack))
    code, out, err = run.wait(120)
    left = run.left(grace=20 if command == "verify" else 5)
    assert left == [], f"{why}: left running: {left}"
    prefix = tmp_path / "env"
    if prefix.exists():  # never half an env
        assert (prefix / "pylock.toml").is_file() and (prefix / "bin" / "python").exists(), why
    if attack == "SIGKILL":
        assert code == -signal.SIGKILL or finished_before, (why, code, err)
        _assert_sweepable(run, tmp_path, why)
        return
    if finished_before:
        assert code in (0, 1), (why, code, err)
    elif code == 0 and command == "install":
        assert "arrived after" in err, (why, err)  # the swap was done: reported as such
    elif code in (0, 1):
        # The signal landed after the command had finished (torchfit then ignores it, so
        # the command's own code stands): its output must be the whole of an undisturbed run's.
        ref_code, ref_out = _undisturbed(tf, command, tmp_path, torch_index, cpu_torch_env, hung_server)
        assert (code, _shape(out)) == (ref_code, _shape(ref_out)), (why, code, err)
        assert "interrupted" not in err and "Traceback" not in err, (why, err)
    else:
        assert code == 130, (why, code, err)
        assert "Traceback" not in err, (why, err)
        if command == "install":
            assert not prefix.exists() and "was not changed" in err, (why, err)
    assert run.temp_dirs() == [], (why, run.temp_dirs())
    assert leftovers(tmp_path) == [], (why, leftovers(tmp_path))


@pytest.mark.slow
@needs_uv
def test_signal_after_the_exchange_is_reported_as_late_not_as_unchanged(
        tf: Tf, tmp_path: Path, torch_index: str) -> None:
    """Defect #5 of the 2026-11 attack (issue 13)."""
    prefix = tmp_path / "env"
    code, _, err = tf.run(*install_args(torch_index, prefix))
    assert code == 0, err
    # An old env that takes a while to remove: the signal lands after the exchange.
    many = prefix / "many"
    many.mkdir()
    for i in range(40000):
        (many / str(i)).touch()
    (prefix / "OLD_MARKER").touch()
    run = tf.start(*install_args(torch_index, prefix, "--force"))
    run.read_until("[swap]", timeout=300)
    time.sleep(0.05)
    run.signal(signal.SIGTERM)
    code, _, err = run.wait(300)
    assert not (prefix / "OLD_MARKER").exists(), "the signal came before the exchange: retry"
    assert "was not changed" not in err
    assert code == 0, err
    assert "SIGTERM arrived after" in err and "already complete" in err
    assert (prefix / "torchfit-install.log").stat().st_size > 0
    assert (prefix / "bin" / "python").exists() and leftovers(tmp_path) == []


@pytest.mark.slow
def test_sigkill_of_install_leaves_no_pip_and_no_debris(tf: Tf, tmp_path: Path, torch_index: str) -> None:
    """Defect #10 of the 2026-11 attack (issue 13)."""
    prefix = tmp_path / "env"
    run = tf.start(*install_args(torch_index, prefix, "--installer", "pip"))
    wait_for_child(run.proc, is_pip_install)
    run.signal(signal.SIGKILL)
    run.proc.wait(timeout=10)
    assert run.left(grace=5) == []
    # The dead run's temporary env is proven (marker, dead owner): the next install removes it.
    assert len(leftovers(tmp_path)) >= 1
    code, _, err = tf.run(*install_args(torch_index, prefix, "--installer", "pip"))
    assert code == 0, err
    assert "left by a torchfit install that was killed" in err
    time.sleep(1)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_doctor_interrupted_exits_130_and_leaves_no_worker(tf: Tf, tmp_path: Path, sig: str) -> None:
    """Defect #11 of the 2026-11 attack (issue 13)."""
    env = hanging_torch_env(tmp_path)
    run = tf.start("doctor", "--env", str(env))
    wait_for_tagged(run, "doctor_worker")
    time.sleep(0.3)
    run.signal(getattr(signal, sig))
    code, _, err = run.wait(30)
    assert code == 130, err
    assert run.left() == [] and run.temp_dirs() == []


@pytest.mark.slow
def test_verify_leaves_no_hung_nvidia_smi(tf: Tf, tmp_path: Path, cpu_torch_env: Path) -> None:
    """Defect #11 of the 2026-11 attack (issue 13)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexec sleep 600\n")
    smi.chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    run = tf.start("verify", "--env", str(cpu_torch_env), "--nproc", "1", env=env)
    run.wait(300)
    assert run.left(grace=3) == []


def test_matrix_check_sigterm_exits_130(tf: Tf, hung_server: str) -> None:
    """Defect #11 of the 2026-11 attack (issue 13)."""
    run = tf.start("matrix", "check", "--variant", "cpu", "--torch", "2.13.0", "--no-cache",
                   "--index-url", hung_server + "/whl", "--allow-insecure-index", "--timeout", "60")
    time.sleep(3)
    run.signal(signal.SIGTERM)
    code, _, err = run.wait(30)
    assert code == 130, err


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_interrupted_verify_removes_its_work_dir(tf: Tf, tmp_path: Path, sig: str) -> None:
    """Defect #25 of the 2026-11 attack (issue 13)."""
    env = hanging_torch_env(tmp_path)
    run = tf.start("verify", "--env", str(env), "--timeout", "120")
    wait_for_tagged(run, "inspect_worker")
    time.sleep(0.3)
    run.signal(getattr(signal, sig))
    code, _, err = run.wait(30)
    assert code == 130, err
    assert run.left() == [] and run.temp_dirs() == []


@pytest.mark.parametrize("json_out", [False, True])
def test_an_interrupted_verify_with_keep_says_once_where_its_work_dir_is(tf: Tf, tmp_path: Path,
                                                                             json_out: bool) -> None:
    """The interruption carries the kept directory and the CLI's boundary prints it once, under
    --json too (verify wrote it to stderr itself, beside the boundary's own line).
    Defect #25 of the 2026-11 attack (issue 13)."""
    env = hanging_torch_env(tmp_path)
    run = tf.start("verify", "--env", str(env), "--timeout", "120", "--keep", *(["--json"] if json_out else []))
    wait_for_tagged(run, "inspect_worker")
    time.sleep(0.3)
    run.signal(signal.SIGINT)
    code, out, err = run.wait(30)
    assert code == 130, err
    lines = [ln for ln in err.splitlines() if ln.startswith("torchfit: ")]
    assert err.count("work directory") == 1 and len(lines) == 1 and lines[0].startswith("torchfit: interrupted by SIGINT; verify's work directory is "
                                                   "kept at "), err
    kept = Path(lines[0].rsplit(" ", 1)[-1])
    assert kept.is_dir() and kept.name in run.temp_dirs()
    if json_out:
        assert json.loads(out)["error"] == "interrupted"
    assert run.left() == []


def test_work_dir_of_a_sigkilled_verify_is_swept_by_the_next(tf: Tf, tmp_path: Path) -> None:
    """Defect #25 of the 2026-11 attack (issue 13)."""
    env = hanging_torch_env(tmp_path)
    run = tf.start("verify", "--env", str(env), "--timeout", "120")
    wait_for_tagged(run, "inspect_worker")
    run.signal(signal.SIGKILL)
    run.proc.wait(timeout=10)
    assert run.left(grace=5) == []  # PDEATHSIG: the inspection worker died with it
    assert len(run.temp_dirs()) == 1
    empty = tmp_path / "no-torch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(empty)], check=True, timeout=120)
    code, _, err = tf.run("verify", "--env", str(empty), tmp=run.tmp)
    assert code == 1, err  # no torch: the answer is no, after sweeping the dead run's directory
    assert run.temp_dirs() == [], err
