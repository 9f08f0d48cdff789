"""installer/prefix.py: the PREFIX lock, relocation of a built env (shell-quoted forms, never out of
the temporary path: #3 of issue 13) and the atomic swap into place (a signal pending before the
exchange cancels it: #5)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from torchfit.errors import PrefixBusy
from torchfit.installer.prefix import PrefixLock, relocate, swap_into_place


def test_prefix_lock_is_exclusive_and_removed(tmp_path: Path) -> None:
    prefix = str(tmp_path / "env")
    with PrefixLock(prefix):
        assert (tmp_path / "env.lock").read_text().strip() == str(os.getpid())
        with pytest.raises(PrefixBusy, match=f"pid {os.getpid()}"):
            with PrefixLock(prefix):
                pass
        start = time.monotonic()
        with pytest.raises(PrefixBusy):
            with PrefixLock(prefix, wait=0.5):
                pass
        assert time.monotonic() - start >= 0.5
    assert not (tmp_path / "env.lock").exists()
    with PrefixLock(prefix):
        pass


def test_relocate_rewrites_scripts_not_symlinks(tmp_path: Path) -> None:
    built = tmp_path / ".env.torchfit-1-abc"
    (built / "bin").mkdir(parents=True)
    (built / "bin" / "tool").write_text(f"#!{built}/bin/python\nprint(1)\n")
    (built / "bin" / "tool").chmod(0o755)
    os.symlink("/usr/bin/python3", built / "bin" / "python")
    (built / "pyvenv.cfg").write_text(f"home = /usr/bin\ncommand = /usr/bin/python3 -m venv {built}\n")
    changed = relocate(str(built), str(tmp_path / "env"))
    assert sorted(os.path.basename(p) for p in changed) == ["pyvenv.cfg", "tool"]
    assert (built / "bin" / "tool").read_text().startswith(f"#!{tmp_path / 'env'}/bin/python\n")
    assert os.access(built / "bin" / "tool", os.X_OK)
    assert os.readlink(built / "bin" / "python") == "/usr/bin/python3"


def test_swap_replaces_atomically_and_removes_the_old(tmp_path: Path) -> None:
    prefix, built = tmp_path / "env", tmp_path / ".env.torchfit-2-def"
    prefix.mkdir()
    (prefix / "old").write_text("old")
    built.mkdir()
    (built / "new").write_text("new")
    swap_into_place(str(built), str(prefix))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]
    assert (prefix / "new").read_text() == "new"
    fresh = tmp_path / ".fresh.torchfit-3-ghi"
    fresh.mkdir()
    swap_into_place(str(fresh), str(tmp_path / "fresh"))
    assert (tmp_path / "fresh").is_dir() and not fresh.exists()



def test_attack3_install_log_never_writes_through_a_planted_symlink(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A symlink at the log's name (pid and stamp are predictable) is refused, never written
    through (82c371b opened it with open(path, "w"), truncating the target)."""
    from torchfit.installer.prefix import InstallLog, state_dir

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    logs = Path(state_dir())
    logs.mkdir(parents=True, mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    now = time.time()
    for dt in range(-1, 60):  # every second the log may be named in, on a machine that stalls a few
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + dt))
        os.symlink(victim, logs / f"install-env-{stamp}-{os.getpid()}.log")
    said: list[str] = []
    log = InstallLog("env", on_error=said.append)
    log.write("secret-free text")
    assert victim.read_text() == "precious\n"
    assert log.path is None and len(said) == 1 and "exists already" in said[0] and "continuing without it" in said[0]


def test_relocate_rewrites_shell_quoted_forms(tmp_path: Path) -> None:
    """Defect #3 of the 2026-11 attack (issue 13)."""
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


def test_relocate_refuses_to_leave_the_temporary_path(tmp_path: Path) -> None:
    """Defect #3 of the 2026-11 attack (issue 13)."""
    from torchfit.errors import RelocationFailed
    from torchfit.installer.prefix import relocate

    built = tmp_path / ".env.torchfit-1-abc" / "env"
    (built / "bin").mkdir(parents=True)
    # a form relocate does not know: the directory's name in another spelling of the path
    (built / "bin" / "odd").write_text("cd ../.env.torchfit-1-abc/env\n")
    with pytest.raises(RelocationFailed, match="odd"):
        relocate(str(built), str(tmp_path / "env"))


def test_signal_pending_before_the_exchange_cancels_it(tmp_path: Path) -> None:
    """Defect #5 of the 2026-11 attack (issue 13)."""
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
                # arrives (held) before the swap starts: sent to this thread, which blocks it; a signal to
                # the process could go to another thread (a session's server) and run the handler at once
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
                with pytest.raises(KeyboardInterrupt, match="before the swap"):
                    swap_into_place(tmp.path, str(prefix))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
        assert (prefix / "OLD").read_text() == "old\n" and not (prefix / "NEW").exists()
