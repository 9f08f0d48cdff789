"""Regression tests for the filesystem, process and wait defects of the 2026-11 attack
(../shared/reference/defects-2026-11.md), one or more per defect, named after it.

Real processes, real signals, real symlinks, a real hanging HTTP server on 127.0.0.1,
real tmpfs mounts (skipped where mounting is not allowed). Each test fails on commit
6e0c2fd's behaviour.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import CPU_ARGS, UV_ON_PATH, Tf, hanging_torch_env, wait_for_tagged
from tests.installer.conftest import is_pip_install, leftovers, needs_uv, wait_for_child
from tests.support.servers import http_server, reply

pytestmark = pytest.mark.filterwarnings("ignore")


def _install(index: str, prefix: Path, *extra: str) -> list[str]:
    return ["install", *CPU_ARGS, "--torch-index-url", index, "--prefix", str(prefix), *extra]


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


# --- #1: PREFIX.lock is never written through ---------------------------------------------


@pytest.mark.parametrize("plant", ["symlink", "dangling-symlink", "hardlink"])
def test_d01_planted_prefix_lock_is_refused_and_its_target_untouched(
        tf: Tf, tmp_path: Path, torch_index: str, plant: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    lock = tmp_path / "env.lock"
    if plant == "symlink":
        lock.symlink_to(victim)
    elif plant == "dangling-symlink":
        lock.symlink_to(tmp_path / "created-through-the-link")
    else:
        os.link(victim, lock)
    code, _, err = tf.run(*_install(torch_index, tmp_path / "env"))
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "created-through-the-link").exists()
    assert code == 2, err
    assert ("symbolic link" if "symlink" in plant else "hard links") in err
    assert "Traceback" not in err and not (tmp_path / "env").exists()
    assert os.path.lexists(lock)  # the evidence stays for whoever investigates


# --- #3: quotes in PREFIX -------------------------------------------------------------------


@pytest.mark.slow
@needs_uv
def test_d03_apostrophe_and_space_in_prefix_give_a_working_env(tf: Tf, tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "o'brien" / "it's env"
    # --seed: pip in the env (no longer by default), a console script to run from the quoted prefix
    code, _, err = tf.run(*_install(torch_index, prefix, "--installer", "uv", "--seed"))
    assert code == 0, err
    which = subprocess.run(["bash", "-c", 'source "$1/bin/activate"; command -v python', "_", str(prefix)],
                           capture_output=True, text=True, timeout=60)
    assert which.stdout.strip() == str(prefix / "bin" / "python"), which
    pip = subprocess.run([str(prefix / "bin" / "pip"), "--version"], capture_output=True, text=True, timeout=120)
    assert pip.returncode == 0 and str(prefix) in pip.stdout, pip
    stale = [p.name for p in (prefix / "bin").iterdir()
             if p.is_file() and not p.is_symlink() and b".torchfit-" in p.read_bytes()]
    assert stale == []


def test_d03_relocate_rewrites_shell_quoted_forms(tmp_path: Path) -> None:
    from torchfit.installer.prefix import relocate

    parent = tmp_path / "o'brien"
    built = parent / ".it's env.torchfit-1-abc" / "env"
    (built / "bin").mkdir(parents=True)
    final = str(parent / "it's env")

    def uvq(path: object) -> str:  # how uv quotes a path inside single quotes
        return str(path).replace("'", "'\"'\"'")

    (built / "bin" / "activate").write_text(f"VIRTUAL_ENV='{uvq(built)}'\nexport VIRTUAL_ENV\n")
    launcher = "#!/bin/sh\n'''exec' '" + uvq(built) + "/bin/python' \"$0\" \"$@\"\n' '''\n"
    (built / "bin" / "pip").write_text(launcher)
    (built / "bin" / "raw").write_text(f"#!{built}/bin/python\n")
    relocate(str(built), final)
    assert (built / "bin" / "activate").read_text().startswith(f"VIRTUAL_ENV='{uvq(final)}'\n")
    assert f"'{uvq(final)}/bin/python'" in (built / "bin" / "pip").read_text()
    assert (built / "bin" / "raw").read_text() == f"#!{final}/bin/python\n"
    # and the shell agrees: the quoted value is the final path
    out = subprocess.run(["sh", "-c", '. "$1"; printf %s "$VIRTUAL_ENV"', "_", str(built / "bin" / "activate")],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout == final, out


def test_d03_relocate_refuses_to_leave_the_temporary_path(tmp_path: Path) -> None:
    from torchfit.errors import RelocationFailed
    from torchfit.installer.prefix import relocate

    built = tmp_path / ".env.torchfit-1-abc" / "env"
    (built / "bin").mkdir(parents=True)
    # a form relocate does not know: the directory's name in another spelling of the path
    (built / "bin" / "odd").write_text("cd ../.env.torchfit-1-abc/env\n")
    with pytest.raises(RelocationFailed, match="odd"):
        relocate(str(built), str(tmp_path / "env"))


# --- #5: the swap is reported as it happened ---------------------------------------------------


@pytest.mark.slow
@needs_uv
def test_d05_signal_after_the_exchange_is_reported_as_late_not_as_unchanged(
        tf: Tf, tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    code, _, err = tf.run(*_install(torch_index, prefix))
    assert code == 0, err
    # An old env that takes a while to remove: the signal lands after the exchange.
    many = prefix / "many"
    many.mkdir()
    for i in range(40000):
        (many / str(i)).touch()
    (prefix / "OLD_MARKER").touch()
    run = tf.start(*_install(torch_index, prefix, "--force"))
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


def test_d05_signal_pending_before_the_exchange_cancels_it(tmp_path: Path) -> None:
    from torchfit.installer.prefix import TempEnv, swap_into_place
    from torchfit.interrupts import interrupts_raise

    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "OLD").write_text("old\n")
    with TempEnv(str(prefix)) as tmp:
        os.mkdir(tmp.path)
        Path(tmp.path, "NEW").write_text("new\n")
        with interrupts_raise():
            old = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # arrives (held) before the swap starts
                with pytest.raises(KeyboardInterrupt, match="before the swap"):
                    swap_into_place(tmp.path, str(prefix))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
        assert (prefix / "OLD").read_text() == "old\n" and not (prefix / "NEW").exists()


# --- #7: a hung mirror is bounded and visible ---------------------------------------------------


@pytest.mark.slow
@needs_uv
def test_d07_install_against_a_hung_mirror_says_what_it_waits_for_and_ends(
        tf: Tf, tmp_path: Path, hung_server: str) -> None:
    start = time.monotonic()
    run = tf.start(*_install(hung_server + "/simple", tmp_path / "env", "--allow-insecure-index"),
                   env={"PIP_DEFAULT_TIMEOUT": "180", "TORCHFIT_STALL_TIMEOUT": "14"})
    seen = run.read_until("still waiting for", timeout=40)
    assert hung_server in seen.splitlines()[-1] and " since " in seen.splitlines()[-1]
    code, _, err = run.wait(90)
    assert code == 1, err
    assert "no progress for 14 s" in err
    assert time.monotonic() - start < 90
    assert run.left() == [] and leftovers(tmp_path) == []


@pytest.mark.slow
@needs_uv
def test_d07_export_against_a_hung_mirror_says_what_it_waits_for(tf: Tf, hung_server: str) -> None:
    run = tf.start("export", "--format", "pylock", *CPU_ARGS, "--assume", "gpu=none",
                   "--torch-index-url", hung_server + "/whl/{variant}", "--allow-insecure-index", env=UV_ON_PATH)
    seen = run.read_until("still waiting for uv pip compile", timeout=40)
    assert hung_server in seen
    run.signal(signal.SIGTERM)  # #11 and #25 as well: 130, no uv left, no temp dir
    code, _, err = run.wait(30)
    assert code == 130, err
    assert run.left() == [] and run.temp_dirs() == []


# --- #10: SIGKILL of install takes pip/uv with it ---------------------------------------------


@pytest.mark.slow
def test_d10_sigkill_of_install_leaves_no_pip_and_no_debris(tf: Tf, tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    run = tf.start(*_install(torch_index, prefix, "--installer", "pip"))
    wait_for_child(run.proc, is_pip_install)
    run.signal(signal.SIGKILL)
    run.proc.wait(timeout=10)
    assert run.left(grace=5) == []
    # The dead run's temporary env is proven (marker, dead owner): the next install removes it.
    assert len(leftovers(tmp_path)) >= 1
    code, _, err = tf.run(*_install(torch_index, prefix, "--installer", "pip"))
    assert code == 0, err
    assert "left by a torchfit install that was killed" in err
    time.sleep(1)
    assert leftovers(tmp_path) == []


# --- #11: every command dies cleanly: exit 130, no child left -------------------------------------


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_d11_doctor_interrupted_exits_130_and_leaves_no_worker(tf: Tf, tmp_path: Path, sig: str) -> None:
    env = hanging_torch_env(tmp_path)
    run = tf.start("doctor", "--env", str(env))
    wait_for_tagged(run, "doctor_worker")
    time.sleep(0.3)
    run.signal(getattr(signal, sig))
    code, _, err = run.wait(30)
    assert code == 130, err
    assert run.left() == [] and run.temp_dirs() == []


@pytest.mark.slow
def test_d11_verify_leaves_no_hung_nvidia_smi(tf: Tf, tmp_path: Path, cpu_torch_env: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexec sleep 600\n")
    smi.chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    run = tf.start("verify", "--env", str(cpu_torch_env), "--nproc", "1", env=env)
    run.wait(300)
    assert run.left(grace=3) == []


def test_d11_matrix_check_sigterm_exits_130(tf: Tf, hung_server: str) -> None:
    run = tf.start("matrix", "check", "--variant", "cpu", "--torch", "2.13.0", "--no-cache",
                   "--index-url", hung_server + "/whl", "--allow-insecure-index", "--timeout", "60")
    time.sleep(3)
    run.signal(signal.SIGTERM)
    code, _, err = run.wait(30)
    assert code == 130, err


# --- #12: nothing deleted without proof ----------------------------------------------------------


@pytest.mark.slow
def test_d12_a_lookalike_directory_beside_prefix_is_never_deleted(
        tf: Tf, tmp_path: Path, torch_index: str) -> None:
    backup = tmp_path / ".env.torchfit-mybackup"
    backup.mkdir()
    (backup / "a.txt").write_text("notes\n")
    forged = tmp_path / ".env.torchfit-99999999-abcdef"  # a marker copied from another directory
    forged.mkdir()
    (forged / ".torchfit-owner").write_text(json.dumps({"tool": "torchfit", "pid": 99999999, "name": "other"}))
    code, _, err = tf.run(*_install(torch_index, tmp_path / "env"))
    assert code == 0, err
    assert (backup / "a.txt").read_text() == "notes\n" and forged.is_dir()
    assert f"leaving {backup} alone" in err


def test_d12_only_a_marked_directory_of_a_dead_run_is_stale(tmp_path: Path) -> None:
    from torchfit.installer.prefix import scan_temps
    from torchfit.owned import make_marked_dir

    prefix = str(tmp_path / "env")
    dead = subprocess.Popen(["true"])
    dead.wait()
    mine = tmp_path / ".env.torchfit-1-aaaaaa"
    make_marked_dir(str(mine), prefix)  # this (live) process
    gone = tmp_path / ".env.torchfit-2-bbbbbb"
    record = make_marked_dir(str(gone), prefix)
    record["pid"] = dead.pid
    (gone / ".torchfit-owner").write_text(json.dumps(record))
    link = tmp_path / ".env.torchfit-3-cccccc"
    link.symlink_to(gone)
    scan = scan_temps(prefix)
    assert scan.stale == [str(gone)] and scan.running == [str(mine)] and scan.unproven == [str(link)]


# --- #13: one rule for http:// ------------------------------------------------------------------


def test_d13_export_refuses_plain_http_unless_allowed(tf: Tf) -> None:
    args = ["export", "--format", "requirements", *CPU_ARGS, "--assume", "gpu=none",
            "--torch-index-url", "http://mirror.example/whl/{variant}"]
    code, out, err = tf.run(*args)
    assert code == 2 and "--allow-insecure-index" in err and out == "", err
    code, out, err = tf.run(*args, "--allow-insecure-index")
    assert code == 0 and "--index-url http://mirror.example/whl/cpu" in out, err


def test_d13_matrix_check_sends_no_token_over_plain_http(tf: Tf) -> None:
    with http_server(lambda h: reply(h, 404)) as srv:
        code, _, err = tf.run("matrix", "check", "--variant", "cpu", "--torch", "2.13.0", "--no-cache",
                              "--index-url", srv.url.replace("http://", "http://u:TOKEN@") + "/whl")
    assert code == 2 and "--allow-insecure-index" in err, err
    assert "TOKEN" not in err and srv.seen == []
    sent = "".join(h.get("Authorization") or "" for h in srv.headers)
    assert base64.b64encode(b"u:TOKEN").decode() not in sent


# --- #18: a mount point is refused up front --------------------------------------------------------


def test_d18_prefix_that_is_a_mount_point_is_refused_before_installing(
        tf: Tf, tmp_path: Path, torch_index: str) -> None:
    prefix = tmp_path / "env"
    _mount_tmpfs(prefix, "16m")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
        start = time.monotonic()
        code, _, err = tf.run(*_install(torch_index, prefix, "--force"))
        assert code == 2 and "mount point" in err, err
        assert "[venv]" not in err and time.monotonic() - start < 30
    finally:
        _umount(prefix)


# --- #24: the install log is never silently empty ----------------------------------------------


@pytest.mark.slow
@needs_uv
def test_d24_install_log_on_a_full_filesystem_is_reported(tf: Tf, tmp_path: Path, torch_index: str) -> None:
    state = tmp_path / "fullstate"
    _mount_tmpfs(state, "64k")
    try:
        (state / "torchfit" / "logs").mkdir(parents=True)
        fd = os.open(state / "filler", os.O_WRONLY | os.O_CREAT, 0o600)  # fill it up
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        prefix = tmp_path / "env"
        code, _, err = tf.run(*_install(torch_index, prefix), env={"XDG_STATE_HOME": str(state)})
        assert code == 0, err
        assert "cannot write the install log" in err
        log = prefix / "torchfit-install.log"
        assert not log.exists() or log.stat().st_size > 0
        assert f"log:   {log}" not in err or log.stat().st_size > 0
    finally:
        _umount(state)


# --- #25: interrupted verify/export leave no temporary directory ----------------------------------


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_d25_interrupted_verify_removes_its_work_dir(tf: Tf, tmp_path: Path, sig: str) -> None:
    env = hanging_torch_env(tmp_path)
    run = tf.start("verify", "--env", str(env), "--timeout", "120")
    wait_for_tagged(run, "inspect_worker")
    time.sleep(0.3)
    run.signal(getattr(signal, sig))
    code, _, err = run.wait(30)
    assert code == 130, err
    assert run.left() == [] and run.temp_dirs() == []


@pytest.mark.parametrize("json_out", [False, True])
def test_d25_an_interrupted_verify_with_keep_says_once_where_its_work_dir_is(tf: Tf, tmp_path: Path,
                                                                             json_out: bool) -> None:
    """The interruption carries the kept directory and the CLI's boundary prints it once, under
    --json too (verify wrote it to stderr itself, beside the boundary's own line)."""
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


def test_d25_work_dir_of_a_sigkilled_verify_is_swept_by_the_next(tf: Tf, tmp_path: Path) -> None:
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
