"""What every worker shares: the record protocol and the runtime truth.

Runs inside the TARGET interpreter (standard library and torch only; never
torchfit). doctor_worker.py imports it and runs on Pythons from 3.6 on, so this
file keeps to Python 3.6 syntax: no `from __future__ import annotations`, no
`X | Y` annotations, no walrus, no positional-only parameters.

How a worker finds it: each worker puts its own directory first on sys.path and
imports it by its bare name, `import torchfit_runtime`; the worker directory is
not a package the target interpreter knows (torchfit is not installed there).
That directory is sys.path[0] for the worker and everything it imports, torch
included, which is why every worker's file name ends in `_worker.py`: a worker
named like a standard-library module (`inspect.py`) would shadow that module.

The record protocol (one for every worker): a record is one JSON object on one
line with `kind` (what it is) and `t` (wall time); `Reporter` writes them.
- To a file (the verify workers: append-only, flushed per line, so a killed
  process leaves every record it wrote; torch and NCCL own stdout there).
- Or to stdout (doctor_worker, build_worker: short runs read when they exit),
  each line prefixed with MARKER, so records stand apart from whatever a library
  prints on the same stream.
Kinds every worker may write: `stage` (heartbeat: `stage`, `step`), `error`
(`stage`, `step`, `type`, `message`, `traceback`), `done`; the rest are the
worker's own data records. The host side (torchfit/workers/__init__.py) reads them.

The runtime truth is what is mapped into this process, not what torch was built
against. `torch.cuda.nccl.version()` returns the NCCL torch was compiled with:
with `LD_PRELOAD` of a system libnccl 2.28.3, NCCL's own banner said 2.28.3 while
torch still said (2, 28, 9) (docs/architecture.md, Contracts: "Measured on real hardware").
So the workers read /proc/self/maps (`load_regions`), find the library that is
really loaded, ask the dynamic linker which file a symbol binds to (`dladdr`,
`bound_symbol`) and call its own version function through ctypes
(`version_call`): ncclGetVersion, cudnnGetVersion, cudaRuntimeGetVersion,
cuDriverGetVersion. Versions are returned raw (integer codes); the host side
decodes and judges them, so that logic stays testable without torch.
"""

import ctypes
import json
import os
import re
import socket
import sys
import threading
import time
import traceback
from typing import Optional

# Prefix of a record line on stdout (torchfit/workers/__init__.py reads it).
MARKER = "TORCHFIT-RECORD "

# Environment variables that change what verify measures or which library loads.
# The report shows them per rank so a reader sees they really reached the workers.
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM", "GLOO_")
ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "CUDA_MODULE_LOADING",
    "OMP_NUM_THREADS",
    # Compared across nodes (verify --slurm): what the ranks import and which node they are.
    "PYTHONPATH",
    "SLURMD_NODENAME",
)

# basename patterns of the libraries whose mapped copy is the truth.
LIB_PATTERNS = {
    "nccl": re.compile(r"^lib[nr]ccl\.so(\.[0-9]+)*$"),
    "cudnn": re.compile(r"^libcudnn\.so(\.[0-9]+)*$"),
    "cudart": re.compile(r"^libcudart\.so(\.[0-9]+)*$"),
    "cuda": re.compile(r"^libcuda\.so(\.[0-9]+)*$"),
    "torch_cuda": re.compile(r"^libtorch_(cuda|hip)\.so$"),
}

# How each library reports its own version: (symbol, takes an int* (True) or
# returns the value (False)). nccl.h ncclGetVersion(int*), cudnn.h
# size_t cudnnGetVersion(void), cuda_runtime_api.h cudaRuntimeGetVersion(int*),
# cuda.h cuDriverGetVersion(int*).
VERSION_CALLS = {
    "nccl": ("ncclGetVersion", True),
    "cudnn": ("cudnnGetVersion", False),
    "cudart": ("cudaRuntimeGetVersion", True),
    "cuda": ("cuDriverGetVersion", True),
}


# --- records ----------------------------------------------------------------------------


class Reporter:
    """Writes records: to `path` (appended, flushed per line), or to stdout with
    MARKER when `path` is None.

    Every record carries the wall time `t` and the `fixed` fields; `stage()`
    records are the heartbeat the host uses to name the stage (and step) where
    a process stalled or died. (The tests' fault injector, tests/support/faults,
    wraps `stage`: keep every stage announced through it.)
    """

    def __init__(self, path=None, **fixed):
        self.path = path
        self.fixed = fixed
        self.stage_name = "start"
        self.step = None  # type: object
        self._fh = open(path, "a", encoding="utf-8") if path is not None else None
        self._lock = threading.Lock()

    def line(self, kind, **fields):
        record = {"t": round(time.time(), 6), "kind": kind}
        record.update(self.fixed)
        record.update(fields)
        text = json.dumps(record, default=str)
        with self._lock:
            if self._fh is not None:
                self._fh.write(text + "\n")
                self._fh.flush()
            else:
                sys.stdout.write(MARKER + text + "\n")
                sys.stdout.flush()

    def stage(self, name, step=None):
        self.stage_name = name
        self.step = step
        self.line("stage", stage=name, step=step)

    def error(self, exc):
        self.line(
            "error",
            stage=self.stage_name,
            step=self.step,
            type=type(exc).__name__,
            message=str(exc)[:2000],
            traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[
                -6000:
            ],
        )

    def close(self):
        with self._lock:
            try:
                if self._fh is not None:
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                else:
                    sys.stdout.flush()
            except OSError:
                pass


# --- never an orphan --------------------------------------------------------------------


def _alive(pid):
    try:
        os.kill(pid, 0)  # noqa: TID251 (a liveness probe in the target, where no runner exists)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_watchdog(deadline, reporter, owner=None):
    """End this process past `deadline`, or when its parent or `owner` (the torchfit
    process) dies: never an orphan.

    torchrun starts workers in their own sessions, so a killed agent does not take
    them along, and torchrun itself lives on if torchfit is killed with SIGKILL; the
    orchestrator kills them by pid, and this is the second line.
    """
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                reason = "parent died"
            elif owner and not _alive(owner):
                reason = "torchfit died"
            elif time.time() > deadline:
                reason = "deadline passed"
            else:
                continue
            try:
                reporter.line("watchdog", reason=reason)
                reporter.close()
            finally:
                os._exit(124)

    threading.Thread(target=watch, name="torchfit-watchdog", daemon=True).start()


def redirect_output(path):
    """Send this process's fd 1 and 2 to `path`: a C-level abort message lands there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


# --- what is mapped -------------------------------------------------------------------


def read_maps():
    """The text of /proc/self/maps; OSError when it cannot be read."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        return fh.read()


def parse_maps(text):
    """/proc/self/maps -> [(start, end, path)] for file-backed regions."""
    regions = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
        except ValueError:
            continue
        path = parts[5].strip()
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        regions.append((lo, hi, path))
    return regions


def load_regions():
    """(regions of this process, None) or ([], why they could not be read)."""
    try:
        return parse_maps(read_maps()), None
    except OSError as exc:
        return [], f"cannot read /proc/self/maps: {exc}"


def mapped_paths(regions, keep):
    """Paths of the mapped files for which keep(path) is true, in map order, once each."""
    seen = []
    for _lo, _hi, path in regions:
        if path not in seen and keep(path):
            seen.append(path)
    return seen


def mapped(kind, regions=None):
    """Paths of the mapped libraries of one kind ("nccl", "cudnn", ...), in map order."""
    pattern = LIB_PATTERNS[kind]
    if regions is None:
        regions = load_regions()[0]
    return mapped_paths(regions, lambda p: bool(pattern.match(os.path.basename(p))))


def owner_of(address, regions):
    """The mapped file that holds `address`, or None."""
    for lo, hi, path in regions:
        if lo <= address < hi:
            return path
    return None


def lib_kind(path: str) -> Optional[str]:
    """Which library a path is: "nccl", "cudnn" (the main libcudnn only), "cudart", "cuda"."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    if base.startswith("libnccl.so"):
        return "nccl"
    if base.startswith("libcudnn.so"):
        return "cudnn"
    if base.startswith("libcudart.so"):
        return "cudart"
    if base.startswith("libcuda.so"):
        return "cuda"
    return None


# --- which file a symbol binds to -----------------------------------------------------------


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _dladdr():
    for lib in (None, "libdl.so.2"):
        try:
            fn = ctypes.CDLL(lib).dladdr
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        fn.restype = ctypes.c_int
        return fn
    return None


def has_dladdr():
    return _dladdr() is not None


def symbol_file(fn, regions=None, real=True):
    """The file that holds function `fn` (a ctypes function): dladdr's answer
    (with `real`, symlinks resolved, as /proc/self/maps names files; else the
    name the loader was given); without dladdr, the mapped region holding it."""
    address = ctypes.cast(fn, ctypes.c_void_p).value or 0
    dladdr = _dladdr()
    if dladdr is not None:
        info = _DlInfo()
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            name = info.dli_fname.decode(errors="replace")
            return os.path.realpath(name) if real else name
        return None
    return owner_of(address, regions) if regions is not None else None


def torch_cuda_scopes(regions):
    """(name, handle) of each mapped libtorch_cuda (libtorch_hip): a dlsym there
    finds what libtorch_cuda's own dependencies bind (RTLD_NOLOAD: never a new load)."""
    out = []
    for path in mapped("torch_cuda", regions):
        try:
            out.append(
                (
                    "libtorch_cuda's dependencies",
                    ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY),
                )
            )
        except OSError:
            pass
    return out


def global_scope():
    """[("the global scope", handle)]: where an LD_PRELOAD library comes first."""
    try:
        return [("the global scope", ctypes.CDLL(None))]
    except OSError:
        return []


def bound_symbol(symbol, scopes, regions=None, real=True):
    """(function, file, scope name) of the first scope, in order, that resolves
    `symbol` to a file (`symbol_file`); None when none does."""
    for scope, handle in scopes:
        try:
            fn = getattr(handle, symbol)
        except AttributeError:
            continue
        path = symbol_file(fn, regions, real)
        if path:
            return fn, path, scope
    return None


# --- asking a library its version --------------------------------------------------------


def version_call(lib, symbol, by_ref=True):
    """(code, rc) from a library's own version function; `lib` is a path or a
    ctypes handle (a mapped library: dlopen returns the same handle), or the
    function itself. rc is that function's status (0 for the by-value ones).
    Raises OSError (cannot load) or AttributeError (no such symbol)."""
    if isinstance(lib, str):
        lib = ctypes.CDLL(lib)
    fn = getattr(lib, symbol) if isinstance(lib, ctypes.CDLL) else lib
    if by_ref:
        out = ctypes.c_int(0)
        rc = fn(ctypes.byref(out))
        return int(out.value), int(rc)
    fn.restype = ctypes.c_size_t
    return int(fn()), 0


def call_version(lib, symbol, by_ref=True):
    """The version code; OSError when the call reports a failure."""
    code, rc = version_call(lib, symbol, by_ref)
    if rc != 0:
        raise OSError(f"{symbol} returned {rc}")
    return code


def probe_lib(kind, symbol, by_ref=True):
    """Runtime version and path of a mapped library; which copy answers when several.

    With two copies mapped, the one the global symbol scope resolves (LD_PRELOAD
    comes first) is the one that answers a plain call; that copy is reported.
    """
    regions = load_regions()[0]
    paths = mapped(kind, regions)
    out = {"paths": paths, "path": None, "code": None, "error": None, "how": None}
    if not paths:
        return out
    chosen = paths[0]
    if len(paths) > 1:
        found = bound_symbol(symbol, global_scope(), regions)
        if found is not None:
            chosen = found[1]
            out["how"] = "global symbol scope"
        else:
            out["how"] = "first mapped"
    out["path"] = chosen
    try:
        out["code"] = call_version(chosen, symbol, by_ref)
    except (AttributeError, OSError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def probe_nccl():
    """The NCCL (RCCL) that runs: mapped libnccl, else a copy linked into libtorch_cuda."""
    found = probe_lib("nccl", "ncclGetVersion")
    if found["path"] is None:
        # Old wheels linked NCCL statically into libtorch_cuda.so; then the symbol
        # lives there (if exported) and that file is the one that runs.
        for path in mapped("torch_cuda"):
            try:
                found["code"] = call_version(path, "ncclGetVersion")
                found["path"] = path
                found["how"] = "linked into " + os.path.basename(path)
                break
            except (AttributeError, OSError):
                continue
    return found


def lib_version(path):
    """{"path", "kind", "code"} or {"path", "kind", "error"}: the raw version code a
    library file reports about itself (kind from its name, `lib_kind`)."""
    kind = lib_kind(path)
    out = {"path": path, "kind": kind}
    if kind is None:
        out["error"] = "not a library torchfit knows how to ask"
        return out
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        out["error"] = f"cannot load: {exc}"
        return out
    symbol, by_ref = VERSION_CALLS[kind]
    try:
        code, rc = version_call(lib, symbol, by_ref)
    except (AttributeError, OSError, ValueError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    if rc != 0:
        out["error"] = f"{symbol} returned {rc}"
    else:
        out["code"] = code
    return out


# --- facts every worker reports --------------------------------------------------------------


def host_info():
    def first_line(path):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return fh.read().strip()[:400] or None
        except OSError:
            return None

    return {
        "hostname": socket.gethostname(),
        "nvrm": first_line("/proc/driver/nvidia/version"),
        "nvidia_module": first_line("/sys/module/nvidia/version"),
        "pid": os.getpid(),
    }


def env_snapshot():
    return {
        k: v
        for k, v in sorted(os.environ.items())
        if k in ENV_NAMES or any(k.startswith(p) for p in ENV_PREFIXES)
    }


def python_info():
    return {
        "version": "{}.{}.{}".format(*sys.version_info[:3]),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
    }


def torch_info(torch):
    """Build facts of the imported torch (compiled versions, arch list)."""
    t = torch
    info = {
        "version": getattr(t, "__version__", None),
        "file": getattr(t, "__file__", None),
        "cuda": getattr(t.version, "cuda", None),
        "hip": getattr(t.version, "hip", None),
        "git": getattr(t.version, "git_version", None),
        "nccl_compiled": None,
        "nccl_compiled_error": None,
        "cudnn_compiled": None,
    }
    try:
        v = t.cuda.nccl.version()
        info["nccl_compiled"] = list(v) if isinstance(v, tuple) else v
    except Exception as exc:  # CPU builds have no _nccl_version
        info["nccl_compiled_error"] = f"{type(exc).__name__}: {exc}"
    try:
        info["cudnn_compiled"] = list(t._C._cudnn.getCompileVersion())
    except Exception:
        pass
    return info


def runtime_libs(torch):
    """The libraries mapped now, with the versions their own functions report."""
    t = torch
    out = {"nccl": probe_nccl(), "cudnn": None, "cudnn_error": None}
    try:
        # torch.backends.cudnn.version() is cudnnGetVersion() of the loaded library
        # (the runtime); calling it is also what loads libcudnn.
        out["cudnn"] = t.backends.cudnn.version()
    except Exception as exc:
        out["cudnn_error"] = f"{type(exc).__name__}: {exc}"
    out["cudnn_lib"] = probe_lib("cudnn", "cudnnGetVersion", by_ref=False)
    out["cudart"] = probe_lib("cudart", "cudaRuntimeGetVersion")
    out["cuda_driver_api"] = probe_lib("cuda", "cuDriverGetVersion")
    return out


def summary(torch, libs):
    """One rank's (one node's) runtime versions, as compared across ranks and nodes."""
    t = torch
    host = host_info()
    nccl = libs.get("nccl") or {}
    cudnn_lib = libs.get("cudnn_lib") or {}
    return {
        "hostname": host["hostname"],
        "nvrm": host["nvrm"],
        "nvidia_module": host["nvidia_module"],
        "python": "{}.{}.{}".format(*sys.version_info[:3]),
        "torch": getattr(t, "__version__", None),
        "cuda": getattr(t.version, "cuda", None),
        "hip": getattr(t.version, "hip", None),
        "cudnn": libs.get("cudnn"),
        "cudnn_path": cudnn_lib.get("path"),
        "nccl_code": nccl.get("code"),
        "nccl_path": nccl.get("path"),
        "cudart_code": (libs.get("cudart") or {}).get("code"),
        "env": env_snapshot(),
    }
