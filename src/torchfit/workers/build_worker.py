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
"""

import importlib.util
import os
import sys
from importlib import metadata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchfit_runtime as rt


def torch_version_file(out):
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        out["torch_error"] = "torch is not installed in this env"
        return
    path = os.path.join(next(iter(spec.submodule_search_locations)), "version.py")
    ns = {}
    try:
        with open(path) as fh:
            exec(compile(fh.read(), path, "exec"), ns)
        out["torch"] = {k: ns.get(k) for k in ("__version__", "cuda", "hip", "git_version")}
    except Exception as exc:
        out["torch_error"] = f"{path}: {exc}"


def bound_nccl(regions):
    """The ncclGetVersion torch calls, with the file dladdr names and its answer."""
    scopes = rt.global_scope() + rt.torch_cuda_scopes(regions)
    found = rt.bound_symbol("ncclGetVersion", scopes, regions, real=False)
    if found is None:
        return None
    fn, path, _scope = found
    code, rc = rt.version_call(fn, "ncclGetVersion")
    return {"library": path, "code": code, "rc": rc}


def wheel_nccl():
    """libnccl.so.2 of the nvidia-nccl wheel, when one is installed."""
    nv = importlib.util.find_spec("nvidia")
    for loc in nv.submodule_search_locations if nv and nv.submodule_search_locations else []:
        cand = os.path.join(loc, "nccl", "lib", "libnccl.so.2")
        if os.path.exists(cand):
            return cand
    return ""


def probe(argv):
    out = {"python": "{}.{}.{}".format(*sys.version_info[:3]), "prefix": sys.prefix, "dists": {}}
    for d in metadata.distributions():
        name = d.metadata["Name"]
        if name:
            out["dists"][name] = d.version
    torch_version_file(out)
    lib = argv[1] if len(argv) > 1 else ""
    if len(argv) > 2 and argv[2] == "import":
        try:
            import torch  # noqa: F401

            out["import"] = {"ok": True}
        except BaseException as exc:
            out["import"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
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
            code, rc = rt.version_call(lib, "ncclGetVersion")
            out["nccl"] = {"library": lib, "code": code, "rc": rc}
        except (OSError, AttributeError) as exc:
            out["nccl"] = {"library": lib, "error": str(exc)}
    return out


if __name__ == "__main__":
    rt.Reporter(None).line("build", **probe(sys.argv))
