"""The torch build against the host: real CPU torch 2.13.0, and fake CUDA torch packages
whose libtorch_cuda.so is a real shared object (see conftest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doctor.conftest import (
    SRC,
    FakeEnv,
    Host,
    fake_lib,
    fixture,
    h200_env,
    raising_torch_env,
)
from tests.support.cli import run_cli
from tests.support.wheels import record_digest

# What the Fooocus#1313 user saw: driver 470.86 (CUDA 11.4) under a cu121 torch.
TOO_OLD = ("The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by "
           "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
           "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
           "version of the CUDA driver.")


@pytest.mark.slow
def test_real_cpu_torch_on_a_gpu_host_is_a_cpu_build_failure(h200: Host, cpu_torch_env: Path) -> None:
    r = h200.doctor("--python", str(cpu_torch_env / "bin" / "python"))
    assert r.rc == 1
    imp = r.check("torch-import")
    assert imp["status"] == "ok" and "2.13.0+cpu" in imp["evidence"] and "CPU-only build" in imp["evidence"]
    cpu = r.check("torch-cpu-build")
    assert cpu["status"] == "fail"
    assert "Torch not compiled with CUDA enabled" in cpu["evidence"] and "2\u00d7 NVIDIA H200" in cpu["evidence"]
    assert "torchfit resolve" in cpu["fix"]
    # The real wheel's WHEEL file says manylinux_2_28; the H200's ldd says 2.39.
    g = r.check("glibc-too-old")
    assert g["status"] == "ok" and "manylinux_2_28_x86_64" in g["evidence"] and "2.39" in g["evidence"]
    for cid in ("driver-too-old", "arch-not-covered", "nccl-shadowed", "cudnn-shadowed"):
        assert r.status(cid) == "ok" and "not a CUDA build" in r.check(cid)["evidence"], r.check(cid)


@pytest.mark.slow
def test_real_cpu_torch_on_a_cpu_host_is_fine_and_glibc_too_old_fails(host: Host, cpu_torch_env: Path) -> None:
    host.tool("lspci", "")
    # CentOS 6's ldd (pytorch/pytorch#14274 quotes `ldd (GNU libc) 2.12`).
    host.tool("ldd", "ldd (GNU libc) 2.12\nCopyright (C) 2010 Free Software Foundation, Inc.\n")
    r = host.doctor("--python", str(cpu_torch_env / "bin" / "python"))
    assert r.status("torch-cpu-build") == "ok"
    assert "no NVIDIA GPU" in r.check("torch-cpu-build")["evidence"]
    g = r.check("glibc-too-old")
    assert g["status"] == "fail"
    assert "glibc 2.12 < 2.28" in g["evidence"] and "GLIBC_2.28' not found" in g["evidence"]


def test_torch_not_installed(h200: Host) -> None:
    r = h200.doctor("--python", sys.executable)
    imp = r.check("torch-import")
    assert imp["status"] == "fail" and "not installed" in imp["evidence"]
    assert r.status("torch-cpu-build") == "unknown"
    assert "see torch-import" in r.check("driver-too-old")["evidence"]
    assert r.status("glibc-too-old") == "unknown"


def test_no_python_to_inspect(h200: Host) -> None:
    r = h200.doctor()  # PATH holds only fake tools: no python3, no venv
    imp = r.check("torch-import")
    assert imp["status"] == "unknown" and "--python" in imp["fix"]


def test_h200_env_build_checks_ok(h200: Host, tmp_path: Path) -> None:
    env = h200_env(tmp_path)
    r = h200.doctor("--python", env.python)
    for cid in ("torch-import", "torch-cpu-build", "driver-too-old", "arch-not-covered", "glibc-too-old"):
        assert r.status(cid) == "ok", r.check(cid)
    assert "CUDA Version: 13.0" in r.check("driver-too-old")["evidence"]
    assert "sm_90 via 9.0" in r.check("arch-not-covered")["evidence"]


def test_cuda_build_newer_than_the_driver(host: Host, fake_env: FakeEnv) -> None:
    """Driver 470.86 (CUDA 11.4, Fooocus#1313's banner) under torch 2.5.1+cu121."""
    host.h200()
    host.nvidia_smi(banner=fixture("nvidia-smi-470-banner.txt"))
    host.file("/proc/driver/nvidia/version",
              "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.86  Tue Oct 26 21:55:45 UTC 2021\n")
    fake_env.nvidia_nccl("nvidia-nccl-cu12", "2.21.5", 22105)
    fake_env.cuda_torch(version="2.5.1+cu121", cuda="12.1", init_error=TOO_OLD, nccl_compiled=(2, 21, 5),
                        requires=("nvidia-nccl-cu12==2.21.5",))
    r = host.doctor("--python", fake_env.python)
    d = r.check("driver-too-old")
    assert d["status"] == "fail", d
    assert "CUDA 12.1" in d["evidence"] and "11.4" in d["evidence"] and "found version 11040" in d["evidence"]
    assert "1000*major + 10*minor" in d["evidence"]
    assert "525.60.13" in d["fix"]  # the CUDA 12.x minor-version-compatibility floor, from the matrix
    assert r.status("torch-cpu-build") == "ok"


def test_driver_ceiling_read_from_libcuda_itself(h200: Host, fake_env: FakeEnv) -> None:
    """cuDriverGetVersion() of the libcuda.so.1 the process loads is the first source."""
    libdir = h200.tmp / "driverlib"
    libdir.mkdir()
    (libdir / "libcuda.so.1").write_bytes(fake_lib("cuda", 11040).read_bytes())
    fake_env.nvidia_nccl()
    fake_env.cuda_torch()
    r = h200.doctor("--python", fake_env.python, env={"LD_LIBRARY_PATH": str(libdir)})
    d = r.check("driver-too-old")
    assert d["status"] == "fail"
    assert "cuDriverGetVersion() = 11040" in d["evidence"] and "CUDA 13.0" in d["evidence"]


def test_minor_version_compatibility_is_a_warning(h200: Host, fake_env: FakeEnv) -> None:
    """torch cu128 on a driver whose ceiling is CUDA 12.4 (>= 525.60.13): runs, without PTX JIT."""
    h200.nvidia_smi(banner="| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |\n")
    h200.file("/proc/driver/nvidia/version",
              "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n")
    fake_env.nvidia_nccl("nvidia-nccl-cu12", "2.27.3", 22703)
    fake_env.cuda_torch(version="2.8.0+cu128", cuda="12.8", nccl_compiled=(2, 27, 3), requires=("nvidia-nccl-cu12==2.27.3",))
    r = h200.doctor("--python", fake_env.python)
    d = r.check("driver-too-old")
    assert d["status"] == "warn", d
    assert "minor-version compatibility" in d["evidence"]


def test_arch_list_without_the_gpu(h200: Host, fake_env: FakeEnv) -> None:
    """torch 2.0.1+cu117's arch list (compat-facts §4, BLD 2.0) has nothing for an H200 (sm_90)."""
    fake_env.nvidia_nccl("nvidia-nccl-cu11", "2.14.3", 21403)
    fake_env.cuda_torch(version="2.0.1+cu117", cuda="11.7", arch="sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86",
                        nccl_compiled=(2, 14, 3), requires=("nvidia-nccl-cu11==2.14.3",))
    r = h200.doctor("--python", fake_env.python)
    a = r.check("arch-not-covered")
    assert a["status"] == "fail"
    assert "NVIDIA H200 (sm_90)" in a["evidence"] and "is not compatible with the current PyTorch" in a["evidence"]
    assert "torchfit resolve" in a["fix"]


RTX5090_QUERY = (
    "index, name, uuid, pci.bus_id, driver_version, compute_cap, memory.total [MiB], memory.used [MiB], "
    "vbios_version, persistence_mode\n"
    # An RTX 5090 (sm_120, Hellod035/LeggedLab#26); the other fields are placeholders in the H200 row's format.
    "0, NVIDIA GeForce RTX 5090, GPU-00000000-0000-0000-0000-000000005090, 00000000:01:00.0, 580.159.04, 12.0, "
    "32607 MiB, 0 MiB, 98.02.2E.00.01, Disabled\n"
)


def test_gpu_covered_only_through_ptx_is_a_warning(h200: Host, fake_env: FakeEnv) -> None:
    """The arch list coendevente/SlicerNNInteractive#58 printed (compute_37 = PTX) on an RTX 5090."""
    h200.nvidia_smi(query=RTX5090_QUERY)
    fake_env.nvidia_nccl()
    fake_env.cuda_torch(arch="sm_37 sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90 compute_37")
    r = h200.doctor("--python", fake_env.python)
    a = r.check("arch-not-covered")
    assert a["status"] == "warn", a
    assert "sm_120" in a["evidence"] and "PTX" in a["evidence"]


def test_import_crash_is_reported_with_the_stage(h200: Host, fake_env: FakeEnv) -> None:
    fake_env.nvidia_nccl()
    fake_env.cuda_torch()
    init = fake_env.site / "torch" / "__init__.py"
    init.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    r = h200.doctor("--python", fake_env.python)
    imp = r.check("torch-import")
    assert imp["status"] == "fail"
    assert "died while importing torch" in imp["evidence"] and "signal 11" in imp["evidence"]
    assert r.status("nccl-cu12-and-cu13") == "ok"  # the metadata was reported before the crash


def test_wheel_without_manylinux_tag_and_unknown_dist(h200: Host, fake_env: FakeEnv) -> None:
    fake_env.nvidia_nccl()
    fake_env.cuda_torch(wheel_tag="cp311-cp311-linux_x86_64")
    r = h200.doctor("--python", fake_env.python)
    g = r.check("glibc-too-old")
    assert g["status"] == "ok" and "no manylinux tag" in g["evidence"]


def test_manylinux1_wheel_uses_the_real_floor_from_the_matrix(host: Host, fake_env: FakeEnv) -> None:
    """torch 2.4.1 wheels are tagged manylinux1 (glibc 2.5) but were built on CentOS 7: 2.17."""
    host.tool("lspci", "")
    host.tool("ldd", "ldd (GNU libc) 2.12\nCopyright (C) 2010 Free Software Foundation, Inc.\n")
    fake_env.dist("torch", "2.4.1", wheel_tag="cp311-cp311-manylinux1_x86_64")
    r = host.doctor("--python", fake_env.python)
    g = r.check("glibc-too-old")
    assert g["status"] == "fail", g
    assert "real floor of torch 2.4.1 is 2.17" in g["evidence"] and "glibc 2.12 < 2.17" in g["evidence"]


@pytest.mark.parametrize("version", ["3.6", "3.9"])
def test_worker_runs_on_old_pythons(tmp_path: Path, version: str) -> None:
    """The worker and torchfit_runtime are plain Python: they must run in a 3.6 or 3.9
    env (any env a torch can live in), and say so in the workers' record protocol."""
    import glob
    import shutil

    from torchfit.workers import read_records, script

    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")))
    py = found[0] if found else shutil.which(f"python{version}")
    if py is None or subprocess.run([py, "-c", "pass"], capture_output=True).returncode != 0:
        pytest.skip(f"no working python{version} here")
    proc = subprocess.run([py, script("doctor"), "report"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    kinds = [r["kind"] for r in read_records(proc.stdout)]
    assert proc.returncode == 0 and kinds == ["metadata", "stage", "torch", "libraries", "done"], proc.stderr


# --- torch that does not import, CPU torch on a GPU host (#9, #8 of issue 13) --------------


@pytest.mark.parametrize("python", ["/bin/false", "/bin/sleep", "script", "exit0"])
def test_uninspectable_python_is_not_a_clean_bill(host: Host, tmp_path: Path, python: str) -> None:
    """Defect #9 of the 2026-11 attack (issue 13)."""
    if python == "script":
        p = tmp_path / "notpython.sh"
        p.write_text("#!/bin/sh\necho hello\n")
        p.chmod(0o755)
        python = str(p)
    elif python == "exit0":
        env = raising_torch_env(tmp_path)
        init = next((env / "lib").glob("python3.*")) / "site-packages" / "torch" / "__init__.py"
        init.write_text("import sys; sys.exit(0)\n")
        python = str(env / "bin" / "python")
    r = host.doctor("--python", python)
    assert r.rc == 1, r
    assert r.status("torch-import") == "fail"
    text = run_cli("doctor", "--root", str(host.root), "--python", python, base_env=host.env, timeout=300).stdout
    assert "Nothing failed" not in text


@pytest.mark.slow
def test_cpu_torch_on_a_gpu_host_same_verdict_in_verify_and_doctor(h200: Host, cpu_torch_env: Path) -> None:
    """The one judgement (compat.judgements.judge_torch_build), from both commands.
    Defect #8 of the 2026-11 attack (issue 13)."""
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


# --- attack round 3 (issue 21, class 2): a damaged torch is a failure, with its cause -------


def _torch_env(tmp_path: Path, init: str, recorded: str) -> Path:
    """A real venv whose torch/__init__.py holds `init` while its RECORD holds the hash of `recorded`."""
    import subprocess

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = next((env / "lib").glob("python*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(init)
    (site / "torch" / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\nhip = None\n")
    info = site / "torch-2.13.0+cpu.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cpu\n")

    (info / "RECORD").write_text(
        f"torch/__init__.py,{record_digest(recorded.encode())},{len(recorded)}\n"
        f"torch/version.py,{record_digest((site / 'torch' / 'version.py').read_bytes())},60\n"
        "../../../bin/torchrun,sha256=rewritten-by-the-installer,1\n"
        "torch-2.13.0+cpu.dist-info/RECORD,,\n")
    return env


GOOD_INIT = "from torch.version import __version__\ncuda = None\n"


def test_attack3_an_empty_torch_init_fails_and_names_the_file_that_differs(host: Host, tmp_path: Path) -> None:
    """What a damaged file in uv's cache gives every env linked from it: torch imports
    (an empty __init__.py) and knows nothing. doctor said "Nothing failed", exit 0."""
    host.tool("lspci", "")
    env = _torch_env(tmp_path, "", GOOD_INIT)
    r = host.doctor("--env", str(env))
    assert r.rc == 1
    imp = r.check("torch-import")
    assert imp["status"] == "fail" and "no torch.__version__" in imp["evidence"], imp
    files = r.check("torch-files")
    assert files["status"] == "fail", files
    assert "1 of torch's 2 files differs" in files["evidence"] and "torch/__init__.py" in files["evidence"]
    assert "bin/torchrun" not in files["evidence"]  # scripts are rewritten on install: not judged
    assert "uv cache clean torch" in files["fix"]


def test_attack3_a_healthy_torch_is_not_hashed(host: Host, tmp_path: Path) -> None:
    host.tool("lspci", "")
    env = _torch_env(tmp_path, GOOD_INIT, GOOD_INIT)
    r = host.doctor("--env", str(env))
    assert r.status("torch-import") == "ok", r.check("torch-import")
    assert r.status("torch-files") == "ok" and "only when" in r.check("torch-files")["evidence"]


def test_attack3_a_torch_that_does_not_import_is_hashed(host: Host, tmp_path: Path) -> None:
    host.tool("lspci", "")
    env = _torch_env(tmp_path, "raise ImportError('libtorch_cpu.so: file too short')\n", GOOD_INIT)
    r = host.doctor("--env", str(env))
    assert r.status("torch-import") == "fail"
    assert r.status("torch-files") == "fail" and "torch/__init__.py" in r.check("torch-files")["evidence"]
    # issue 28, item 1: the failed import points at the files that differ, not at the loader's search path
    fix = r.check("torch-import")["fix"] or ""
    assert "torch-files below" in fix and "shadowing" not in fix, fix
