"""Library shadowing, decided by the real dynamic loader: fake torch envs whose
libtorch_cuda.so carries the pip wheel's DT_NEEDED and DT_RPATH (see conftest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.doctor.conftest import (
    FakeEnv,
    Host,
    fake_lib,
    h200_env,
    system_libs,
)


def test_h200_system_nccl_and_cudnn_beside_the_bundled_ones_are_warnings(h200: Host, tmp_path: Path) -> None:
    """The H200 host: system libnccl 2.28.3 / libcudnn 9.14 on `ldconfig -p`, torch 2.11 loads its own."""
    env = h200_env(tmp_path)
    system_libs(h200)
    r = h200.doctor("--python", env.python)
    assert r.rc == 0, [c for c in r.data["checks"] if c["status"] == "fail"]
    n = r.check("nccl-shadowed")
    assert n["status"] == "warn"
    assert f"{env.site}/nvidia/nccl/lib/libnccl.so.2 (NCCL 2.28.9, ncclGetVersion() = 22809) via the env's package" in n["evidence"]
    assert "libnccl.so.2.28.3 (NCCL 2.28.3, ldconfig -p)" in n["evidence"]
    c = r.check("cudnn-shadowed")
    assert c["status"] == "warn" and "cuDNN 9.14.0" in c["evidence"] and "cuDNN 9.19.0" in c["evidence"]
    assert r.status("cudart-shadowed") == "ok"


def test_clean_loader_path_is_ok(h200: Host, tmp_path: Path) -> None:
    env = h200_env(tmp_path)
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", env.python)
    for cid in ("nccl-shadowed", "cudnn-shadowed", "cudart-shadowed"):
        assert r.status(cid) == "ok", r.check(cid)
    assert "cudaRuntimeGetVersion() = 13000" in r.check("cudart-shadowed")["evidence"]


def test_ld_preload_of_the_system_nccl_replaces_the_bundled_one(h200: Host, tmp_path: Path) -> None:
    """docs/architecture.md, Contracts, measured: LD_PRELOAD of the system 2.28.3 makes NCCL run 2.28.3."""
    env = h200_env(tmp_path)
    libs = system_libs(h200)
    r = h200.doctor("--python", env.python, env={"LD_PRELOAD": str(libs["nccl"])})
    n = r.check("nccl-shadowed")
    assert n["status"] == "warn", n  # same 2.28 minor: runs, but not the env's file
    assert f"{libs['nccl_real']} (NCCL 2.28.3, ncclGetVersion() = 22803) via LD_PRELOAD" in n["evidence"]
    assert "nvidia-nccl-cu13 2.28.9 is not the one that runs" in n["evidence"]
    # torch preloads the env's libnccl by path too: both are mapped, and the evidence says
    # which one libtorch_cuda's symbols resolve to (measured so on the H200 host).
    assert (f"also mapped but not the one torch's symbols resolve to: {env.site}/nvidia/nccl/lib/libnccl.so.2 "
            "(NCCL 2.28.9)") in n["evidence"]
    assert "LD_PRELOAD" in n["fix"]


def test_ld_preload_of_an_older_nccl_minor_fails(h200: Host, tmp_path: Path) -> None:
    env = h200_env(tmp_path)
    old = h200.tmp / "old" / "libnccl.so.2.26.2"
    old.parent.mkdir()
    old.write_bytes(fake_lib("nccl", 22602).read_bytes())
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", env.python, env={"LD_PRELOAD": str(old)})
    n = r.check("nccl-shadowed")
    assert n["status"] == "fail" and "NCCL 2.26.2" in n["evidence"]


def test_ld_library_path_does_not_replace_nccl_of_a_pip_wheel(h200: Host, tmp_path: Path) -> None:
    """docs/architecture.md, Contracts, measured: DT_RPATH wins over LD_LIBRARY_PATH; the bundled 2.28.9 still runs."""
    env = h200_env(tmp_path)
    libs = system_libs(h200)
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", env.python, env={"LD_LIBRARY_PATH": str(libs["dir"])})
    n = r.check("nccl-shadowed")
    assert n["status"] == "warn"
    assert "(NCCL 2.28.9, ncclGetVersion() = 22809) via the env's package" in n["evidence"]
    assert "(NCCL 2.28.3, LD_LIBRARY_PATH)" in n["evidence"]


def test_preloaded_older_cudnn_minor_fails_with_torchs_own_message(h200: Host, tmp_path: Path) -> None:
    env = h200_env(tmp_path)
    old = h200.tmp / "cudnn91" / "libcudnn.so.9.1.0"
    old.parent.mkdir()
    old.write_bytes(fake_lib("cudnn", 90100).read_bytes())
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", env.python, env={"LD_PRELOAD": str(old)})
    c = r.check("cudnn-shadowed")
    assert c["status"] == "fail", c
    assert "cuDNN version incompatibility: PyTorch was compiled  against (9, 19, 0) but found runtime version (9, 1, 0)" in c["evidence"]
    assert "via LD_PRELOAD" in c["evidence"]


def test_preloaded_older_cuda_runtime_minor_fails(h200: Host, fake_env: FakeEnv) -> None:
    """A 13.0 libcudart preloaded into a torch built with 13.2 (nvidia-cuda-runtime 13.2.75)."""
    fake_env.nvidia_cudart(version="13.2.75", code=13020)
    fake_env.nvidia_nccl()
    fake_env.cuda_torch(version="2.15.0+cu132", cuda="13.2")
    old = fake_env.path.parent / "cuda130" / "libcudart.so.13.0.96"
    old.parent.mkdir()
    old.write_bytes(fake_lib("cudart", 13000).read_bytes())
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", fake_env.python, env={"LD_PRELOAD": str(old)})
    c = r.check("cudart-shadowed")
    assert c["status"] == "fail", c
    assert "CUDA runtime 13.0" in c["evidence"] and "nvidia-cuda-runtime 13.2.75" in c["evidence"]


def test_nccl_cu12_and_cu13_both_installed(h200: Host, fake_env: FakeEnv) -> None:
    """pytorch/pytorch#186591: nvidia-nccl-cu12 2.29.3 overwrote -cu13 2.29.7's libnccl.so.2, and
    torch 2.13's libtorch_cuda.so needs ncclCommResume (NCCL >= 2.29.7): the real loader refuses."""
    fake_env.nvidia_nccl("nvidia-nccl-cu13", "2.29.7", 22907, resume=True)
    fake_env.nvidia_nccl("nvidia-nccl-cu12", "2.29.3", 22903)  # installed last: its file wins
    fake_env.cuda_torch(version="2.13.0", cuda="13.0", nccl_compiled=(2, 29, 7), needs_resume=True,
                        requires=("nvidia-nccl-cu13==2.29.7",))
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", fake_env.python)
    assert r.rc == 1
    both = r.check("nccl-cu12-and-cu13")
    assert both["status"] == "fail"
    assert "nvidia-nccl-cu13 2.29.7" in both["evidence"] and "nvidia-nccl-cu12 2.29.3" in both["evidence"]
    assert "NCCL 2.29.3 (ncclGetVersion() = 22903)" in both["evidence"]
    assert "torch requires nvidia-nccl-cu13==2.29.7" in both["evidence"]
    assert "pip uninstall -y nvidia-nccl-cu12" in both["fix"] and "nvidia-nccl-cu13==2.29.7" in both["fix"]
    imp = r.check("torch-import")
    assert imp["status"] == "fail" and "undefined symbol: ncclCommResume" in imp["evidence"]
    assert "2.29.7" in imp["fix"]


def test_one_nccl_package_is_ok(h200: Host, tmp_path: Path) -> None:
    env = h200_env(tmp_path)
    r = h200.doctor("--python", env.python)
    assert r.status("nccl-cu12-and-cu13") == "ok"
    assert "nvidia-nccl-cu13 2.28.9" in r.check("nccl-cu12-and-cu13")["evidence"]


def _conda_meta(env: FakeEnv, name: str, payload: dict[str, str]) -> None:
    meta = env.path / "conda-meta"
    meta.mkdir(exist_ok=True)
    (meta / name).write_text(json.dumps(payload))


def test_conda_pytorch_and_pip_torch_in_one_prefix(h200: Host, fake_env: FakeEnv) -> None:
    # conda's package file name for pytorch 2.1.0 from the pytorch channel.
    _conda_meta(fake_env, "pytorch-2.1.0-py3.11_cuda12.1_cudnn8.9.2_0.json", {"name": "pytorch", "version": "2.1.0"})
    fake_env.dist("torch", "2.1.0", installer="conda")
    fake_env.dist("torch", "2.5.1", installer="pip", wheel_tag="cp311-cp311-manylinux1_x86_64")
    r = h200.doctor("--python", fake_env.python)
    c = r.check("conda-and-pip-torch")
    assert c["status"] == "fail", c
    assert "pytorch 2.1.0" in c["evidence"] and "pip-installed torch 2.5.1" in c["evidence"]
    assert "pip uninstall torch" in c["fix"]


def test_conda_pytorch_alone_is_ok(h200: Host, fake_env: FakeEnv) -> None:
    _conda_meta(fake_env, "pytorch-2.1.0-py3.11_cuda12.1_cudnn8.9.2_0.json", {"name": "pytorch", "version": "2.1.0"})
    fake_env.dist("torch", "2.1.0", installer="conda")
    r = h200.doctor("--python", fake_env.python)
    c = r.check("conda-and-pip-torch")
    assert c["status"] == "ok" and "conda only" in c["evidence"]


def test_conda_lib_dir_nccl_is_found(h200: Host, tmp_path: Path) -> None:
    """A conda env's lib/ holding another libnccl (the conda `nccl` package) is on the list."""
    env = h200_env(tmp_path)
    (env.path / "conda-meta").mkdir()
    lib = env.path / "lib" / "libnccl.so.2.27.3"
    lib.parent.mkdir(exist_ok=True)
    lib.write_bytes(fake_lib("nccl", 22703).read_bytes())
    (env.path / "lib" / "libnccl.so.2").symlink_to("libnccl.so.2.27.3")
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", env.python)
    n = r.check("nccl-shadowed")
    assert n["status"] == "warn" and "the conda env's lib/" in n["evidence"] and "NCCL 2.27.3" in n["evidence"]


def test_nccl_older_than_torch_was_built_against_without_a_package(h200: Host, fake_env: FakeEnv) -> None:
    """torch 2.2.0 (built with NCCL 2.19.3) running a 2.18.1 libnccl that no package owns: the
    pytorch/pytorch#119072 situation, here without the undefined symbol to announce it."""
    fake_env.put_lib("nvidia/nccl/lib/libnccl.so.2", fake_lib("nccl", 21801))
    fake_env.cuda_torch(version="2.2.0+cu121", cuda="12.1", nccl_compiled=(2, 19, 3),
                        requires=("nvidia-nccl-cu12==2.19.3",))
    h200.tool("ldconfig", "")
    r = h200.doctor("--python", fake_env.python)
    n = r.check("nccl-shadowed")
    assert n["status"] == "fail", n
    assert "NCCL 2.18.1" in n["evidence"] and "built against NCCL 2.19.3" in n["evidence"]
    assert "nvidia-nccl-cu12==2.19.3" in n["fix"]


# --- one NCCL verdict with verify ----------------------------------------------------------


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

