"""verify/inspection.py: the inspection worker's facts judged (versions, arch coverage, NCCL,
CUDA_VISIBLE_DEVICES, the lock's expected versions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import torchfit.lock.pylock as pylock
import torchfit.verify.inspection as vinsp
from tests.verify.conftest import H200_ARCHS, by_name
from torchfit.compat.judgements import GpuHost
from torchfit.compat.tags import parse_arch_list
from torchfit.compat.versions import Arch


@pytest.mark.parametrize(
    "code, want",
    [
        (22809, "2.28.9"),
        (22803, "2.28.3"),
        (23007, "2.30.7"),
        (2708, "2.7.8"),
        (8902, "8.9.2"),
        (91002, "9.10.2"),
    ],
)
def test_decode_version_code(code: int, want: str) -> None:
    assert vinsp.code_text(code) == want


def test_decode_cuda_code_and_compiled() -> None:
    assert vinsp.cuda_code_text(13000) == "13.0" and vinsp.cuda_code_text(12080) == "12.8"
    assert vinsp.format_compiled([2, 28, 9]) == "2.28.9" and vinsp.format_compiled(2708) == "2.7.8"
    assert vinsp.format_compiled(None) is None


def test_same_release_is_what_verify_compares() -> None:
    from torchfit.compat.versions import same_release

    assert same_release("9.10.2.21", "9.10.2", 3)  # a lock's cuDNN wheel against the runtime's
    assert same_release("12.8", "12.8", 3)
    assert not same_release("2.28.9", "2.28.3", 3)
    assert not same_release("2.28.9", None, 3)


@pytest.mark.parametrize(
    "cc, archs, kind",
    [
        ("9.0", H200_ARCHS, "native"),  # the H200 and its torch 2.11.0+cu130
        ("8.9", H200_ARCHS, "native"),  # sm_86 SASS runs on 8.9 (same major)
        ("12.1", H200_ARCHS, "native"),
        ("10.3", ["sm_80", "sm_90", "compute_90"], "ptx"),  # 9.0 PTX JIT-compiles forward to 10.3
        ("7.0", H200_ARCHS, "none"),  # V100 is gone from this build
        ("9.0", ["sm_90a"], "native"),
        ("9.1", ["sm_90a"], "none"),
    ],
)
def test_arch_coverage(cc: str, archs: list[str], kind: str) -> None:
    assert vinsp.arch_coverage(cc, archs)[0] == kind


def test_ptx_only_entry_is_not_native() -> None:
    assert parse_arch_list(["compute_90"]) == ((), (Arch(9, 0, ""),))
    assert vinsp.arch_coverage("9.0", ["compute_90"]) == ("ptx", "compute_90")
    assert vinsp.arch_coverage("9.0", ["sm_90", "compute_90"])[0] == "native"


def cuda_facts(**over: Any) -> dict[str, Any]:
    """Inspection facts shaped like the 2x H200 (torch 2.11.0+cu130, fixtures/h200-x2)."""
    facts: dict[str, Any] = {
        "python": {
            "version": "3.12.3",
            "executable": "/usr/bin/python3",
            "prefix": "/opt/torch/.venv",
        },
        "env": {},
        "torch": {
            "version": "2.11.0+cu130",
            "file": "/opt/torch/.venv/lib/python3.12/site-packages/torch/__init__.py",
            "cuda": "13.0",
            "hip": None,
            "nccl_compiled": [2, 28, 9],
            "cudnn_compiled": [9, 19, 0],
        },
        "arch_list": H200_ARCHS,
        "devices": {
            "count": 2,
            "gpus": [
                {"index": 0, "name": "NVIDIA H200", "capability": "9.0", "memory_mib": 143771},
                {"index": 1, "name": "NVIDIA H200", "capability": "9.0", "memory_mib": 143771},
            ],
        },
        "libs": {
            "nccl": {
                "code": 22809,
                "path": "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
                "paths": [],
            },
            "cudnn": 91900,
            "cudnn_lib": {
                "path": "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9"
            },
            "cudart": {
                "code": 13000,
                "path": "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13",
            },
        },
        "kernels": [{"index": 0, "ok": True, "ms": 80.0}, {"index": 1, "ok": True, "ms": 12.0}],
        "conv": {"ok": True},
    }
    facts.update(over)
    return facts


def test_healthy_h200_passes_every_inspection_check() -> None:
    checks = by_name(vinsp.judge_inspection(cuda_facts(), None, None, None))
    assert {n: c.status for n, c in checks.items()} == {
        "python": "pass",
        "torch": "pass",
        "gpus": "pass",
        "arch-coverage": "pass",
        "kernels": "pass",
        "nccl": "pass",
        "cudnn": "pass",
    }


def test_ld_preload_of_the_system_nccl_warns_and_names_the_file() -> None:
    # The H200 measurement: LD_PRELOAD of /lib/x86_64-linux-gnu/libnccl.so.2 (2.28.3).
    # Another patch release of the NCCL line torch was built with: a warning, the verdict
    # doctor's nccl-shadowed gives the same file (compat.judgements.judge_runtime_library).
    libs = dict(cuda_facts()["libs"])
    libs["nccl"] = {
        "code": 22803,
        "path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3",
        "paths": [],
    }
    facts = cuda_facts(libs=libs, env={"LD_PRELOAD": "/lib/x86_64-linux-gnu/libnccl.so.2"})
    nccl = by_name(vinsp.judge_inspection(facts, None, None, None))["nccl"]
    assert nccl.status == "warn"
    assert (
        nccl.summary
        == "runtime NCCL 2.28.3 from /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3, torch compiled against 2.28.9"
    )
    assert nccl.hint and "LD_PRELOAD" in nccl.hint
    older = dict(libs, nccl={"code": 22703, "path": "/usr/lib/libnccl.so.2.27.3", "paths": []})
    assert by_name(vinsp.judge_inspection(cuda_facts(libs=older), None, None, None))["nccl"].status == "fail"


def test_cpu_torch_has_no_nccl_but_a_preloaded_one_is_mentioned() -> None:
    torch = {"version": "2.13.0+cpu", "cuda": None, "hip": None}
    check = vinsp.judge_nccl(torch, {"nccl": {"code": 23007, "path": "/x/libnccl.so.2"}}, {})
    assert (
        check.status == "skip" and "2.30.7" in check.summary and "/x/libnccl.so.2" in check.summary
    )
    assert vinsp.judge_nccl(torch, {"nccl": {}}, {}).summary == "CPU build of torch: no NCCL"


def test_cuda_visible_devices_with_an_invalid_entry_fails() -> None:
    facts = cuda_facts(env={"CUDA_VISIBLE_DEVICES": "0,7"})
    facts["devices"] = {"count": 1, "gpus": facts["devices"]["gpus"][:1]}
    gpus = by_name(vinsp.judge_inspection(facts, None, None, None))["gpus"]
    assert gpus.status == "fail" and "lists 2 devices but torch sees 1" in gpus.summary


def test_cuda_visible_devices_hiding_every_gpu_fails() -> None:
    facts = cuda_facts(env={"CUDA_VISIBLE_DEVICES": ""}, devices={"count": 0, "gpus": []})
    gpus = by_name(vinsp.judge_inspection(facts, None, None, None))["gpus"]
    assert gpus.status == "fail" and "hides every GPU" in gpus.summary


def test_uncovered_gpu_fails_arch_coverage() -> None:
    facts = cuda_facts(arch_list=["sm_80", "sm_86"])
    cov = by_name(vinsp.judge_inspection(facts, None, None, None))["arch-coverage"]
    assert cov.status == "fail" and "NOT covered" in cov.detail[0]


def test_missing_torch_is_one_clear_failure() -> None:
    facts = {
        "python": {"version": "3.11.7", "prefix": "/e"},
        "torch_error": "ModuleNotFoundError: No module named 'torch'",
    }
    checks = by_name(vinsp.judge_inspection(facts, None, None, None))
    assert (
        checks["torch"].status == "fail"
        and checks["torch"].summary == "torch is not installed in /e"
    )


def test_lock_mismatch_names_the_file_that_runs(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\n[tool.torchfit]\nexpected = {torch = "2.11.0", cuda = "13.0", '
        'cudnn = "9.19.0.56", nccl = "2.28.9", other = "x"}\n'
    )
    expected, err = pylock.load_expected(str(lock))
    assert err is None and expected == {
        "torch": "2.11.0",
        "cuda": "13.0",
        "cudnn": "9.19.0.56",
        "nccl": "2.28.9",
    }
    assert (
        vinsp.judge_lock(expected, vinsp.runtime_versions(cuda_facts()), str(lock)).status == "pass"
    )
    libs = dict(cuda_facts()["libs"])
    libs["nccl"] = {"code": 22803, "path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3"}
    check = vinsp.judge_lock(expected, vinsp.runtime_versions(cuda_facts(libs=libs)), str(lock))
    assert check.status == "fail"
    assert (
        check.summary
        == "nccl: lock expects 2.28.9, runs 2.28.3 (runs: /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3)"
    )



_BOGUS = {"CUDA_VISIBLE_DEVICES": "GPU-00000000-bogus"}
_NO_GPU = {"count": 0, "gpus": [], "error": "CUDA error: no CUDA-capable device is detected"}
_CPU_TORCH = {"version": "2.13.0+cpu", "file": "/e/torch/__init__.py", "cuda": None, "hip": None}
_GPU_HOST = GpuHost("gpu", "8x NVIDIA H100 (sm_90)")


@pytest.mark.parametrize(
    "over, backend, gpu_host, stops, why",
    [
        ({}, None, None, None, "two GPUs seen: every phase runs"),
        ({"env": _BOGUS, "devices": _NO_GPU}, None, None, "torch sees no GPU: CUDA_VISIBLE_DEVICES=",
         "issue 37 on the H200: a UUID no driver knows, the CUDA build sees nothing"),
        ({"env": _BOGUS, "devices": _NO_GPU}, "gloo", None, None,
         "--backend gloo asked for the CPU: the gpus check only warns"),
        ({"env": {"CUDA_VISIBLE_DEVICES": "0,7"}, "devices": {"count": 1, "gpus": []}}, None, None,
         "lists 2 devices but torch sees 1", "fewer GPUs than CUDA_VISIBLE_DEVICES asks for"),
        ({"torch": _CPU_TORCH, "devices": _NO_GPU}, None, _GPU_HOST, "CPU-only build on a host with GPUs",
         "a CPU build on a GPU host"),
        ({"torch": _CPU_TORCH, "devices": _NO_GPU}, None, GpuHost("none", "no GPU"), None,
         "a CPU build where there is no GPU is right: the gloo smoke test is the proof"),
        ({"torch": _CPU_TORCH, "devices": _NO_GPU}, None, GpuHost("unknown", "GPUs unknown", "NVML mismatch"),
         "CPU-only build; GPUs unknown", "nvidia-smi fails: the build cannot be called right, FAIL as before"),
        ({"devices": None}, None, None, None, "the GPUs are not counted yet"),
        ({"torch": None, "torch_error": "ImportError: x"}, None, None, None, "no torch: plan_ddp's skip"),
    ],
)
def test_deciding_failure_is_a_failed_gpus_check(
    over: dict[str, Any], backend: str | None, gpu_host: GpuHost | None, stops: str | None, why: str
) -> None:
    facts = {k: v for k, v in {**cuda_facts(), **over}.items() if v is not None}
    failed = vinsp.deciding_failure(facts, backend, gpu_host)
    if stops is None:
        assert failed is None, why
    else:
        assert failed is not None and failed.name == "gpus" and failed.status == "fail", why
        assert stops in failed.summary, (why, failed.summary)
