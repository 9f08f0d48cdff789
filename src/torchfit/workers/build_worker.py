"""torchfit install's build check, run by the NEW environment's Python.

Usage: PYTHON build_worker.py [LIBRARY] [import]

Writes one `build` record on stdout (torchfit_runtime's protocol): the Python
version and prefix, the installed distributions, the values of torch's own
`torch/version.py` (`__version__`, `cuda`, `hip`, `git_version`: what
`torch.version` gives, read without importing torch, which takes seconds), and
the NCCL the env will load: `ncclGetVersion()` of LIBRARY (an `--nccl-lib` pin),
else of the nvidia-nccl wheel's libnccl.so.2.

With `import`, it imports torch (under the pin the caller put in LD_PRELOAD) and
reports the libnccl files mapped into the process and the one whose
ncclGetVersion torch calls: the global scope's (an LD_PRELOAD is there), else the
one libtorch_cuda.so's own dependencies provide, named by dladdr.

Standard library (and torch with `import`) only, never torchfit; Python 3.8+.
installer/buildcheck.py judges the record.

It runs on every install's critical path, so it reads files instead of importing
`importlib.metadata` (34 of its 60 ms, measured: the email parser it pulls in): the
`*.dist-info/METADATA` headers on sys.path give each distribution's name and version.
"""

import importlib
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# torchfit_runtime.MARKER (tests/workers check they agree): the runtime module itself
# (ctypes, socket, threading: ~20 ms) is imported only where NCCL is to be asked.
MARKER = "TORCHFIT-RECORD "


def runtime():
    import torchfit_runtime

    return torchfit_runtime


def site_dirs():
    """sys.path's directories, the worker's own first entry left out."""
    return [p for p in sys.path[1:] if p and os.path.isdir(p)]


def find_in_path(*parts):
    """The first sys.path directory holding PARTS (what the import system would find first)."""
    for d in site_dirs():
        cand = os.path.join(d, *parts)
        if os.path.exists(cand):
            return cand
    return None


def read_dists():
    """{Name: Version} from the headers of every *.dist-info/METADATA on sys.path (first wins)."""
    dists = {}
    for d in site_dirs():
        try:
            entries = sorted(os.listdir(d))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            name = version = None
            try:
                with open(os.path.join(d, entry, "METADATA"), encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        if not line.strip():
                            break  # the headers end at the first blank line
                        key, _, value = line.partition(":")
                        if key == "Name":
                            name = value.strip()
                        elif key == "Version":
                            version = value.strip()
            except OSError:
                continue
            if name and version and name not in dists:
                dists[name] = version
    return dists


def torch_version_file(out):
    pkg = find_in_path("torch", "__init__.py")
    if pkg is None:
        out["torch_error"] = "torch is not installed in this env"
        return
    path = os.path.join(os.path.dirname(pkg), "version.py")
    ns: dict[str, Any] = {}  # local: not evaluated (3.6)
    try:
        with open(path) as fh:
            exec(compile(fh.read(), path, "exec"), ns)
        out["torch"] = {k: ns.get(k) for k in ("__version__", "cuda", "hip", "git_version")}
    except Exception as exc:
        out["torch_error"] = f"{path}: {exc}"


def bound_nccl(regions):
    """The ncclGetVersion torch calls, with the file dladdr names and its answer."""
    rt = runtime()
    scopes = rt.global_scope() + rt.torch_cuda_scopes(regions)
    found = rt.bound_symbol("ncclGetVersion", scopes, regions, real=False)
    if found is None:
        return None
    fn, path, _scope = found
    code, rc = rt.version_call(fn, "ncclGetVersion")
    return {"library": path, "code": code, "rc": rc}


def wheel_nccl():
    """libnccl.so.2 of the nvidia-nccl wheel, when one is installed."""
    return find_in_path("nvidia", "nccl", "lib", "libnccl.so.2") or ""


def probe(argv):
    out = {"python": "{}.{}.{}".format(*sys.version_info[:3]), "prefix": sys.prefix, "dists": read_dists()}
    torch_version_file(out)
    lib = argv[1] if len(argv) > 1 else ""
    if len(argv) > 2 and argv[2] == "import":
        try:
            torch = importlib.import_module("torch")

            if getattr(torch, "__version__", None):
                out["import"] = {"ok": True}
            else:  # an empty or truncated torch/__init__.py imports and defines nothing
                out["import"] = {"ok": False, "error": "torch imports but has no torch.__version__ "
                                                      "(its __init__.py is empty or damaged)"}
        except BaseException as exc:
            out["import"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        rt = runtime()
        regions, _ = rt.load_regions()
        out["mapped"] = sorted(rt.mapped_paths(regions, lambda p: "libnccl.so" in p))
        if out["import"]["ok"]:
            try:
                out["bound"] = bound_nccl(regions)
            except Exception as exc:
                out["bound"] = {"error": str(exc)}
    if out.get("bound") and out["bound"].get("library"):
        out["nccl"] = out["bound"]
        lib = ""
    elif not lib:
        lib = wheel_nccl()
    if lib:
        try:
            code, rc = runtime().version_call(lib, "ncclGetVersion")
            out["nccl"] = {"library": lib, "code": code, "rc": rc}
        except (OSError, AttributeError) as exc:
            out["nccl"] = {"library": lib, "error": str(exc)}
    return out


def report(record):
    """One `build` record on stdout, as torchfit_runtime.Reporter(None).line writes it."""
    line = {"t": round(time.time(), 6), "kind": "build"}
    line.update(record)
    sys.stdout.write(MARKER + json.dumps(line, default=str) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    report(probe(sys.argv))
