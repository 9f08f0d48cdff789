"""Fake hosts for `torchfit doctor` tests: a root tree, fake tools on PATH, fake envs.

Every test runs `python -m torchfit doctor --json --root ROOT` as a real subprocess.
Tools are executables on a PATH that holds nothing else: a fake `nvidia-smi` that
replays outputs captured on real machines (fixtures/, each with its provenance in
a `# ` header ending at `# ---`), and shell scripts for lspci, ldconfig, dkms,
dmesg and ldd. Environments are real venvs: the CPU torch 2.13.0 one is tests/conftest.py's
`cpu_torch_env` (built once, cached: tests/support/envs.py); "CUDA" ones hold a fake torch package
whose libtorch_cuda.so is a real shared object, compiled here with the wheel's
DT_NEEDED (libnccl.so.2, libcudnn.so.9) and DT_RPATH ($ORIGIN/../../nvidia/...),
so the real dynamic loader decides which libnccl a process maps (LD_PRELOAD,
DT_RPATH, LD_LIBRARY_PATH), exactly as with a pip-installed torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.envs import CACHE

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "data" / "doctor"
# The H200 `nvidia-smi topo -m` capture, stored once (tests/data/h200-x2/PROVENANCE.md).
H200_TOPO = HERE.parent / "data" / "h200-x2" / "topo-m.txt"
SRC = HERE.parent.parent / "src"

# Variables that would leak the developer's machine into a fake host.
_SCRUB_PREFIXES = ("NCCL_", "CUDA_", "SLURM_", "PET_")
_SCRUB = {"container", "LD_PRELOAD", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
          "NNODES", "PYTHONHOME", "TORCHFIT_TEST_CACHE"}


def capture(name: str) -> str:
    """A raw capture of the 2x H200 machine (tests/data/h200-x2, provenance in its PROVENANCE.md)."""
    return (FIXTURES.parent / "h200-x2" / name).read_text(encoding="utf-8")


def fixture(name: str) -> str:
    """A fixture's content: everything after its `# ---` provenance header."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    head, sep, body = text.partition("# ---\n")
    assert sep and all(line.startswith("# ") or not line for line in head.splitlines()), f"{name}: no provenance header"
    return body


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        try:
            self.data: dict[str, Any] | None = json.loads(proc.stdout)
        except ValueError:
            self.data = None

    def check(self, check_id: str) -> dict[str, Any]:
        assert self.data is not None, f"no JSON (rc {self.rc}): {self.stdout[-2000:]} {self.stderr[-2000:]}"
        for c in self.data["checks"]:
            if c["id"] == check_id:
                return c
        raise AssertionError(f"no check {check_id}: {[c['id'] for c in self.data['checks']]}")

    def status(self, check_id: str) -> str:
        return str(self.check(check_id)["status"])

    def __repr__(self) -> str:
        return f"Result(rc={self.rc}, stderr={self.stderr[-1500:]!r})"


class Host:
    """A fake host under tmp_path: `root/` for --root, `bin/` as the whole PATH."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.root = tmp / "root"
        self.bin = tmp / "bin"
        self.root.mkdir()
        self.bin.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith(_SCRUB_PREFIXES)}
        env["PATH"] = str(self.bin)
        env["PYTHONPATH"] = str(SRC)
        env["COLUMNS"] = "200"
        # Byte-compile torchfit once for all the doctor runs, outside the source tree.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(CACHE / "pycache")
        self.env = env
        # Every host has a kernel release, network interfaces and a /dev/shm mount.
        self.file("/proc/sys/kernel/osrelease", "6.18.44-fc-v657-gpu\n")
        self.file("/proc/version", "Linux version 6.18.44-fc-v657-gpu (nixbld@localhost) (gcc 15.3.0) #1 SMP\n")
        for iface in ("lo", "eth0"):
            (self.root / "sys/class/net" / iface).mkdir(parents=True, exist_ok=True)
        (self.root / "dev/shm").mkdir(parents=True, exist_ok=True)
        # This test machine's own /proc/mounts line for /dev/shm (24 GB tmpfs).
        self.file("/proc/mounts", "tmpfs /dev/shm tmpfs rw,relatime,size=24684096k 0 0\n")

    # --- files under root -----------------------------------------------------------

    def file(self, path: str, text: str = "", mode: int | None = None) -> Path:
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        if mode is not None:
            p.chmod(mode)
        return p

    def remove(self, path: str) -> None:
        p = self.root / path.lstrip("/")
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()

    # --- tools on PATH ---------------------------------------------------------------

    def tool(self, name: str, stdout: str = "", stderr: str = "", rc: int = 0, sleep: float | None = None) -> Path:
        """A fake tool that prints fixed output (stored beside it) and exits `rc`."""
        out = self.bin / f".{name}.out"
        err = self.bin / f".{name}.err"
        out.write_text(stdout, encoding="utf-8")
        err.write_text(stderr, encoding="utf-8")
        script = self.bin / name
        body = f"#!/bin/sh\n/bin/cat '{out}'\n/bin/cat '{err}' >&2\n"
        if sleep:
            body += f"exec /bin/sleep {sleep}\n"
        body += f"exit {rc}\n"
        script.write_text(body)
        script.chmod(0o755)
        return script

    def no_tool(self, name: str) -> None:
        (self.bin / name).unlink(missing_ok=True)

    def nvidia_smi(self, *, fail_text: str | None = None, rc: int = 0,
                   p2p: str | None = None, topo: str | None = None, banner: str | None = None,
                   query: str | None = None, sleep: float | None = None) -> None:
        """A fake nvidia-smi. `h200` answers every command from the 2x H200 fixtures
        (any --query-gpu field list, from the captured full table); `fail_text`
        makes every call print it and exit `rc`, as nvidia-smi does without a driver."""
        data = self.bin / ".nvidia-smi"
        data.mkdir(exist_ok=True)
        (data / "query.csv").write_text(query if query is not None else fixture("h200-query-gpu.csv"))
        (data / "banner.txt").write_text(banner if banner is not None else fixture("h200-nvidia-smi.txt"))
        (data / "topo-m.txt").write_text(topo if topo is not None else H200_TOPO.read_text(encoding="utf-8"))
        (data / "topo-p2p-r.txt").write_text(p2p if p2p is not None else fixture("h200-topo-p2p-r.txt"))
        if fail_text is not None:
            (data / "fail.txt").write_text(fail_text)
        script = self.bin / "nvidia-smi"
        script.write_text(textwrap.dedent(f"""\
            #!{sys.executable} -S
            import csv, os, sys, time
            d = {str(data)!r}
            if {sleep!r}:
                time.sleep({sleep!r})
            def out(name):
                sys.stdout.write(open(os.path.join(d, name)).read())
            if os.path.exists(os.path.join(d, "fail.txt")):
                out("fail.txt"); sys.exit({rc})
            args = sys.argv[1:]
            q = [a for a in args if a.startswith("--query-gpu=")]
            if q:
                rows = list(csv.reader(open(os.path.join(d, "query.csv")), skipinitialspace=True))
                head = [h.split(" [")[0].strip() for h in rows[0]]
                fields = q[0].split("=", 1)[1].split(",")
                for f in fields:
                    if f not in head:
                        print('Field "%s" is not a valid field to query.' % f); sys.exit(2)
                for row in rows[1:]:
                    cells = dict(zip(head, row))
                    vals = [cells[f] for f in fields]
                    if "nounits" in " ".join(args):
                        vals = [v.replace(" MiB", "") for v in vals]
                    print(", ".join(vals))
            elif args[:2] == ["topo", "-m"]:
                out("topo-m.txt")
            elif args[:2] == ["topo", "-p2p"]:
                out("topo-p2p-r.txt")
            else:
                out("banner.txt")
            """))
        script.chmod(0o755)

    # --- a whole healthy H200 host -----------------------------------------------------

    def h200(self) -> Host:
        """The 2x H200 host of shared/fixtures/h200-x2 as far as files and tools go."""
        self.nvidia_smi()
        self.tool("lspci", fixture("lspci-nn-2x-h200.txt"))
        self.tool("ldconfig", fixture("h200-ldconfig-p.txt"))
        self.tool("ldd", capture("ldd-version.txt"))
        self.tool("dmesg", "")
        self.file("/proc/driver/nvidia/version", capture("proc-driver-nvidia-version.txt"))
        # proc(5) /proc/modules format: name size refcount deps state address.
        self.file("/proc/modules", "nvidia_uvm 2076672 0 - Live 0x0000000000000000\n"
                                   "nvidia 14368768 2 nvidia_uvm, Live 0x0000000000000000\n")
        for node in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"):
            self.file(f"/dev/{node}", "", mode=0o666)
        return self

    # --- running doctor ---------------------------------------------------------------

    def doctor(self, *args: str, env: dict[str, str] | None = None, json_out: bool = True,
               root: bool = True, timeout: float = 120) -> Result:
        full = dict(self.env)
        full.update(env or {})
        argv = ["doctor"]
        if json_out:
            argv.append("--json")
        if root:
            argv += ["--root", str(self.root)]
        argv += list(args)
        proc = run_cli(*argv, base_env=full, timeout=timeout, cwd=self.tmp)
        return Result(proc)


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


@pytest.fixture
def h200(tmp_path: Path) -> Host:
    return Host(tmp_path).h200()


# --- fake CUDA libraries -------------------------------------------------------------------------


def _cc() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake CUDA libraries")
    return cc


_LIB_SOURCES = {
    "nccl": "int ncclGetVersion(int *v) {{ *v = {code}; return 0; }}\n{extra}",
    "cudnn": "#include <stddef.h>\nsize_t cudnnGetVersion(void) {{ return {code}; }}\n",
    "cudart": "int cudaRuntimeGetVersion(int *v) {{ *v = {code}; return 0; }}\n",
    "cuda": "int cuDriverGetVersion(int *v) {{ *v = {code}; return 0; }}\n",
}
_SONAMES = {"nccl": "libnccl.so.2", "cudnn": "libcudnn.so.9", "cudart": "libcudart.so.13", "cuda": "libcuda.so.1"}


def fake_lib(kind: str, code: int, *, resume: bool = False) -> Path:
    """A real shared object with the library's soname whose version call answers `code`.

    `resume` adds ncclCommResume (NCCL >= 2.29.7 has it)."""
    extra = "int ncclCommResume(void *c) { return 0; }\n" if resume else ""
    src = _LIB_SOURCES[kind].format(code=code, extra=extra)
    key = hashlib.sha256(src.encode()).hexdigest()[:12]
    out = CACHE / "fakelibs" / f"{kind}-{code}-{key}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        c = out.with_suffix(".c")
        c.write_text(src)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run([_cc(), "-shared", "-fPIC", f"-Wl,-soname,{_SONAMES[kind]}", "-o", str(tmp), str(c)], check=True)
        tmp.replace(out)
    return out


def fake_libtorch_cuda(*, needs_resume: bool = False) -> Path:
    """libtorch_cuda.so as the pip wheel links it: DT_NEEDED libnccl.so.2, libcudnn.so.9 and
    libcudart.so.13, DT_RPATH (not RUNPATH) $ORIGIN/../../nvidia/{nccl,cudnn,cu13}/lib."""
    call = "extern int ncclCommResume(void*); int torch_resume(void) { return ncclCommResume(0); }\n" if needs_resume else ""
    src = ("extern int ncclGetVersion(int*);\n#include <stddef.h>\nextern size_t cudnnGetVersion(void);\n"
           "extern int cudaRuntimeGetVersion(int*);\n"
           "int torch_nccl(void) { int v = 0; ncclGetVersion(&v); return v; }\n"
           "int torch_cudart(void) { int v = 0; cudaRuntimeGetVersion(&v); return v; }\n"
           "size_t torch_cudnn(void) { return cudnnGetVersion(); }\n" + call)
    key = hashlib.sha256(src.encode()).hexdigest()[:12]
    out = CACHE / "fakelibs" / f"libtorch_cuda-{key}.so"
    if not out.exists():
        stubs = CACHE / "fakelibs" / f"stubs-{key}"
        stubs.mkdir(parents=True, exist_ok=True)
        shutil.copy(fake_lib("nccl", 22907, resume=True), stubs / "libnccl.so.2")
        shutil.copy(fake_lib("cudnn", 91900), stubs / "libcudnn.so.9")
        shutil.copy(fake_lib("cudart", 13000), stubs / "libcudart.so.13")
        c = out.with_suffix(".c")
        c.write_text(src)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run([_cc(), "-shared", "-fPIC", "-o", str(tmp), str(c), f"-L{stubs}", "-l:libnccl.so.2",
                        "-l:libcudnn.so.9", "-l:libcudart.so.13", "-Wl,--disable-new-dtags",
                        "-Wl,-rpath,$ORIGIN/../../nvidia/nccl/lib:$ORIGIN/../../nvidia/cudnn/lib:"
                        "$ORIGIN/../../nvidia/cu13/lib"], check=True)
        tmp.replace(out)
    return out


# The fake torch package: what torch 2.11.0+cu130 reported on the H200 host
# (shared/fixtures/h200-x2/torch-info.txt) unless a test says otherwise.
_TORCH_INIT = '''\
"""A stand-in for a CUDA torch wheel (torchfit tests): real libtorch_cuda.so, fake Python."""
import ctypes, os, warnings
__version__ = {version!r}
class version:
    cuda = {cuda!r}
    hip = None
_site = os.path.dirname(os.path.dirname(__file__))
# torch >= 2.5 (_load_global_deps -> _preload_cuda_deps) dlopens each nvidia-* library
# by path before libtorch_cuda, whenever libcudart is mapped.
for _sub in ("cudnn/lib/libcudnn.so.9", "cu13/lib/libcudart.so.13", "nccl/lib/libnccl.so.2"):
    try:
        ctypes.CDLL(os.path.join(_site, "nvidia", _sub))
    except OSError:
        pass
_lib = os.path.join(os.path.dirname(__file__), "lib", "libtorch_cuda.so")
try:
    _handle = ctypes.CDLL(_lib)
except OSError as exc:
    # torch raises this from `from torch._C import *`
    raise ImportError(str(exc)) from None
from . import _C, cuda, backends
'''

_TORCH_C = '''\
ARCH = {arch!r}
def _cuda_getArchFlags():
    return ARCH
class _cudnn:
    @staticmethod
    def getCompileVersion():
        return {cudnn_compiled!r}
'''

_TORCH_CUDA = '''\
import warnings
from . import nccl
INIT_ERROR = {init_error!r}
GPUS = {gpus!r}
def is_available():
    if INIT_ERROR:
        warnings.warn("CUDA initialization: " + INIT_ERROR, UserWarning)
        return False
    return bool(GPUS)
def device_count():
    return 0 if INIT_ERROR else len(GPUS)
def init():
    if INIT_ERROR:
        raise RuntimeError(INIT_ERROR)
def get_device_capability(i):
    return tuple(GPUS[i][1])
def get_device_name(i):
    return GPUS[i][0]
'''

_TORCH_NCCL = '''\
def version():
    return {nccl_compiled!r}
'''

_TORCH_BACKENDS_CUDNN = '''\
import ctypes
COMPILED = {cudnn_compiled!r}
def version():
    # Real torch: runtime major must equal the build's, runtime minor >= the build's,
    # else "cuDNN version incompatibility" (torch/backends/cudnn/__init__.py).
    lib = ctypes.CDLL("libcudnn.so.9")
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    code = lib.cudnnGetVersion()
    runtime = (code // 10000, code % 10000 // 100, code % 100)
    if runtime[0] != COMPILED[0] or runtime[1] < COMPILED[1]:
        raise RuntimeError(
            "cuDNN version incompatibility: PyTorch was compiled  against %s but found runtime version %s. "
            "PyTorch already comes bundled with cuDNN." % (COMPILED, runtime))
    return code
'''


class FakeEnv:
    """A venv (no pip) whose site-packages the test fills: torch, nvidia-* dists, libs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True)
        self.python = str(path / "bin" / "python")
        out = subprocess.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True)
        self.site = Path(out.stdout.strip())

    def dist(self, name: str, version: str, *, files: tuple[str, ...] = (), installer: str = "pip",
             requires: tuple[str, ...] = (), wheel_tag: str | None = None) -> Path:
        """A dist-info as pip writes it (METADATA, INSTALLER, RECORD, WHEEL)."""
        d = self.site / f"{name.replace('-', '_')}-{version}.dist-info"
        d.mkdir(parents=True, exist_ok=True)
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
        (d / "METADATA").write_text(meta)
        (d / "INSTALLER").write_text(installer + "\n")
        if wheel_tag:
            (d / "WHEEL").write_text(f"Wheel-Version: 1.0\nGenerator: setuptools\nRoot-Is-Purelib: false\nTag: {wheel_tag}\n")
        record = [f"{f},," for f in files] + [f"{d.name}/{n},," for n in ("METADATA", "INSTALLER", "RECORD")]
        (d / "RECORD").write_text("\n".join(record) + "\n")
        return d

    def put_lib(self, rel: str, lib: Path) -> Path:
        dest = self.site / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, dest)
        return dest

    def nvidia_nccl(self, package: str = "nvidia-nccl-cu13", version: str = "2.28.9", code: int = 22809,
                    resume: bool = False) -> Path:
        lib = self.put_lib("nvidia/nccl/lib/libnccl.so.2", fake_lib("nccl", code, resume=resume))
        self.dist(package, version, files=("nvidia/nccl/lib/libnccl.so.2",))
        return lib

    def nvidia_cudart(self, package: str = "nvidia-cuda-runtime", version: str = "13.0.96", code: int = 13000) -> Path:
        lib = self.put_lib("nvidia/cu13/lib/libcudart.so.13", fake_lib("cudart", code))
        self.dist(package, version, files=("nvidia/cu13/lib/libcudart.so.13",))
        return lib

    def nvidia_cudnn(self, package: str = "nvidia-cudnn-cu13", version: str = "9.19.0.56", code: int = 91900) -> Path:
        lib = self.put_lib("nvidia/cudnn/lib/libcudnn.so.9", fake_lib("cudnn", code))
        self.dist(package, version, files=("nvidia/cudnn/lib/libcudnn.so.9",))
        return lib

    def cuda_torch(self, *, version: str = "2.11.0+cu130", cuda: str = "13.0",
                   arch: str = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", nccl_compiled: tuple[int, ...] = (2, 28, 9),
                   cudnn_compiled: tuple[int, ...] = (9, 19, 0), init_error: str | None = None,
                   gpus: tuple[tuple[str, tuple[int, int]], ...] = (("NVIDIA H200", (9, 0)), ("NVIDIA H200", (9, 0))),
                   requires: tuple[str, ...] = ("nvidia-nccl-cu13==2.28.9", "nvidia-cudnn-cu13==9.19.0.56"),
                   wheel_tag: str = "cp311-cp311-manylinux_2_28_x86_64", needs_resume: bool = False) -> None:
        if not (self.site / "nvidia/cu13/lib/libcudart.so.13").exists():
            self.nvidia_cudart()
        if not (self.site / "nvidia/cudnn/lib/libcudnn.so.9").exists():
            self.nvidia_cudnn()
        torch = self.site / "torch"
        (torch / "lib").mkdir(parents=True, exist_ok=True)
        shutil.copy(fake_libtorch_cuda(needs_resume=needs_resume), torch / "lib" / "libtorch_cuda.so")
        (torch / "__init__.py").write_text(_TORCH_INIT.format(version=version, cuda=cuda))
        (torch / "_C.py").write_text(_TORCH_C.format(arch=arch, cudnn_compiled=cudnn_compiled))
        (torch / "cuda").mkdir(exist_ok=True)
        (torch / "cuda" / "__init__.py").write_text(_TORCH_CUDA.format(init_error=init_error, gpus=[list(g) for g in gpus]))
        (torch / "cuda" / "nccl.py").write_text(_TORCH_NCCL.format(nccl_compiled=nccl_compiled))
        (torch / "backends" / "cudnn").mkdir(parents=True, exist_ok=True)
        (torch / "backends" / "__init__.py").write_text("from . import cudnn\n")
        (torch / "backends" / "cudnn" / "__init__.py").write_text(_TORCH_BACKENDS_CUDNN.format(cudnn_compiled=cudnn_compiled))
        self.dist("torch", version, requires=requires, wheel_tag=wheel_tag, files=("torch/__init__.py",))


@pytest.fixture
def fake_env(tmp_path: Path) -> FakeEnv:
    return FakeEnv(tmp_path / "env")


def h200_env(tmp_path: Path) -> FakeEnv:
    """The env of the H200 host's python3: torch 2.11.0+cu130 with nvidia-nccl-cu13 2.28.9
    and nvidia-cudnn-cu13 9.19.0.56 (shared/fixtures/h200-x2/torch-info.txt, compat-facts §2)."""
    env = FakeEnv(tmp_path / "env")
    env.nvidia_nccl()
    env.nvidia_cudnn()
    env.nvidia_cudart()
    env.cuda_torch()
    return env


def system_libs(host: Host) -> dict[str, Path]:
    """The H200's system libnccl 2.28.3 and libcudnn 9.14.0 (shared/fixtures/h200-x2), as real
    files under tmp, with `ldconfig -p` replaying the captured lines relocated there."""
    lib = host.tmp / "sys" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True, exist_ok=True)
    nccl = lib / "libnccl.so.2.28.3"
    shutil.copy(fake_lib("nccl", 22803), nccl)
    (lib / "libnccl.so.2").symlink_to("libnccl.so.2.28.3")
    cudnn = lib / "libcudnn.so.9.14.0"
    shutil.copy(fake_lib("cudnn", 91400), cudnn)
    (lib / "libcudnn.so.9").symlink_to("libcudnn.so.9.14.0")
    text = fixture("h200-ldconfig-p.txt").replace("=> /lib/x86_64-linux-gnu/", f"=> {lib}/")
    host.tool("ldconfig", text)
    return {"nccl": lib / "libnccl.so.2", "nccl_real": nccl, "cudnn": lib / "libcudnn.so.9", "dir": lib}


def mode_bits(path: Path) -> str:
    return stat.filemode(path.stat().st_mode)


def raising_torch_env(parent: Path) -> Path:
    """A venv at PARENT/raise whose `import torch` raises RuntimeError("broken") (defect #4 of issue 13)."""
    py311 = "/root/.pyenv/versions/3.11.7/bin/python3.11"
    base = py311 if os.path.exists(py311) else sys.executable
    env = parent / "raise"
    subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = next((env / "lib").glob("python3.*")) / "site-packages" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('raise RuntimeError("broken")\n')
    return env

