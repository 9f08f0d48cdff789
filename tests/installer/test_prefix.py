"""installer/prefix.py: the PREFIX lock, relocation of a built env and the atomic swap into place."""

from __future__ import annotations

import os
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
    for dt in range(4):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + dt))
        os.symlink(victim, logs / f"install-env-{stamp}-{os.getpid()}.log")
    said: list[str] = []
    log = InstallLog("env", on_error=said.append)
    log.write("secret-free text")
    assert victim.read_text() == "precious\n"
    assert log.path is None and len(said) == 1 and "exists already" in said[0] and "continuing without it" in said[0]
