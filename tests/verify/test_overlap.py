"""verify starts the inspection and torchrun together, on a plan taken without torch, and
keeps that run only where the inspection agrees; one rank sweeps nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.verify.conftest import Verify, assert_no_orphans
from torchfit.verify.ddp import early_plan, plan_ddp, visible_gpus_guess
from torchfit.verify.model import Options


@pytest.mark.parametrize(
    "cvd, host, want",
    [
        (None, 2, 2),
        (None, 0, 0),
        ("", 2, 0),
        ("1", 2, 1),
        ("0,1", 2, 2),
        ("0,7", 2, 1),  # CUDA stops at the first index past the last GPU (seen on the H200)
        ("7,0", 2, 0),
        ("0,0", 2, 1),  # a repeat ends the list too
        ("-1", 2, 0),
        ("0, 1", 2, 2),
        ("GPU-8d7e0c3a-0000", 2, None),  # UUIDs need the driver: no guess
        ("0,MIG-1234", 2, None),
    ],
)
def test_visible_gpus_guess(cvd: str | None, host: int, want: int | None) -> None:
    assert visible_gpus_guess(cvd, host) == want


@pytest.mark.parametrize(
    "opts, gpus",
    [
        (Options(python="p"), 2),
        (Options(python="p"), 1),
        (Options(python="p"), 0),
        (Options(python="p", nproc=1), 2),
        (Options(python="p", nproc=3), 2),
        (Options(python="p", backend="nccl"), 0),
        (Options(python="p", backend="gloo", nproc=4), 2),
    ],
)
def test_early_plan_is_the_plan_the_inspection_would_make(opts: Options, gpus: int) -> None:
    early = early_plan(opts, gpus)
    backend, nproc, why = plan_ddp(opts, {"torch": {"version": "2.13.0"}, "devices": {"count": gpus}})
    assert early == (None if why else (backend, nproc))


def test_no_early_plan_without_a_count_or_across_nodes() -> None:
    assert early_plan(Options(python="p"), None) is None
    assert early_plan(Options(python="p", nnodes=2, rdzv_endpoint="h:1"), 2) is None


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_torchrun_starts_before_the_inspection_knows_the_gpus_and_one_rank_sweeps_nothing(
    verify: Verify, cpu_torch_env: Path
) -> None:
    res = verify.run(
        "--env", str(cpu_torch_env), "--nproc", "1", "--bandwidth", "--sizes", "1M", "--keep", "--json"
    )
    assert res.code == 0, res
    report = res.json
    assert report["verdict"] == "PASS"
    work = Path(report["work_dir"])
    inspection = _records(work / "inspect.jsonl")
    devices_at = next(r["t"] for r in inspection if r.get("key") == "devices")
    # torchrun's configuration is written the moment it is launched, never again:
    # it was launched before torch, in the inspection, had counted the GPUs.
    launched_at = (work / "ddp" / "config.json").stat().st_mtime
    assert launched_at < devices_at, (launched_at, devices_at)
    assert not (work / "ddp-discarded").exists()
    bw = res.check("bandwidth")
    assert bw["status"] == "skip" and "one rank" in bw["summary"] and "skipped" in bw["summary"]
    assert report["bandwidth"] is None
    human = verify.run("--env", str(cpu_torch_env), "--nproc", "1", "--bandwidth", "--sizes", "1M")
    assert human.code == 0, human
    assert "all-reduce bus bandwidth" not in human.out and "0.0 GB/s" not in human.out
    assert "sweep skipped" in " ".join(human.out.split())
    assert_no_orphans(res.tag)
    assert_no_orphans(human.tag)
