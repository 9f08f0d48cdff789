"""verify stops once its inspection has decided the verdict (issue 37): a GPU host (a fake
nvidia-smi listing 8 H100s) whose torch sees no GPU (the real CPU torch 2.13.0; with
CUDA_VISIBLE_DEVICES a UUID no driver knows, as in the issue) fails `gpus`, and verify
ends there: no torchrun, `ddp` and `bandwidth` reported as skipped, not passed. Real
`torchfit verify` processes, measured against the same verify on a host without GPUs,
which runs every phase."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.fake_smi import EIGHT_H100, install_fake_smi
from tests.verify.conftest import Verify, assert_no_orphans

pytestmark = pytest.mark.slow

NOT_RUN = "not run: the gpus check failed"
CPU_ON_GPU_HOST = "torch 2.13.0+cpu is a CPU-only build on a host with GPUs (8\N{MULTIPLICATION SIGN} NVIDIA H100 80GB HBM3"


def test_a_verify_whose_gpus_check_fails_stops_after_the_inspection(
    verify: Verify, cpu_torch_env: Path, tmp_path: Path
) -> None:
    smi = install_fake_smi(tmp_path / "smi", EIGHT_H100)
    gpu_host = {"PATH": f"{smi}{os.pathsep}{os.environ['PATH']}"}
    args = ("--env", str(cpu_torch_env), "--bandwidth", "--sizes", "1M", "--keep")
    stopped = verify.run(*args, "--json", env={**gpu_host, "CUDA_VISIBLE_DEVICES": "GPU-00000000-bogus"})
    assert stopped.code == 1, stopped
    report = stopped.json
    assert report["failed"] == ["gpus"], stopped
    assert report["verdict"].startswith(f"FAIL gpus: {CPU_ON_GPU_HOST}"), stopped
    # What was not proven says so: skipped, with the reason, never a pass.
    for phase in ("ddp", "bandwidth"):
        check = stopped.check(phase)
        assert check["status"] == "skip" and check["summary"].startswith(NOT_RUN), stopped
    names = {c["name"] for c in report["checks"]}
    assert not names & {"allreduce", "params", "ranks-agree"}, stopped
    assert report["ddp"] is None and report["bandwidth"] is None, stopped
    # No DDP phase ran at all: torchrun never started (its configuration, its log, the
    # `torchelastic_*` directory it makes in its TMPDIR are nowhere), not merely unreported.
    work = Path(report["work_dir"])
    assert (work / "inspect.jsonl").exists(), sorted(p.name for p in work.iterdir())
    started = [p.name for p in work.iterdir() if p.name.startswith(("ddp", "torchrun"))]
    assert started == [] and not list(tmp_path.rglob("torchelastic_*")), started

    # The same verify where no GPU is claimed: torch's CPU build is right there, every phase runs.
    full = verify.run(*args, "--json")
    assert full.code == 0 and full.check("ddp")["status"] == "pass", full
    # What the first run said it kept is still there after the next one (whose start sweeps
    # the work directories of runs that have ended): kept is handed over, never swept.
    assert (work / "inspect.jsonl").exists() and not (work / ".torchfit-owner").exists(), full
    assert full.check("bandwidth")["status"] == "pass", full
    # It ended with the inspection: what follows it is nothing like the DDP phase's time.
    after_inspection = report["timings"]["total"] - report["timings"]["inspect"]
    assert after_inspection < full.json["timings"]["ddp"] / 2, (stopped, full)
    assert stopped.seconds < full.seconds, (stopped, full)

    # No CUDA_VISIBLE_DEVICES: torchrun starts before torch has counted the GPUs (the driver
    # lists none here), and that early run is ended when the gpus check fails. The human
    # report and its progress lines say what was not run, and why.
    human = verify.run("--env", str(cpu_torch_env), env=gpu_host)
    assert human.code == 1, human
    out = " ".join(human.out.split())
    assert f"verify: FAIL gpus: {CPU_ON_GPU_HOST}" in out, human
    assert f"- ddp: {NOT_RUN}" in out and "✓ ddp" not in out, human
    assert "not running the DDP smoke test" in human.err, human
    for res in (stopped, full, human):
        assert_no_orphans(res.tag)
