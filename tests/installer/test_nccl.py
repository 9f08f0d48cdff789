"""NCCL pinning: bin/torchfit-env, the activate hook, `torchfit run`, proven by
ncclGetVersion() of the libnccl mapped into the process (no GPU needed).

The default run uses the real libnccl.so.2 of the local nvidia-nccl-cu13 2.30.7 wheel.
`test_cuda_build_and_nccl_pins` (marked cuda_wheels, ~5.5 GB) installs PyPI's torch
2.14.1 (CUDA 13.0) and pins another NCCL with --nccl-lib; run it with
`pytest -m cuda_wheels tests/install`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import leftovers, run_tf
from tests.support.envs import CACHE
from torchfit.compat.versions import decode_nccl_code, version_text
from torchfit.errors import BadInput
from torchfit.installer.nccl import (
    NcclPin,
    check_nccl_lib,
    hook_activate,
    render_env_script,
    write_env_script,
)

pytestmark = pytest.mark.filterwarnings("ignore")

NCCL_WHEEL = Path("/opt/pypi-more/files/nvidia_nccl_cu13-2.30.7-py3-none-manylinux_2_18_x86_64.whl")

# Run inside the env: which libnccl files are mapped (/proc/self/maps), which one torch
# calls (its ncclGetVersion, found as libtorch_cuda.so's dynamic linking finds it, named by
# dladdr) and what that ncclGetVersion() says. Without torch: the first mapped file.
MAPPED_NCCL = r"""
import ctypes, json, os, sys
if len(sys.argv) > 1 and sys.argv[1] == "torch":
    import torch  # loads libtorch_cuda.so and, through its DT_RPATH or a preload, libnccl.so.2
maps = open("/proc/self/maps").read().splitlines()
out = {"mapped": sorted({ln.split()[-1] for ln in maps if "libnccl.so" in ln})}
cuda = sorted({ln.split()[-1] for ln in maps if "libtorch_cuda.so" in ln})
try:
    fn = ctypes.CDLL(None).ncclGetVersion          # the global scope: where an LD_PRELOAD sits
except AttributeError:
    fn = ctypes.CDLL(cuda[0] if cuda else out["mapped"][0], mode=os.RTLD_NOLOAD | os.RTLD_LAZY).ncclGetVersion

class Info(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]

info = Info()
ctypes.CDLL(None).dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info))
code = ctypes.c_int(0)
fn(ctypes.byref(code))
out.update(bound=info.fname.decode(), code=code.value)
print(json.dumps(out))
"""


def extract_libnccl(wheel: Path, dest: Path) -> Path:
    lib = dest / "libnccl.so.2"
    if not lib.exists():
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as zf, zf.open("nvidia/nccl/lib/libnccl.so.2") as src, open(lib, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    return lib


@pytest.fixture(scope="session")
def libnccl_2_30_7(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not NCCL_WHEEL.is_file():
        pytest.skip(f"{NCCL_WHEEL} is not on this machine")
    return extract_libnccl(NCCL_WHEEL, tmp_path_factory.mktemp("nccl"))


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    return path


def _mapped(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_torchfit_run_preloads_the_pinned_libnccl(tmp_path: Path, libnccl_2_30_7: Path) -> None:
    env = _venv(tmp_path / "env")
    pin = NcclPin("ld-preload", None, "2.30.7", str(libnccl_2_30_7))
    write_env_script(str(env), str(env), pin)
    hook_activate(str(env), str(env), pin)
    out = _mapped(run_tf("run", "--env", str(env), "--", "python", "-c", MAPPED_NCCL, state=tmp_path))
    assert out["mapped"] == [str(libnccl_2_30_7)] and out["bound"] == str(libnccl_2_30_7)
    assert nccl_text(out["code"]) == "2.30.7"
    # `torchfit run` adds nothing to the user's own LD_PRELOAD but the pin, in front
    both = run_tf("run", "--env", str(env), "--", "sh", "-c", 'echo "$LD_PRELOAD"', state=tmp_path,
                  LD_PRELOAD="/lib/x86_64-linux-gnu/libm.so.6")
    assert both.stdout.strip() == f"{libnccl_2_30_7}:/lib/x86_64-linux-gnu/libm.so.6"


def test_activate_applies_the_pin_and_deactivate_undoes_it(tmp_path: Path, libnccl_2_30_7: Path) -> None:
    env = _venv(tmp_path / "env")
    pin = NcclPin("ld-preload", None, "2.30.7", str(libnccl_2_30_7))
    write_env_script(str(env), str(env), pin)
    hook_activate(str(env), str(env), pin)
    hook_activate(str(env), str(env), pin)  # idempotent
    script = (f". '{env}/bin/activate'; echo \"in=$LD_PRELOAD\"; . '{env}/bin/activate'; echo \"again=$LD_PRELOAD\"; "
              "deactivate; echo \"out=${LD_PRELOAD-unset}\"")
    for shell in ("bash", "sh"):
        if not shutil.which(shell):
            continue
        res = subprocess.run([shell, "-c", script], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "LD_PRELOAD": ""} if shell == "sh" else dict(os.environ))
        lines = res.stdout.split()
        assert lines[0] == f"in={libnccl_2_30_7}" or lines[0] == f"in={libnccl_2_30_7}:", (shell, res.stdout,
                                                                                            res.stderr)
        assert lines[1].startswith(f"again={libnccl_2_30_7}") and lines[1].count("libnccl") == 1
        assert lines[2] in ("out=unset", "out="), (shell, res.stdout)


# --- the real CUDA build (opt-in: ~5.5 GB) --------------------------------------------------------

CUDA_INDEX = "file:///opt/pypi-more/simple"
OLDER_NCCL, NEWER_NCCL, PATCH_NCCL = "2.28.9", "2.32.3", "2.30.3"


def _pypi_libnccl(version: str) -> Path:
    """libnccl.so.2 of nvidia-nccl-cu13==VERSION from PyPI, downloaded once and cached."""
    wheels = CACHE / "wheels"
    found = sorted(wheels.glob(f"nvidia_nccl_cu13-{version}-*.whl")) if wheels.exists() else []
    if not found:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                        "--index-url", "https://pypi.org/simple", "--dest", str(wheels),
                        f"nvidia-nccl-cu13=={version}"], check=True, timeout=1800)
        found = sorted(wheels.glob(f"nvidia_nccl_cu13-{version}-*.whl"))
    return extract_libnccl(found[0], CACHE / f"nccl-{version}")


def _torch_nccl(python: list[str], **env: str) -> dict[str, Any]:
    return _mapped(subprocess.run([*python, "-c", MAPPED_NCCL, "torch"], capture_output=True, text=True,
                                  timeout=600, env={**os.environ, **env}))


@pytest.mark.cuda_wheels
def test_cuda_build_and_nccl_pins(tmp_path: Path) -> None:
    """PyPI's torch 2.14.1 (CUDA 13.0), its own NCCL, then --nccl-lib and --nccl; no GPU needed."""
    if not Path(CUDA_INDEX[7:], "torch").is_dir():
        pytest.skip(f"{CUDA_INDEX} is not on this machine")
    prefix = tmp_path / "cu130"
    python = [str(prefix / "bin" / "python")]
    base = ("torch==2.14.1", "--variant", "cu130", "--assume", "gpu=sm_90", "--assume", "driver=580.159.04",
            "--python", "3.11", "--torch-index-url", CUDA_INDEX, "--prefix", str(prefix), "--json")
    own_lib = f"{prefix}/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"
    try:
        # 1. the plan's NCCL: the nvidia-nccl-cu13 2.30.7 wheel torch pins
        proc = run_tf("install", *base, state=tmp_path, timeout=3600)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        print("\n== install:", json.dumps({k: result[k] for k in ("installer", "nccl", "runtime", "timings")}))
        rt = result["runtime"]
        assert rt["cuda"] == "13.0" and rt["torch"].startswith("2.14.1") and rt["cudnn"] == "9.24.0.43"
        assert rt["nccl"] == "2.30.7" and rt["nccl_library"] == own_lib
        own = _torch_nccl(python)
        print("== import torch:", own, nccl_text(own["code"]))
        assert own["mapped"] == [own_lib] and own["bound"] == own_lib
        assert nccl_text(own["code"]) == "2.30.7"
        # DT_RPATH beats LD_LIBRARY_PATH: the env's own NCCL still loads (docs/architecture.md, Contracts)
        newer = _pypi_libnccl(NEWER_NCCL)
        ldlp = _torch_nccl(python, LD_LIBRARY_PATH=str(newer.parent))
        print(f"== with LD_LIBRARY_PATH={newer.parent}:", ldlp, nccl_text(ldlp["code"]))
        assert ldlp["mapped"] == [own_lib] and ldlp["bound"] == own_lib
        # 2. --nccl-lib of an NCCL older than torch's: refused by the build check, the env untouched
        older = _pypi_libnccl(OLDER_NCCL)
        proc = run_tf("install", *base, "--force", "--nccl-lib", str(older), state=tmp_path, timeout=3600)
        print("== --nccl-lib", OLDER_NCCL, "exit", proc.returncode, json.loads(proc.stdout).get("error"))
        assert proc.returncode == 1 and "undefined symbol: ncclCommResume" in proc.stderr, proc.stderr
        assert _torch_nccl(python)["bound"] == own_lib
        # 3. --nccl-lib of a newer NCCL: LD_PRELOAD in bin/torchfit-env, and torchfit run loads it
        proc = run_tf("install", *base, "--force", "--nccl-lib", str(newer), state=tmp_path, timeout=3600)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        print("== --nccl-lib install:", json.dumps({k: result[k] for k in ("nccl", "runtime", "timings")}))
        assert result["nccl"] == {"mechanism": "ld-preload", "package": None, "version": NEWER_NCCL,
                                  "library": str(newer)}
        pinned = _mapped(run_tf("run", "--env", str(prefix), "--", "python", "-c", MAPPED_NCCL, "torch",
                                state=tmp_path, timeout=600))
        print("== torchfit run:", pinned, nccl_text(pinned["code"]))
        # torch >= 2.14 also dlopens the env's own libnccl by path (torch/__init__.py,
        # _preload_cuda_deps), so both files are mapped; libtorch_cuda binds to the preload.
        assert pinned["bound"] == str(newer) and str(newer) in pinned["mapped"]
        assert nccl_text(pinned["code"]) == NEWER_NCCL
        lock = (prefix / "pylock.toml").read_text()
        assert 'mechanism = "ld-preload"' in lock and f'version = "{NEWER_NCCL}"' in lock
        # 4. --nccl: another nvidia-nccl-cu13 wheel in the env instead of torch's pin
        proc = run_tf("install", *base, "--force", "--nccl", PATCH_NCCL, state=tmp_path, timeout=3600)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        print("== --nccl install:", json.dumps({k: result[k] for k in ("nccl", "runtime", "timings")}))
        wheel_pin = _mapped(run_tf("run", "--env", str(prefix), "--", "python", "-c", MAPPED_NCCL, "torch",
                                   state=tmp_path, timeout=600))
        print("== torchfit run:", wheel_pin, nccl_text(wheel_pin["code"]))
        assert wheel_pin["mapped"] == [own_lib] and wheel_pin["bound"] == own_lib
        assert nccl_text(wheel_pin["code"]) == PATCH_NCCL
        assert leftovers(tmp_path) == []
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def nccl_text(code: int) -> str | None:
    return version_text(decode_nccl_code(code))


# --- the version codes, the env script, --nccl-lib's check ------------------------------------


def test_nccl_version_codes() -> None:
    assert nccl_text(23007) == "2.30.7"
    assert nccl_text(22809) == "2.28.9"
    assert nccl_text(2708) == "2.7.8"


def test_env_script_is_idempotent_and_undoable(tmp_path: Path) -> None:
    lib = tmp_path / "it's lib" / "libnccl.so.2"
    script = tmp_path / "torchfit-env"
    script.write_text(render_env_script("/p", NcclPin("ld-preload", None, "2.28.9", str(lib))))
    res = subprocess.run(["sh", "-c", f'. "{script}"; . "{script}"; echo "$LD_PRELOAD"; _torchfit_env_off; '
                                      'echo "${LD_PRELOAD-unset}"'], capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ["PATH"], "LD_PRELOAD": "/x.so"})
    assert res.stdout.splitlines() == [f"{lib}:/x.so", "/x.so"], res.stderr


def test_check_nccl_lib_rejects_non_libraries(tmp_path: Path) -> None:
    fake = tmp_path / "libnccl.so.2"
    fake.write_bytes(b"\x7fELF" + b"\0" * 100)
    with pytest.raises(BadInput, match="ncclGetVersion"):
        check_nccl_lib(str(fake))
    fake.write_bytes(b"\x7fELF" + b"\0" * (5 << 20) + b"ncclGetVersion")  # found across a chunk border
    assert check_nccl_lib(str(fake)) == str(fake)

