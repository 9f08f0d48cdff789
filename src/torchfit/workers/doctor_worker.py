"""torchfit doctor's worker: run by the *target* environment's Python, never imports torchfit.

    python doctor_worker.py report            what `import torch` really loads, and why
    python doctor_worker.py libversions PATH  the version a shared library reports of itself

`report` prints lines that start with MARKER followed by one JSON object each: first
the environment's metadata (interpreter, LD_* variables, the torch / nvidia-* / cuda-*
distributions with their WHEEL, INSTALLER and shared-library files), then what
importing torch gave (version, CUDA build, arch list, compiled and runtime NCCL/cuDNN,
CUDA initialisation messages), and finally the libraries mapped into this process
(/proc/self/maps) with the version each reports through ctypes: ncclGetVersion,
cudnnGetVersion, cudaRuntimeGetVersion, cuDriverGetVersion. The metadata line comes
before the import, so a crash inside `import torch` still leaves it behind; a
`stage` line names the step that was running.

`torch.cuda.nccl.version()` reports the NCCL torch was *compiled* against, not the
one that runs (measured on the H200 host: LD_PRELOAD of a system libnccl 2.28.3 gave
NCCL's banner 2.28.3 while torch said (2, 28, 9)), so the runtime truth is read
from the mapped file itself.

Runs on any Python from 3.6 on (no torchfit, no third-party imports), ends with
os._exit(0) after flushing, so an interpreter-teardown crash of torch cannot turn a
finished report into a failure.
"""

import ctypes
import json
import os
import sys
import traceback
import warnings

MARKER = "TORCHFIT-DOCTOR "

# Libraries whose mapping says something about the stack; everything else in
# /proc/self/maps (libc, Python's extension modules) is left out of the report.
_INTERESTING = ("nccl", "cudnn", "cudart", "libcuda.", "cublas", "nvidia-ml", "torch", "c10", "nvrtc")


def emit(obj):
    sys.stdout.write(MARKER + json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def tail(text, lines=20):
    return "\n".join(str(text).splitlines()[-lines:])


def lib_kind(path):
    base = os.path.basename(path)
    if base.startswith("libnccl.so"):
        return "nccl"
    if base.startswith("libcudnn.so"):
        return "cudnn"
    if base.startswith("libcudart.so"):
        return "cudart"
    if base.startswith("libcuda.so"):
        return "cuda"
    return None


def lib_version(path):
    """The raw version code a library reports about itself, through ctypes."""
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
    try:
        if kind == "cudnn":
            fn = lib.cudnnGetVersion
            fn.restype = ctypes.c_size_t
            out["code"] = int(fn())
            return out
        name = {"nccl": "ncclGetVersion", "cudart": "cudaRuntimeGetVersion", "cuda": "cuDriverGetVersion"}[kind]
        fn = getattr(lib, name)
        value = ctypes.c_int(0)
        rc = fn(ctypes.byref(value))
        if rc != 0:
            out["error"] = f"{name} returned {rc}"
        else:
            out["code"] = int(value.value)
    except (AttributeError, OSError, ValueError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def mapped_libraries():
    """Shared objects mapped into this process, in mapping order, de-duplicated."""
    seen = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                if not path.startswith("/") or ".so" not in path or path in seen:
                    continue
                base = os.path.basename(path)
                if any(key in base for key in _INTERESTING):
                    seen.append(path)
    except OSError as exc:
        return None, f"cannot read /proc/self/maps: {exc}"
    return seen, None


def distributions():
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        try:
            import importlib_metadata as metadata
        except ImportError:
            return None, "importlib.metadata is not available in this Python"
    out = []
    try:
        dists = list(metadata.distributions())
    except Exception as exc:  # a broken dist-info must not stop the report
        return None, f"importlib.metadata failed: {exc}"
    for dist in dists:
        try:
            name = dist.metadata["Name"] or ""
        except Exception:
            continue
        key = name.lower().replace("_", "-")
        if not (key in ("torch", "pytorch", "triton") or key.startswith("nvidia-") or key.startswith("cuda-")):
            continue
        entry = {"name": name, "version": dist.version}
        path = getattr(dist, "_path", None)
        entry["path"] = str(path) if path is not None else None
        try:
            entry["installer"] = (dist.read_text("INSTALLER") or "").strip() or None
        except Exception:
            entry["installer"] = None
        if key == "torch":
            try:
                entry["wheel"] = dist.read_text("WHEEL")
            except Exception:
                entry["wheel"] = None
            try:
                entry["requires"] = list(dist.requires or [])
            except Exception:
                entry["requires"] = []
        libs = []
        if key.startswith("nvidia-"):
            try:
                for f in dist.files or []:
                    if lib_kind(str(f)) is not None:
                        libs.append(os.path.normpath(str(dist.locate_file(f))))
            except Exception:
                pass
        entry["libs"] = libs
        out.append(entry)
    return out, None


def metadata_report():
    dists, why = distributions()
    return {
        "stage": "metadata",
        "python": {
            "executable": sys.executable,
            "version": "{}.{}.{}".format(*sys.version_info[:3]),
            "prefix": sys.prefix,
            "base_prefix": getattr(sys, "base_prefix", sys.prefix),
            "path": [p for p in sys.path if p],
        },
        "env": {k: os.environ.get(k) for k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "CONDA_PREFIX", "VIRTUAL_ENV")},
        "distributions": dists,
        "distributions_error": why,
    }


def call(fn):
    """fn() -> (value, None) or (None, "Type: message")."""
    try:
        return fn(), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def torch_report():
    out = {"stage": "torch", "imported": False}
    try:
        import torch
    except Exception as exc:
        out["error"] = {"type": type(exc).__name__, "message": str(exc), "traceback": tail(traceback.format_exc())}
        return out
    out["imported"] = True
    out["version"] = getattr(torch, "__version__", None)
    out["file"] = getattr(torch, "__file__", None)
    version = getattr(torch, "version", None)
    out["cuda"] = getattr(version, "cuda", None)
    out["hip"] = getattr(version, "hip", None)
    cuda = out["cuda"] is not None
    if cuda:
        flags, out["arch_error"] = call(lambda: torch._C._cuda_getArchFlags())
        out["arch_flags"] = flags
        nccl, out["nccl_error"] = call(lambda: torch.cuda.nccl.version())
        out["nccl_compiled"] = list(nccl) if isinstance(nccl, (tuple, list)) else nccl
        compiled, _ = call(lambda: torch._C._cudnn.getCompileVersion())
        out["cudnn_compiled"] = list(compiled) if isinstance(compiled, (tuple, list)) else compiled
        # torch.backends.cudnn.version() loads libcudnn and raises the "cuDNN version
        # incompatibility" RuntimeError when the one found differs from the build's.
        out["cudnn_runtime"], out["cudnn_error"] = call(lambda: torch.backends.cudnn.version())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available, out["available_error"] = call(lambda: bool(torch.cuda.is_available()))
        out["available"] = available
        count, _ = call(lambda: int(torch.cuda.device_count()))
        out["device_count"] = count
        if cuda and not available:
            # The reason is in the exception torch.cuda.init() raises ("found version 11040").
            _, out["init_error"] = call(lambda: torch.cuda.init())
        devices = []
        if available:
            for i in range(count or 0):
                cap, err = call(lambda i=i: torch.cuda.get_device_capability(i))
                name, _ = call(lambda i=i: torch.cuda.get_device_name(i))
                devices.append({"index": i, "name": name, "capability": list(cap) if cap else None, "error": err})
        out["devices"] = devices
    out["warnings"] = [str(w.message) for w in caught]
    return out


# The call each library answers its version with; also the symbol whose binding
# says which copy is in effect when several are mapped.
_SYMBOLS = {"nccl": "ncclGetVersion", "cudnn": "cudnnGetVersion", "cudart": "cudaRuntimeGetVersion"}


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


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


def effective_libraries(maps):
    """Which mapped copy a symbol resolves to, as libtorch_cuda sees it.

    torch >= 2.5 preloads the nvidia-* libraries by path (_preload_cuda_deps), so with
    LD_PRELOAD of another libnccl two copies are mapped; libtorch_cuda's DT_NEEDED
    binds to the one loaded first under that soname. dlsym on libtorch_cuda's handle
    (its dependency scope), else on the global scope, then dladdr, names the file.
    """
    dladdr = _dladdr()
    if dladdr is None:
        return {}, "dladdr is not available"
    handles = []
    for path in maps or []:
        if os.path.basename(path).startswith("libtorch_cuda"):
            try:
                handles.append(("libtorch_cuda's dependencies", ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)))
            except OSError:
                pass
    try:
        handles.append(("the global scope", ctypes.CDLL(None)))
    except OSError:
        pass
    out = {}
    for kind, symbol in _SYMBOLS.items():
        for scope, handle in handles:
            try:
                fn = getattr(handle, symbol)
            except AttributeError:
                continue
            info = _DlInfo()
            if not dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) or not info.dli_fname:
                continue
            out[kind] = {"path": os.path.realpath(info.dli_fname.decode(errors="replace")), "scope": scope}
            break
    return out, None


def libraries_report():
    maps, why = mapped_libraries()
    out = {"stage": "libraries", "maps": maps, "maps_error": why, "libs": []}
    for path in maps or []:
        if lib_kind(path) in ("nccl", "cudnn", "cudart", "cuda"):
            out["libs"].append(lib_version(path))
    out["effective"], out["effective_error"] = effective_libraries(maps)
    if not any(lib_kind(p) == "cuda" for p in maps or []):
        # The driver's CUDA ceiling (cuDriverGetVersion: 1000*major + 10*minor, e.g.
        # 11040 = 11.4) needs no GPU and no cuInit; libcuda comes with the driver.
        drv = lib_version_by_name("libcuda.so.1")
        out["libs"].append(drv)
    return out


def lib_version_by_name(name):
    out = lib_version(name)
    maps, _ = mapped_libraries()
    for path in maps or []:
        if os.path.basename(path).startswith("libcuda.so"):
            out["path"] = path
            break
    return out


def main(argv):
    # Python put this script's directory first on sys.path; it is torchfit's
    # package directory, which must not shadow anything the env would import.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    mode = argv[1] if len(argv) > 1 else "report"
    if mode == "libversions":
        emit({"stage": "libversions", "libs": [lib_version(p) for p in argv[2:]]})
        return
    emit(metadata_report())
    emit({"stage": "importing torch"})
    emit(torch_report())
    emit(libraries_report())
    emit({"stage": "done"})


if __name__ == "__main__":
    try:
        main(sys.argv)
    except BaseException as exc:  # report, then leave without running teardown
        emit({"stage": "worker-error", "error": f"{type(exc).__name__}: {exc}", "traceback": tail(traceback.format_exc())})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
