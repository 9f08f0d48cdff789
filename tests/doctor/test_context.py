"""doctor/context.py: the files it reads are bounded (#15 of issue 13) and the worker it runs cannot
hold it (#9: a daemon keeping the worker's pipe open). Real `torchfit doctor` subprocesses."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.doctor.conftest import Host, raising_torch_env


def test_doctor_reads_root_files_linked_to_dev_zero_bounded(host: Host) -> None:
    """/proc and /sys files that are endless (links to /dev/zero) are read bounded.
    Defect #15 of the 2026-11 attack (issue 13)."""
    import time

    for path in ("proc/version", "proc/sys/kernel/osrelease", "proc/mounts", "proc/modules",
                 "proc/driver/nvidia/version", "sys/module/nvidia/version"):
        target = host.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.unlink()
        target.symlink_to("/dev/zero")
    start = time.monotonic()
    r = host.doctor("--python", sys.executable, timeout=120)
    assert time.monotonic() - start < 90
    assert r.rc in (0, 1) and r.data is not None and "Traceback" not in r.stderr
    assert not [c for c in r.data["checks"] if "MemoryError" in c["evidence"]]


def test_a_daemon_holding_the_workers_pipe_does_not_hold_doctor(host: Host, tmp_path: Path) -> None:
    """`import torch` starts a daemon (setsid, double fork) that inherits the worker's stdout
    and stderr, then fails. Doctor used to wait its full 300 s on the pipe; it now stops
    waiting 2 s after the worker exits, kills the daemon, and judges what the worker said.
    Defect #9 of the 2026-11 attack (issue 13)."""
    import time
    import uuid

    mark = f"tfdaemon-{uuid.uuid4().hex[:8]}"
    env = raising_torch_env(tmp_path)
    init = next((env / "lib").glob("python3.*")) / "site-packages" / "torch" / "__init__.py"
    init.write_text(
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', [{mark!r}, '600'])\n"
        "    os._exit(0)\n"
        "raise ImportError('this torch is broken and left a daemon behind')\n")
    start = time.monotonic()
    r = host.doctor("--python", str(env / "bin" / "python"), timeout=120)
    took = time.monotonic() - start
    alive = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if fh.read().startswith(mark.encode()):
                    alive.append(int(entry))
        except (OSError, ValueError):
            continue
    for pid in alive:
        os.kill(pid, 9)
    assert took < 60, took
    assert r.rc == 1 and r.status("torch-import") == "fail", r
    assert alive == [], "the daemon that held the worker's pipe outlived doctor"

