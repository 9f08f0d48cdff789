"""The torch build against the host: does it import, is it a GPU build, can this driver
run it, does its arch list cover these GPUs, can this glibc load it.

Everything about torch comes from the worker, which imports torch in the target
environment; the driver's CUDA ceiling comes from libcuda itself
(cuDriverGetVersion), from torch's own message or from nvidia-smi's banner, in
that order; floors come from the compatibility matrix, never from a table here.
"""

from __future__ import annotations

import os
import re
from shlex import quote as _quote

from torchfit.compat import versions
from torchfit.compat.judgements import judge_torch_build
from torchfit.compat.matrix import CudaInfo
from torchfit.compat.rules import cuda_driver_fit
from torchfit.compat.tags import glibc_of_tag, parse_arch_flags
from torchfit.compat.versions import Dotted, coverage
from torchfit.doctor import parse
from torchfit.doctor.context import Context, decode_lib
from torchfit.doctor.model import Verdict, check, fail, ok, unknown, warn
from torchfit.errors import BadInput
from torchfit.lock.closure import DAMAGED_FIX, format_mismatches
from torchfit.text import first_line
from torchfit.workers.records import DistRecord, DoctorTorchRecord, LibVersionRecord

RESOLVE = "`torchfit resolve` picks the build that fits this host (then `torchfit install`)"


def torch_info(ctx: Context) -> tuple[DoctorTorchRecord | None, str]:
    """The worker's torch stage when torch imported, else (None, why not)."""
    w = ctx.worker
    t = w.torch
    if t is None:
        return None, f"nothing known about torch: {w.cause or 'the worker reported nothing'} (see torch-import)"
    if not t.get("imported"):
        return None, "needs torch, which does not import (see torch-import)"
    return t, ""


def build_label(t: DoctorTorchRecord) -> str:
    if t.get("cuda"):
        return f"CUDA {t['cuda']} build"
    if t.get("hip"):
        return f"ROCm {t['hip']} build"
    return "CPU-only build"


@check("torch-import", "build", "import torch works in the target environment")
def check_torch_import(ctx: Context) -> Verdict:
    w = ctx.worker
    if w.python is None:
        return unknown(w.cause or "no Python to inspect", "pass --python PATH or --env PREFIX")
    t = w.torch
    if t is None:
        if w.last_stage == "importing torch":
            return fail(
                f"{w.python} died while importing torch: {w.cause}",
                "a library loaded ahead of torch's own is the usual cause: see the shadowing checks "
                "(LD_PRELOAD, LD_LIBRARY_PATH)",
            )
        # The interpreter was given (or found) and could not be inspected: a failure,
        # not an unknown, so "Nothing failed" (exit 0) is never said about it.
        return fail(
            f"cannot inspect {w.python}: {w.cause}",
            "check that it is a Python interpreter whose `import torch` returns "
            f"(try: {_quote(w.python)} -c 'import torch')",
        )
    if not t.get("imported"):
        err = t.get("error") or {}
        kind, message = str(err.get("type")), str(err.get("message", ""))
        if kind == "ModuleNotFoundError" and "'torch'" in message:
            return fail(f"torch is not installed in {w.python} ({ctx.python_source})",
                        _fix_command(ctx, "installs it again from the env's lock (nothing else replaced)") or RESOLVE)
        from torchfit.doctor.logs import explain_text

        bad = ctx.torch_files[2]
        if bad:  # torch's own files differ from its wheel: that is the fix, not the loader's search
            hint = (f"{len(bad)} of torch's own files {'differs' if len(bad) == 1 else 'differ'} from its wheel's "
                    f"RECORD (torch-files below): {_damaged_fix(ctx)}")
        else:
            hint = explain_text(message) or "see the shadowing checks below (LD_PRELOAD, LD_LIBRARY_PATH)"
        return fail(f"import torch failed in {w.python}: {kind}: {first_line(message, 400)}", hint)
    if not t.get("version"):
        # An empty or truncated torch/__init__.py imports "fine" and defines nothing.
        return fail(f"torch imports in {w.python} but is damaged: it has no torch.__version__ "
                    f"({t.get('file') or 'no torch.__file__'}); see torch-files for the files that differ",
                    _damaged_fix(ctx))
    return ok(f"torch {t.get('version')} ({build_label(t)}) from {t.get('file')} ({ctx.python_source})")


@check("torch-files", "build", "torch's files match its wheel's RECORD (hashed when torch is damaged)")
def check_torch_files(ctx: Context) -> Verdict:
    w = ctx.worker
    if w.python is None:
        return unknown(w.cause or "no Python to inspect")
    t = w.torch
    if t is not None and t.get("imported") and t.get("version"):
        return ok("torch imports and knows its version; its files are hashed only when it does not")
    record, checked, bad = ctx.torch_files
    if record is None:
        return unknown("no torch-*.dist-info/RECORD on the interpreter's path: nothing to check the files against")
    if not checked:
        return unknown(f"{record} lists no file with a hash: nothing to check the files against")
    if not bad:
        return ok(f"all {checked} files of torch with a hash match {record}")
    return fail(format_mismatches(record, checked, bad), _damaged_fix(ctx))


def _fix_command(ctx: Context, does: str) -> str | None:
    """`torchfit doctor --fix --env PREFIX` and what it does, when torchfit built the env (its
    PREFIX/pylock.toml: the lock the repair restores), else None."""
    prefix = ctx.worker.prefix
    if not prefix or not os.path.isfile(os.path.join(prefix, "pylock.toml")):
        return None
    return f"`torchfit doctor --fix --env {_quote(prefix)}` {does}"


def _damaged_fix(ctx: Context) -> str:
    """The repair of torch's damaged files: doctor --fix in an env torchfit built, else by hand."""
    fix = _fix_command(ctx, "reinstalls them from the env's lock")
    return f"{fix}; if they differ again, {DAMAGED_FIX}" if fix else DAMAGED_FIX


@check("torch-cpu-build", "build", "a GPU host has a GPU build of torch")
def check_cpu_build(ctx: Context) -> Verdict:
    t, why = torch_info(ctx)
    if t is None:
        return unknown(why)
    if t.get("cuda") or t.get("hip"):
        return ok(f"torch {t.get('version')} is a {build_label(t)}")
    # The judgement verify makes too (compat.judgements), so the two cannot disagree.
    verdict = judge_torch_build(ctx.gpu_host, False, str(t.get("version")))
    if verdict.status == "fail":
        said = t.get("init_error") or "Torch not compiled with CUDA enabled"
        return fail(f"{verdict.summary}: torch.cuda says \"{said}\"", verdict.fix)
    if verdict.status == "unknown":
        return fail(verdict.summary, "the driver checks above name the broken layer; once nvidia-smi lists "
                                     "the GPUs, `torchfit resolve` picks the GPU build for them")
    return ok(verdict.summary)


def driver_cuda_ceiling(ctx: Context, t: DoctorTorchRecord) -> tuple[tuple[int, int] | None, str]:
    """The newest CUDA the driver runs, and where that was read."""
    libs = (ctx.worker.libs or {}).get("libs") or []
    for lib in libs:
        if isinstance(lib, dict) and lib.get("kind") == "cuda" and isinstance(lib.get("code"), int):
            got = versions.decode_cuda_code(lib["code"])
            if got:
                return got, f"cuDriverGetVersion() = {lib['code']} in {lib.get('path')}"
    for text in [str(t.get("init_error") or ""), *[str(x) for x in t.get("warnings") or []]]:
        code = parse.parse_found_version(text)
        if code is not None:
            got = versions.decode_cuda_code(code)
            if got:
                return got, f"torch: \"driver on your system is too old (found version {code})\""
    banner = parse.parse_smi_banner(ctx.smi.stdout) if not ctx.smi.cause else parse.SmiBanner(None, None)
    if banner.cuda:
        got_v = parse.dotted(banner.cuda)
        if got_v and len(got_v) >= 2:
            return (got_v[0], got_v[1]), f"nvidia-smi: \"CUDA Version: {banner.cuda}\""
    return None, ""


def cuda_info(ctx: Context, cuda: str) -> CudaInfo | None:
    matrix, _ = ctx.matrix
    return matrix.cuda_info(cuda) if matrix is not None else None


def _driver(text: str | None) -> Dotted | None:
    try:
        return Dotted.parse(text) if text else None
    except BadInput:
        return None


@check("driver-too-old", "build", "the driver can run this CUDA build")
def check_driver_too_old(ctx: Context) -> Verdict:
    t, why = torch_info(ctx)
    if t is None:
        return unknown(why)
    if not t.get("cuda"):
        return ok(f"torch {t.get('version')} is not a CUDA build: no driver floor")
    build = parse.dotted(str(t["cuda"]))
    if not build or len(build) < 2:
        return unknown(f"torch reports CUDA {t['cuda']!r}, which is not a version")
    want = (build[0], build[1])
    ceiling, source = driver_cuda_ceiling(ctx, t)
    info = cuda_info(ctx, f"{want[0]}.{want[1]}")
    driver = ctx.nvidia.driver_version or ctx.kernel_module_version
    mvc = getattr(info, "mvc_driver", None)
    full = getattr(info, "toolkit_driver", None)
    floors = []
    if mvc:
        floors.append(f">= {mvc} (CUDA {want[0]}.x minor-version-compatibility floor)")
    if full:
        floors.append(f">= {full} for the full CUDA {want[0]}.{want[1]} toolkit (PTX JIT)")
    fix = (
        f"upgrade the NVIDIA driver ({'; '.join(floors) or 'to one whose CUDA version is at least ' + str(t['cuda'])}), "
        f"or install a torch built for a CUDA this driver runs: {RESOLVE}"
    )
    said = str(t.get("init_error") or "")
    too_old = parse.parse_found_version(said) is not None or any(
        parse.parse_found_version(str(w)) is not None for w in t.get("warnings") or []
    )
    # The minor-version-compatibility rule is compat's, the one the resolver applies.
    fit = cuda_driver_fit(info, _driver(driver)) if info is not None else "unknown"
    if ceiling is None:
        if fit == "too-old":
            return fail(f"torch {t.get('version')} needs driver {floors[0]}; this host runs {driver}", fix)
        if fit in ("full", "mvc"):
            return ok(f"driver {driver} >= {mvc or full}, the CUDA {want[0]}.x floor of torch {t.get('version')}")
        return unknown("the driver's CUDA version is unknown (no libcuda, no nvidia-smi banner)")
    explain = f"{ceiling[0]}.{ceiling[1]} ({source}; cudaDriverGetVersion encodes 1000*major + 10*minor, so 11040 is 11.4)"
    if ceiling >= want and not too_old:
        return ok(f"the driver runs CUDA up to {ceiling[0]}.{ceiling[1]} ({source}) >= torch's CUDA {t['cuda']}")
    if ceiling[0] == want[0] and not too_old:
        if fit != "too-old":
            return warn(
                f"torch's CUDA {t['cuda']} is newer than the driver's {explain}; it runs under CUDA "
                "minor-version compatibility, without PTX JIT and the newest CUDA APIs",
                fix,
            )
    return fail(
        f"torch {t.get('version')} is built for CUDA {t['cuda']}, but the driver runs at most CUDA {explain}"
        + (f"; torch says: {first_line(said, 200)}" if said else ""),
        fix,
    )


@check("arch-not-covered", "build", "torch has kernels for every GPU's architecture")
def check_arch(ctx: Context) -> Verdict:
    t, why = torch_info(ctx)
    if t is None:
        return unknown(why)
    if not t.get("cuda"):
        return ok(f"torch {t.get('version')} is not a CUDA build (see torch-cpu-build)")
    gpus = [(g, g.arch) for g in ctx.gpus if g.arch is not None]
    if not gpus:
        return ok("no NVIDIA GPU with a known compute capability to cover") if not ctx.gpus else unknown(
            "nvidia-smi did not report the GPUs' compute capability"
        )
    archs = parse_arch_flags(t.get("arch_flags"))
    if not archs:
        return unknown(f"torch reported no arch list ({t.get('arch_error') or t.get('arch_flags')!r})")
    flags = t.get("arch_flags")
    listed = " ".join(flags.split()) if isinstance(flags, str) else str(flags)
    missing, jit, native, missing_sm = [], [], [], []
    for g, arch in gpus:
        cov = coverage(arch, archs)
        label = f"GPU {g.index} {g.name} ({arch.sm})"
        if cov.kind == "none":
            missing.append(label)
            missing_sm.append(arch.sm)
        elif cov.kind == "ptx":
            jit.append(f"{label} via PTX {cov.via}")
        else:
            native.append(f"{arch.sm} via {cov.via}")
    if missing:
        return fail(
            f"{'; '.join(sorted(set(missing)))}: not in torch {t.get('version')}'s arch list ({listed}); "
            f"torch says \"... with CUDA capability {missing_sm[0]} is not compatible with the current PyTorch "
            "installation\" and kernels fail with \"no kernel image is available for execution on the device\"",
            f"install a torch build whose arch list covers these GPUs: {RESOLVE}",
        )
    if jit:
        return warn(
            f"{'; '.join(jit)}: no native code, kernels are JIT-compiled from PTX on first use "
            "(slow start; needs a driver at least as new as the build's toolkit)",
            f"a build with native code for these GPUs starts faster: {RESOLVE}",
        )
    return ok(f"{', '.join(sorted(set(native)))} (arch list: {listed})")


def torch_dist(ctx: Context) -> DistRecord | None:
    dists = ctx.worker.dist("torch")
    return dists[0] if dists else None


def matrix_glibc_floor(ctx: Context, version: str, arch: str) -> tuple[tuple[int, ...] | None, str]:
    """The glibc a torch release really needs, from the matrix (2.0-2.6 wheels say
    manylinux1 but were built on CentOS 7, so need 2.17)."""
    matrix, why = ctx.matrix
    if matrix is None:
        return None, why or ""
    base, _, local = version.partition("+")
    builds = [b for b in matrix.builds if str(b.torch) == base]
    if not builds:
        return None, f"torch {base} is not in the matrix"
    chosen = [b for b in builds if b.variant == local] or [b for b in builds if b.pypi_default] or builds
    floors = [b.glibc_for(arch) for b in chosen if b.glibc_for(arch) is not None]
    if not floors:
        return None, f"the matrix does not know torch {base}'s glibc floor"
    best = max(floors)
    return tuple(best.parts), f"matrix.toml:{chosen[0].line}"


@check("glibc-too-old", "build", "the host's glibc can load the installed torch wheel")
def check_glibc(ctx: Context) -> Verdict:
    dist = torch_dist(ctx)
    t = ctx.worker.torch or {}
    err = str((t.get("error") or {}).get("message", ""))
    m = re.search(r"version `GLIBC_([0-9.]+)' not found", err)
    if dist is None:
        if m:
            return fail(f"import torch: {first_line(err, 300)}", "use a host with a newer glibc, or an older torch")
        return unknown(f"no torch distribution found in the env ({ctx.worker.cause or 'not installed'})")
    tags = parse.parse_wheel_tags(str(dist.get("wheel") or ""))
    floors = [f for f in (glibc_of_tag(tag) for tag in tags) if f]
    version = str(dist.get("version") or "")
    arch = "aarch64" if any(tag.endswith("aarch64") for tag in tags) else "x86_64"
    need: tuple[int, ...] | None = min(floors) if floors else None
    source = f"wheel tag {', '.join(tags)}" if tags else "no wheel tag"
    real, real_src = matrix_glibc_floor(ctx, version, arch)
    if real and (need is None or real > need) and tags and any(tag.startswith("manylinux") for tag in tags):
        need, source = real, f"{source}; the real floor of torch {version} is {parse.fmt_version(real)} ({real_src})"
    host, why = ctx.glibc
    if m:
        return fail(
            f"import torch: {first_line(err, 300)} (host glibc {host or 'unknown'}; {source})",
            "this wheel needs a newer glibc: use a newer OS image, or a torch release built for this glibc "
            f"({RESOLVE})",
        )
    if need is None:
        return ok(f"torch {version} has no manylinux tag ({source}): built for this system, not from PyPI")
    if host is None:
        return unknown(f"torch {version} needs glibc >= {parse.fmt_version(need)} ({source}); the host's glibc is {why}")
    host_v = parse.dotted(host)
    if host_v is None:
        return unknown(f"the host's glibc {host!r} is not a version")
    if host_v < need:
        return fail(
            f"glibc {host} < {parse.fmt_version(need)}, which torch {version} needs ({source}); "
            f"import fails with \"version `GLIBC_{parse.fmt_version(need)}' not found\"",
            f"use an OS with glibc >= {parse.fmt_version(need)}, or install a torch release built for glibc {host}: "
            f"{RESOLVE} (it reads glibc from this host)",
        )
    return ok(f"glibc {host} >= {parse.fmt_version(need)} ({source})")


def mapped_libs(ctx: Context, kind: str) -> list[LibVersionRecord]:
    """The worker's mapped libraries of `kind` (absolute paths), in /proc/self/maps order."""
    libs = (ctx.worker.libs or {}).get("libs") or []
    return [lib for lib in libs if isinstance(lib, dict) and lib.get("kind") == kind
            and str(lib.get("path", "")).startswith("/")]


def loaded_lib(ctx: Context, kind: str) -> tuple[str | None, tuple[int, ...] | None, str]:
    """The library of `kind` torch's symbols resolve to, and its runtime version.

    When several copies are mapped (torch preloads nvidia-* libraries by path, and
    LD_PRELOAD adds another), the one the worker's dlsym/dladdr named is in effect.
    """
    libs = mapped_libs(ctx, kind)
    effective = ((ctx.worker.libs or {}).get("effective") or {}).get(kind) or {}
    chosen = None
    if isinstance(effective, dict) and effective.get("path"):
        want = os.path.realpath(str(effective["path"]))
        chosen = next((lib for lib in libs if os.path.realpath(str(lib["path"])) == want), None)
    if chosen is None and libs:
        chosen = libs[0]
    if chosen is None:
        return None, None, ""
    version, how = decode_lib(chosen, str(chosen["path"]))
    return str(chosen["path"]), version, how or ""
