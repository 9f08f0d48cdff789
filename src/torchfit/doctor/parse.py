"""Pure parsers for `torchfit doctor`: tool output and file text in, small values out.

Every function here takes text (or a number) and never raises on any input; the
tests fuzz them with hypothesis. Nothing here runs a command or reads a file:
`doctor.context` does the I/O and the area modules judge the values.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from torchfit.compat.versions import decode_cudnn_code, decode_nccl_code
from torchfit.text import said_lines

_DOTTED = re.compile(r"[0-9]+(?:\.[0-9]+)+")


def head(text: str, lines: int = 6, width: int = 240) -> str:
    """The first `lines` non-blank lines (loader noise skipped), each cut to `width`, joined by ' | '."""
    return " | ".join(ln[:width] for ln in said_lines(text)[:lines])


_LSPCI_SLOT = re.compile(r"^(?:[0-9A-Fa-f]{4}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s")


def looks_like_lspci(text: str) -> bool:
    """Whether any line is an lspci device line ("1b:00.0 ..." or "0000:1b:00.0 ...")."""
    return any(_LSPCI_SLOT.match(line.strip() + " ") for line in text.splitlines())


def dotted(version: str) -> tuple[int, ...] | None:
    """"2.28.9" -> (2, 28, 9); "9.19.0.56" -> (9, 19, 0, 56); None when not dotted digits."""
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)*)", version or "")
    if not m:
        return None
    try:
        return tuple(int(p) for p in m.group(1).split(".")[:6])
    except ValueError:
        return None


def fmt_version(parts: tuple[int, ...] | None) -> str:
    return ".".join(str(p) for p in parts) if parts else "unknown"


# --- PCI, kernel modules, dkms, dmesg ------------------------------------------------


class PciDevice(NamedTuple):
    """One NVIDIA display-class device from `lspci -nn`."""

    slot: str
    description: str


# `lspci -nn`: "1b:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB]
# [10de:2335] (rev a1)" (easydiffusion/torchruntime#24, a DGX H200). Display
# controllers are PCI class 03xx; NVSwitches are bridges (0680) and not GPUs.
_LSPCI_NN = re.compile(
    r"^(?P<slot>[0-9A-Fa-f:.]+)\s+(?P<cls>[^\[\]]*?)\s*\[(?P<code>[0-9A-Fa-f]{4})\]:\s*(?P<desc>.*?)"
    r"\s*\[(?P<vendor>[0-9A-Fa-f]{4}):(?P<device>[0-9A-Fa-f]{4})\]"
)
_LSPCI_PLAIN = re.compile(
    r"^(?P<slot>[0-9A-Fa-f:.]+)\s+(?P<cls>VGA compatible controller|3D controller|Display controller):\s*(?P<desc>NVIDIA.*)$"
)


def parse_lspci(text: str) -> tuple[PciDevice, ...]:
    """NVIDIA GPUs in `lspci -nn` output (plain `lspci` lines are accepted too)."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        m = _LSPCI_NN.match(line)
        if m:
            if m.group("vendor").lower() == "10de" and m.group("code").startswith("03"):
                out.append(PciDevice(m.group("slot"), f"{m.group('cls')}: {m.group('desc')}".strip()))
            continue
        m = _LSPCI_PLAIN.match(line)
        if m:
            out.append(PciDevice(m.group("slot"), f"{m.group('cls')}: {m.group('desc')}"))
    return tuple(out)


def parse_proc_modules(text: str) -> frozenset[str]:
    """Loaded module names from /proc/modules (what `lsmod` formats)."""
    names = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and re.fullmatch(r"[A-Za-z0-9_-]+", parts[0]) and parts[1].isdigit():
            names.add(parts[0])
    return frozenset(names)


class DkmsEntry(NamedTuple):
    module: str
    version: str
    kernel: str | None
    status: str


def parse_dkms_status(text: str) -> tuple[DkmsEntry, ...]:
    """`dkms status` lines, in both spellings dkms has used:

    "nvidia/580.65.06, 6.8.0-45-generic, x86_64: installed" (dkms >= 3) and
    "nvidia, 396.45, 4.17.14-202.fc28.x86_64, x86_64: installed" (dkms 2, quoted in
    negativo17/nvidia-driver#56); "nvidia/580.65.06: added" has no kernel yet.
    """
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if ":" not in line or line.lower().startswith(("error", "warning")):
            continue
        left, _, status = line.rpartition(":")
        parts = [p.strip() for p in left.split(",")]
        if not parts or not parts[0]:
            continue
        if "/" in parts[0]:
            module, _, version = parts[0].partition("/")
            rest = parts[1:]
        elif len(parts) >= 2:
            module, version = parts[0], parts[1]
            rest = parts[2:]
        else:
            continue
        kernel = rest[0] if rest else None
        out.append(DkmsEntry(module.strip(), version.strip(), kernel or None, status.strip()))
    return tuple(out)


class DmesgHit(NamedTuple):
    """One kernel-log line about the NVIDIA driver and what kind of trouble it shows."""

    kind: str  # api-mismatch | fallen-off-bus | xid | probe-failed | init-failed | unsigned-module | nouveau
    line: str
    xid: int | None = None


# Xid 79 is "GPU has fallen off the bus"; 48 a double-bit ECC error; 119/120 GSP
# errors (NVIDIA "XID Errors" catalogue, docs.nvidia.com/deploy/xid-errors).
_FATAL_XIDS = frozenset({48, 79, 95, 119, 120, 140})
_XID = re.compile(r"NVRM: Xid \([^)]*\): (\d+)")


def parse_dmesg(text: str) -> tuple[DmesgHit, ...]:
    """NVIDIA-related trouble in `dmesg` output.

    Recognises the lines real failures leave (quoted in the issues cited in
    docs/troubleshooting.md): "NVRM: API mismatch: the client has the version
    535.54.03, but ... this kernel module has the version 530.30.02", "NVRM: Xid
    (PCI:0000:44:00): 79, GPU has fallen off the bus", "NVRM: The NVIDIA probe
    routine was not called for 3 device(s)" / "... failed for 1 device(s)", "NVRM: GPU 0000:07:00.0:
    RmInitAdapter failed!", "Loading of unsigned module is rejected" / "module
    verification failed" (Secure Boot).
    """
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        low = line.lower()
        m = _XID.search(line)
        if m:
            try:
                code = int(m.group(1))
            except ValueError:
                code = None
            kind = "fallen-off-bus" if code == 79 else "xid"
            out.append(DmesgHit(kind, line[:300], code))
        elif "api mismatch" in low and "nvrm" in low:
            out.append(DmesgHit("api-mismatch", line[:300]))
        elif "fallen off the bus" in low:
            out.append(DmesgHit("fallen-off-bus", line[:300]))
        elif "nvrm" in low and ("probe routine was not called" in low or "probe routine failed" in low
                                or "no nvidia gpu found" in low
                                or "no nvidia graphics adapter probed" in low):
            out.append(DmesgHit("probe-failed", line[:300]))
        elif "nvrm" in low and ("rminitadapter failed" in low or "rm_init_adapter failed" in low):
            out.append(DmesgHit("init-failed", line[:300]))
        elif ("nvidia" in low and "module verification failed" in low) or (
            "unsigned module" in low and ("rejected" in low or "restricted" in low)
        ):
            out.append(DmesgHit("unsigned-module", line[:300]))
    return tuple(out)


def is_fatal_xid(code: int | None) -> bool:
    return code in _FATAL_XIDS


# --- nvidia-smi ----------------------------------------------------------------------


class SmiBanner(NamedTuple):
    driver: str | None
    cuda: str | None


def parse_smi_banner(text: str) -> SmiBanner:
    """"| NVIDIA-SMI 580.159.04  Driver Version: 580.159.04  CUDA Version: 13.0 |"."""
    drv = re.search(r"Driver Version:\s*([0-9]+\.[0-9]+(?:\.[0-9]+)?)", text)
    cuda = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", text)
    return SmiBanner(drv.group(1) if drv else None, cuda.group(1) if cuda else None)


class NvmlMismatch(NamedTuple):
    found: bool
    library_version: str | None


def parse_nvml_mismatch(text: str) -> NvmlMismatch:
    """"Failed to initialize NVML: Driver/library version mismatch" and, on newer
    drivers, the line after it: "NVML library version: 570.124"
    (tinygrad/open-gpu-kernel-modules#47)."""
    found = "driver/library version mismatch" in text.lower()
    m = re.search(r"NVML library version:\s*([0-9]+(?:\.[0-9]+)+)", text)
    return NvmlMismatch(found, m.group(1) if m else None)


def parse_libnvidia_ml_version(path: str) -> str | None:
    """"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04" -> "580.159.04"."""
    m = re.search(r"libnvidia-ml\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)$", path.strip())
    return m.group(1) if m else None


# --- the dynamic loader ----------------------------------------------------------------


class LdEntry(NamedTuple):
    """One `ldconfig -p` line: "libnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2"."""

    soname: str
    flags: str
    path: str


_LDCONFIG = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(/\S.*?)\s*$")


def parse_ldconfig(text: str) -> tuple[LdEntry, ...]:
    """Entries of `ldconfig -p`; the "N libs found in cache" header and noise are skipped."""
    out = []
    for line in text.splitlines():
        m = _LDCONFIG.match(line)
        if m:
            out.append(LdEntry(m.group(1), m.group(2), m.group(3)))
    return tuple(out)


def version_from_filename(path: str) -> tuple[int, ...] | None:
    """The full version in a library's file name: libnccl.so.2.28.3 -> (2, 28, 3).

    A bare soname (libnccl.so.2) says only the major version: None.
    """
    base = path.rstrip("/").rsplit("/", 1)[-1]
    m = re.search(r"\.so\.([0-9]+(?:\.[0-9]+)+)$", base)
    if not m:
        return None
    return dotted(m.group(1))


def parse_found_version(text: str) -> int | None:
    """The number in torch's "The NVIDIA driver on your system is too old (found version 11040)"."""
    m = re.search(r"too old \(found version ([0-9]{1,7})\)", text)
    return int(m.group(1)) if m else None


def parse_cudnn_tuple(value: object) -> tuple[int, ...] | None:
    """torch's cuDNN versions: (8, 3, 2), [9, 19, 0] or an int (91900) -> a tuple."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return decode_cudnn_code(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def parse_nccl_tuple(value: object) -> tuple[int, ...] | None:
    """torch.cuda.nccl.version(): (2, 28, 9) on current torch, an int (2708) on old ones."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return decode_nccl_code(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


# --- wheels and build arch lists ------------------------------------------------------


def parse_wheel_tags(text: str) -> tuple[str, ...]:
    """The platform tags of a dist-info WHEEL file ("Tag: cp311-cp311-manylinux_2_28_x86_64"),
    with compressed tag sets ("manylinux_2_17_x86_64.manylinux2014_x86_64") expanded."""
    tags: list[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep or key.strip().lower() != "tag":
            continue
        parts = value.strip().split("-")
        if len(parts) != 3:
            continue
        tags.extend(p for p in parts[2].split(".") if p)
    return tuple(dict.fromkeys(tags))


# --- environment variables and files ----------------------------------------------------


def parse_mount_size(text: str, mountpoint: str = "/dev/shm") -> int | None:
    """The size= option of `mountpoint` in /proc/mounts (or /proc/self/mounts), in bytes.

    "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0" (Docker's
    default) -> 67108864. None when there is no such mount or no absolute size.
    """
    found = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[1] != mountpoint:
            continue
        found = None  # a later mount over the same point wins
        for opt in parts[3].split(","):
            m = re.fullmatch(r"size=([0-9]{1,18})([kKmMgG]?)", opt)
            if m:
                mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
                found = int(m.group(1)) * mult
    return found


def parse_osrelease(text: str) -> str | None:
    """/proc/sys/kernel/osrelease ("6.8.0-45-generic\\n") -> "6.8.0-45-generic"."""
    token = text.strip()
    if token and re.fullmatch(r"[A-Za-z0-9._+~-]{1,200}", token):
        return token
    return None

