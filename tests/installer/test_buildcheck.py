"""installer/buildcheck.py: the installed build judged against the plan (a CPU torch slipping in, a CUDA
mismatch, the NCCL pin), from the build worker's records."""

from __future__ import annotations

import pytest

from torchfit.compat.plan import Plan
from torchfit.installer.buildcheck import compare_build, parse_probe
from torchfit.installer.nccl import (
    NcclPin,
)


def _plan(**kw: object) -> Plan:
    base: dict[str, object] = {
        "python": "3.11", "python_version": "3.11.7", "python_source": "installed", "python_path": None, "torch": "2.14.1",
        "variant": "cu130", "cuda": "13.0", "rocm": None, "cudnn": "9.24.0.43", "nccl": "2.30.7", "torchvision": "0.29.1",
        "torchaudio": None, "index_url": "", "packages": ("torch",), "reasons": (), "warnings": ()}
    base.update(kw)
    return Plan(**base)  # type: ignore[arg-type]


def _probe(version: str, cuda: str | None, **dists: str) -> dict[str, object]:
    return {"python": "3.11.7", "torch": {"__version__": version, "cuda": cuda, "hip": None},
            "dists": {"torch": version, **dists}}


def test_cpu_build_slipping_in_fails() -> None:
    report = compare_build(_plan(), _probe("2.14.1+cpu", None), NcclPin("wheel", "nvidia-nccl-cu13", "2.30.7"))
    assert any("CPU build" in f and "wrong build" in f for f in report.failures)


def test_matching_cuda_build_passes_and_records_runtime() -> None:
    probe = _probe("2.14.1", "13.0", **{"nvidia-nccl-cu13": "2.30.7", "nvidia_cudnn_cu13": "9.24.0.43"})
    probe["nccl"] = {"library": "/env/nvidia/nccl/lib/libnccl.so.2", "code": 23007, "rc": 0}
    report = compare_build(_plan(), probe, NcclPin("wheel", "nvidia-nccl-cu13", "2.30.7"))
    assert report.failures == () and report.warnings == ()
    assert report.runtime["nccl"] == "2.30.7" and report.runtime["cudnn"] == "9.24.0.43"


@pytest.mark.parametrize("probe,pin,expect", [
    (_probe("2.13.0", "13.0"), NcclPin("none"), "plan is torch 2.14.1"),
    (_probe("2.14.1", "12.8"), NcclPin("none"), "CUDA 12.8"),
    (_probe("2.14.1", "13.0", **{"nvidia-nccl-cu13": "2.30.7"}), NcclPin("wheel-override", "nvidia-nccl-cu13", "2.28.9"),
     "expected 2.28.9"),
])
def test_mismatches_fail(probe: dict[str, object], pin: NcclPin, expect: str) -> None:
    assert any(expect in f for f in compare_build(_plan(), probe, pin).failures)


def test_parse_probe_takes_the_last_build_record() -> None:
    out = (
        'warning: x\n{"python": "noise"}\n'
        'TORCHFIT-RECORD {"t": 1.0, "kind": "stage", "stage": "x"}\n'
        'TORCHFIT-RECORD {"t": 2.0, "kind": "build", "python": "3.11.7"}\n'
    )
    assert parse_probe(out) == {"python": "3.11.7"}
    assert parse_probe("garbage") == {}
    assert parse_probe('{"python": "3.11.7"}') == {}  # not a record

