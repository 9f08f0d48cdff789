"""`torchfit doctor --fix` (installer/repair.py, cli/commands/_doctor_fix.py): issue 28, item 2.

The slow tests damage a real CPU torch 2.13.0 env built by `torchfit install` from the local
wheel (its own env: the session's shared one stays whole), then let doctor find the damage,
show the repair (--dry-run, nothing changed), make it, and pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import CPU_ARGS, needs_uv, one_line_error, run_tf
from tests.support.wheels import sha256_file
from torchfit.installer.repair import load_built_env, plan_repairs, script_variables
from torchfit.lock.model import Artifact, Lock, LockedDist

pytestmark = needs_uv


@pytest.fixture
def damaged_env(tmp_path: Path, torch_index: str, state_home: Path) -> dict[str, Any]:
    prefix = tmp_path / "env"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix),
                  state=state_home)
    assert proc.returncode == 0, proc.stderr
    site = next((prefix / "lib").glob("python3*/site-packages"))
    return {"prefix": prefix, "site": site, "lock": (prefix / "pylock.toml").read_bytes()}


def doctor(state: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_tf("doctor", *args, state=state, timeout=600, **env)


@pytest.mark.slow
def test_fix_reinstalls_a_deleted_library_from_the_lock(damaged_env: dict[str, Any], state_home: Path) -> None:
    prefix, site = damaged_env["prefix"], damaged_env["site"]
    lib = site / "torch" / "lib" / "libtorch_cpu.so"
    digest = sha256_file(lib)
    lib.unlink()

    # The damaged env's report points at torch-files and at --fix first, not at the shadowing checks.
    r = doctor(state_home, "--env", str(prefix))
    assert r.returncode == 1, r.stderr
    imp = r.stdout[r.stdout.index("torch-import"):r.stdout.index("\n  fail     torch-files")]
    assert "torch-files below" in imp and f"torchfit doctor --fix --env {prefix}" in imp, imp
    assert "shadowing" not in imp and "1 of torch's own files differs" in imp, imp

    dry = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run", "--json")
    assert dry.returncode == 1, dry.stderr
    data = json.loads(dry.stdout)
    assert data["schema"] == "torchfit.doctor/1"
    assert [(f["check"], f["kind"], f["done"]) for f in data["fixes"]] == [("torch-files", "reinstall", False)]
    assert not lib.exists()  # a dry run changes nothing
    text = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run")
    assert "would fix torch-files: reinstall torch 2.13.0+cpu" in text.stdout, text.stdout

    fixed = doctor(state_home, "--env", str(prefix), "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "fixed torch-files: reinstalled torch from the lock" in fixed.stdout
    assert "Nothing failed." in fixed.stdout
    assert sha256_file(lib) == digest
    assert (prefix / "pylock.toml").read_bytes() == damaged_env["lock"]  # the lock is the truth, untouched
    after = doctor(state_home, "--env", str(prefix), "--json")
    assert after.returncode == 0 and json.loads(after.stdout)["summary"]["fail"] == 0, after.stdout


@pytest.mark.slow
def test_fix_rebuilds_an_env_whose_torch_is_gone(damaged_env: dict[str, Any], state_home: Path) -> None:
    prefix, site = damaged_env["prefix"], damaged_env["site"]
    shutil.rmtree(site / "torch")
    for info in site.glob("torch-*.dist-info"):
        shutil.rmtree(info)
    dry = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run")
    assert dry.returncode == 1
    assert "would fix torch-import: rebuild" in dry.stdout and "--force" in dry.stdout, dry.stdout
    fixed = doctor(state_home, "--env", str(prefix), "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert f"fixed torch-import: rebuilt {prefix} from its lock" in fixed.stdout
    assert (site / "torch" / "lib" / "libtorch_cpu.so").is_file()


@pytest.mark.slow
def test_fix_drops_a_variable_from_the_env_script_only(damaged_env: dict[str, Any], state_home: Path) -> None:
    prefix = damaged_env["prefix"]
    script = prefix / "bin" / "torchfit-env"
    original = script.read_text()
    script.write_text(original + "export NCCL_P2P_DISABLE=1\n")
    # NCCL_IB_DISABLE comes from the shell, not from a file torchfit wrote: said, not touched.
    env = {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
    dry = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run", **env)
    assert "would fix nccl-env-disables:" in dry.stdout and "without NCCL_P2P_DISABLE" in dry.stdout, dry.stdout
    assert "not fixed: nccl-env-disables: NCCL_IB_DISABLE is set outside the files torchfit wrote" in dry.stdout
    assert "NCCL_P2P_DISABLE" in script.read_text()
    fixed = doctor(state_home, "--env", str(prefix), "--fix", **env)
    assert fixed.returncode == 0, fixed.stderr
    assert script.read_text() == original


def test_fix_refuses_an_env_torchfit_did_not_build(tmp_path: Path, state_home: Path) -> None:
    venv = tmp_path / "plain"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    before = sorted(str(p) for p in venv.rglob("*"))
    line = one_line_error(doctor(state_home, "--env", str(venv), "--fix"))
    assert "--fix repairs only envs torchfit built" in line and "nothing was changed" in line, line
    assert sorted(str(p) for p in venv.rglob("*")) == before
    line = one_line_error(doctor(state_home, "--dry-run"))
    assert "--dry-run shows what --fix would do" in line


def test_list_names_every_check_and_its_repair(state_home: Path) -> None:
    r = doctor(state_home, "--list", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["schema"] == "torchfit.doctor-list/1"
    rows = {c["id"]: c for c in data["checks"]}
    assert rows["torch-files"]["fix"] == "reinstall" and rows["torch-import"]["fix"] == "rebuild"
    assert rows["nccl-env-disables"]["fix"] == "env-script" and rows["dev-shm-size"]["fix"] is None
    assert rows["log-unrecognised"]["needs_log"] is True
    text = doctor(state_home, "--list").stdout
    assert text.splitlines()[0].startswith("nvidia-smi ") and "--fix: reinstall the locked packages" in text


def _lock() -> Lock:
    torch = LockedDist("torch", "2.13.0+cpu", (Artifact("wheel", "0" * 64, "file:///w/torch.whl", None, "torch.whl"),))
    return Lock((torch,), {"plan": {"variant": "cpu"}})


def test_plan_repairs_from_verdicts() -> None:
    lock = _lock()
    plan = plan_repairs("/e", lock, {"torch-import": "fail", "torch-files": "fail"}, {}, "")
    assert [(r.check, r.kind, r.packages) for r in plan.repairs] == [("torch-files", "reinstall", ("torch",))]
    plan = plan_repairs("/e", lock, {"torch-import": "fail", "torch-files": "unknown"}, {}, "")
    assert [r.kind for r in plan.repairs] == ["rebuild"]
    # torch imports badly but its files match its RECORD (a shadowing library): nothing torchfit may rebuild
    assert plan_repairs("/e", lock, {"torch-import": "fail", "torch-files": "ok"}, {}, "").repairs == []
    script = "TORCHFIT_ENV='/e'\nexport TORCHFIT_ENV\n  export NCCL_SOCKET_IFNAME=eth9\n"
    assert script_variables(script) == {"TORCHFIT_ENV", "NCCL_SOCKET_IFNAME"}
    plan = plan_repairs("/e", lock, {"nccl-socket-ifname": "fail", "cuda-visible-devices": "ok"},
                        {"NCCL_SOCKET_IFNAME": "eth9", "CUDA_VISIBLE_DEVICES": "7"}, script)
    assert [(r.kind, r.variables) for r in plan.repairs] == [("env-script", ("NCCL_SOCKET_IFNAME",))]
    assert plan.refused == []
    # bin/torchfit-env a symlink (or not the file install wrote): the variable is said, never rewritten
    plan = plan_repairs("/e", lock, {"nccl-socket-ifname": "fail"}, {"NCCL_SOCKET_IFNAME": "eth9"}, script,
                        "/e/bin/torchfit-env is not a regular file of the env (a symlink?)")
    assert plan.repairs == [] and "NCCL_SOCKET_IFNAME set in /e/bin/torchfit-env" in plan.refused[0]


def test_a_symlinked_env_script_is_not_the_file_torchfit_wrote(tmp_path: Path) -> None:
    from torchfit.installer.repair import read_env_script

    (tmp_path / "bin").mkdir()
    outside = tmp_path / "outside.sh"
    outside.write_text("# torchfit-env: x\nexport NCCL_P2P_DISABLE=1\n")
    (tmp_path / "bin" / "torchfit-env").symlink_to(outside)
    text, why = read_env_script(str(tmp_path))
    assert text == "" and why is not None and "symlink" in why
    (tmp_path / "bin" / "torchfit-env").unlink()
    (tmp_path / "bin" / "torchfit-env").write_text("export NCCL_P2P_DISABLE=1\n")
    assert "does not start as the file torchfit writes" in (read_env_script(str(tmp_path))[1] or "")


def test_load_built_env_needs_the_lock_and_the_env_script(tmp_path: Path) -> None:
    from torchfit.errors import BadInput

    (tmp_path / "bin").mkdir()
    with pytest.raises(BadInput, match="only envs torchfit built"):
        load_built_env(str(tmp_path))
    with pytest.raises(BadInput, match="no such directory"):
        load_built_env(str(tmp_path / "nope"))
    assert os.path.isdir(tmp_path)
