"""Attack: SIGKILL, SIGTERM and SIGHUP at a random moment of install, doctor, export and
verify; afterwards the process table and the temporary directories are checked.

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

import os
import random
import re
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import CPU_ARGS, UV_ON_PATH, Run, Tf
from tests.installer.conftest import leftovers, needs_uv

SEED = int(os.environ.get("TORCHFIT_ATTACK_SEED", "20261130"))
COMMANDS = ("install", "doctor", "export", "verify")
ATTACKS = ("SIGKILL", "SIGTERM", "SIGHUP")
# Roughly how long each command runs here: the random moment falls inside it.
DURATION = {"install": 6.0, "doctor": 4.0, "export": 5.0, "verify": 15.0}

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


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
