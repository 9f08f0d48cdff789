"""The host rules of DESIGN.md as checks: does one build fit one host, and why not.

Each rule returns a `Check` (ok, and a sentence that states the fact from the
host first, then what the matrix demands). The resolver turns these into
virtual-package requirements; `--explain` and conflict reports print them.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchfit._backports import FROZEN
from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import CONSERVATIVE_GLIBC, Build, Matrix
from torchfit.compat.versions import Dotted, coverage


@dataclass(**FROZEN)
class Check:
    """The verdict of one rule for one (build, host) pair."""

    ok: bool
    text: str
    category: str  # "driver" | "gpu" | "glibc" | "platform" | "python" | "companion" | "user"


def host_platform(host: HostFacts) -> str | None:
    return host.arch


def driver_floor(build: Build, matrix: Matrix, strict: bool) -> tuple[Dotted | None, str]:
    """The driver a CUDA build needs: the family's minor-version-compatibility floor,
    or with `strict` the toolkit's own floor. Sources: NVIDIA CUDA Toolkit release
    notes Table 3; CUDA Compatibility guide, "Minor Version Compatibility"."""
    info = matrix.cuda[build.cuda or ""]
    if strict:
        return info.toolkit_driver, f"CUDA {info.version} toolkit floor"
    return info.mvc_driver, f"CUDA {info.version.split('.')[0]}.x minor-version-compatibility floor"


def has_full_driver(build: Build, host: HostFacts, matrix: Matrix) -> bool:
    """Driver at or above the toolkit's own floor: PTX JIT and the newest APIs work."""
    if build.kind != "cuda":
        return True
    floor = matrix.cuda[build.cuda or ""].toolkit_driver
    drv = host.driver
    return floor is not None and drv is not None and drv >= floor


def _unknown(host: HostFacts, fact: str) -> str:
    why = host.reasons.get(fact)
    return f"{fact} unknown on {host.name}" + (f" ({why})" if why else "")


def check_driver(build: Build, host: HostFacts, matrix: Matrix, strict: bool) -> Check:
    floor, what = driver_floor(build, matrix, strict)
    if floor is None:
        return Check(False, f"{build.variant}: {what} is unknown in the matrix", "driver")
    drv = host.driver
    if drv is None:
        return Check(False, f"{build.variant}: needs driver >= {floor}; {_unknown(host, 'driver_version')}", "driver")
    if drv < floor:
        return Check(False, f"{build.variant}: needs driver >= {floor} ({what}), {host.name} has {drv}", "driver")
    return Check(True, f"driver {drv} >= {floor} ({what})", "driver")


def check_gpus(build: Build, host: HostFacts, matrix: Matrix, want_cpu: bool) -> Check:
    """Every visible GPU must be covered by the build; a GPU host gets CPU only on request."""
    if build.kind == "cpu":
        if host.gpus and not want_cpu:
            gpus = ", ".join(g.label() for g in host.gpus)
            return Check(False, f"cpu: {host.name} has GPUs ({gpus}); a CPU build only with --variant cpu", "gpu")
        return Check(True, "no GPU to cover" if not host.gpus else "CPU build requested", "gpu")
    if build.kind == "rocm":
        amd = host.amd_gpus
        if not amd:
            return Check(False, f"{build.variant}: {host.name} has no AMD GPU", "gpu")
        if build.gfx is None:
            return Check(False, f"{build.variant}: its gfx target list is unknown in the matrix", "gpu")
        missing = [g for g in amd if g.gfx not in build.gfx]
        if missing:
            names = ", ".join(g.label() for g in missing)
            return Check(False, f"{build.variant}: {names} not in its targets ({';'.join(build.gfx)})", "gpu")
        return Check(True, f"{', '.join(sorted({g.gfx or '' for g in amd}))} in the ROCm target list", "gpu")
    nv = host.nvidia_gpus
    if not nv:
        extra = " (only AMD GPUs)" if host.amd_gpus else ""
        return Check(False, f"{build.variant}: {host.name} has no NVIDIA GPU{extra}", "gpu")
    platform = host_platform(host) or "x86_64"
    archs = build.arch_for(platform)
    if archs is None:
        return Check(False, f"{build.variant}: its {platform} arch list is unknown in the matrix", "gpu")
    full = has_full_driver(build, host, matrix)
    notes = []
    for gpu in nv:
        arch = gpu.arch
        listed = ";".join(str(a) for a in archs)
        if arch is None:
            return Check(False, f"{build.variant}: compute capability of {gpu.name} unknown", "gpu")
        cov = coverage(arch, archs)
        if cov.kind == "none":
            return Check(False, f"{build.variant}: {gpu.label()} is not in its arch list ({listed})", "gpu")
        if cov.kind == "ptx" and not full:
            floor = matrix.cuda[build.cuda or ""].toolkit_driver
            return Check(
                False,
                f"{build.variant}: {gpu.label()} only runs through PTX JIT, which needs driver >= "
                f"{floor or 'unknown'} (minor-version compatibility has no PTX JIT)",
                "gpu",
            )
        notes.append(f"{arch.sm} {'native' if cov.kind == 'native' else 'PTX'} via {cov.via}")
    return Check(True, ", ".join(sorted(set(notes))), "gpu")


def check_platform(build: Build, host: HostFacts) -> Check:
    platform = host_platform(host)
    if platform is None:
        return Check(False, f"{build.variant}: {_unknown(host, 'arch')}", "platform")
    if platform not in build.platforms:
        return Check(False, f"{build.variant}: no {platform} wheels on its index", "platform")
    return Check(True, f"{platform} wheels", "platform")


def check_glibc(build: Build, host: HostFacts) -> Check:
    platform = host_platform(host) or "x86_64"
    floor = build.glibc_for(platform)
    shown = floor or CONSERVATIVE_GLIBC
    glibc = host.glibc_v
    if glibc is None:
        return Check(False, f"{build.label}: needs glibc >= {shown}; {_unknown(host, 'glibc')}", "glibc")
    if glibc < shown:
        unknown = " (floor unknown in the matrix, taken as 2.28)" if floor is None else ""
        return Check(
            False, f"{build.label}: needs glibc >= {shown}{unknown}, {host.name} has {glibc}", "glibc"
        )
    return Check(True, f"glibc {glibc} >= {shown}", "glibc")
