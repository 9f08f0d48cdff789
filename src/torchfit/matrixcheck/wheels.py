"""Wheels as an index lists them: what a file name says, and the pins in a METADATA.

`parse_wheel` reads a wheel file name (project, version, variant, CPython tags,
platform and the glibc floor its manylinux tag promises, `compat.tags`);
`parse_pins` reads the cuDNN and NCCL pins of a torch METADATA. Pure.
"""

from __future__ import annotations

import email.message
import email.parser
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.compat.matrix import PLATFORMS, VARIANT_RE
from torchfit.compat.tags import parse_linux_tag
from torchfit.compat.versions import Dotted
from torchfit.index.pages import IndexFile


@dataclass(**FROZEN)
class Wheel:
    """What a wheel's file name says: project, version, variant, Pythons, platform, glibc floor."""

    project: str
    version: Version
    variant: str | None  # local label, else the index directory it sits in (None: neither)
    pythons: frozenset[tuple[int, int]]  # CPython minors of cpXY-cpXY / cpXY-abi3 tags
    any_python: bool  # py3 / py2.py3 wheels
    abi3_from: tuple[int, int] | None
    arch: str | None  # x86_64 | aarch64 | "any" | None (another OS)
    glibc: Dotted | None  # floor implied by the manylinux tag; None for linux_* tags
    tag: str  # platform tag(s) as written, for messages
    file: IndexFile

    @property
    def public(self) -> Version:
        return Version(self.version.public)

    def covers(self, python: tuple[int, int], platform: str) -> bool:
        if self.arch not in (platform, "any"):
            return False
        return (
            self.any_python
            or python in self.pythons
            or (self.abi3_from is not None and python >= self.abi3_from)
        )


def parse_wheel(file: IndexFile) -> Wheel | None:
    """A `Wheel` for a Linux (or any-platform) wheel; None for sdists, other OSes, garbage names."""
    if not file.filename.endswith(".whl"):
        return None
    try:
        name, version, _build, tags = parse_wheel_filename(file.filename)
    except (InvalidWheelFilename, ValueError):
        return None
    pythons: set[tuple[int, int]] = set()
    any_python = False
    abi3_from = None
    arches: set[str] = set()
    floors: list[Dotted] = []
    plats: set[str] = set()
    for tag in tags:
        plat = tag.platform
        if plat == "any":
            arches.add("any")
        else:
            linux = parse_linux_tag(plat)
            if linux is None or linux.arch not in PLATFORMS:
                continue
            arches.add(linux.arch)
            plats.add(plat)
            if linux.glibc is not None:
                floors.append(linux.glibc)
        interp, abi = tag.interpreter, tag.abi
        cp = re.match(r"^cp3(\d+)$", interp)
        if cp and abi == interp:
            pythons.add((3, int(cp.group(1))))
        elif cp and abi == "abi3":
            mv = (3, int(cp.group(1)))
            abi3_from = min(abi3_from, mv) if abi3_from else mv
        elif re.match(r"^py3\d*$", interp) and abi == "none":
            any_python = True
        # cp313-cp313t (free-threaded) and other ABIs: not counted (the matrix ignores them)
    if not arches or (not pythons and not any_python and abi3_from is None):
        return None
    label = version.local
    variant = label if label else _directory_variant(file.url)
    return Wheel(
        project=str(name),
        version=version,
        variant=variant,
        pythons=frozenset(pythons),
        any_python=any_python,
        abi3_from=abi3_from,
        arch=sorted(arches)[0] if len(arches) == 1 else next(iter(sorted(arches - {"any"}))),
        # pip installs a multi-tag wheel when any tag fits: the lowest floor is the wheel's.
        glibc=min(floors) if floors else None,
        tag=".".join(sorted(plats)) or "any",
        file=file,
    )


def _directory_variant(url: str) -> str | None:
    """download.pytorch.org keeps unlabelled wheels of a variant in its directory (/whl/cpu/...)."""
    parts = unquote(urlsplit(url).path).rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 and VARIANT_RE.match(parts[-2]) else None


def linux_requirements(msg: email.message.Message, platform: str) -> list[Requirement]:
    """The Requires-Dist entries of a METADATA that hold on Linux/`platform` (CPython 3.11).

    A requirement that does not parse, or whose marker names an undefined variable,
    is not for this platform.
    """
    env = {
        "platform_system": "Linux", "sys_platform": "linux", "os_name": "posix",
        "platform_machine": platform, "python_version": "3.11", "python_full_version": "3.11.0",
        "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": "",
    }
    out = []
    for raw in msg.get_all("Requires-Dist") or []:
        try:
            req = Requirement(str(raw))
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue
        out.append(req)
    return out


def pin_fact(name: str) -> str | None:
    """Which matrix fact a pinned NVIDIA wheel states: cudnn, nccl, cuda-runtime, cuda-toolkit."""
    n = name.lower().replace("_", "-")
    return ("cudnn" if re.match(r"^nvidia-cudnn-cu\d+$", n) else
            "nccl" if re.match(r"^nvidia-nccl-cu\d+$", n) else
            "cuda-runtime" if re.match(r"^nvidia-cuda-runtime(-cu\d+)?$", n) else
            "cuda-toolkit" if n == "cuda-toolkit" else None)


def parse_pins(metadata: str, platform: str = "x86_64",
               facts: tuple[str, ...] = ("cudnn", "nccl")) -> dict[str, str]:
    """The versions a torch METADATA pins (`nvidia-cudnn-cu12==9.10.2.21`), by fact.

    Only requirements whose marker holds on Linux/`platform` count; by default the
    cuDNN and NCCL pins, {"cudnn": ..., "nccl": ...}.
    """
    msg = email.parser.HeaderParser().parsestr(metadata)
    pins: dict[str, str] = {}
    for req in linux_requirements(msg, platform):
        fact = pin_fact(req.name)
        if fact not in facts:
            continue
        exact = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
        if exact and fact is not None:
            pins[fact] = exact[0]
    return pins


def same_version(a: str, b: str) -> bool:
    """PEP 440 equality ("9.10.2.21" == "9.10.2.21.0"); text equality for what is not a version."""
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b
