"""One judgement of the environment (issue 19): verify reports what doctor would say about
the ranks' environment, with doctor's check id, cause and fix, before launching ranks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_cli

pytestmark = pytest.mark.slow  # real verify runs (torch imports, torchrun)

IFACES = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []


def tf(*args: str, env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    """The CLI with `env`; TMPDIR the test's own: a failed verify keeps its work directory there
    for the reader (it was left in /tmp by every slow run)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "CUDA_"))}
    full.update(env, TMPDIR=str(tmp))
    return run_cli(*args, base_env=full, timeout=300)


def check(report: dict, name: str, key: str) -> dict:
    return next(c for c in report["checks"] if c[key] == name)


@pytest.mark.skipif(not IFACES, reason="no /sys/class/net to judge interfaces against")
def test_verify_names_a_bad_nccl_interface_as_doctor_does(cpu_torch_env: Path, tmp_path: Path) -> None:
    env = {"NCCL_SOCKET_IFNAME": "bogus0", "NCCL_P2P_DISABLE": "1"}
    doc = tf("doctor", "--json", "--env", str(cpu_torch_env), env=env, tmp=tmp_path)
    ver = tf("verify", "--json", "--env", str(cpu_torch_env), "--backend", "nccl", "--no-bandwidth", env=env,
             tmp=tmp_path)
    assert ver.returncode == 1, ver.stderr
    d, v = json.loads(doc.stdout), json.loads(ver.stdout)
    for name in ("nccl-socket-ifname", "nccl-env-disables"):
        ours, theirs = check(v, name, "name"), check(d, name, "id")
        assert (ours["summary"], ours.get("hint")) == (theirs["evidence"], theirs["fix"])
    assert check(v, "nccl-socket-ifname", "name")["status"] == "fail"
    assert "matches no interface (this host has: " in check(v, "nccl-socket-ifname", "name")["summary"]
    assert v["failed"][0] == "nccl-socket-ifname"
    # No NCCL rank was started for an environment that cannot run one.
    assert v["ddp"] is None and check(v, "ddp", "name")["status"] in ("fail", "skip")


def test_gloo_runs_are_not_judged_by_nccl_variables(cpu_torch_env: Path, tmp_path: Path) -> None:
    ver = tf("verify", "--json", "--env", str(cpu_torch_env), "--backend", "gloo", "--nproc", "1", "--no-bandwidth",
             env={"NCCL_SOCKET_IFNAME": "bogus0"}, tmp=tmp_path)
    assert ver.returncode == 0, ver.stdout[-2000:] + ver.stderr[-2000:]
    v = json.loads(ver.stdout)
    assert check(v, "environment", "name")["status"] == "pass"
    assert not any(c["name"].startswith("nccl-socket") for c in v["checks"])
