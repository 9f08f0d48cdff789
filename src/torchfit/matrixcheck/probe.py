"""Measure a torch wheel's facts from the artifact itself, without installing it or a GPU.

`probe_wheel(archive)` reads, member by member (index.wheelmeta):

- `*.dist-info/METADATA`: Requires-Python, the CPython classifiers, and the pins
  that decide what the build needs at run time (nvidia-cudnn-*, nvidia-nccl-*,
  cuda-toolkit, nvidia-cuda-runtime-*), plus torch/torchvision/torchaudio
  requirements (a companion wheel names its torch);
- `*.dist-info/WHEEL` and the file name: the tags (Python, manylinux floor, platform),
  with `packaging.utils.parse_wheel_filename`;
- `torch/version.py`: the build's own `__version__`, `cuda` and `hip` strings;
- the compiled GPU arch list: the `CUDA_ARCH_FLAGS` string that
  `torch._C._cuda_getArchFlags()` returns and `torch.cuda.get_arch_list()` splits
  (torch/csrc/cuda/Module.cpp, compiled into `libtorch_python.so`; a ROCm build's
  hipified Module.cpp holds its gfx list the same way), found as a whole
  NUL-terminated string in the library's read-only data;
- opt-in (`embedded=True`), the GPU code actually embedded, as a cross-check: the
  SASS/PTX entries of the `.nv_fatbin` section of `libtorch_cuda.so`, or the
  `__CLANG_OFFLOAD_BUNDLE__` target ids of `libtorch_hip.so`;
- opt-in (`glibc=True`), the real glibc floor: the highest `GLIBC_x.y` symbol
  version any ELF file of the wheel needs (`.gnu.version_r`, read with pyelftools).

The byte-level parsers (`find_arch_strings`, `parse_fatbin`, `parse_offload_bundles`)
are pure and raise only `WheelFormatError`; ELF files that pyelftools cannot read
raise it too.
"""

from __future__ import annotations

import email.parser
import io
import re
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, Any, TypedDict

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from torchfit.compat.matrix import VARIANT_RE
from torchfit.compat.tags import parse_linux_tag
from torchfit.errors import WheelFormatError
from torchfit.index.wheelmeta import (
    MAX_METADATA_BYTES,
    ByteSource,
    FileSource,
    WheelArchive,
    ZipMember,
    copy_to_temp,
)
from torchfit.jsontypes import JsonObject
from torchfit.matrixcheck.wheels import linux_requirements, parse_pins

# get_arch_list()'s tokens: sm_90, sm_90a, sm_100f, compute_120 (CUDA); gfx942,
# gfx90a:xnack+ (ROCm). The string is one C string, space separated.
_CUDA_TOKEN = rb"(?:sm|compute)_\d{2,3}[af]?"
_GFX_TOKEN = rb"gfx[0-9a-f]{3,4}(?::[a-z]+[+-])*"
# No anchor at the start: the string may follow a char array without a NUL of its
# own (2.8.0 and 2.9.1: "...ipc_hsm_70 sm_75 ..."); the longest list wins. The lists
# are matched backwards from each NUL (`_longest_list`): an unanchored regex over the
# bytes backtracked quadratically (a 60 KB run of "sm_90 " without a NUL: 13 s).
_CUDA_WORD = re.compile(_CUDA_TOKEN)
_GFX_WORD = re.compile(_GFX_TOKEN)
_CUDA_SUFFIX = re.compile(_CUDA_TOKEN + rb"\Z")
_GFX_START = re.compile(rb"gfx")
# Where the arch string lives, in the order tried: Module.cpp is in libtorch_python.
ARCH_MEMBERS = (r"^torch/lib/libtorch_python\.so$", r"^torch/lib/libtorch_hip\.so$",
                r"^torch/lib/libtorch_cuda\.so$", r"^torch/lib/libtorch_cpu\.so$")
BIG_MEMBER = 64_000_000  # compressed bytes: members above this are read only when asked
_FATBIN_MAGIC = 0xBA55ED50
_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_ELF_NAME = re.compile(r"(\.so(\.[0-9.]+)?$|^torch/bin/[^/]+$|^[^/]+\.libs/[^/]+$)")


# ---------------------------------------------------------------------------
# What a probe found
# ---------------------------------------------------------------------------


class Fatbin(TypedDict):
    """`parse_fatbin`: an `.nv_fatbin` section's containers, SASS and PTX entries (target -> count)."""

    containers: int
    sass: dict[str, int]  # "sm_90" -> entries
    ptx: dict[str, int]  # "compute_90" -> entries


class Embedded(TypedDict, total=False):
    """`WheelFacts.embedded`: the GPU code of one member, a CUDA fatbin's or a ROCm offload bundle's."""

    member: str
    containers: int  # CUDA
    sass: dict[str, int]
    ptx: dict[str, int]
    targets: list[str]  # ROCm: gfx942 ...
    bundle_ids: int


class WheelTags(TypedDict):
    """`parse_tags`: a wheel file name's tags, CPython tags, platform and manylinux floor."""

    tags: list[str]
    python_tags: list[str]
    platform: str | None
    manylinux_glibc: str | None


class WheelMetadata(TypedDict):
    """`parse_metadata`: what a wheel's METADATA states for Linux on one platform."""

    name: str | None
    version: str | None
    requires_python: str | None
    classifiers: list[str]  # "3.10" ...
    pins: dict[str, str]  # cudnn, nccl, cuda-runtime, cuda-toolkit
    requires: dict[str, str]  # torch / torchvision / torchaudio specifiers


@dataclass
class WheelFacts:
    """Everything one probe read, with where it read it. JSON: `to_json()`."""

    file: str
    size: int
    url: str | None = None
    sha256: str | None = None
    sha256_from: str | None = None  # "file" (hashed here) | "index" (the index's hash)
    project: str | None = None
    version: str | None = None  # from METADATA
    build_version: str | None = None  # torch/version.py __version__ (2.14.1+cu130)
    variant: str | None = None  # cu130 | rocm6.4 | cpu, from the build's own strings
    variant_from: str | None = None
    cuda: str | None = None  # version.py `cuda`
    hip: str | None = None  # version.py `hip`
    tags: list[str] = field(default_factory=list)
    python_tags: list[str] = field(default_factory=list)  # cp311 ...
    platform: str | None = None  # x86_64 | aarch64 | any
    manylinux_glibc: str | None = None  # the floor the platform tag promises
    requires_python: str | None = None
    python_classifiers: list[str] = field(default_factory=list)  # "3.10" ... from METADATA
    index_pythons: list[str] | None = None  # CPython minors the index has wheels of (index probes)
    pins: dict[str, str] = field(default_factory=dict)  # cudnn, nccl, cuda-toolkit, cuda-runtime
    requires: dict[str, str] = field(default_factory=dict)  # torch / torchvision / torchaudio specs
    metadata_from: str | None = None  # "PEP 658" | member name
    arch_flags: str | None = None  # the raw string, as get_arch_list() would split it
    arch: list[str] | None = None  # CUDA: sm_75 ...; ROCm: gfx942 ...
    arch_matrix: str | None = None  # matrix spelling: 7.5;8.0;...;12.0+PTX | gfx900;gfx942
    arch_member: str | None = None
    embedded: Embedded | None = None
    embedded_agrees: bool | None = None
    glibc_floor: str | None = None
    glibc_member: str | None = None  # one ELF file that needs the floor
    elf_files: int | None = None
    bytes_read: int = 0
    requests: int | None = None
    whole_file: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: object) -> WheelFacts:
        if not isinstance(obj, dict):
            raise ValueError("a probe record must be a JSON object")
        known = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__}
        if not isinstance(known.get("file"), str) or not isinstance(known.get("size"), int):
            raise ValueError("a probe record needs 'file' (a string) and 'size' (an integer)")
        shapes: dict[str, type | tuple[type, ...]] = {"pins": dict, "requires": dict, "tags": list, "python_tags": list, "python_classifiers": list,
                  "notes": list, "arch": (list, type(None)), "index_pythons": (list, type(None)),
                  "embedded": (dict, type(None))}
        for key, shape in shapes.items():
            if key in known and not isinstance(known[key], shape):
                raise ValueError(f"probe record of {known['file']}: '{key}' has the wrong type")
        for key in ("version", "variant", "platform", "arch_matrix", "sha256", "glibc_floor"):
            if known.get(key) is not None and not isinstance(known[key], str):
                raise ValueError(f"probe record of {known['file']}: '{key}' must be a string")
        return cls(**known)


# ---------------------------------------------------------------------------
# Pure parsers
# ---------------------------------------------------------------------------


def find_arch_strings(data: bytes) -> list[str]:
    """Every whole C string in `data` that is a CUDA or ROCm arch list, longest first, deduplicated.

    Linear in `data`: each NUL-terminated string is read backwards, word by word, as
    far as its words are arch tokens (the first may be the tail of a longer word).
    """
    found: dict[str, None] = {}
    strings = data.split(b"\x00")[:-1]  # the last piece has no NUL of its own
    for seps, word, suffix in ((b" ", _CUDA_WORD, _cuda_suffix), (b" ;", _GFX_WORD, _gfx_suffix)):
        for text in strings:
            got = _longest_list(text, seps, word, suffix)
            if got:
                found[got.decode("ascii")] = None
    return sorted(found, key=lambda s: (-len(s.split()), -len(s)))


def _longest_list(text: bytes, seps: bytes, word: re.Pattern[bytes],
                  suffix: Callable[[bytes], bytes | None]) -> bytes | None:
    """The longest tail of `text` that is tokens joined by single separators of `seps`
    (what `(TOKEN(?:SEP TOKEN)*)\\x00` matches before the NUL), in linear time."""
    words = re.split(b"[" + re.escape(seps) + b"]", text)
    i = len(words) - 1
    while i >= 0 and word.fullmatch(words[i]):
        i -= 1
    tokens = words[i + 1:]
    head = suffix(words[i]) if i >= 0 else None
    if head:
        tokens = [head, *tokens]
    if not tokens:
        return None
    return text[len(text) - (sum(len(t) for t in tokens) + len(tokens) - 1):]


def _cuda_suffix(piece: bytes) -> bytes | None:
    """The longest tail of `piece` that is a CUDA token ("ipc_hsm_70" -> "sm_70"); tokens are short."""
    m = _CUDA_SUFFIX.search(piece[-16:])
    return m.group(0) if m else None


def _gfx_suffix(piece: bytes) -> bytes | None:
    """The longest tail of `piece` that is a ROCm token (linear: each start is a "gfx")."""
    for m in _GFX_START.finditer(piece):
        if _GFX_WORD.fullmatch(piece, m.start()):
            return piece[m.start():]
    return None


def cuda_arch_to_matrix(tokens: Iterable[str]) -> str:
    """['sm_75', 'sm_120', 'compute_120'] -> '7.5;12.0+PTX' (TORCH_CUDA_ARCH_LIST spelling)."""
    sass: dict[str, None] = {}
    ptx: set[str] = set()
    for t in tokens:
        m = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", t)
        if not m:
            continue
        name = f"{m.group(2)}.{m.group(3)}{m.group(4)}"
        if m.group(1) == "sm":
            sass[name] = None
        else:
            ptx.add(name)
    for p in ptx:
        sass.setdefault(p, None)
    order = sorted(sass, key=lambda a: (int(a.split(".")[0]), int(re.sub(r"\D", "", a.split(".")[1])), a))
    return ";".join(f"{a}+PTX" if a in ptx else a for a in order)


def parse_fatbin(fh: IO[bytes], start: int, size: int) -> Fatbin:
    """SASS and PTX entries of an `.nv_fatbin` section at `start` (`size` bytes) of `fh`.

    Layout (as cuobjdump reads it): containers of header `<IHHQ>` (magic
    0xBA55ED50, version, header size, payload size), each a run of entries with
    kind `u16` at +0 (1 = PTX, 2 = ELF/SASS), header size `u32` at +4, padded
    payload size `u64` at +8 and the SM number `u32` at +28. Only headers are
    read (seeks), so a 400 MB section costs a few MB of reads.
    """
    sass: dict[int, int] = {}
    ptx: dict[int, int] = {}
    containers = 0
    pos = start
    end = start + size
    while pos + 16 <= end:
        fh.seek(pos)
        head = fh.read(16)
        if len(head) < 16:
            break
        magic, _ver, hsize, payload = struct.unpack("<IHHQ", head)
        if magic != _FATBIN_MAGIC:
            # Containers are 8-byte aligned; padding between them is zeros.
            if head[:8].strip(b"\x00") == b"":
                pos += 8
                continue
            raise WheelFormatError(".nv_fatbin", f"no fatbin container at offset {pos - start}")
        if hsize < 16 or pos + hsize + payload > end:
            raise WheelFormatError(".nv_fatbin", f"container at offset {pos - start} runs past the section")
        containers += 1
        epos = pos + hsize
        cend = epos + payload
        while epos + 32 <= cend:
            fh.seek(epos)
            e = fh.read(32)
            if len(e) < 32:
                raise WheelFormatError(".nv_fatbin", "truncated entry header")
            kind, = struct.unpack("<H", e[0:2])
            ehsize, = struct.unpack("<I", e[4:8])
            padded, = struct.unpack("<Q", e[8:16])
            sm, = struct.unpack("<I", e[28:32])
            if ehsize < 32 or epos + ehsize + padded > cend:
                raise WheelFormatError(".nv_fatbin", f"entry at offset {epos - start} runs past its container")
            if kind == 1:
                ptx[sm] = ptx.get(sm, 0) + 1
            elif kind == 2:
                sass[sm] = sass.get(sm, 0) + 1
            epos += ehsize + padded
        pos = cend
    return {"containers": containers, "sass": {f"sm_{k}": v for k, v in sorted(sass.items())},
            "ptx": {f"compute_{k}": v for k, v in sorted(ptx.items())}}


def parse_offload_bundles(data: bytes) -> dict[str, int]:
    """Target ids of every uncompressed clang offload bundle in `data`, with how often each occurs.

    A bundle is the magic `__CLANG_OFFLOAD_BUNDLE__`, a `u64` entry count, then per
    entry `u64` offset, `u64` size, `u64` id length and the id
    (`hipv4-amdgcn-amd-amdhsa--gfx942`). Compressed bundles (`CCOB`) hold their ids
    inside the compressed payload and are counted under the key "compressed".
    """
    out: dict[str, int] = {}
    pos = data.find(_BUNDLE_MAGIC)
    while pos >= 0:
        p = pos + len(_BUNDLE_MAGIC)
        if p + 8 > len(data):
            raise WheelFormatError("offload bundle", "truncated header")
        n, = struct.unpack("<Q", data[p:p + 8])
        p += 8
        if n > 4096:
            raise WheelFormatError("offload bundle", f"implausible entry count {n}")
        for _ in range(n):
            if p + 24 > len(data):
                raise WheelFormatError("offload bundle", "truncated entry")
            _off, _size, idlen = struct.unpack("<QQQ", data[p:p + 24])
            p += 24
            if idlen > 1024 or p + idlen > len(data):
                raise WheelFormatError("offload bundle", "entry id runs past the data")
            tid = data[p:p + idlen].decode("ascii", errors="replace")
            p += idlen
            out[tid] = out.get(tid, 0) + 1
        pos = data.find(_BUNDLE_MAGIC, p)
    ccob = data.count(b"CCOB")
    if ccob:
        out["compressed"] = ccob
    return out


def gfx_of_bundle_ids(ids: Iterable[str]) -> list[str]:
    """The gfx targets of offload-bundle ids (host entries and features dropped), sorted."""
    gfx = {m.group(1) for i in ids if (m := re.search(r"--(gfx[0-9a-f]+)", i))}
    return sorted(gfx, key=_gfx_key)


def _gfx_key(g: str) -> tuple[int, str]:
    return (len(g), g)


def parse_metadata(text: str, platform: str) -> WheelMetadata:
    """The facts a wheel's METADATA states, for Linux on `platform` (markers evaluated)."""
    msg = email.parser.HeaderParser().parsestr(text)
    pins = parse_pins(text, platform, facts=("cudnn", "nccl", "cuda-runtime", "cuda-toolkit"))
    requires: dict[str, str] = {}
    for req in linux_requirements(msg, platform):
        name = req.name.lower().replace("_", "-")
        if name in ("torch", "torchvision", "torchaudio"):
            requires[name] = str(req.specifier) or "*"
    classifiers = [m.group(1) for c in msg.get_all("Classifier") or []
                   if (m := re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", str(c).strip()))]
    return {
        "name": msg.get("Name"), "version": msg.get("Version"),
        "requires_python": msg.get("Requires-Python"), "classifiers": classifiers,
        "pins": pins, "requires": requires,
    }


def parse_version_py(text: str) -> dict[str, str | None]:
    """`__version__`, `cuda` and `hip` of torch/version.py (assignments of string literals)."""
    out: dict[str, str | None] = {}
    for key in ("__version__", "cuda", "hip"):
        # One line at a time ([ \t], [^...\n]): `\s` and `[^=]` spanning lines backtracked
        # quadratically over a crafted version.py (8,000 lines "cuda:": 14 s).
        m = re.search(rf"^{key}[ \t]*(?::[^=\n]*)?=[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|None)", text, re.M)
        out[key] = (m.group(1) or m.group(2)) if m and (m.group(1) or m.group(2)) else None
    return out


def parse_tags(filename: str) -> WheelTags:
    """Tags of a wheel file name: CPython tags, platform, the manylinux glibc floor."""
    try:
        _name, _ver, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, ValueError) as exc:
        raise WheelFormatError(filename, f"not a wheel file name ({exc})") from None
    pys = sorted({t.interpreter for t in tags}, key=lambda s: (len(s), s))
    floors: list[tuple[int, int]] = []
    arches: set[str] = set()
    for t in tags:
        linux = parse_linux_tag(t.platform)  # compat.tags: the manylinux names and their floors
        if t.platform == "any":
            arches.add("any")
        elif linux is not None:
            arches.add(linux.arch)
            if linux.glibc is not None:
                floors.append(linux.glibc.major_minor())
        else:
            arches.add(t.platform)
    floor = min(floors) if floors else None
    return {
        "tags": sorted(str(t) for t in tags),
        "python_tags": pys,
        "platform": sorted(arches)[0] if len(arches) == 1 else ",".join(sorted(arches)) or None,
        "manylinux_glibc": f"{floor[0]}.{floor[1]}" if floor else None,
    }


def variant_of(build_version: str | None, cuda: str | None, hip: str | None) -> tuple[str | None, str]:
    """The build's variant name from its own strings: the local label, else version.py's cuda/hip."""
    if build_version and "+" in build_version:
        label = build_version.split("+", 1)[1]
        if VARIANT_RE.fullmatch(label):
            return label, "version.py local label"
    if cuda:
        m = re.fullmatch(r"(\d+)\.(\d)", cuda)
        if m:
            return f"cu{m.group(1)}{m.group(2)}", "version.py cuda"
    if hip:
        return None, "version.py hip (no rocm label)"
    if build_version is not None:
        return "cpu", "version.py (no cuda, no hip)"
    return None, "no torch/version.py"


# ---------------------------------------------------------------------------
# ELF, through pyelftools
# ---------------------------------------------------------------------------


def _elf(fh: IO[bytes], name: str) -> Any:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        return ELFFile(fh)
    except (ELFError, struct.error, ValueError, KeyError, IndexError) as exc:
        raise WheelFormatError(name, f"not a readable ELF file ({exc})") from None


def elf_rodata_strings(data: bytes, name: str) -> list[str]:
    """Arch-list strings in an ELF image's read-only data sections (all of it when it has no sections)."""
    from elftools.common.exceptions import ELFError

    elf = _elf(io.BytesIO(data), name)
    found: dict[str, None] = {}
    try:
        secs = [s for s in elf.iter_sections() if s.name in (".rodata", ".data.rel.ro", ".data", ".hip_fatbin")]
        for s in secs:
            off, size = s["sh_offset"], s["sh_size"]
            for a in find_arch_strings(b"\x00" + data[off:off + size]):
                found[a] = None
    except (ELFError, struct.error, ValueError, KeyError, IndexError) as exc:
        raise WheelFormatError(name, f"unreadable ELF sections ({exc})") from None
    if not secs:
        for a in find_arch_strings(data):
            found[a] = None
    return sorted(found, key=lambda s: (-len(s.split()), -len(s)))


def elf_glibc_needs(fh: IO[bytes], name: str) -> list[str]:
    """The GLIBC_x.y versions an ELF file needs (its `.gnu.version_r` entries for libc & co)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.gnuversions import GNUVerNeedSection

    elf = _elf(fh, name)
    out: set[str] = set()
    try:
        for sec in elf.iter_sections():
            if isinstance(sec, GNUVerNeedSection):
                for _vn, auxs in sec.iter_versions():
                    out.update(a.name for a in auxs if str(a.name).startswith("GLIBC_"))
    except (ELFError, struct.error, ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
        raise WheelFormatError(name, f"unreadable version section ({exc})") from None
    return sorted(out, key=_glibc_key)


def _glibc_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def elf_section(fh: IO[bytes], name: str, section: str) -> tuple[int, int] | None:
    """(offset, size) of a section in an ELF file, or None."""
    elf = _elf(fh, name)
    sec = elf.get_section_by_name(section)
    if sec is None:
        return None
    return int(sec["sh_offset"]), int(sec["sh_size"])


# ---------------------------------------------------------------------------
# The probe
# ---------------------------------------------------------------------------


def probe_wheel(
    archive: WheelArchive,
    facts: WheelFacts,
    *,
    metadata: str | None = None,
    glibc: bool = False,
    embedded: bool = False,
    say: Callable[[str], None] | None = None,
) -> WheelFacts:
    """Fill `facts` from `archive` (METADATA from `metadata` when the index served it: PEP 658)."""
    t0 = time.monotonic()
    tags = parse_tags(facts.file)
    facts.tags, facts.python_tags = tags["tags"], tags["python_tags"]
    facts.platform, facts.manylinux_glibc = tags["platform"], tags["manylinux_glibc"]
    plat = facts.platform if facts.platform in ("x86_64", "aarch64") else "x86_64"
    if metadata is None:
        found = archive.metadata()
        if found is None:
            raise WheelFormatError(facts.file, "no *.dist-info/METADATA")
        metadata = found[1].decode("utf-8", errors="replace")
        facts.metadata_from = found[0].name
    md = parse_metadata(metadata, plat)
    facts.project, facts.version = md["name"], md["version"]
    facts.requires_python, facts.python_classifiers = md["requires_python"], md["classifiers"]
    facts.pins, facts.requires = md["pins"], md["requires"]
    vpy = archive.find(r"^torch/version\.py$")
    if vpy:
        v = parse_version_py(archive.read(vpy[0], MAX_METADATA_BYTES).decode("utf-8", errors="replace"))
        facts.build_version, facts.cuda, facts.hip = v["__version__"], v["cuda"], v["hip"]
    facts.variant, facts.variant_from = variant_of(facts.build_version, facts.cuda, facts.hip)
    keep: dict[str, IO[bytes]] = {}  # big members already extracted, reused by the glibc pass
    try:
        if facts.project and facts.project.lower() == "torch" and facts.variant != "cpu":
            _probe_arch(archive, facts, big=embedded)
            if embedded:
                _probe_embedded(archive, facts, keep)
        if glibc:
            _probe_glibc(archive, facts, say, keep)
    finally:
        for fh in keep.values():
            fh.close()
    facts.seconds = round(time.monotonic() - t0, 2)
    return facts


def _probe_arch(archive: WheelArchive, facts: WheelFacts, big: bool = False) -> None:
    rocm = bool(facts.hip) or (facts.variant or "").startswith("rocm")
    for pattern in ARCH_MEMBERS:
        for m in archive.find(pattern):
            if m.compressed_size > BIG_MEMBER and not big:
                facts.notes.append(f"{m.name} ({m.compressed_size / 1e6:.0f} MB) not searched for the arch "
                                   "list (--embedded reads big members)")
                continue
            strings = elf_rodata_strings(archive.read(m), m.name)
            wanted = [s for s in strings if s.startswith("gfx") == rocm]
            if not wanted:
                continue
            facts.arch_flags, facts.arch_member = wanted[0], m.name
            if len(wanted) > 1:
                facts.notes.append(f"{m.name}: {len(wanted)} arch-list strings; took the longest "
                                   f"({', '.join(repr(w) for w in wanted[:4])})")
            tokens = re.split(r"[ ;]", wanted[0])
            facts.arch = tokens
            facts.arch_matrix = (";".join(sorted(dict.fromkeys(t.split(":")[0] for t in tokens), key=_gfx_key))
                                 if rocm else cuda_arch_to_matrix(tokens))
            return
    facts.notes.append("no arch-list string found in " + ", ".join(p.strip("^$").replace("\\", "")
                                                                     for p in ARCH_MEMBERS))


def _probe_embedded(archive: WheelArchive, facts: WheelFacts, keep: dict[str, IO[bytes]]) -> None:
    name = r"^torch/lib/libtorch_hip\.so$" if (facts.hip or (facts.variant or "").startswith("rocm")) \
        else r"^torch/lib/libtorch_cuda\.so$"
    members = archive.find(name)
    if not members:
        facts.notes.append(f"embedded code not checked: no {name.strip('^$').replace(chr(92), '')}")
        return
    m = members[0]
    fh = keep[m.name] = copy_to_temp(archive, m)
    if "hip" in m.name:
        ids = parse_offload_bundles(fh.read())
        gfx = gfx_of_bundle_ids(ids)
        facts.embedded = {"member": m.name, "targets": gfx, "bundle_ids": sum(ids.values())}
        if facts.arch is not None:
            facts.embedded_agrees = set(gfx) == {t.split(":")[0] for t in facts.arch}
        return
    where = elf_section(fh, m.name, ".nv_fatbin")
    if where is None:
        facts.notes.append(f"{m.name} has no .nv_fatbin section")
        return
    fat = parse_fatbin(fh, *where)
    facts.embedded = {"member": m.name, "containers": fat["containers"], "sass": fat["sass"], "ptx": fat["ptx"]}
    if facts.arch is None:
        return
    # An arch of the build list has code in (nearly) every container; a few kernels
    # of vendored libraries are also built for other SMs (sm_89, sm_103): "extra".
    half = fat["containers"] / 2
    broad = {k for k, n in fat["sass"].items() if n >= half}
    broad_ptx = {k for k, n in fat["ptx"].items() if n >= half}
    claimed = {t for t in facts.arch if t.startswith("sm_")}
    claimed_ptx = {t for t in facts.arch if t.startswith("compute_")}
    facts.embedded_agrees = broad == claimed and broad_ptx == claimed_ptx
    extra = {k: n for k, n in {**fat["sass"], **fat["ptx"]}.items() if k not in broad | broad_ptx}
    if extra:
        facts.notes.append(f"{m.name}: also code for " + ", ".join(
            f"{k} ({n} of {fat['containers']} containers)" for k, n in extra.items()))
    if not facts.embedded_agrees:
        facts.notes.append(f"embedded code differs from the arch string: SASS in most containers "
                           f"{sorted(broad)}, PTX {sorted(broad_ptx)}")


def iter_elf_members(archive: WheelArchive) -> Iterator[ZipMember]:
    """Members that are ELF files by name: shared objects, torch/bin/*, vendored *.libs/*."""
    for m in archive.members.values():
        if not m.name.endswith("/") and _ELF_NAME.search(m.name) and m.size >= 64:
            yield m


def _probe_glibc(archive: WheelArchive, facts: WheelFacts, say: Callable[[str], None] | None, keep: dict[str, IO[bytes]]) -> None:
    best: tuple[tuple[int, ...], str, str] | None = None
    n = 0
    for m in sorted(iter_elf_members(archive), key=lambda m: m.header_offset):
        if say and m.compressed_size > 50_000_000 and m.name not in keep:
            say(f"{facts.file}: reading {m.name} ({m.compressed_size / 1e6:.0f} MB) for its GLIBC versions")
        fh = keep.get(m.name) or copy_to_temp(archive, m)
        try:
            fh.seek(0)
            if fh.read(4) != b"\x7fELF":
                continue
            fh.seek(0)
            needs = elf_glibc_needs(fh, m.name)
        finally:
            if m.name not in keep:
                fh.close()
        n += 1
        if needs and (best is None or _glibc_key(needs[-1]) > best[0]):
            best = (_glibc_key(needs[-1]), needs[-1], m.name)
    facts.elf_files = n
    if best:
        facts.glibc_floor = best[1].removeprefix("GLIBC_")
        facts.glibc_member = best[2]


def probe_file(path: str, *, glibc: bool = False, embedded: bool = False, hash_file: bool = True,
               say: Callable[[str], None] | None = None) -> WheelFacts:
    """Probe a local wheel file."""
    src = FileSource(path)
    try:
        facts = WheelFacts(file=src.name, size=src.size)
        probe_wheel(WheelArchive(src), facts, glibc=glibc, embedded=embedded, say=say)
        facts.bytes_read = src.bytes_read
        if hash_file:
            facts.sha256, facts.sha256_from = src.sha256(), "file"
    finally:
        src.close()
    return facts


def probe_source(source: ByteSource, facts: WheelFacts, archive: WheelArchive, **kw: Any) -> WheelFacts:
    """Probe through any byte source; `bytes_read` counts what it transferred."""
    probe_wheel(archive, facts, **kw)
    facts.bytes_read = source.bytes_read
    return facts


# ---------------------------------------------------------------------------
# Wheels on an index
# ---------------------------------------------------------------------------


def _pick(wheels: list[Any], python: str | None) -> Any:
    """One wheel per (release, platform): the asked CPython tag, else cp311, else the newest."""
    def key(w: Any) -> tuple[bool, bool, list[int]]:
        tags = {f"cp{a}{b}" for a, b in w.pythons}
        return (python is not None and python not in tags, "cp311" not in tags,
                [-m for _, m in sorted(w.pythons)])
    return min(wheels, key=key)


def find_index_wheels(
    page_files: Iterable[Any], *, torch: str | None, variant: str | None, pypi: bool,
    platforms: Iterable[str], python: str | None = None, newer_than: Any = None,
) -> list[tuple[Any, list[str]]]:
    """(wheel, CPython minors of its release/platform/variant) to probe, one per release and platform.

    `torch`: "2.14.1", "2.14" (every 2.14.x) or None (every release). On a variant
    index a wheel belongs to `variant` by its local label or its directory; on PyPI
    (`pypi`) wheels are unlabelled. Pre-releases are skipped.
    """
    from torchfit.matrixcheck.wheels import parse_wheel

    groups: dict[tuple[str, str], list[Any]] = {}
    plats = set(platforms)
    for f in page_files:
        w = parse_wheel(f)
        if w is None or w.arch not in plats or w.public.is_prerelease or not w.pythons:
            continue
        if pypi:
            if w.version.local:
                continue
        elif variant and w.variant != variant:
            continue
        pub = str(w.public)
        if torch and not (pub == torch or pub.startswith(torch + ".")):
            continue
        if newer_than is not None and not w.public > newer_than:
            continue
        groups.setdefault((pub, w.arch), []).append(w)
    out = []
    for (_pub, _arch), ws in sorted(groups.items(), key=lambda kv: (version_key(kv[0][0]), kv[0][1])):
        pys = sorted({p for w in ws for p in w.pythons})
        out.append((_pick(ws, python), [f"{a}.{b}" for a, b in pys]))
    return out


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def probe_index_wheel(client: Any, wheel: Any, pythons: list[str], *, glibc: bool = False,
                      embedded: bool = False, say: Callable[[str], None] | None = None) -> WheelFacts:
    """Probe one index file with range requests; METADATA through PEP 658 when the index serves it."""
    from torchfit.index.wheelmeta import HttpRangeSource
    from torchfit.redact import redact

    file = wheel.file
    facts = WheelFacts(file=file.filename, size=0, url=redact(file.url.split("#", 1)[0]))
    digest = file.hashes.get("sha256")
    if digest:
        facts.sha256, facts.sha256_from = digest.lower(), "index"
    facts.index_pythons = pythons
    # PEP 658: FILE.metadata, tried once even when the page does not advertise it.
    metadata = client.core_metadata(file, probe=True)
    src = HttpRangeSource(client, file.url)
    try:
        tail = src.open()
        facts.size = src.size
        archive = WheelArchive(src, tail)
        probe_wheel(archive, facts, metadata=metadata, glibc=glibc, embedded=embedded, say=say)
    finally:
        src.close()
    if metadata is not None:
        facts.metadata_from = "PEP 658"
        facts.bytes_read += len(metadata.encode())
    facts.bytes_read += src.bytes_read
    facts.requests = src.requests
    facts.whole_file = src.whole_file
    if src.warning:
        facts.notes.append(src.warning)
    return facts
