"""Regression tests for doctor's defects of the 2026-11 attack (issue 13): #4, #8, #9,
the shared NCCL verdict, and the 80-column report. Real `torchfit doctor` subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doctor.conftest import SRC, Host, fake_lib, h200_env, system_libs
from tests.support.cli import run_cli


def _raising_env(parent: Path) -> Path:
    """A venv whose `import torch` raises (defects file, #4)."""
    py311 = "/root/.pyenv/versions/3.11.7/bin/python3.11"
    base = py311 if os.path.exists(py311) else sys.executable
    env = parent / "raise"
    subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = next((env / "lib").glob("python3.*")) / "site-packages" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('raise RuntimeError("broken")\n')
    return env


@pytest.mark.parametrize("how", [["--env", "raise"], ["--env", "./raise"], ["--python", "raise/bin/python"],
                                 ["VIRTUAL_ENV=."]])
def test_d04_relative_env_is_inspected(host: Host, tmp_path: Path, how: list[str]) -> None:
    _raising_env(tmp_path)
    env = dict(host.env)
    cwd = tmp_path
    args = how
    if how == ["VIRTUAL_ENV=."]:
        env["VIRTUAL_ENV"] = "."
        cwd = tmp_path / "raise"
        args = []
    proc = run_cli("doctor", "--json", "--root", str(host.root), *args, base_env=env, cwd=cwd, timeout=300)
    data = json.loads(proc.stdout)
    imp = next(c for c in data["checks"] if c["id"] == "torch-import")
    assert imp["status"] == "fail" and "broken" in imp["evidence"], imp
    assert proc.returncode == 1
    assert os.path.isabs(data["python"])


@pytest.mark.parametrize("python", ["/bin/false", "/bin/sleep", "script", "exit0"])
def test_d09_uninspectable_python_is_not_a_clean_bill(host: Host, tmp_path: Path, python: str) -> None:
    if python == "script":
        p = tmp_path / "notpython.sh"
        p.write_text("#!/bin/sh\necho hello\n")
        p.chmod(0o755)
        python = str(p)
    elif python == "exit0":
        env = _raising_env(tmp_path)
        init = next((env / "lib").glob("python3.*")) / "site-packages" / "torch" / "__init__.py"
        init.write_text("import sys; sys.exit(0)\n")
        python = str(env / "bin" / "python")
    r = host.doctor("--python", python)
    assert r.rc == 1, r
    assert r.status("torch-import") == "fail"
    text = run_cli("doctor", "--root", str(host.root), "--python", python, base_env=host.env, timeout=300).stdout
    assert "Nothing failed" not in text


@pytest.mark.slow
def test_d08_cpu_torch_on_a_gpu_host_same_verdict_in_verify_and_doctor(h200: Host, cpu_torch_env: Path) -> None:
    """The one judgement (compat.judgements.judge_torch_build), from both commands."""
    doc = h200.doctor("--python", str(cpu_torch_env / "bin" / "python"))
    assert doc.status("torch-cpu-build") == "fail"
    env = dict(h200.env)
    env["PYTHONPATH"] = str(SRC)
    ver = run_cli("verify", "--json", "--python", str(cpu_torch_env / "bin" / "python"), "--no-bandwidth", "--nproc", "1",
                  base_env=env, timeout=300)
    assert ver.returncode == 1, ver.stderr[-2000:]
    gpus = next(c for c in json.loads(ver.stdout)["checks"] if c["name"] == "gpus")
    assert gpus["status"] == "fail" and "CPU-only build on a host with GPUs" in gpus["summary"]
    assert "CPU-only build on a host with GPUs" in doc.check("torch-cpu-build")["evidence"]


@pytest.mark.parametrize(("code", "status"), [(22803, "warn"), (22602, "fail")])
def test_ux_shadowed_nccl_same_verdict_in_doctor_and_verify(h200: Host, tmp_path: Path, code: int,
                                                            status: str) -> None:
    """A preloaded libnccl other than torch's 2.28.9: doctor's nccl-shadowed and verify's
    nccl check give the same verdict (the H200 record had warn against fail)."""
    import torchfit.verify.inspection as v

    env = h200_env(tmp_path)
    system_libs(h200)
    version = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    lib = tmp_path / "pre" / f"libnccl.so.{version}"
    lib.parent.mkdir()
    lib.write_bytes(fake_lib("nccl", code).read_bytes())
    r = h200.doctor("--python", env.python, env={"LD_PRELOAD": str(lib)})
    assert r.check("nccl-shadowed")["status"] == status
    torch = {"version": "2.11.0+cu130", "cuda": "13.0", "nccl_compiled": [2, 28, 9]}
    check = v.judge_nccl(torch, {"nccl": {"code": code, "path": str(lib), "paths": []}}, {"LD_PRELOAD": str(lib)})
    assert check.status == status


@pytest.mark.slow
def test_ux_doctor_report_reads_at_80_columns(host: Host, cpu_torch_env: Path) -> None:
    env = dict(host.env, COLUMNS="80")
    proc = run_cli("doctor", "--root", str(host.root), "--python", str(cpu_torch_env / "bin" / "python"), "--log", os.devnull,
                   base_env=env, timeout=300)
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    ok = [ln for ln in lines if ln.startswith("  ok ")]
    assert ok and all("fix:" not in ln for ln in ok)
    data = json.loads(run_cli("doctor", "--json", "--root", str(host.root), "--python", str(cpu_torch_env / "bin" / "python"),
                              "--log", os.devnull, base_env=env, timeout=300).stdout)
    assert len(ok) == sum(1 for c in data["checks"] if c["status"] == "ok")
    bad = [c["id"] for c in data["checks"] if c["status"] in ("warn", "fail") and c["fix"]]
    fixes = [ln for ln in lines if ln.strip().startswith("fix:")]
    assert len(fixes) == len(bad)


def test_d15_doctor_root_files_linked_to_dev_zero(host: Host) -> None:
    """/proc and /sys files that are endless (links to /dev/zero) are read bounded."""
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


def test_d09_a_daemon_holding_the_workers_pipe_does_not_hold_doctor(host: Host, tmp_path: Path) -> None:
    """`import torch` starts a daemon (setsid, double fork) that inherits the worker's stdout
    and stderr, then fails. Doctor used to wait its full 300 s on the pipe; it now stops
    waiting 2 s after the worker exits, kills the daemon, and judges what the worker said."""
    import time
    import uuid

    mark = f"tfdaemon-{uuid.uuid4().hex[:8]}"
    env = _raising_env(tmp_path)
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
