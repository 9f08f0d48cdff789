"""What both verify workers share: JSON-lines reporting and the runtime truth.

Runs inside the TARGET environment (standard library and torch only; never
torchfit) on Python 3.8 or newer, so no `X | Y` at run time and no match.

The runtime truth is what is mapped into this process, not what torch was built
against. `torch.cuda.nccl.version()` returns the NCCL torch was compiled with:
with `LD_PRELOAD` of a system libnccl 2.28.3, NCCL's own banner said 2.28.3 while
torch still said (2, 28, 9) (../shared/DESIGN.md, "Measured on real hardware").
So the workers read /proc/self/maps, find the libnccl (librccl on ROCm) that is
really loaded and call its `ncclGetVersion()` through ctypes; the same for
libcudnn (`cudnnGetVersion`) and libcudart (`cudaRuntimeGetVersion`).

Versions are returned raw (integer codes, text lines); the orchestrator decodes
and judges them, so that logic stays testable without torch.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import socket
import sys
import threading
import time
import traceback

# Environment variables that change what verify measures or which library loads.
# The report shows them per rank so a reader sees they really reached the workers.
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM", "GLOO_", "TORCHFIT_VERIFY_")
ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "CUDA_MODULE_LOADING",
    "OMP_NUM_THREADS",
)

# basename patterns of the libraries whose mapped copy is the truth.
LIB_PATTERNS = {
    "nccl": re.compile(r"^lib[nr]ccl\.so(\.[0-9]+)*$"),
    "cudnn": re.compile(r"^libcudnn\.so(\.[0-9]+)*$"),
    "cudart": re.compile(r"^libcudart\.so(\.[0-9]+)*$"),
    "cuda": re.compile(r"^libcuda\.so(\.[0-9]+)*$"),
    "torch_cuda": re.compile(r"^libtorch_(cuda|hip)\.so$"),
}


class Reporter:
    """Append-only JSON lines, flushed per line, so a killed process leaves a record.

    Every line carries the wall time `t`; `stage()` lines are the heartbeat the
    orchestrator uses to name the stage (and step) where a process stalled.
    """

    def __init__(self, path: str, **fixed: object) -> None:
        self.path = path
        self.fixed = fixed
        self.stage_name = "start"
        self.step = None  # type: object
        self._fh = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def line(self, kind: str, **fields: object) -> None:
        record = {"t": round(time.time(), 6), "kind": kind}
        record.update(self.fixed)
        record.update(fields)
        text = json.dumps(record, default=str)
        with self._lock:
            self._fh.write(text + "\n")
            self._fh.flush()

    def stage(self, name: str, step: object = None) -> None:
        self.stage_name = name
        self.step = step
        self.line("stage", stage=name, step=step)

    def error(self, exc: BaseException) -> None:
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

    def close(self) -> None:
        with self._lock:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            except OSError:
                pass


# --- faults (a test hook) -------------------------------------------------------------


def parse_faults(text: str) -> list:
    """TORCHFIT_VERIFY_FAULT="KIND:WHO[:STAGE],..." -> [(kind, who, stage or None)].

    KIND is crash (raise), abort (SIGABRT, no traceback), hang (never return),
    teardown (abort after reporting: the gloo exit crash of DESIGN.md), exit (exit 3
    without reporting), wrong (feed a wrong value into the all-reduce: a failed
    check, not a crash); WHO is a global rank or "inspect". A test hook: documented
    in docs/verify.md, harmless when unset.
    """
    faults = []
    for part in (text or "").split(","):
        bits = part.strip().split(":")
        if len(bits) >= 2 and bits[0] in ("crash", "abort", "hang", "teardown", "exit", "wrong"):
            faults.append((bits[0], bits[1], bits[2] if len(bits) > 2 and bits[2] else None))
    return faults


class Faults:
    def __init__(self, who: str, default_stage: str) -> None:
        self.who = who
        self.default_stage = default_stage
        self.spec = os.environ.get("TORCHFIT_VERIFY_FAULT", "")
        self.faults = [f for f in parse_faults(self.spec) if f[1] == who]

    def at(self, stage: str) -> None:
        for kind, _who, where in self.faults:
            if kind in ("teardown", "wrong") or (where or self.default_stage) != stage:
                continue
            what = f"injected fault TORCHFIT_VERIFY_FAULT={self.spec} ({kind} at {stage})"
            if kind == "crash":
                raise RuntimeError(what)
            if kind == "abort":
                sys.stderr.write(what + "\n")
                sys.stderr.flush()
                os.abort()
            if kind == "exit":
                os._exit(3)
            if kind == "hang":
                while True:
                    time.sleep(3600)

    def wrong(self) -> bool:
        return any(kind == "wrong" for kind, _w, _s in self.faults)

    def teardown(self) -> bool:
        return any(kind == "teardown" for kind, _w, _s in self.faults)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_watchdog(deadline: float, reporter: Reporter, owner: int | None = None) -> None:
    """End this process past `deadline`, or when its parent or `owner` (the torchfit
    process) dies: never an orphan.

    torchrun starts workers in their own sessions, so a killed agent does not take
    them along, and torchrun itself lives on if torchfit is killed with SIGKILL; the
    orchestrator kills them by pid, and this is the second line.
    """
    parent = os.getppid()

    def watch() -> None:
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


# --- what is mapped -------------------------------------------------------------------


def read_maps() -> str:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def parse_maps(text: str) -> list:
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


def mapped(kind: str, regions: list | None = None) -> list:
    """Paths of the mapped libraries of one kind ("nccl", "cudnn", ...), in map order."""
    pattern = LIB_PATTERNS[kind]
    seen = []
    for _lo, _hi, path in regions if regions is not None else parse_maps(read_maps()):
        if pattern.match(os.path.basename(path)) and path not in seen:
            seen.append(path)
    return seen


def owner_of(address: int, regions: list) -> str | None:
    for lo, hi, path in regions:
        if lo <= address < hi:
            return path
    return None


def call_version(path: str, symbol: str, by_ref: bool = True) -> int:
    """Call an `int f(int*)` (or `T f(void)`) version function of a mapped library."""
    lib = ctypes.CDLL(path)  # already mapped: dlopen returns the same handle
    fn = getattr(lib, symbol)
    if by_ref:
        out = ctypes.c_int(0)
        rc = fn(ctypes.byref(out))
        if rc != 0:
            raise OSError(f"{symbol} returned {rc}")
        return int(out.value)
    fn.restype = ctypes.c_size_t
    return int(fn())


def probe_lib(kind: str, symbol: str, by_ref: bool = True) -> dict:
    """Runtime version and path of a mapped library; which copy answers when several.

    With two copies mapped, the one the global symbol scope resolves (LD_PRELOAD
    comes first) is the one that answers a plain call; that copy is reported.
    """
    regions = parse_maps(read_maps())
    paths = mapped(kind, regions)
    out = {"paths": paths, "path": None, "code": None, "error": None, "how": None}
    if not paths:
        return out
    chosen = paths[0]
    if len(paths) > 1:
        try:
            addr = ctypes.cast(getattr(ctypes.CDLL(None), symbol), ctypes.c_void_p).value
            chosen = owner_of(addr or 0, regions) or chosen
            out["how"] = "global symbol scope"
        except (AttributeError, OSError):
            out["how"] = "first mapped"
    out["path"] = chosen
    try:
        out["code"] = call_version(chosen, symbol, by_ref)
    except (AttributeError, OSError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def probe_nccl() -> dict:
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


def host_info() -> dict:
    def first_line(path: str) -> str | None:
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


def env_snapshot() -> dict:
    return {
        k: v
        for k, v in sorted(os.environ.items())
        if k in ENV_NAMES or any(k.startswith(p) for p in ENV_PREFIXES)
    }


def python_info() -> dict:
    return {
        "version": "{}.{}.{}".format(*sys.version_info[:3]),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
    }


def torch_info(torch: object) -> dict:
    """Build facts of the imported torch (compiled versions, arch list)."""
    t = torch  # type: ignore[assignment]
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


def runtime_libs(torch: object) -> dict:
    """The libraries mapped now, with the versions their own functions report."""
    t = torch  # type: ignore[assignment]
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


def summary(torch: object, libs: dict) -> dict:
    """One rank's (one node's) runtime versions, as compared across ranks and nodes."""
    t = torch  # type: ignore[assignment]
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


def redirect_output(path: str) -> None:
    """Send this process's fd 1 and 2 to `path`: a C-level abort message lands there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
