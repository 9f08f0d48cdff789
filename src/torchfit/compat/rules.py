"""The host rules (docs/architecture.md, Contracts) as checks: does one build fit one host, and why not.

Each rule returns a `RuleResult` (ok, and a sentence that states the fact from the
host first, then what the matrix demands). The resolver turns these into
virtual-package requirements; `--explain` and conflict reports print them.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchfit._backports import FROZEN
from torchfit.compat.facts import HostFacts, distinct_gpus
from torchfit.compat.judgements import describe_gpus
from torchfit.compat.matrix import CONSERVATIVE_GLIBC, Build, CudaInfo, Matrix
from torchfit.compat.versions import BuildArch, Dotted, coverage


@dataclass(**FROZEN)
class RuleResult:
    """The verdict of one rule for one (build, host) pair."""

    ok: bool
    text: str
    category: str  # "driver" | "gpu" | "glibc" | "platform" | "python" | "companion" | "user"
    # For a refusal that holds for a whole line of builds: the predicate of
    # "<variant> builds of torch 2.6-2.14 <group>" ("have no sm_120 code: arch list
    # 5.0-9.0, no PTX"), so conflict reports can group the builds over releases.
    group: str = ""


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


def cuda_driver_fit(info: CudaInfo, driver: Dotted | None) -> str:
    """How a driver runs one CUDA minor version: the rule, on the CUDA version alone.

    "full": at or above the toolkit's own floor (PTX JIT and the newest APIs
    work); "mvc": at or above the family's minor-version-compatibility floor but
    below the toolkit's (runs, without PTX JIT); "too-old": below the MVC floor;
    "unknown": no driver, or the floors it would need are unknown. Sources: NVIDIA
    CUDA Toolkit release notes Table 3; CUDA Compatibility guide, "Minor Version
    Compatibility". The resolver (through a Build) and doctor (through the CUDA
    version torch reports) both ask this function.
    """
    if driver is None:
        return "unknown"
    if info.toolkit_driver is not None and driver >= info.toolkit_driver:
        return "full"
    if info.mvc_driver is None:
        return "unknown"
    return "mvc" if driver >= info.mvc_driver else "too-old"


def has_full_driver(build: Build, host: HostFacts, matrix: Matrix) -> bool:
    """Driver at or above the toolkit's own floor: PTX JIT and the newest APIs work."""
    if build.kind != "cuda":
        return True
    return cuda_driver_fit(matrix.cuda[build.cuda or ""], host.driver) == "full"


def _unknown(host: HostFacts, fact: str) -> str:
    why = host.reasons.get(fact)
    return f"{fact} unknown on {host.name}" + (f" ({why})" if why else "")


def check_driver(build: Build, host: HostFacts, matrix: Matrix, strict: bool) -> RuleResult:
    floor, what = driver_floor(build, matrix, strict)
    if floor is None:
        return RuleResult(False, f"{build.variant}: {what} is unknown in the matrix", "driver")
    drv = host.driver
    if drv is None:
        return RuleResult(False, f"{build.variant}: needs driver >= {floor}; {_unknown(host, 'driver_version')}", "driver")
    if drv < floor:
        return RuleResult(False, f"{build.variant}: needs driver >= {floor} ({what}), {host.name} has {drv}", "driver")
    return RuleResult(True, f"driver {drv} >= {floor} ({what})", "driver")


def check_gpus(build: Build, host: HostFacts, matrix: Matrix, want_cpu: bool) -> RuleResult:
    """Every visible GPU must be covered by the build; a GPU host gets CPU only on request."""
    if build.kind == "cpu":
        if host.gpus and not want_cpu:
            gpus = describe_gpus(host.gpus)
            return RuleResult(False, f"cpu: {host.name} has GPUs ({gpus}); a CPU build only with --variant cpu", "gpu")
        return RuleResult(True, "no GPU to cover" if not host.gpus else "CPU build requested", "gpu")
    if build.kind == "rocm":
        amd = host.amd_gpus
        if not amd:
            return RuleResult(False, f"{build.variant}: {host.name} has no AMD GPU", "gpu", "need an AMD GPU")
        if build.gfx is None:
            return RuleResult(False, f"{build.variant}: its gfx target list is unknown in the matrix", "gpu",
                         "have an unknown gfx target list in the matrix (it covers no GPU)")
        missing = [g for g in amd if g.gfx not in build.gfx]
        if missing:
            names = describe_gpus(missing)
            gfx = ", ".join(sorted({g.gfx or "gfx unknown" for g in missing}))
            return RuleResult(False, f"{build.variant}: {names} not in its targets ({';'.join(build.gfx)})", "gpu",
                         f"have no {gfx} code: targets {';'.join(build.gfx)}")
        return RuleResult(True, f"{', '.join(sorted({g.gfx or '' for g in amd}))} in the ROCm target list", "gpu")
    nv = host.nvidia_gpus
    if not nv:
        extra = " (only AMD GPUs)" if host.amd_gpus else ""
        return RuleResult(False, f"{build.variant}: {host.name} has no NVIDIA GPU{extra}", "gpu", "need an NVIDIA GPU")
    platform = host_platform(host) or "x86_64"
    archs = build.arch_for(platform)
    if archs is None:
        return RuleResult(False, f"{build.variant}: its {platform} arch list is unknown in the matrix", "gpu",
                     f"have an unknown {platform} arch list in the matrix (it covers no GPU)")
    full = has_full_driver(build, host, matrix)
    notes = []
    listed = ";".join(str(a) for a in archs)
    for gpu in [g for g in distinct_gpus(host.gpus)[0] if g.vendor == "nvidia"]:  # once per GPU model
        arch = gpu.arch
        if arch is None:
            return RuleResult(False, f"{build.variant}: compute capability of {gpu.name} unknown", "gpu")
        cov = coverage(arch, archs)
        if cov.kind == "none":
            return RuleResult(False, f"{build.variant}: {gpu.label()} is not in its arch list ({listed})", "gpu",
                         f"have no {arch.sm} code: arch list {format_arch_span(archs)}")
        if cov.kind == "ptx" and not full:
            floor = matrix.cuda[build.cuda or ""].toolkit_driver
            return RuleResult(
                False,
                f"{build.variant}: {gpu.label()} only runs through PTX JIT, which needs driver >= "
                f"{floor or 'unknown'} (minor-version compatibility has no PTX JIT)",
                "gpu",
                f"run {arch.sm} only through PTX JIT (arch list {format_arch_span(archs)}), which needs "
                f"driver >= {floor or 'unknown'}; minor-version compatibility has none",
            )
        notes.append(f"{arch.sm} {'native' if cov.kind == 'native' else 'PTX'} via {cov.via}")
    return RuleResult(True, ", ".join(sorted(set(notes))), "gpu")


# NVIDIA's own PyTorch wheels for Jetson (L4T's CUDA, JetPack <= 6).
JETSON_WHEELS = ("NVIDIA's Jetson wheels (docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/, "
                 "forums.developer.nvidia.com/t/pytorch-for-jetson/72048)")


# AMD's own instructions for PyTorch on WSL 2: its ROCm WSL runtime and its wheels.
AMD_WSL = ("the PyTorch wheels AMD's ROCm-on-WSL guide prescribes "
           "(rocm.docs.amd.com/projects/radeon-ryzen/en/latest/docs/install/installrad/wsl/howto_wsl.html)")
# NVIDIA's CUDA on WSL: the Windows driver, libcuda from /usr/lib/wsl/lib.
NVIDIA_WSL = "NVIDIA, CUDA on WSL User Guide: docs.nvidia.com/cuda/wsl-user-guide/"


def check_platform(build: Build, host: HostFacts) -> RuleResult:
    platform = host_platform(host)
    if platform is None:
        return RuleResult(False, f"{build.variant}: {_unknown(host, 'arch')}", "platform")
    if platform not in build.platforms:
        return RuleResult(False, f"{build.variant}: no {platform} wheels on its index", "platform")
    if build.kind == "rocm" and host.wsl:
        return RuleResult(
            False,
            f"{build.variant}: {host.name} runs WSL 2, where ROCm reaches the GPU through AMD's WSL runtime "
            f"(librocdxg over /dev/dxg, not /dev/kfd); {build.index_url.rsplit('/', 1)[0]}'s ROCm wheels are not "
            f"built for it: use {AMD_WSL}",
            "platform",
            "are not built for ROCm on WSL 2 (AMD's WSL runtime): use " + AMD_WSL,
        )
    if build.kind == "cuda" and host.jetson == "igpu":
        # The arch check would pass (8.0 SASS loads on Orin's 8.7): exactly the trap.
        l4t = f"L4T {host.l4t}" if host.l4t else "a Jetson iGPU"
        return RuleResult(
            False,
            f"{build.variant}: {host.name} is {l4t} (JetPack 6 or older), whose CUDA is L4T's own; "
            f"{build.index_url.rsplit('/', 1)[0]}'s aarch64 CUDA wheels are SBSA builds for server Arm and do "
            f"not run there (bitsandbytes-foundation/bitsandbytes#1941): use {JETSON_WHEELS}",
            "platform",
            "are SBSA builds that do not run on a Jetson's L4T CUDA (JetPack 6 or older): use " + JETSON_WHEELS,
        )
    return RuleResult(True, f"{platform} wheels", "platform")


def check_glibc(build: Build, host: HostFacts) -> RuleResult:
    platform = host_platform(host) or "x86_64"
    floor = build.glibc_for(platform)
    shown = floor or CONSERVATIVE_GLIBC
    glibc = host.glibc_v
    if glibc is None:
        return RuleResult(False, f"{build.label}: needs glibc >= {shown}; {_unknown(host, 'glibc')}", "glibc")
    if glibc < shown:
        unknown = " (floor unknown in the matrix, taken as 2.28)" if floor is None else ""
        return RuleResult(
            False, f"{build.label}: needs glibc >= {shown}{unknown}, {host.name} has {glibc}", "glibc"
        )
    return RuleResult(True, f"glibc {glibc} >= {shown}", "glibc")


def format_arch_span(archs: tuple[BuildArch, ...]) -> str:
    """A build's arch list in a few words: "5.0-9.0, no PTX", "7.5-12.0, PTX for 12.0"."""
    if not archs:
        return "empty"
    ordered = sorted(archs, key=lambda b: b.arch)
    span = str(ordered[0].arch) if len(ordered) == 1 else f"{ordered[0].arch}\u2013{ordered[-1].arch}"
    ptx = [str(b.arch) for b in ordered if b.ptx]
    return f"{span}, " + (f"PTX for {', '.join(ptx)}" if ptx else "no PTX")


def check_cudnn(build: Build, host: HostFacts, matrix: Matrix) -> RuleResult:
    """cuDNN's own GPU floor: every NVIDIA GPU at or above the compute capability the
    build's cuDNN supports, whatever its arch list says. cuDNN 9 needs 5.0+, so a
    Kepler GPU (K80, sm_37) never gets a cuDNN 9 build; cuDNN 8.5 still runs on 3.5+.
    Source: NVIDIA cuDNN support matrix (the `[[cudnn]]` rows of the matrix). An
    unknown cuDNN is held to the strictest floor listed."""
    nv = [g for g in distinct_gpus(host.gpus)[0] if g.vendor == "nvidia" and g.arch is not None]
    if build.kind != "cuda" or not nv:
        return RuleResult(True, "no cuDNN GPU floor applies", "gpu")
    row = matrix.cudnn_floor(build.cudnn) if build.cudnn else None
    what = f"cuDNN {build.cudnn}"
    if row is None:
        row = matrix.highest_cudnn_floor
        what = (f"cuDNN {build.cudnn} (no floor listed for it, so the strictest)" if build.cudnn
                else "its cuDNN (unknown in the matrix, so held to the strictest floor)")
    if row is None:
        return RuleResult(True, "no cuDNN GPU floor in the matrix", "gpu")
    floor = row.min_compute
    low = [g for g in nv if g.arch is not None and g.arch[:2] < floor[:2]]
    if low:
        names = describe_gpus([g for g in host.nvidia_gpus if g.arch is not None and g.arch[:2] < floor[:2]])
        sms = ", ".join(sorted({g.arch.sm for g in low if g.arch is not None}))
        cudnn = f"cuDNN {build.cudnn}" if build.cudnn else "an unknown cuDNN"
        return RuleResult(
            False,
            f"{build.variant}: {what} needs compute capability >= {floor} (NVIDIA cuDNN support matrix: "
            f"{row.source}); {names} is below it",
            "gpu",
            f"carry {cudnn}, which needs compute capability >= {floor} (NVIDIA cuDNN support matrix): "
            f"{sms} is below it",
        )
    return RuleResult(True, f"{what} supports compute capability >= {floor}", "gpu")


def host_checks(
    build: Build, host: HostFacts, matrix: Matrix, *, strict_driver: bool, want_cpu: bool
) -> list[tuple[str, RuleResult]]:
    """Every host rule for one (build, host) pair, keyed by the virtual package it becomes.

    The resolver turns each into a requirement; `install --lock` applies the same
    list to the locked build, so a lock is refused for exactly the reasons a
    resolve would be.
    """
    out = [("platform", check_platform(build, host)), ("glibc", check_glibc(build, host))]
    if build.kind == "cuda":
        out.append(("driver", check_driver(build, host, matrix, strict_driver)))
    out.append(("gpu-arch", check_gpus(build, host, matrix, want_cpu)))
    if build.kind == "cuda":
        out.append(("cudnn", check_cudnn(build, host, matrix)))
    return out


def host_warnings(build: Build, host: HostFacts, matrix: Matrix) -> list[str]:
    """What a plan must say of one (build, host) pair that fits: the rules of `host_checks`
    that allow the build with a caveat. Each host kind keeps its refusals (`check_platform`)
    and its warnings here, side by side.

    - WSL 2 with a CUDA build: the driver is the Windows host's, libcuda comes from
      /usr/lib/wsl/lib (NVIDIA_WSL);
    - a driver below the toolkit's floor: CUDA minor-version compatibility, no PTX JIT;
    - a GPU covered only by PTX in the build's arch list: the first launch JIT-compiles.
    """
    out: list[str] = []
    if build.kind == "cuda" and host.wsl:
        out.append(
            "WSL 2: the NVIDIA driver is the Windows host's (nvidia-smi here reports it) and libcuda "
            "comes from /usr/lib/wsl/lib: install no Linux NVIDIA driver or CUDA driver package inside WSL, "
            f"and keep /usr/lib/wsl/lib on the loader path ({NVIDIA_WSL})"
        )
    if build.kind != "cuda":
        return out
    if not has_full_driver(build, host, matrix):
        floor = matrix.cuda[build.cuda or ""].toolkit_driver
        out.append(
            f"{build.variant} runs on driver {host.driver} only through CUDA minor-version "
            f"compatibility: no PTX JIT, and the newest CUDA APIs need driver >= {floor or 'unknown'} "
            "(supported by NVIDIA and PyTorch; upgrade the driver to lift it)"
        )
    archs = build.arch_for(host.arch or "x86_64") or ()
    for gpu in distinct_gpus(host.gpus)[0]:  # one warning per GPU model
        if gpu.vendor == "nvidia" and gpu.arch and coverage(gpu.arch, archs).kind == "ptx":
            out.append(f"{gpu.label()} runs {build.variant} through PTX JIT: the first launch of "
                       "each kernel compiles it, and startup is slower")
    return out
