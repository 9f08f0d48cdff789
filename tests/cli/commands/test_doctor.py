"""The command: exit codes, bad input, the table, --json, garbage in, Ctrl-C, and the docs."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.doctor.conftest import Host, h200_env, raising_torch_env
from tests.support.cli import run_cli, start_cli

STATUSES = {"ok", "warn", "fail", "unknown"}


def test_nothing_failed_exits_0_and_the_json_has_the_contract(h200: Host, tmp_path: Path) -> None:
    env = h200_env(tmp_path)
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", env.python)
    assert r.rc == 0, [c for c in r.data["checks"] if c["status"] == "fail"]
    data = r.data
    assert data["ok"] is True and data["python"] == env.python and data["python_source"] == "--python"
    assert data["summary"]["fail"] == 0 and sum(data["summary"].values()) == len(data["checks"])
    for c in data["checks"]:
        assert set(c) == {"id", "area", "title", "status", "evidence", "fix"}
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", c["id"]) and c["status"] in STATUSES and c["evidence"]
    areas = [c["area"] for c in data["checks"]]
    assert areas == sorted(areas, key=["driver", "build", "shadowing", "environment", "topology", "log"].index)


def test_a_failure_exits_1(h200: Host) -> None:
    r = h200.doctor(env={"CUDA_VISIBLE_DEVICES": "7"})
    assert r.rc == 1 and r.data["ok"] is False


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--env", "/nonexistent/prefix"], "--env /nonexistent/prefix: not a directory"),
        (["--env", "."], "no bin/python or bin/python3"),
        (["--python", "/nonexistent/python"], "--python /nonexistent/python: not found"),
        (["--log", "/nonexistent/train.log"], "--log /nonexistent/train.log: cannot read"),
        (["--log", "."], "is a directory"),
        (["--root", "/nonexistent/root"], "--root /nonexistent/root: not a directory"),
        (["--env", ".", "--python", sys.executable], "not allowed with argument"),
        (["--timeout", "0"], "give seconds > 0"),
        (["--timeout", "soon"], "is not a number"),
    ],
)
def test_bad_input_exits_2_with_one_line(host: Host, args: list[str], words: str) -> None:
    r = host.doctor(*args, root=False)
    assert r.rc == 2, r
    # --json: the one error object of every command on stdout (docs/architecture.md shape, issue 10).
    if r.stdout:
        error = lines_of(r.stderr)[0].split("error: ", 1)[1].rsplit("  [", 1)[0]
        assert json.loads(r.stdout) == {"schema": "torchfit.error/1", "ok": False, "error": error,
                                        "reference": "bad-input", "hint": None}
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchfit: error:") and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_table_is_grouped_by_area_with_fixes(h200: Host) -> None:
    r = h200.doctor(json_out=False, env={"NCCL_P2P_DISABLE": "1", "CUDA_VISIBLE_DEVICES": "0,GPU-8be0f050"})
    assert r.rc == 1
    out = r.stdout
    for words in ("torchfit doctor", "driver", "environment", "topology", "nccl-env-disables", "cuda-visible-devices",
                  "fix:", "1 fail"):
        assert words in out, words
    assert out.index("driver") < out.index("environment") < out.index("topology")


def test_json_mode_never_imports_rich(h200: Host) -> None:
    r = h200.doctor(env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert r.data is not None
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "torchfit.doctor" in imported
    assert not any(name == "rich" or name.startswith("rich.") for name in imported)


def test_active_venv_is_the_default_target(h200: Host, tmp_path: Path) -> None:
    env = h200_env(tmp_path)
    r = h200.doctor(env={"VIRTUAL_ENV": str(env.path)})
    assert r.data["python"] in (str(env.path / "bin" / "python3"), str(env.path / "bin" / "python"))
    assert r.data["python_source"] == "the active env ($VIRTUAL_ENV)"
    assert r.status("torch-import") == "ok"
    r = h200.doctor("--env", str(env.path))
    assert r.data["python_source"] == "--env" and r.status("torch-import") == "ok"


def test_garbage_in_gives_warn_or_unknown_with_a_reason_never_a_traceback(host: Host) -> None:
    junk = "\x00\xff garbage \x1b[31m ][ ::: ==> \n" * 3
    host.nvidia_smi(banner=junk, topo=junk, p2p=junk, query="index, name\nnot, a, table\n")
    for tool in ("lspci", "ldconfig", "dmesg", "dkms", "ldd"):
        host.tool(tool, junk)
    host.file("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kern")  # truncated
    host.file("/proc/modules", "\x00\x01\x02 nvid")
    host.file("/proc/sys/kernel/osrelease", "")
    host.file("/proc/mounts", junk)
    host.remove("/sys/class/net")
    host.file("/sys/class/net", "not a directory")  # an unreadable dir
    host.remove("/dev/shm")
    host.file("/dev/shm", "")
    host.file("/etc/nccl.conf", junk)
    bad_python = host.tmp / "python"
    bad_python.write_text("#!/bin/sh\necho 'TORCHFIT-RECORD {not json'\necho 'TORCHFIT-RECORD [1, 2]'\nexit 3\n")
    bad_python.chmod(0o755)
    log = host.tmp / "garbage.log"
    log.write_bytes(os.urandom(4096))
    r = host.doctor("--python", str(bad_python), "--log", str(log),
                    env={k: junk.replace("\x00", "") for k in ("CUDA_VISIBLE_DEVICES", "NCCL_SOCKET_IFNAME",
                                                                 "LD_PRELOAD", "CUDA_DEVICE_ORDER", "NCCL_P2P_DISABLE")})
    assert r.data is not None and r.rc in (0, 1), r
    assert "Traceback" not in r.stderr
    for c in r.data["checks"]:
        assert c["status"] in STATUSES and c["evidence"]
    smi = r.check("nvidia-smi")
    assert smi["status"] == "fail" and "nothing torchfit could read" in smi["evidence"]
    assert r.status("torch-import") == "fail" and "exited with status 3" in r.check("torch-import")["evidence"]
    assert r.status("dev-shm-size") == "unknown"
    bus = r.check("gpu-on-pci-bus")
    assert bus["status"] == "unknown" and "lspci printed nothing torchfit could read" in bus["evidence"]
    assert r.status("nccl-socket-ifname") == "unknown" and "cannot be listed" in r.check("nccl-socket-ifname")["evidence"]
    assert not [c for c in r.data["checks"] if "the check itself failed" in c["evidence"]]


def test_ctrl_c_stops_the_worker_and_exits_130(host: Host) -> None:
    hang = host.tmp / "python"
    marker = "61.4242"
    hang.write_text(f"#!/bin/sh\nexec /bin/sleep {marker}\n")
    hang.chmod(0o755)
    env = dict(host.env)
    proc = start_cli("doctor", "--json", "--root", str(host.root), "--python", str(hang), base_env=env,
                     cwd=host.tmp)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    time.sleep(0.5)
    alive = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd:
                alive.append(pid)
    assert alive == [], "the worker outlived doctor"


def _registered_ids() -> set[str]:
    sys.path.insert(0, str(ROOT / "src"))
    from torchfit.doctor.model import load_all

    return {s.id for s in load_all()}


def test_docs_list_every_check_and_troubleshooting_points_at_real_checks() -> None:
    ids = _registered_ids()
    doctor_md = (ROOT / "docs" / "doctor.md").read_text()
    missing = sorted(i for i in ids if f"`{i}`" not in doctor_md)
    assert missing == []
    guide = (ROOT / "docs" / "troubleshooting.md").read_text()
    cited = set(re.findall(r"doctor check `([a-z0-9-]+)`", guide))
    assert cited and cited <= ids, cited - ids
    # Every error message in the guide is one doctor recognises or explains.
    assert len(re.findall(r"^### ", guide, re.M)) >= 15


def test_help_names_the_options(host: Host) -> None:
    r = host.doctor("--help", root=False, json_out=False)
    assert r.rc == 0
    for opt in ("--env", "--python", "--log", "--json", "--root", "--timeout"):
        assert opt in r.stdout
    json.dumps(r.stdout)


def lines_of(text: str) -> list[str]:
    return text.strip().splitlines()


# --- the target and the report (#4 of issue 13; 80 columns) --------------------------------


@pytest.mark.parametrize("how", [["--env", "raise"], ["--env", "./raise"], ["--python", "raise/bin/python"],
                                 ["VIRTUAL_ENV=."]])
def test_relative_env_is_inspected(host: Host, tmp_path: Path, how: list[str]) -> None:
    """Defect #4 of the 2026-11 attack (issue 13)."""
    raising_torch_env(tmp_path)
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


@pytest.mark.slow
def test_ux_doctor_report_reads_at_80_columns(host: Host, cpu_torch_env: Path, tmp_path: Path) -> None:
    env = dict(host.env, COLUMNS="80")
    empty_log = tmp_path / "empty.log"  # a regular file: --log refuses a device, /dev/null included
    empty_log.write_text("")
    proc = run_cli("doctor", "--root", str(host.root), "--python", str(cpu_torch_env / "bin" / "python"), "--log", str(empty_log),
                   base_env=env, timeout=300)
    lines = proc.stdout.splitlines()
    # Wrapped to COLUMNS even through a pipe; a path longer than the width is never broken
    # (it must stay copyable), so it stands alone on its line.
    wide = [ln for ln in lines if len(ln) > 80 and len(ln.split()) > 1]
    assert wide == [], wide
    ok = [ln for ln in lines if ln.startswith("  ok ")]
    assert ok and all("fix:" not in ln for ln in ok)
    data = json.loads(run_cli("doctor", "--json", "--root", str(host.root), "--python", str(cpu_torch_env / "bin" / "python"),
                              "--log", str(empty_log), base_env=env, timeout=300).stdout)
    assert len(ok) == sum(1 for c in data["checks"] if c["status"] == "ok")
    bad = [c["id"] for c in data["checks"] if c["status"] in ("warn", "fail") and c["fix"]]
    fixes = [ln for ln in lines if ln.strip().startswith("fix:")]
    assert len(fixes) == len(bad)

