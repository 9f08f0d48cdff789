"""Wheel and build tags: what a platform tag or an arch list says, as values.

- A manylinux platform tag promises a glibc floor: `manylinux_2_28_x86_64` -> 2.28
  (PEP 600), and the names before it: manylinux1 -> 2.5 (PEP 513), manylinux2010
  -> 2.12 (PEP 571), manylinux2014 -> 2.17 (PEP 599). `linux_*` promises nothing.
- torch's arch list (`torch.cuda.get_arch_list()`, `sm_90 ... compute_90`) as the
  `BuildArch` values `compat.versions.coverage` judges.

Pure; matrixcheck (the index's wheels), doctor and verify (an installed torch)
read tags through here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from packaging.tags import Tag, compatible_tags, cpython_tags

from torchfit.compat.versions import Arch, BuildArch, Dotted
from torchfit.errors import BadInput

# PEP 513 / 571 / 599: the glibc floors of the manylinux names before PEP 600.
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}

_PLATFORM_TAG = re.compile(r"^(?:manylinux_(\d+)_(\d+)|(manylinux1|manylinux2010|manylinux2014)|linux)_(\w+)$")


class LinuxTag(NamedTuple):
    """A Linux platform tag: its machine (`x86_64`) and glibc floor (None for `linux_*`)."""

    arch: str
    glibc: Dotted | None


def parse_linux_tag(tag: str) -> LinuxTag | None:
    """`manylinux_2_28_x86_64` -> LinuxTag("x86_64", 2.28); None for a non-Linux tag."""
    m = _PLATFORM_TAG.match(tag)
    if not m:
        return None
    if m.group(1):
        floor: Dotted | None = Dotted((int(m.group(1)), int(m.group(2))), f"{m.group(1)}.{m.group(2)}")
    elif m.group(3):
        major, minor = LEGACY_MANYLINUX[m.group(3)]
        floor = Dotted((major, minor), f"{major}.{minor}")
    else:
        floor = None
    return LinuxTag(m.group(4), floor)


# torch's Linux wheels are tagged manylinux2014 (glibc 2.17) through 2.5 and manylinux_2_28
# from 2.6 on (the wheel files' own tags on PyPI, pytorch/pytorch PR#143423): the two floors
# a lock for torch is made for, newest first.
TORCH_MANYLINUX_FLOORS = ((2, 28), (2, 17))


def torch_manylinux_floor(glibc: str | None) -> tuple[int, int]:
    """The newest of torch's manylinux floors that `glibc` meets: "2.31" -> (2, 28);
    "2.17", an older glibc or None -> (2, 17), the oldest."""
    have = tuple(int(x) for x in glibc.split(".")[:2]) if glibc else None
    for floor in TORCH_MANYLINUX_FLOORS:
        if have is not None and have >= floor:
            return floor
    return TORCH_MANYLINUX_FLOORS[-1]


def glibc_of_tag(tag: str) -> tuple[int, int] | None:
    """manylinux_2_28_x86_64 -> (2, 28); manylinux2014_aarch64 -> (2, 17); linux_x86_64 -> None."""
    parsed = parse_linux_tag(tag)
    if parsed is None or parsed.glibc is None:
        return None
    return parsed.glibc.major_minor()


def parse_arch_flags(flags: object) -> tuple[BuildArch, ...]:
    """torch's arch flags ("sm_50 sm_60 ... sm_90 compute_90", or a list) as BuildArch values.

    `compute_XY` is PTX for X.Y (JIT-compiled forward), `sm_XY` native code; each
    entry stays its own value. Entries that are not architectures are skipped.
    """
    if isinstance(flags, (list, tuple)):
        items = [str(f) for f in flags]
    elif isinstance(flags, str):
        items = flags.replace(",", " ").split()
    else:
        return ()
    out = []
    for item in items:
        low = item.strip().lower()
        try:
            arch = Arch.parse(low)
        except BadInput:
            continue
        out.append(BuildArch(arch, low.startswith("compute_")))
    return tuple(out)


def parse_arch_list(names: Iterable[str]) -> tuple[tuple[BuildArch, ...], tuple[Arch, ...]]:
    """torch.cuda.get_arch_list() -> (SASS entries, PTX-only arches).

    "sm_90" is SASS for 9.0; "compute_90" is PTX for 9.0. An arch with both is one
    BuildArch with ptx=True (the TORCH_CUDA_ARCH_LIST "9.0+PTX" spelling that
    `coverage` understands); PTX without SASS is kept apart because coverage()
    would count it as native. gfx names (ROCm) are ignored.
    """
    sass: dict[Arch, bool] = {}
    ptx: set[Arch] = set()
    for name in names:
        n = name.strip().lower()
        try:
            if n.startswith("sm_"):
                sass.setdefault(Arch.parse(n), False)
            elif n.startswith("compute_"):
                ptx.add(Arch.parse(n))
        except BadInput:
            continue
    for a in ptx:
        if a in sass:
            sass[a] = True
    entries = tuple(BuildArch(a, p) for a, p in sorted(sass.items()))
    return entries, tuple(sorted(a for a in ptx if a not in sass))


# uv's --python-platform knows manylinux_2_17 up to manylinux_2_40 by name (uv's
# TargetTriple, crates/uv-configuration/src/target_triple.rs).
UV_MANYLINUX_RANGE = ((2, 17), (2, 40))


def uv_platform(arch: str, glibc: tuple[int, int] | None) -> str:
    """uv's --python-platform for a Linux host: `x86_64-manylinux_2_35` for glibc 2.35.

    Wheels up to the host's own glibc install there; an unknown glibc is taken as 2.28
    (every torch wheel since 2.7 needs it anyway).
    """
    low, high = UV_MANYLINUX_RANGE
    major, minor = max(low, min(high, glibc or (2, 28)))
    return f"{arch}-manylinux_{major}_{minor}"


def target_tags(python: str, arch: str, glibc: tuple[int, int], *, free_threaded: bool = False) -> list[Tag]:
    """The wheel tags CPython `python` on Linux `arch` with `glibc` installs, best first
    (an image's interpreter, a planned host's): every manylinux floor up to `glibc`, the
    legacy names (PEP 513/571/599), `linux_ARCH`, then abi3, none and `py3` ones
    (`packaging.tags`). `free_threaded`: the `cp313t` ABI (PEP 703) in place of `cp313`."""
    major, minor = (int(x) for x in python.split(".")[:2])
    legacy = {floor: name for name, floor in LEGACY_MANYLINUX.items()}
    platforms = []
    for m in range(glibc[1], 4, -1):
        platforms.append(f"manylinux_2_{m}_{arch}")
        if (2, m) in legacy:
            platforms.append(f"{legacy[(2, m)]}_{arch}")
    platforms.append(f"linux_{arch}")
    abis = [f"cp{major}{minor}t"] if free_threaded else None
    return [*cpython_tags((major, minor), abis=abis, platforms=platforms),
            *compatible_tags((major, minor), platforms=platforms)]
