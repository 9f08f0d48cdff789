"""torchfit doctor's worker: run by the *target* environment's Python, never imports torchfit.

    python doctor_worker.py report            what `import torch` really loads, and why
    python doctor_worker.py libversions PATH  the version a shared library reports of itself

It writes records on stdout (torchfit_runtime's protocol: MARKER, then one JSON
object per line). `report` writes, in order: `metadata` (interpreter, LD_*
variables, the torch / nvidia-* / cuda-* distributions with their WHEEL,
INSTALLER and shared-library files), a `stage` heartbeat "importing torch",
`torch` (version, CUDA build, arch list, compiled and runtime NCCL/cuDNN, CUDA
initialisation messages), `libraries` (the libraries mapped into this process,
/proc/self/maps, with the version each reports through ctypes: ncclGetVersion,
cudnnGetVersion, cudaRuntimeGetVersion, cuDriverGetVersion) and `done`. The
metadata record comes before the import, so a crash inside `import torch` still
leaves it behind, and the heartbeat names the step that was running.

`torch.cuda.nccl.version()` reports the NCCL torch was *compiled* against, not the
one that runs (measured on the H200 host: LD_PRELOAD of a system libnccl 2.28.3 gave
NCCL's banner 2.28.3 while torch said (2, 28, 9)), so the runtime truth is read
from the mapped file itself.

Runs on any Python from 3.6 on (no torchfit, no third-party imports; so does
torchfit_runtime), ends with os._exit(0) after flushing, so an interpreter-teardown
crash of torch cannot turn a finished report into a failure.
"""

import os
import sys
import traceback
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchfit_runtime as rt

# Libraries whose mapping says something about the stack; everything else in
# /proc/self/maps (libc, Python's extension modules) is left out of the report.
_INTERESTING = (
    "nccl",
    "cudnn",
    "cudart",
    "libcuda.",
    "cublas",
    "nvidia-ml",
    "torch",
    "c10",
    "nvrtc",
)


def tail(text, lines=20):
    return "\n".join(str(text).splitlines()[-lines:])


def mapped_libraries():
    """Shared objects mapped into this process, in mapping order, de-duplicated."""
    regions, why = rt.load_regions()
    if why:
        return None, why
    return rt.mapped_paths(
        regions,
        lambda p: ".so" in p and any(key in os.path.basename(p) for key in _INTERESTING),
    ), None


def distributions():
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        try:
            import importlib_metadata as metadata  # type: ignore[no-redef]
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
        if not (
            key in ("torch", "pytorch", "triton")
            or key.startswith("nvidia-")
            or key.startswith("cuda-")
        ):
            continue
        entry: dict[str, Any] = {"name": name, "version": dist.version}  # local: not evaluated (3.6)
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
                    if rt.lib_kind(str(f)) is not None:
                        libs.append(os.path.normpath(str(dist.locate_file(f))))
            except Exception:
                pass
        entry["libs"] = libs
        out.append(entry)
    return out, None


def metadata_report():
    dists, why = distributions()
    return {
        "python": {
            "executable": sys.executable,
            "version": "{}.{}.{}".format(*sys.version_info[:3]),
            "prefix": sys.prefix,
            "base_prefix": getattr(sys, "base_prefix", sys.prefix),
            "path": [p for p in sys.path if p],
        },
        "env": {
            k: os.environ.get(k)
            for k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "CONDA_PREFIX", "VIRTUAL_ENV")
        },
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
    out: dict[str, Any] = {"imported": False}  # local: not evaluated (3.6)
    try:
        import torch
    except Exception as exc:
        out["error"] = {
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": tail(traceback.format_exc()),
        }
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
                devices.append(
                    {
                        "index": i,
                        "name": name,
                        "capability": list(cap) if cap else None,
                        "error": err,
                    }
                )
        out["devices"] = devices
    out["warnings"] = [str(w.message) for w in caught]
    return out


def effective_libraries(maps):
    """Which mapped copy a symbol resolves to, as libtorch_cuda sees it.

    torch >= 2.5 preloads the nvidia-* libraries by path (_preload_cuda_deps), so with
    LD_PRELOAD of another libnccl two copies are mapped; libtorch_cuda's DT_NEEDED
    binds to the one loaded first under that soname. dlsym on libtorch_cuda's handle
    (its dependency scope), else on the global scope, then dladdr, names the file.
    """
    if not rt.has_dladdr():
        return {}, "dladdr is not available"
    regions, _ = rt.load_regions()
    scopes = rt.torch_cuda_scopes(regions) + rt.global_scope()
    out = {}
    for kind in ("nccl", "cudnn", "cudart"):
        found = rt.bound_symbol(rt.VERSION_CALLS[kind][0], scopes)
        if found is not None:
            out[kind] = {"path": found[1], "scope": found[2]}
    return out, None


def libraries_report():
    maps, why = mapped_libraries()
    out = {"maps": maps, "maps_error": why, "libs": []}
    for path in maps or []:
        if rt.lib_kind(path) in ("nccl", "cudnn", "cudart", "cuda"):
            out["libs"].append(rt.lib_version(path))
    out["effective"], out["effective_error"] = effective_libraries(maps)
    if not any(rt.lib_kind(p) == "cuda" for p in maps or []):
        # The driver's CUDA ceiling (cuDriverGetVersion: 1000*major + 10*minor, e.g.
        # 11040 = 11.4) needs no GPU and no cuInit; libcuda comes with the driver.
        drv = lib_version_by_name("libcuda.so.1")
        out["libs"].append(drv)
    return out


def lib_version_by_name(name):
    out = rt.lib_version(name)
    maps, _ = mapped_libraries()
    for path in maps or []:
        if os.path.basename(path).startswith("libcuda.so"):
            out["path"] = path
            break
    return out


def main(argv, rep):
    # Python put this script's directory first on sys.path; it is torchfit's
    # package directory, which must not shadow anything the env would import.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    mode = argv[1] if len(argv) > 1 else "report"
    if mode == "libversions":
        rep.line("libversions", libs=[rt.lib_version(p) for p in argv[2:]])
        return
    rep.line("metadata", **metadata_report())
    rep.stage("importing torch")
    rep.line("torch", **torch_report())
    rep.line("libraries", **libraries_report())
    rep.line("done")


if __name__ == "__main__":
    reporter = rt.Reporter(None)
    try:
        main(sys.argv, reporter)
    except BaseException as exc:  # report, then leave without running teardown
        reporter.error(exc)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
