"""Small value types that order correctly: driver versions, glibc, GPU architectures.

Drivers and glibc are compared component-wise as integers ("580.159.04" >
"580.65.06"); a compute capability is (major, minor) with an optional suffix
("9.0a"), because CUDA's binary-compatibility rules are stated in those terms.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from packaging.version import InvalidVersion, Version

from torchfit.errors import BadInput

if TYPE_CHECKING:  # packaging.requirements loads markers, tags, platform, logging: ~10 ms (issue 37)
    from packaging.requirements import Requirement

# ASCII digits only (Python's \d also takes full-width and other scripts' digits),
# at most 8 parts of at most 9 digits: no driver or glibc version is longer.
_DOTTED = re.compile(r"^[0-9]{1,9}(\.[0-9]{1,9}){0,7}$")


class Dotted(NamedTuple):
    """A dotted all-numeric version ("580.159.04", "2.17") that compares numerically.

    `text` keeps the spelling (driver "560.35.05" keeps its leading zero); it only
    breaks ties, so "2.17" and "2.17.0" differ in `parts` and order correctly.
    """

    parts: tuple[int, ...]
    text: str = ""

    @classmethod
    def parse(cls, text: str, what: str = "version") -> Dotted:
        text = str(text).strip()
        if not _DOTTED.match(text):
            raise BadInput(f"{what} {text!r} is not a dotted number like 580.65.06")
        return cls(tuple(int(p) for p in text.split(".")), text)

    def __str__(self) -> str:
        return self.text or ".".join(str(p) for p in self.parts)

    def major_minor(self) -> tuple[int, int]:
        return (self.parts[0], self.parts[1] if len(self.parts) > 1 else 0)


def driver_version(text: str) -> Dotted:
    """Parse an NVIDIA driver version; BadInput when it is not one."""
    return Dotted.parse(text, "driver version")


def glibc_version(text: str) -> Dotted:
    """Parse a glibc version ("2.17"); BadInput when it is not one."""
    return Dotted.parse(text, "glibc version")


_CC = re.compile(r"^(?:sm_|compute_)?([0-9]{1,3}?)([0-9])([a-z]?)$|^([0-9]{1,3})\.([0-9]{1,3})([a-z]?)$")


class Arch(NamedTuple):
    """A CUDA compute capability: 9.0 is Arch(9, 0, ""), sm_90a is Arch(9, 0, "a")."""

    major: int
    minor: int
    suffix: str = ""

    @classmethod
    def parse(cls, text: str) -> Arch:
        """Accept "9.0", "sm_90", "sm_90a", "compute_90", "12.0", "sm_120"."""
        m = _CC.match(str(text).strip().lower())
        if not m:
            raise BadInput(f"GPU architecture {text!r} is not like 9.0 or sm_90")
        if m.group(4) is not None:
            return cls(int(m.group(4)), int(m.group(5)), m.group(6))
        return cls(int(m.group(1)), int(m.group(2)), m.group(3))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def sm(self) -> str:
        return f"sm_{self.major}{self.minor}{self.suffix}"


class BuildArch(NamedTuple):
    """One entry of a build's arch list: code for `arch`, with PTX embedded when `ptx`."""

    arch: Arch
    ptx: bool

    @classmethod
    def parse(cls, text: str) -> BuildArch:
        """"8.6", "12.0+PTX", "9.0a" (TORCH_CUDA_ARCH_LIST spelling)."""
        text = text.strip()
        ptx = text.upper().endswith("+PTX")
        core = text[: -len("+PTX")] if ptx else text
        return cls(Arch.parse(core), ptx)

    def __str__(self) -> str:
        return f"{self.arch}+PTX" if self.ptx else str(self.arch)


class Coverage(NamedTuple):
    """How a build runs on one GPU: natively (SASS), through PTX JIT, or not at all."""

    kind: str  # "native" | "ptx" | "none"
    via: BuildArch | None


def coverage(gpu: Arch, build: tuple[BuildArch, ...]) -> Coverage:
    """How `build` covers `gpu`, by NVIDIA's binary compatibility rules.

    A cubin for X.y runs on X.z with z >= y, never across majors; an `a`-suffixed
    target runs only on exactly that GPU; PTX for X.y JIT-compiles for any GPU
    >= X.y. Source: NVIDIA Blackwell Compatibility Guide, "Application
    Compatibility on the NVIDIA Blackwell Architecture"
    (https://docs.nvidia.com/cuda/blackwell-compatibility-guide/), and the CUDA C
    Programming Guide, "Binary Compatibility".
    """
    native = [
        b
        for b in build
        if b.arch.major == gpu.major
        and (
            (b.arch.suffix == "" and b.arch.minor <= gpu.minor)
            # sm_90a code runs on a compute capability 9.0 GPU and nothing else.
            or (b.arch.suffix != "" and b.arch.minor == gpu.minor)
        )
    ]
    if native:
        return Coverage("native", max(native))
    ptx = [b for b in build if b.ptx and b.arch.suffix == "" and b.arch[:2] <= gpu[:2]]
    if ptx:
        return Coverage("ptx", max(ptx))
    return Coverage("none", None)


def python_version(text: str) -> tuple[int, int]:
    """"3.12" or "3.12.1" -> (3, 12); BadInput otherwise."""
    m = re.match(r"^([0-9]{1,2})\.([0-9]{1,3})(\.[0-9]{1,4})?$", str(text).strip())
    if not m:
        raise BadInput(f"Python version {text!r} is not like 3.12")
    return (int(m.group(1)), int(m.group(2)))


# --- NVIDIA's integer version codes ---------------------------------------------------
#
# Libraries report their version as one integer. Every decoder torchfit needs is
# here; the edge (install's NCCL pin, verify, doctor) imports them.


def decode_xyz_code(code: object) -> tuple[int, int, int] | None:
    """An NCCL or cuDNN version code -> (major, minor, patch); None if not one.

    NCCL >= 2.9 (nccl.h NCCL_VERSION(X,Y,Z)) and cuDNN >= 9 (cudnn_version.h
    CUDNN_VERSION) encode X*10000 + Y*100 + Z; earlier releases X*1000 + Y*100 + Z:
    22809 -> (2, 28, 9), 2708 -> (2, 7, 8), 91900 -> (9, 19, 0), 8902 -> (8, 9, 2).
    """
    if isinstance(code, bool) or not isinstance(code, int) or code <= 0:
        return None
    if code >= 10000:
        return (code // 10000, (code % 10000) // 100, code % 100)
    return (code // 1000, (code % 1000) // 100, code % 100)


def decode_nccl_code(code: object) -> tuple[int, int, int] | None:
    """ncclGetVersion() / torch.cuda.nccl.version() as an int: 22809 -> (2, 28, 9)."""
    return decode_xyz_code(code)


def decode_cudnn_code(code: object) -> tuple[int, int, int] | None:
    """cudnnGetVersion() / torch.backends.cudnn.version(): 91900 -> (9, 19, 0)."""
    return decode_xyz_code(code)


def decode_cuda_code(code: object) -> tuple[int, int] | None:
    """cudaDriverGetVersion / cudaRuntimeGetVersion: 1000*major + 10*minor (CUDA Runtime
    API reference), so 11040 is CUDA 11.4 and 13000 is 13.0; None if not one."""
    if isinstance(code, bool) or not isinstance(code, int) or code <= 0:
        return None
    return (code // 1000, (code % 1000) // 10)


def version_text(parts: tuple[int, ...] | None) -> str | None:
    """(2, 28, 9) -> "2.28.9"; None stays None."""
    return ".".join(str(p) for p in parts) if parts else None


# --- comparing releases ---------------------------------------------------------------


def release_of(version: str | tuple[int, ...] | None) -> tuple[int, ...]:
    """The numeric release of a version: "9.10.2.21" -> (9, 10, 2, 21), "12.8" -> (12, 8).

    Reads PEP 440 versions and library versions alike ("2.28.9+cuda13.0" ->
    (2, 28, 9)); text with no leading number is ().
    """
    if version is None:
        return ()
    if isinstance(version, tuple):
        return version
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def same_release(a: str | tuple[int, ...] | None, b: str | tuple[int, ...] | None, parts: int) -> bool:
    """The first `parts` release components of `a` and `b` agree (neither empty).

    same_release("9.10.2.21", "9.10.2", 3) (a wheel's cuDNN against the runtime's);
    same_release("12.8", "12.8.1", 2); not same_release("12.8", "12.8.1", 3).
    """
    ra, rb = release_of(a), release_of(b)
    return bool(ra) and bool(rb) and ra[:parts] == rb[:parts]


# --- a base build's label (torchfit adopt) ------------------------------------------------


def is_pep440(version: str) -> bool:
    """Can packaging, pip and uv read `version` (an installed distribution's, as its METADATA
    says)? `unknown`, `2.8.0-custom build` and `2.8.0+` cannot be pinned or compared."""
    try:
        Version(version)
    except InvalidVersion:
        return False
    return True


def release_label(version: str) -> str | None:
    """What a version carries beyond its release, as written: `2.8.0a0+5228986.nv25.08` ->
    `a0+5228986.nv25.08` (packaging's str() would normalise it to `nv25.8`)."""
    try:
        Version(version)
    except InvalidVersion:
        return None
    m = re.match(r"^\s*v?(?:\d+!)?\d+(?:\.\d+)*", version)
    rest = version[m.end():].strip() if m else ""
    return rest or None


def differs_only_by_label(req: Requirement, version: str) -> bool:
    """Does `req` refuse `version` only for its prerelease/local label: `torch==2.8.0` and the
    base `2.8.0a0+…nv25.08` (the same release, NVIDIA's build of it)?"""
    try:
        v = Version(version)
        release = Version(".".join(str(x) for x in v.release))
    except InvalidVersion:
        return False
    return (not req.specifier.contains(v, prereleases=True)
            and req.specifier.contains(release, prereleases=True))
