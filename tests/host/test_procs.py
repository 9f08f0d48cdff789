"""host/procs.py: which processes use a directory (install --force's check, issue 21 class 0d).
Real processes: one working in the directory, one holding a file of it open, one with a
library of it mapped; a sibling directory whose name extends it is not it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from torchfit.host.procs import find_users, parse_maps

# The kernel pads the columns with spaces: a name's own leading or trailing blank is lost there.
_path = st.text(st.sampled_from(list("abc/ ._-é")), min_size=1, max_size=30).map(lambda s: "/" + s.strip())


@given(paths=st.lists(_path, min_size=1, max_size=6), deleted=st.booleans())
def test_attack3_parse_maps_reads_every_path_once(paths: list[str], deleted: bool) -> None:
    lines = [f"7f00{i:04x}000-7f00{i:04x}fff r-xp 00000000 fd:01 {1000 + i}                    {p}"
             + (" (deleted)" if deleted else "") for i, p in enumerate(paths)]
    lines += ["7ffd0000-7ffd1000 rw-p 00000000 00:00 0                          [stack]",
              "7ffd2000-7ffd3000 rw-p 00000000 00:00 0 "]
    assert parse_maps("\n".join(lines)) == list(dict.fromkeys(paths))


def test_attack3_find_users_sees_cwd_open_files_and_mappings(tmp_path: Path) -> None:
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    sibling = tmp_path / "env2"
    sibling.mkdir()
    lib = env / "lib" / "libcopy.so"
    shutil.copy(Path(sys.executable).resolve(), lib)  # any ELF file can be mapped
    data = env / "data.txt"
    data.write_text("x")
    code = ("import mmap, sys, time; f = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ);"
            "g = open(sys.argv[2]); print('ready', flush=True); time.sleep(60)")
    procs = [
        subprocess.Popen(["sleep", "60"], cwd=env / "lib"),
        subprocess.Popen([sys.executable, "-c", code, str(lib), str(data)], stdout=subprocess.PIPE, text=True),
        subprocess.Popen(["sleep", "60"], cwd=sibling),  # env2 is not env
    ]
    try:
        assert procs[1].stdout is not None and procs[1].stdout.readline().strip() == "ready"
        found = {u.pid: u for u in find_users(str(env)).procs}
        assert procs[0].pid in found and found[procs[0].pid].how == "works in it (lib)"
        assert found[procs[0].pid].command == "sleep 60"
        assert procs[1].pid in found and found[procs[1].pid].how == "has lib/libcopy.so mapped"
        assert procs[2].pid not in found
        assert find_users(str(sibling)).procs[0].pid == procs[2].pid
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert find_users(str(env)).procs == []


def test_a_python_run_through_a_venv_symlink_is_seen(tmp_path: Path) -> None:
    """Issue 25: a venv's bin/python is a symlink, so /proc/PID/exe names the interpreter outside
    the env, and a python that imported nothing maps nothing of it: its argv[0] does name it."""
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    proc = subprocess.Popen([str(env / "bin" / "python"), "-c", "import time; print('ready', flush=True); "
                             "time.sleep(60)"], stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        found = {u.pid: u.how for u in find_users(str(env)).procs}
        assert found.get(proc.pid) == "runs bin/python", found
    finally:
        proc.kill()
        proc.wait()
