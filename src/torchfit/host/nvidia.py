"""NVIDIA: the GPUs (`nvidia-smi --query-gpu`), the driver version (NVRM banner,
module version, nvidia-smi) and the topology (`nvidia-smi topo -m`); each parser
next to its probe."""

import re
from collections.abc import Sequence
from typing import NamedTuple

from torchfit.compat.facts import Gpu
from torchfit.compat.gpunames import find_capability, load_gpu_names
from torchfit.compat.versions import Arch
from torchfit.errors import BadInput
from torchfit.host._io import DEFAULT_TIMEOUT, _read, _run_tool, _under, _unknown
from torchfit.runner import Runner
from torchfit.text import first_line, strip_ansi

# `nvidia-smi --query-gpu` is NVIDIA's stable, scriptable interface
# (`nvidia-smi --help-query-gpu`); the human table is not. Order matters only to
# the parser, which is given the same tuple.
GPU_FIELDS = (
    "index",
    "name",
    "compute_cap",
    "memory.total",
    "uuid",
    "pci.bus_id",
    "driver_version",
)

# Explicit ASCII classes: Python's \d also matches other scripts' digits.
_DRIVER = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?")
_GPU_LABEL = re.compile(r"GPU([0-9]+)")
# A device column of `topo -m`: GPU0, NIC0, and mlx5_0 on drivers that named NICs
# by their RDMA device. "CPU Affinity", "NUMA Affinity" and "GPU NUMA ID" end the
# device columns; none of their words ends in a digit.
_DEVICE_COL = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]*[0-9]")
_LINK = re.compile(r"[A-Za-z][A-Za-z0-9#]*")

def parse_nvrm_version(text: str) -> str | None:
    """The driver version in /proc/driver/nvidia/version's NVRM line, or None.

    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release
    Build ..." -> "580.159.04". Proprietary-module lines read "NVIDIA UNIX x86_64
    Kernel Module  470.82.01  ..."; the first dotted number is the version either way.
    """
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            for token in line[len("NVRM version:") :].split():
                if _DRIVER.fullmatch(token):
                    return token
            return None
    return None


def parse_module_version(text: str) -> str | None:
    """/sys/module/nvidia/version ("580.159.04\\n") -> "580.159.04", or None."""
    token = text.strip()
    return token if _DRIVER.fullmatch(token) else None


class SmiGpus(NamedTuple):
    """What one `nvidia-smi --query-gpu` run said: the GPUs and the driver version."""

    gpus: tuple[Gpu, ...]
    driver_version: str | None


def _cell(value: str) -> str | None:
    # nvidia-smi prints "[N/A]", "[Not Supported]", "[Insufficient Permissions]",
    # "[Unknown Error]", "[GPU requires reset]" for values it cannot read.
    value = value.strip()
    if not value or value.startswith("[") or value.upper() == "N/A":
        return None
    return value


def parse_query_gpu(text: str, fields: Sequence[str] = GPU_FIELDS) -> SmiGpus:
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`.

    Lines that do not have one cell per field, or no integer index, are skipped
    (nvidia-smi prints warnings and "No devices were found" on the same stream).
    A capability that is not like "9.0" becomes None. Never raises.
    """
    gpus: list[Gpu] = []
    driver: str | None = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            continue
        row = dict(zip(fields, cells))
        index = row.get("index", "")
        if not re.fullmatch(r"[0-9]{1,6}", index):
            continue
        cc = _cell(row.get("compute_cap", ""))
        if cc is not None:
            try:
                cc = str(Arch.parse(cc))
            except BadInput:
                cc = None
        mem_text = _cell(row.get("memory.total", "")) or ""
        mem = re.fullmatch(r"([0-9]{1,12})(?:\s*MiB)?", mem_text)
        drv = _cell(row.get("driver_version", ""))
        if driver is None and drv is not None and _DRIVER.fullmatch(drv):
            driver = drv
        gpus.append(
            Gpu(
                index=int(index),
                name=_cell(row.get("name", "")) or "unknown NVIDIA GPU",
                compute_capability=cc,
                memory_mib=int(mem.group(1)) if mem else None,
                uuid=_cell(row.get("uuid", "")),
                pci_bus_id=_cell(row.get("pci.bus_id", "")),
            )
        )
    return SmiGpus(tuple(gpus), driver)


def parse_invalid_field(text: str) -> str | None:
    """The field an old nvidia-smi rejected, from `Field "compute_cap" is not a valid
    field to query.` (printed on stdout, exit status 2; seen on driver 580 with a
    bogus field, and in huggingface/candle#733 for compute_cap on 470.182.03)."""
    m = re.search(r'Field "([^"\n]*)" is not a valid field to query', text)
    return m.group(1) if m else None


def parse_topology(text: str) -> dict[str, str]:
    """`nvidia-smi topo -m` -> {"0-1": "NV18", ...} for every GPU pair i<j it shows.

    Tolerates what real outputs vary in: tabs or spaces, ANSI escapes (the header
    row is underlined), NIC rows and columns (NIC0, or mlx5_0 on older drivers),
    empty affinity cells, a label line before the header and the legend after it.
    The header is the first line that starts with a GPU column and has no "X" (every
    matrix row has one: a GPU's link to itself). Only GPU rows and columns count.
    Returns {} for anything it cannot read.
    """
    columns: list[str] | None = None
    links: dict[str, str] = {}
    for raw in text.splitlines():
        tokens = strip_ansi(raw).split()  # nvidia-smi underlines the topo -m header
        if not tokens:
            continue
        if tokens[0].rstrip(":") == "Legend":
            break
        if columns is None:
            if _GPU_LABEL.fullmatch(tokens[0]) and "X" not in tokens:
                columns = []
                for tok in tokens:
                    if not _DEVICE_COL.fullmatch(tok):
                        break
                    columns.append(tok)
            continue
        row = _GPU_LABEL.fullmatch(tokens[0])
        if row is None:
            continue  # a NIC row, or noise
        i = int(row.group(1))
        for col, cell in zip(columns, tokens[1:]):
            c = _GPU_LABEL.fullmatch(col)
            if c is None or cell == "X" or not _LINK.fullmatch(cell):
                continue
            j = int(c.group(1))
            if i < j:
                links[f"{i}-{j}"] = cell
            elif j < i:
                # The matrix is symmetric; the lower half fills a pair whose own
                # row was missing (a truncated capture).
                links.setdefault(f"{j}-{i}", cell)
    return dict(sorted(links.items(), key=lambda kv: tuple(int(x) for x in kv[0].split("-"))))

class NvidiaProbe(NamedTuple):
    """What nvidia-smi gave: GPUs, its driver version, why it gave nothing (`cause`),
    and a `note` when GPUs were found but a detail is missing."""

    gpus: tuple[Gpu, ...]
    driver_version: str | None
    cause: str | None = None
    note: str | None = None
    missing: bool = False  # nvidia-smi is not installed (normal on a host without NVIDIA GPUs)


def _query_argv(fields: Sequence[str]) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


def probe_nvidia_gpus(runner: Runner, *, timeout: float = DEFAULT_TIMEOUT) -> NvidiaProbe:
    """NVIDIA GPUs from `nvidia-smi --query-gpu=...`.

    If the driver's nvidia-smi predates the `compute_cap` field, query again
    without it and take the capability from data/gpus.toml by GPU name.
    """
    res, cause = _run_tool(runner, _query_argv(GPU_FIELDS), timeout)
    fields: tuple[str, ...] = GPU_FIELDS
    note: str | None = None
    if res is not None and cause is not None:
        if parse_invalid_field(f"{res.stdout}\n{res.stderr}") == "compute_cap":
            fields = tuple(f for f in GPU_FIELDS if f != "compute_cap")
            res, cause = _run_tool(runner, _query_argv(fields), timeout)
    if res is None:
        return NvidiaProbe((), None, cause, missing=runner.which("nvidia-smi") is None)
    parsed = parse_query_gpu(res.stdout, fields)
    if cause is not None:
        if not parsed.gpus:
            return NvidiaProbe((), None, cause)
        # Some GPUs answered, one did not ("Unable to determine the device handle for
        # GPU 0000:41:00.0: GPU is lost"): keep the ones listed and say what failed.
        said = next(
            (
                line.strip()[:200]
                for text in (res.stderr, res.stdout)
                for line in text.splitlines()
                if line.strip() and not parse_query_gpu(line, fields).gpus
            ),
            "",
        )
        note = (
            f"nvidia-smi listed {len(parsed.gpus)} GPU(s) but exited with status"
            f" {res.returncode}" + (f": {said}" if said else "")
        )
    if not parsed.gpus:
        said = first_line(res.stdout) or first_line(res.stderr)
        cause = "nvidia-smi listed no GPUs" + (f" ({said})" if said else "")
        return NvidiaProbe((), parsed.driver_version, cause)
    gpus = parsed.gpus
    if "compute_cap" not in fields:
        table = load_gpu_names()
        filled = []
        missing = []
        for g in gpus:
            cc = find_capability(g.name, table)
            if cc is None:
                missing.append(g.name)
            filled.append(Gpu(g.index, g.name, cc, g.memory_mib, g.uuid, g.pci_bus_id))
        gpus = tuple(filled)
        if missing:
            unknown_cc = (
                f"compute capability of {', '.join(sorted(set(missing)))} unknown, because this"
                " nvidia-smi cannot report compute_cap (driver too old) and torchfit's GPU table"
                " (data/gpus.toml) has no entry for it; use --assume gpu=sm_XY"
            )
            note = f"{note}; {unknown_cc}" if note else unknown_cc
    return NvidiaProbe(gpus, parsed.driver_version, None, note)


def probe_topology(
    runner: Runner, *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[dict[str, str], str | None]:
    """GPU-pair links from `nvidia-smi topo -m`; ({}, reason) when unreadable."""
    res, cause = _run_tool(runner, ["nvidia-smi", "topo", "-m"], timeout)
    if res is None or cause is not None:
        return {}, _unknown(cause or "nvidia-smi topo -m failed")
    links = parse_topology(res.stdout)
    if not links:
        return {}, _unknown("nvidia-smi topo -m printed no GPU matrix torchfit could read")
    return links, None


def probe_driver_version(
    runner: Runner,
    root: str = "/",
    *,
    timeout: float = DEFAULT_TIMEOUT,
    nvidia: NvidiaProbe | None = None,
) -> tuple[str | None, str | None]:
    """The NVIDIA driver version: /proc NVRM line, /sys/module, then nvidia-smi.

    The kernel module's own files come first: they need no tool and name the
    driver actually loaded (an nvidia-smi from another driver package can be first
    on PATH, e.g. canonical/inference-snaps#89: nvidia-smi 470 on driver 580).
    Pass `nvidia` (an earlier probe_nvidia_gpus result) to avoid a second query.
    """
    causes = []
    proc = _read(_under(root, "/proc/driver/nvidia/version"))
    if proc is not None:
        found = parse_nvrm_version(proc)
        if found:
            return found, None
        causes.append("/proc/driver/nvidia/version has no NVRM version line")
    sys_mod = _read(_under(root, "/sys/module/nvidia/version"))
    if sys_mod is not None:
        found = parse_module_version(sys_mod)
        if found:
            return found, None
        causes.append("/sys/module/nvidia/version holds no version")
    if proc is None and sys_mod is None:
        causes.append(
            "no NVIDIA kernel module is loaded (/proc/driver/nvidia/version and"
            " /sys/module/nvidia/version are absent)"
        )
    if nvidia is None:
        nvidia = probe_nvidia_gpus(runner, timeout=timeout)
    if nvidia.driver_version:
        return nvidia.driver_version, None
    causes.append(nvidia.cause or "nvidia-smi reported no driver version")
    return None, _unknown(", and ".join(causes))
