"""compat/judgements.py: a host whose nvidia-smi fails is a GPU host with unknown facts, never "no GPU"
(defect #2 of the 2026-11 attack, issue 13): resolve, install, detect --facts and doctor, one judgement.
Real CLI runs with a fake nvidia-smi on PATH."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import run_clean
from tests.support.fake_smi import HANGS, NVML_MISMATCH, fake_smi_env


@pytest.mark.parametrize("script", [NVML_MISMATCH, HANGS], ids=["nvml-mismatch", "hung-smi"])
def test_broken_driver_resolve_refuses_with_cause_and_fix(tmp_path: Path, script: str) -> None:
    """Defect #2 of the 2026-11 attack (issue 13)."""
    env = fake_smi_env(tmp_path, script)
    start = time.monotonic()
    proc = run_clean("resolve", "--json", env=env, timeout=90)
    assert time.monotonic() - start < 60
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "gpu-facts-unknown" in proc.stderr
    assert "timed out" in proc.stderr or "Driver/library version mismatch" in proc.stderr
    for fix in ("torchfit doctor", "--assume gpu=", "--variant cpu"):
        assert fix in proc.stderr
    # No CPU plan printed: with --json, stdout holds the one error object (issue 10), no plan.
    out = json.loads(proc.stdout)
    assert out["ok"] is False and out["reference"] == "gpu-facts-unknown" and "variant" not in out


def test_broken_driver_install_refuses_before_building(tmp_path: Path) -> None:
    """Defect #2 of the 2026-11 attack (issue 13)."""
    env = fake_smi_env(tmp_path, NVML_MISMATCH)
    prefix = tmp_path / "env"
    proc = run_clean("install", "torch==2.13.0", "--python", "3.11", "--prefix", str(prefix), env=env)
    assert proc.returncode == 1, proc.stderr
    assert "gpu-facts-unknown" in proc.stderr and not prefix.exists()


def test_a_broken_driver_host_may_still_choose_cpu_or_a_cuda(tmp_path: Path) -> None:
    """Defect #2 of the 2026-11 attack (issue 13)."""
    env = fake_smi_env(tmp_path, NVML_MISMATCH)
    cpu = run_clean("resolve", "--variant", "cpu", "--json", env=env)
    assert cpu.returncode == 0, cpu.stderr
    assert json.loads(cpu.stdout)["variant"] == "cpu"
    gpu = run_clean("resolve", "--assume", "gpu=sm_90", "--assume", "driver=580.95.05", "--json", env=env)
    assert gpu.returncode == 0, gpu.stderr
    assert json.loads(gpu.stdout)["variant"].startswith("cu")


def test_one_judgement_for_resolve_and_doctor(tmp_path: Path) -> None:
    """doctor fails the same host resolve refuses, through the same function.
    Defect #2 of the 2026-11 attack (issue 13)."""
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.judgements import judge_gpu_host
    from torchfit.host import nvidia_failure
    from torchfit.host.nvidia import NvidiaProbe

    probe = NvidiaProbe((), None, "nvidia-smi failed: Failed to initialize NVML: Driver/library version mismatch")
    judged = judge_gpu_host(HostFacts(nvidia_failure=nvidia_failure(probe)))
    assert judged.kind == "unknown" and "mismatch" in (judged.cause or "")
    missing = NvidiaProbe((), None, "nvidia-smi not found on PATH", missing=True)
    assert judge_gpu_host(HostFacts(nvidia_failure=nvidia_failure(missing))).kind == "none"
    env = fake_smi_env(tmp_path, NVML_MISMATCH)
    doc = run_clean("doctor", "--json", "--python", sys.executable, env=env)
    assert doc.returncode == 1
    smi = next(c for c in json.loads(doc.stdout)["checks"] if c["id"] == "nvidia-smi")
    assert smi["status"] == "fail" and "mismatch" in smi["evidence"]


def test_facts_file_keeps_the_unknown(tmp_path: Path) -> None:
    """detect --json of a broken host, resolved elsewhere with --facts: still refused.
    Defect #2 of the 2026-11 attack (issue 13)."""
    env = fake_smi_env(tmp_path, NVML_MISMATCH)
    det = run_clean("detect", "--json", env=env)
    assert det.returncode == 0
    facts = tmp_path / "node.json"
    facts.write_text(det.stdout)
    assert json.loads(det.stdout)["nvidia_failure"]
    proc = run_clean("resolve", "--facts", str(facts))
    assert proc.returncode == 1 and "gpu-facts-unknown" in proc.stderr



def test_a_fleet_group_whose_gpus_cannot_be_read_is_told_it_may_be_left_out() -> None:
    """Issue 28, item 5: the fix docs/cluster.md gives for such a group, --exclude, is in the hint."""
    from dataclasses import replace

    import pytest

    from tests.conftest import make_facts
    from torchfit.compat.judgements import refuse_unknown_gpus
    from torchfit.errors import GpuFactsUnknown

    broken = replace(make_facts(gpus=[]), nvidia_failure="Failed to initialize NVML: Driver/library version mismatch")
    group = replace(broken, name="gpu[07-09]", source="fleet: fleet.json, 3 node(s)")
    with pytest.raises(GpuFactsUnknown) as info:
        refuse_unknown_gpus([group])
    assert "`--exclude gpu[07-09]`" in (info.value.hint or "")
    with pytest.raises(GpuFactsUnknown) as info:
        refuse_unknown_gpus([broken])  # a single host: nothing to leave out
    assert "--exclude" not in (info.value.hint or "")
