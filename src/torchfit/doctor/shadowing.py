"""Library shadowing: which libnccl / libcudnn / libcudart torch really runs, and what
else on the loader path could take their place.

The runtime truth is the worker's /proc/self/maps after `import torch`, with each
library's own version call (ncclGetVersion, cudnnGetVersion, cudaRuntimeGetVersion).
It is compared with what the environment's packages (nvidia-nccl-cuXX, ...) provide
and what torch was compiled against. Other copies are looked for where the loader
could find them: LD_PRELOAD, LD_LIBRARY_PATH, a conda env's lib/ and `ldconfig -p`.

pip wheels link libtorch_cuda.so with DT_RPATH=$ORIGIN/../../nvidia/nccl/lib, and
DT_RPATH wins over LD_LIBRARY_PATH (measured on the H200 host, docs/architecture.md, Contracts), so a
system libnccl beside the wheel's is a hazard (anything loading libnccl.so.2 by
name, a RUNPATH build) rather than a failure; LD_PRELOAD does replace it.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from torchfit.compat.judgements import judge_runtime_library
from torchfit.doctor import parse
from torchfit.doctor.build import loaded_lib, mapped_libs, torch_info
from torchfit.doctor.context import Context, decode_lib
from torchfit.doctor.model import Verdict, check, fail, ok, unknown, warn
from torchfit.text import first_line
from torchfit.workers.records import DistRecord, DoctorTorchRecord
from torchfit.workers.torchfit_runtime import lib_kind


class Kind(NamedTuple):
    kind: str  # torchfit_runtime.lib_kind value
    name: str  # for people
    package: str  # regex of the env's package names
    precision: int  # how many version parts must agree


NCCL = Kind("nccl", "NCCL", r"nvidia-nccl(-cu[0-9]+)?", 3)
CUDNN = Kind("cudnn", "cuDNN", r"nvidia-cudnn(-cu[0-9]+)?", 3)
CUDART = Kind("cudart", "CUDA runtime", r"nvidia-cuda-runtime(-cu[0-9]+)?", 2)


def _real(path: str) -> str:
    return os.path.realpath(path)


def _norm(name: object) -> str:
    return str(name or "").lower().replace("_", "-")


def env_packages(ctx: Context, kind: Kind) -> list[DistRecord]:
    return [d for d in ctx.worker.distributions if re.fullmatch(kind.package, _norm(d.get("name")))]


def required_by_torch(ctx: Context, kind: Kind) -> str | None:
    """The package name (and pin) torch's metadata asks for: "nvidia-nccl-cu13==2.28.9"."""
    for dist in ctx.worker.dist("torch"):
        for req in dist.get("requires") or []:
            m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(==\s*[0-9][0-9A-Za-z.]*)?", str(req))
            if m and re.fullmatch(kind.package, _norm(m.group(1))):
                return _norm(m.group(1)) + (m.group(2).replace(" ", "") if m.group(2) else "")
    return None


def package_lib(dist: DistRecord, kind: Kind) -> str | None:
    libs = [p for p in dist.get("libs") or [] if lib_kind(str(p)) == kind.kind and ".so." in os.path.basename(str(p))]
    return str(libs[0]) if libs else None


def conda_prefix(ctx: Context) -> str | None:
    prefix = ctx.worker.prefix
    if prefix and os.path.isdir(os.path.join(prefix, "conda-meta")):
        return prefix
    return None


def split_paths(value: str | None) -> list[str]:
    return [p for p in re.split(r"[:\s]+", value or "") if p]


class Candidate(NamedTuple):
    path: str
    via: str


def loader_candidates(ctx: Context, kind: Kind) -> list[Candidate]:
    """Every copy of the library the loader could pick, with how it would get there."""
    out: list[Candidate] = []
    for p in split_paths(ctx.environ.get("LD_PRELOAD")):
        if lib_kind(p) == kind.kind:
            out.append(Candidate(p, "LD_PRELOAD"))
    dirs = [(d, "LD_LIBRARY_PATH") for d in split_paths(ctx.environ.get("LD_LIBRARY_PATH"))]
    prefix = conda_prefix(ctx)
    if prefix:
        dirs.append((os.path.join(prefix, "lib"), "the conda env's lib/"))
    for d, via in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if lib_kind(name) == kind.kind and re.search(r"\.so\.[0-9]+$", name):
                out.append(Candidate(os.path.join(d, name), via))
    entries, _ = ctx.ldconfig
    for e in entries:
        if lib_kind(e.soname) == kind.kind and re.search(r"\.so\.[0-9]+$", e.soname):
            out.append(Candidate(e.path, "ldconfig -p"))
    seen: set[str] = set()
    unique = []
    for c in out:
        key = _real(c.path)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def how_loaded(ctx: Context, path: str, kind: Kind, pkg_lib: str | None) -> str:
    real = _real(path)
    if pkg_lib and _real(pkg_lib) == real:
        return "the env's package"
    for c in loader_candidates(ctx, kind):
        if _real(c.path) == real:
            return c.via
    return "torch's own search path (RPATH/RUNPATH)"


def same(a: tuple[int, ...] | None, b: tuple[int, ...] | None, n: int) -> bool | None:
    if not a or not b:
        return None
    return a[:n] == b[:n]


def older(a: tuple[int, ...] | None, b: tuple[int, ...] | None, n: int) -> bool:
    return bool(a and b and a[:n] < b[:n])


def compiled_version(t: DoctorTorchRecord, kind: Kind) -> tuple[int, ...] | None:
    if kind is NCCL:
        return parse.parse_nccl_tuple(t.get("nccl_compiled"))
    if kind is CUDNN:
        return parse.parse_cudnn_tuple(t.get("cudnn_compiled"))
    v = parse.dotted(str(t.get("cuda") or ""))
    return v[:2] if v else None


def judge(ctx: Context, kind: Kind) -> Verdict:
    t, why = torch_info(ctx)
    pkgs = env_packages(ctx, kind)
    want = required_by_torch(ctx, kind)
    pkg = next((d for d in pkgs if want and _norm(d.get("name")) == want.split("==")[0]), pkgs[0] if pkgs else None)
    pkg_lib = package_lib(pkg, kind) if pkg else None
    pkg_v = parse.dotted(str(pkg.get("version"))) if pkg else None
    pkg_text = f"the env's {pkg.get('name')} {pkg.get('version')}" if pkg else None
    others = [c for c in loader_candidates(ctx, kind) if not (pkg_lib and _real(c.path) == _real(pkg_lib))]
    if t is None:
        message = str(((ctx.worker.torch or {}).get("error") or {}).get("message", ""))
        if kind.kind in message.lower() and others:
            listed = "; ".join(f"{c.path} ({c.via})" for c in others[:3])
            return fail(
                f"import torch failed ({first_line(message, 200)}) and other {kind.name} copies are on the "
                f"loader path: {listed}",
                f"take them off the path (unset LD_PRELOAD / LD_LIBRARY_PATH entries, remove the package) so torch "
                f"loads {pkg_text or 'the one it was built with'}",
            )
        return unknown(why)
    if not t.get("cuda"):
        return ok(f"torch {t.get('version')} is not a CUDA build and loads no {kind.name}")
    path, version, how = loaded_lib(ctx, kind.kind)
    compiled = compiled_version(t, kind)
    expected = pkg_v or compiled
    err = str(t.get("cudnn_error") or "") if kind is CUDNN else ""
    parts = []
    status = "ok"
    fix = None
    if path is None:
        parts.append(f"no {kind.name} library is mapped after import torch (linked statically, or loaded later)")
    else:
        via = how_loaded(ctx, path, kind, pkg_lib)
        parts.append(f"torch loads {path} ({kind.name} {parse.fmt_version(version)}, {how}) via {via}")
        idle = [lib for lib in mapped_libs(ctx, kind.kind) if _real(str(lib["path"])) != _real(path)]
        if idle:
            shown = ", ".join(f"{lib['path']} ({kind.name} {parse.fmt_version(decode_lib(lib, str(lib['path']))[0])})"
                              for lib in idle[:2])
            parts.append(f"also mapped but not the one torch's symbols resolve to: {shown}")
        if compiled:
            parts.append(f"torch was built against {kind.name} {parse.fmt_version(compiled)}")
        if pkg_lib and via != "the env's package":
            parts.append(f"{pkg_text} is not the one that runs")
            # The verdict verify's nccl check gives the same library (compat.judgements).
            judged, _ = judge_runtime_library(kind.name, version, expected)
            status = "warn" if judged == "ok" else judged
            fix = (
                f"make torch load {pkg_lib or 'its own library'}: remove {path} from {via}"
                + (" (unset LD_PRELOAD or drop that entry)" if via == "LD_PRELOAD" else "")
                + (" (drop that directory from LD_LIBRARY_PATH)" if via == "LD_LIBRARY_PATH" else "")
                + "; to pin a different one on purpose, install the matching package version instead"
            )
        elif compiled and judge_runtime_library(kind.name, version, compiled)[0] == "fail":
            status = "fail"
            fix = f"install the {kind.name} torch was built against: {want or 'the version in torch metadata'}"
    if err and ("incompatib" in err or "mismatch" in err):
        parts.append(f"torch.backends.cudnn.version() raised: {first_line(err, 300)}")
        status = "fail"
        fix = fix or "see above: take the other libcudnn off LD_LIBRARY_PATH / the conda env's lib/"
    # Copies the loader could pick that differ from the one that should run.
    if others:
        paths = [c.path for c in others]
        versions = ctx.lib_versions(paths)
        differing = []
        for c in others:
            v, _how = versions.get(c.path, (None, None))
            if path and _real(c.path) == _real(path):
                continue
            if expected and v and same(v, expected, kind.precision):
                continue
            differing.append(f"{c.path} -> {os.path.basename(_real(c.path))} ({kind.name} {parse.fmt_version(v)}, {c.via})")
        if differing:
            parts.append(
                f"also on the loader path: {'; '.join(differing[:3])}"
                + (f" beside {pkg_text}" if pkg_text else "")
                + ". torch's pip wheel finds its own through DT_RPATH; programs and builds that load "
                "the library by name (RUNPATH, LD_LIBRARY_PATH ordering, other frameworks) get this copy"
            )
            if status == "ok":
                status = "warn"
                fix = (
                    "nothing breaks while torch loads its own (doctor and verify show which file runs); "
                    "to remove the hazard uninstall the system package or keep its directory off the loader "
                    f"path, or pin explicitly with LD_PRELOAD={pkg_lib or '<the library you want>'}"
                )
    evidence = "; ".join(parts)
    if status == "fail":
        return fail(evidence, fix)
    if status == "warn":
        return warn(evidence, fix)
    return ok(evidence)


@check("nccl-shadowed", "shadowing", "torch runs the NCCL it should, and no other libnccl lurks")
def check_nccl(ctx: Context) -> Verdict:
    return judge(ctx, NCCL)


@check("cudnn-shadowed", "shadowing", "torch runs the cuDNN it should, and no other libcudnn lurks")
def check_cudnn(ctx: Context) -> Verdict:
    return judge(ctx, CUDNN)


@check("cudart-shadowed", "shadowing", "torch runs the CUDA runtime it should, and no other libcudart lurks")
def check_cudart(ctx: Context) -> Verdict:
    return judge(ctx, CUDART)


@check("nccl-cu12-and-cu13", "shadowing", "one nvidia-nccl package per environment")
def check_nccl_families(ctx: Context) -> Verdict:
    if not ctx.worker.meta:
        return unknown(f"cannot list the env's packages ({ctx.worker.cause})")
    dists = [d for d in ctx.worker.distributions if re.fullmatch(r"nvidia-nccl-cu[0-9]+", _norm(d.get("name")))]
    if len(dists) < 2:
        if dists:
            return ok(f"one NCCL package: {dists[0].get('name')} {dists[0].get('version')}")
        return ok("no nvidia-nccl-cuXX package in this env")
    listed = ", ".join(f"{d.get('name')} {d.get('version')}" for d in dists)
    want = required_by_torch(ctx, NCCL)
    keep = want or "the one torch requires"
    drop = [str(d.get("name")) for d in dists if not want or _norm(d.get("name")) != want.split("==")[0]]
    files = sorted({str(p) for d in dists for p in d.get("libs") or [] if lib_kind(str(p)) == "nccl"})
    on_disk = ""
    if files:
        versions = ctx.lib_versions(files[:2])
        v, how = versions.get(files[0], (None, None))
        on_disk = f"; {files[0]} on disk is NCCL {parse.fmt_version(v)} ({how})"
    return fail(
        f"{listed} are all installed: they write the same nvidia/nccl/lib/libnccl.so.2, so the last one "
        f"installed wins{on_disk}" + (f"; torch requires {want}" if want else "")
        + " (\"undefined symbol: ncclCommResume\", pytorch/pytorch#186591)",
        f"`pip uninstall -y {' '.join(drop)}` then `pip install --force-reinstall --no-deps {keep}` "
        "(uninstalling one deletes the file both share)",
    )


def _conda_torch(prefix: str) -> list[tuple[str, str, str]]:
    """(name, version, file) of the conda packages that carry torch in PREFIX/conda-meta."""
    out: list[tuple[str, str, str]] = []
    try:
        names = sorted(os.listdir(os.path.join(prefix, "conda-meta")))
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        parts = name[: -len(".json")].rsplit("-", 2)
        if len(parts) == 3 and parts[0] in ("pytorch", "libtorch", "pytorch-gpu", "pytorch-cpu"):
            out.append((parts[0], parts[1], name))
    return out


@check("conda-and-pip-torch", "shadowing", "torch comes from one installer (conda or pip), not both")
def check_conda_and_pip(ctx: Context) -> Verdict:
    prefix = ctx.worker.prefix
    if not prefix:
        return unknown(f"cannot tell the env's prefix ({ctx.worker.cause})")
    conda = _conda_torch(prefix)
    torches = ctx.worker.dist("torch")
    pip = [d for d in torches if str(d.get("installer") or "").lower() not in ("", "conda")]
    if not os.path.isdir(os.path.join(prefix, "conda-meta")):
        return ok(f"{prefix} is not a conda env")
    if conda and (pip or len(torches) > 1):
        c = conda[0]
        p = (pip or torches)[0]
        return fail(
            f"conda package {c[0]} {c[1]} (conda-meta/{c[2]}) and a {p.get('installer') or 'second'}-installed "
            f"torch {p.get('version')} ({os.path.basename(str(p.get('path')))}) share {prefix}: each overwrote the "
            "other's files in site-packages/torch",
            "keep one: `pip uninstall torch` then `conda install --force-reinstall pytorch` to restore conda's "
            "files, or remove the conda one (`conda remove pytorch`) and reinstall torch with pip in a fresh env",
        )
    if conda:
        return ok(f"torch from conda only ({conda[0][0]} {conda[0][1]})")
    if pip:
        return ok(f"torch from {pip[0].get('installer')} only ({pip[0].get('version')}); no conda pytorch package")
    return ok(f"conda env {prefix} without torch packages")
