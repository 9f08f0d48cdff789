"""Host probes: what this machine has, read from /proc, /sys, /etc and a few tools.

Split the way STYLE.md asks. `parse_*` are pure functions of text that never
raise (the tests fuzz them); `probe_*` do the I/O, through the one `Runner` for
commands, and return a value plus, when the value is unknown, the reason
("unknown, because nvidia-smi timed out after 10 s"); `probe_host` assembles
`HostFacts`. A missing, hanging or failing tool never gives a traceback, only a
None/empty fact and its reason. `root` relocates /proc, /sys, /etc and /opt so
tests can point the probes at a fake tree. Nothing is cached between calls.
"""

from __future__ import annotations

import glob
import os
import platform
import re
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from torchfit.compat.facts import Gpu, HostFacts, Pyenv, PythonInstall
from torchfit.compat.gpunames import find_capability, load_gpu_names
from torchfit.compat.judgements import GpuHost, judge_gpu_host
from torchfit.compat.versions import Arch
from torchfit.errors import BadInput, ProbeFailed
from torchfit.runner import Runner, RunResult, ToolMissing, ToolTimeout

# nvidia-smi hangs for minutes on a wedged driver (GPU fallen off the bus, Xid 79);
# 10 s is far above a healthy query (~0.1-0.5 s on the H200 host) and the CLI's
# --timeout changes it.
DEFAULT_TIMEOUT = 10.0

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

_PY_VERSION_CODE = "import sys;print('%d.%d.%d'%sys.version_info[:3])"

# Explicit ASCII classes: Python's \d also matches other scripts' digits.
_DRIVER = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?")
_GPU_LABEL = re.compile(r"GPU([0-9]+)")
# A device column of `topo -m`: GPU0, NIC0, and mlx5_0 on drivers that named NICs
# by their RDMA device. "CPU Affinity", "NUMA Affinity" and "GPU NUMA ID" end the
# device columns; none of their words ends in a digit.
_DEVICE_COL = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]*[0-9]")
_LINK = re.compile(r"[A-Za-z][A-Za-z0-9#]*")
# CSI sequences (ESC [ ... final byte): nvidia-smi underlines the topo -m header.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PY_FINAL = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)")
_GFX = re.compile(r"gfx[0-9a-f]+")


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


# /proc and /sys files are a few KB; a link to /dev/zero must not fill the memory.
READ_LIMIT = 1 << 20


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(READ_LIMIT)
    except (OSError, ValueError):
        return None


def _first_line(text: str, limit: int = 200) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


# --- pure parsers ---------------------------------------------------------------------


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


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


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
        tokens = _strip_ansi(raw).split()
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


def parse_gfx_target_version(value: int) -> str | None:
    """KFD's gfx_target_version (90402) -> "gfx942"; None for 0 (a CPU node) or junk.

    The kernel encodes major*10000 + minor*100 + stepping (drivers/gpu/drm/amd/
    amdkfd/kfd_topology.c); LLVM target names print minor and stepping as one hex
    digit each, so 90010 is gfx90a and 100300 is gfx1030.
    """
    if value <= 0:
        return None
    major, minor, step = value // 10000, (value // 100) % 100, value % 100
    if major <= 0 or minor > 15 or step > 15:
        return None
    return f"gfx{major}{minor:x}{step:x}"


def parse_kfd_properties(text: str) -> str | None:
    """A KFD topology node's `properties` file -> its gfx target, or None (CPU node)."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "gfx_target_version":
            if re.fullmatch(r"[0-9]{1,9}", parts[1]):
                return parse_gfx_target_version(int(parts[1]))
            return None
    return None


def parse_rocm_agents(text: str) -> tuple[str, ...]:
    """`rocm_agent_enumerator` output -> GPU gfx targets; gfx000 (the CPU) is skipped."""
    out = []
    for line in text.splitlines():
        token = line.strip()
        if _GFX.fullmatch(token) and token != "gfx000":
            out.append(token)
    return tuple(out)


def parse_rocminfo(text: str) -> tuple[tuple[str, str | None], ...]:
    """`rocminfo` -> (gfx, marketing name) for each GPU agent, in agent order.

    Agents are blocks after "Agent N" lines; a GPU agent has "Name: gfxNNN" and
    "Device Type: GPU" (the ISA section's "Name: amdgcn-amd-amdhsa--gfx942:..." is not
    a bare gfx name, so it never matches).
    """
    agents: list[dict[str, str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if re.fullmatch(r"Agent [0-9]+", stripped):
            agents.append({})
            continue
        if not agents or ":" not in stripped:
            continue
        key, _, value = stripped.partition(":")
        agents[-1].setdefault(key.strip(), value.strip())
    out = []
    for agent in agents:
        name = agent.get("Name", "")
        if not _GFX.fullmatch(name) or name == "gfx000":
            continue
        if agent.get("Device Type", "GPU") != "GPU":
            continue
        out.append((name, agent.get("Marketing Name") or None))
    return tuple(out)


def parse_ldd_version(text: str) -> str | None:
    """glibc's version from `ldd --version`: "ldd (Ubuntu GLIBC 2.39-0ubuntu8.6) 2.39"
    -> "2.39", "ldd (GNU libc) 2.17" -> "2.17". musl's ldd ("musl libc (x86_64)") and
    anything else give None."""
    line = _first_line(text, 500)
    if not line.startswith("ldd") and "GLIBC" not in line.upper():
        return None
    last = line.split()[-1]
    return last if re.fullmatch(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?", last) else None


def parse_confstr_glibc(text: str | None) -> str | None:
    """`os.confstr("CS_GNU_LIBC_VERSION")` ("glibc 2.39") -> "2.39", or None."""
    if not text:
        return None
    parts = text.split()
    if (
        len(parts) == 2
        and parts[0] == "glibc"
        and re.fullmatch(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?", parts[1])
    ):
        return parts[1]
    return None


def _unquote(value: str) -> str:
    # os-release(5): values may be enclosed in single or double quotes, with
    # backslash escapes inside double quotes.
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
        if value and "\\" in value:
            value = re.sub(r"\\(.)", r"\1", value)
    return value


def parse_os_release(text: str) -> str | None:
    """/etc/os-release -> "ID:VERSION_ID" ("ubuntu:24.04", "centos:7"), "ID" alone on
    rolling distributions without VERSION_ID (Arch), None without an ID."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values.setdefault(key.strip(), _unquote(value))
    os_id = values.get("ID", "").strip().lower()
    if not os_id or any(c.isspace() or c == ":" for c in os_id):
        return None
    version = values.get("VERSION_ID", "").strip()
    if version and not any(c.isspace() for c in version):
        return f"{os_id}:{version}"
    return os_id


def parse_wsl(text: str) -> bool:
    """True when a kernel release or /proc/version string is WSL's.

    WSL2 kernels are "5.15.153.1-microsoft-standard-WSL2", WSL1 reports
    "4.4.0-19041-Microsoft" (Microsoft's WSL docs, "check which version of WSL").
    """
    low = text.lower()
    return "microsoft" in low or "wsl" in low


def parse_python_version(text: str) -> str | None:
    """Output of `python -c "...sys.version_info[:3]"` ("3.12.1") -> "3.12.1", or None."""
    token = text.strip()
    return token if _PY_FINAL.fullmatch(token) else None


def parse_pyenv_version(text: str) -> str | None:
    """`pyenv --version` ("pyenv 2.6.30") -> "2.6.30"."""
    m = re.match(r"pyenv\s+([0-9][0-9A-Za-z.+-]*)", text.strip())
    return m.group(1) if m else None


def parse_pyenv_versions(text: str) -> tuple[str, ...]:
    """`pyenv versions --bare` -> the CPython versions pyenv has built ("3.12.1").

    Skips "system", virtualenvs ("3.12.1/envs/x", "myenv"), other implementations
    (pypy3.10-7.3.15, miniconda3-latest) and free-threaded builds ("3.13.0t": a
    different ABI, cp313t wheels).
    """
    return _final_cpython(text.splitlines())


def parse_pyenv_install_list(text: str) -> tuple[str, ...]:
    """`pyenv install --list` -> CPython final releases pyenv can build, in its order.

    Only bare "X.Y.Z" lines count: not "3.14-dev", "3.14.0rc1", "3.13.0t", "pypy...",
    "anaconda3-...", nor the "Available versions:" header.
    """
    return _final_cpython(text.splitlines())


def _final_cpython(lines: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for line in lines:
        token = line.strip()
        if _PY_FINAL.fullmatch(token):
            seen.setdefault(token, None)
    return tuple(seen)


def parse_pci_vendor(vendor: str, pci_class: str) -> str | None:
    """A PCI device's sysfs `vendor` and `class` -> "NVIDIA"/"AMD" for GPUs, else None.

    Display controllers are PCI base class 0x03 (VGA 0x0300, 3D 0x0302, other
    0x0380: PCI Code and ID Assignment Specification); NVSwitches (0x0680) are not
    GPUs. Vendor IDs: 0x10de NVIDIA, 0x1002 AMD (PCI-SIG vendor list).
    """
    if not pci_class.strip().lower().startswith("0x03"):
        return None
    return {"0x10de": "NVIDIA", "0x1002": "AMD"}.get(vendor.strip().lower())


# --- running tools --------------------------------------------------------------------


def _run_tool(
    runner: Runner, argv: Sequence[str], timeout: float
) -> tuple[RunResult | None, str | None]:
    """Run argv; return (result, None) on success, else (result-or-None, cause)."""
    tool = os.path.basename(argv[0])
    try:
        res = runner.run(argv, timeout=timeout)
    except ToolTimeout:
        return None, f"{tool} timed out after {timeout:g} s"
    except ToolMissing as exc:
        return None, exc.message
    except ProbeFailed as exc:
        return None, f"{tool} could not run: {exc.message}"
    if res.returncode != 0:
        # Errors usually go to stderr; nvidia-smi prints its own on stdout
        # (fixtures/h200-x2/query-gpu-bad-field.txt: stdout, stderr empty).
        said = _first_line(res.stderr) or _first_line(res.stdout)
        if said:
            return res, f"{tool} failed: {said}"
        return res, f"{tool} failed with exit status {res.returncode}"
    return res, None


def _unknown(cause: str) -> str:
    return f"unknown, because {cause}"


# --- NVIDIA ---------------------------------------------------------------------------


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
        said = _first_line(res.stdout) or _first_line(res.stderr)
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


# --- AMD ------------------------------------------------------------------------------


def _find_rocm_tool(runner: Runner, name: str, root: str) -> str | None:
    # ROCm installs its tools in /opt/rocm/bin, which is often not on PATH.
    on_path = runner.which(name)
    if on_path:
        return on_path
    candidate = _under(root, f"/opt/rocm/bin/{name}")
    return candidate if os.access(candidate, os.X_OK) else None


def _amd_gpu(index: int, gfx: str, name: str | None = None) -> Gpu:
    return Gpu(index=index, name=name or f"AMD {gfx}", vendor="amd", gfx=gfx)


def probe_amd_gpus(
    runner: Runner, root: str = "/", *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[tuple[Gpu, ...], str | None]:
    """AMD GPUs: rocm_agent_enumerator, else rocminfo, else KFD's sysfs topology.

    Returns (gpus, None), or ((), cause) with every source's cause joined.
    """
    causes = []
    tool = _find_rocm_tool(runner, "rocm_agent_enumerator", root)
    if tool is None:
        causes.append("rocm_agent_enumerator not found")
    else:
        res, cause = _run_tool(runner, [tool], timeout)
        if res is not None and cause is None:
            targets = parse_rocm_agents(res.stdout)
            if targets:
                return tuple(_amd_gpu(i, g) for i, g in enumerate(targets)), None
            return (), "rocm_agent_enumerator lists no GPU agent"
        causes.append(cause or "rocm_agent_enumerator failed")
    tool = _find_rocm_tool(runner, "rocminfo", root)
    if tool is None:
        causes.append("rocminfo not found")
    else:
        res, cause = _run_tool(runner, [tool], timeout)
        if res is not None and cause is None:
            agents = parse_rocminfo(res.stdout)
            if agents:
                return tuple(_amd_gpu(i, g, n) for i, (g, n) in enumerate(agents)), None
            return (), "rocminfo lists no GPU agent"
        causes.append(cause or "rocminfo failed")
    nodes_dir = _under(root, "/sys/class/kfd/kfd/topology/nodes")
    if not os.path.isdir(nodes_dir):
        causes.append("/sys/class/kfd is absent (no amdgpu kernel driver)")
        return (), "; ".join(causes)

    def node_number(path: str) -> int:
        num = os.path.basename(os.path.dirname(path))
        return int(num) if num.isdigit() and num.isascii() else 1 << 30

    gfx_list = []
    for props in sorted(glob.glob(os.path.join(nodes_dir, "*", "properties")), key=node_number):
        text = _read(props)
        found = parse_kfd_properties(text) if text is not None else None
        if found:
            gfx_list.append(found)
    if gfx_list:
        return tuple(_amd_gpu(i, g) for i, g in enumerate(gfx_list)), None
    causes.append("/sys/class/kfd lists no GPU node")
    return (), "; ".join(causes)


def probe_rocm_version(root: str = "/") -> str | None:
    """ROCm's version from /opt/rocm/.info/version ("6.2.0-66" -> "6.2.0"), or None."""
    text = _read(_under(root, "/opt/rocm/.info/version"))
    if text is None:
        return None
    m = re.match(r"\s*([0-9]+\.[0-9]+(?:\.[0-9]+)?)", text)
    return m.group(1) if m else None


def find_pci_gpus(root: str = "/") -> dict[str, int]:
    """Count GPUs on the PCI bus by vendor ({"NVIDIA": 2}), from sysfs; no driver needed."""
    counts: dict[str, int] = {}
    for dev in glob.glob(_under(root, "/sys/bus/pci/devices/*")):
        vendor = _read(os.path.join(dev, "vendor"))
        pci_class = _read(os.path.join(dev, "class"))
        if vendor is None or pci_class is None:
            continue
        name = parse_pci_vendor(vendor, pci_class)
        if name:
            counts[name] = counts.get(name, 0) + 1
    return counts


# --- OS, glibc, arch, WSL --------------------------------------------------------------


def probe_glibc(
    runner: Runner, root: str = "/", *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[str | None, str | None]:
    """glibc's version: confstr on this host (no subprocess), else `ldd --version`."""
    if root == "/":
        try:
            found = parse_confstr_glibc(os.confstr("CS_GNU_LIBC_VERSION"))
        except (ValueError, OSError, AttributeError):
            found = None  # not glibc (musl), or not a POSIX confstr at all
        if found:
            return found, None
    res, cause = _run_tool(runner, ["ldd", "--version"], timeout)
    if res is None:
        return None, _unknown(cause or "ldd failed")
    # musl's ldd prints its banner on stderr and exits 1; glibc's on stdout, exit 0.
    found = parse_ldd_version(res.stdout) or parse_ldd_version(res.stderr)
    if found:
        return found, None
    said = _first_line(res.stdout) or _first_line(res.stderr)
    if "musl" in said.lower():
        return None, _unknown(f"this system's C library is not glibc ({said})")
    return None, _unknown(f"`ldd --version` did not name a glibc version ({said or 'no output'})")


def probe_os(root: str = "/") -> tuple[str | None, str | None]:
    """ "ubuntu:24.04" from /etc/os-release (or /usr/lib/os-release, per os-release(5))."""
    if root == "/" and not sys.platform.startswith("linux"):
        return None, _unknown(
            f"this is {platform.system() or sys.platform}, not Linux (out of scope)"
        )
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        text = _read(_under(root, path))
        if text is not None:
            found = parse_os_release(text)
            if found:
                return found, None
            return None, _unknown(f"{path} has no ID")
    return None, _unknown("/etc/os-release and /usr/lib/os-release are absent")


def probe_wsl(root: str = "/") -> tuple[bool | None, str | None]:
    """Whether this Linux runs under WSL, from the kernel release string."""
    texts = [
        _read(_under(root, "/proc/sys/kernel/osrelease")),
        _read(_under(root, "/proc/version")),
    ]
    if all(t is None for t in texts):
        return None, _unknown("/proc/sys/kernel/osrelease and /proc/version are unreadable")
    return any(parse_wsl(t) for t in texts if t is not None), None


_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def probe_arch(
    runner: Runner, *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[str | None, str | None]:
    """The CPU architecture as wheel tags spell it (x86_64, aarch64)."""
    machine = platform.machine()
    if not machine:
        res, cause = _run_tool(runner, ["uname", "-m"], timeout)
        if res is None or cause is not None:
            return None, _unknown(cause or "uname -m failed")
        machine = res.stdout.strip()
    if not machine:
        return None, _unknown("platform.machine() and `uname -m` are empty")
    return _ARCH_ALIASES.get(machine.lower(), machine), None


# --- Pythons and pyenv -------------------------------------------------------------------


def _find_pyenv(runner: Runner) -> str | None:
    found = runner.which("pyenv")
    if found:
        return found
    # pyenv's installer puts it in $PYENV_ROOT/bin (default ~/.pyenv/bin), which
    # non-interactive shells (cron, CI, ssh host cmd) often lack on PATH.
    env = runner.environ()
    roots = [
        env.get("PYENV_ROOT", ""),
        os.path.join(env.get("HOME", ""), ".pyenv") if env.get("HOME") else "",
    ]
    for r in roots:
        candidate = os.path.join(r, "bin", "pyenv") if r else ""
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _pyenv_python(pyenv_root: str, version: str) -> str | None:
    major_minor = ".".join(version.split(".")[:2])
    bindir = os.path.join(pyenv_root, "versions", version, "bin")
    for name in (f"python{major_minor}", "python3", "python"):
        exe = os.path.join(bindir, name)
        if os.access(exe, os.X_OK):
            return exe
    return None


def probe_pyenv(
    runner: Runner, *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[Pyenv | None, tuple[PythonInstall, ...], str | None]:
    """pyenv, its CPython builds and what it can install; (None, (), reason) without it.

    Four quick pyenv calls (root, --version, versions --bare, install --list),
    run concurrently; `install --list` reads python-build's definition files and
    runs once.
    """
    exe = _find_pyenv(runner)
    if exe is None:
        return None, (), _unknown("pyenv not found on PATH, in $PYENV_ROOT/bin or ~/.pyenv/bin")
    calls = {
        "root": [exe, "root"],
        "version": [exe, "--version"],
        "versions": [exe, "versions", "--bare"],
        "list": [exe, "install", "--list"],
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {k: pool.submit(_run_tool, runner, argv, timeout) for k, argv in calls.items()}
        results = {k: f.result() for k, f in futures.items()}
    res, cause = results["root"]
    root = res.stdout.strip() if res is not None and cause is None else ""
    if not root or not os.path.isdir(root):
        return None, (), _unknown(cause or f"`pyenv root` named no directory ({root!r})")
    res, cause = results["version"]
    version = parse_pyenv_version(res.stdout) if res is not None and cause is None else None
    res, cause = results["list"]
    installable = parse_pyenv_install_list(res.stdout) if res is not None and cause is None else ()
    reason = None
    if not installable:
        reason = (
            f"pyenv found at {root}, but `pyenv install --list` gave no CPython release"
            f" ({cause or 'empty list'}), so none is known to be installable"
        )
    pythons = []
    res, cause = results["versions"]
    if res is not None and cause is None:
        for v in parse_pyenv_versions(res.stdout):
            path = _pyenv_python(root, v)
            if path:
                pythons.append(PythonInstall(v, path, "pyenv"))
    return Pyenv(root, version, installable), tuple(pythons), reason


def _is_venv_bin(directory: str) -> bool:
    # PEP 405: a virtual environment has pyvenv.cfg one level above its bin/.
    return os.path.isfile(os.path.join(os.path.dirname(directory), "pyvenv.cfg"))


def _path_python_candidates(runner: Runner, skip_dirs: Iterable[str], seen: set[str]) -> list[str]:
    """One path per distinct interpreter file on PATH, in PATH order.

    When several names lead to one file, prefer a name outside a virtual
    environment (an activated venv's python3.12 links to /usr/bin/python3.12, and
    the host's interpreter is the fact), then PATH order.
    """
    skip = {os.path.realpath(d) for d in skip_dirs}
    chosen: dict[str, tuple[bool, str]] = {}  # realpath -> (in a venv, path)
    for d in runner.environ().get("PATH", "").split(os.pathsep):
        if not d or os.path.realpath(d) in skip:
            continue
        try:
            # python3.X before a bare python3 that links to it: the versioned name
            # is the one a user would type to get that interpreter again.
            names = sorted(os.listdir(d), key=lambda n: (n == "python3", n))
        except OSError:
            continue
        in_venv = _is_venv_bin(d)
        for name in names:
            if not re.fullmatch(r"python3(?:\.[0-9]+)?", name):
                continue
            path = os.path.join(d, name)
            real = os.path.realpath(path)
            if real in seen or not os.path.isfile(real) or not os.access(real, os.X_OK):
                continue
            if real not in chosen or (chosen[real][0] and not in_venv):
                chosen[real] = (in_venv, path)
    seen.update(chosen)
    return [path for _, path in chosen.values()]


def probe_pythons(
    runner: Runner,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    skip_dirs: Iterable[str] = (),
    known: Iterable[PythonInstall] = (),
) -> tuple[tuple[PythonInstall, ...], str | None]:
    """Every `python3` / `python3.X` on PATH, one per real file, with its version.

    `skip_dirs` (pyenv's shims) are left out; `known` interpreters (pyenv's) are not
    run again. Each interpreter is asked for its version, concurrently; one that
    fails or hangs is left out.
    """
    seen = {os.path.realpath(p.path) for p in known if p.path}
    candidates = _path_python_candidates(runner, skip_dirs, seen)

    def ask(path: str) -> PythonInstall | None:
        res, cause = _run_tool(runner, [path, "-c", _PY_VERSION_CODE], timeout)
        if res is None or cause is not None:
            return None
        version = parse_python_version(res.stdout)
        return PythonInstall(version, path, "path") if version else None

    found: list[PythonInstall] = []
    if candidates:
        with ThreadPoolExecutor(max_workers=min(8, len(candidates))) as pool:
            found = [p for p in pool.map(ask, candidates) if p is not None]
    if not found:
        return (), _unknown("no working python3 or python3.X on PATH")
    return tuple(found), None


def _probe_all_pythons(
    runner: Runner, timeout: float
) -> tuple[Pyenv | None, tuple[PythonInstall, ...], str | None, str | None]:
    pyenv, pyenv_pythons, pyenv_reason = probe_pyenv(runner, timeout=timeout)
    skip: list[str] = []
    if pyenv is not None:
        # pyenv's shims are bash wrappers around the builds listed above; running
        # each costs ~50 ms and says nothing new.
        skip = [os.path.join(pyenv.path, "shims")]
        skip += glob.glob(os.path.join(pyenv.path, "plugins", "*", "shims"))
    path_pythons, _ = probe_pythons(runner, timeout=timeout, skip_dirs=skip, known=pyenv_pythons)
    pythons = path_pythons + pyenv_pythons
    reason = None
    if not pythons:
        reason = _unknown("no python3.X on PATH and no CPython built by pyenv")
    return pyenv, pythons, reason, pyenv_reason


# --- the assembler ----------------------------------------------------------------------


def nvidia_failure(nvidia: NvidiaProbe, pci_nvidia: int | None = 0) -> str | None:
    """The cause when this is an NVIDIA GPU host whose GPUs could not be listed.

    nvidia-smi failing ("Failed to initialize NVML: Driver/library version
    mismatch", exit 18) or hanging, or NVIDIA GPUs on the PCI bus with no driver
    answering: the GPUs are unknown, not absent. probe_host and doctor both call
    this, and compat.judgements.judge_gpu_host judges what it returns.
    """
    if nvidia.gpus:
        return None
    if not nvidia.missing and nvidia.cause:
        return nvidia.cause
    if pci_nvidia:
        return (
            f"the PCI bus shows {pci_nvidia} NVIDIA GPU(s), but no NVIDIA driver answers"
            f" ({nvidia.cause or 'nvidia-smi not found'})"
        )
    return None


def probe_gpu_host(runner: Runner, root: str = "/", *, timeout: float = DEFAULT_TIMEOUT) -> GpuHost:
    """Only the GPU part of probe_host, judged: for verify, which needs nothing else."""
    nvidia = probe_nvidia_gpus(runner, timeout=timeout)
    amd, _ = probe_amd_gpus(runner, root, timeout=timeout) if not nvidia.gpus else ((), None)
    gpus = nvidia.gpus + tuple(Gpu(len(nvidia.gpus) + g.index, g.name, vendor="amd", gfx=g.gfx) for g in amd)
    failure = None if gpus else nvidia_failure(nvidia, find_pci_gpus(root).get("NVIDIA", 0))
    return judge_gpu_host(HostFacts(gpus=gpus, nvidia_failure=failure))


def _gpus_reason(nvidia: NvidiaProbe, amd_cause: str | None, found: bool, root: str) -> str | None:
    if found:
        if nvidia.note:
            return nvidia.note
        if nvidia.cause and not nvidia.missing:
            return f"NVIDIA GPUs unknown, because {nvidia.cause}"
        return None
    parts = [nvidia.cause or "nvidia-smi listed no GPUs"]
    if amd_cause:
        parts.append(f"no AMD GPU found ({amd_cause})")
    on_bus = find_pci_gpus(root)
    if on_bus:
        listed = ", ".join(f"{n} {v}" for v, n in sorted(on_bus.items()))
        parts.append(f"yet the PCI bus shows {listed} GPU(s): is the driver installed and loaded?")
    return _unknown("; ".join(parts))


def probe_host(runner: Runner, root: str = "/", *, timeout: float = DEFAULT_TIMEOUT) -> HostFacts:
    """Probe this host (or the tree at `root`) and return its HostFacts.

    Pythons/pyenv, AMD and glibc probes run in worker threads while nvidia-smi
    (the one that can hang) runs in the calling thread, so Ctrl-C kills it at once.
    `timeout` bounds every command.
    """
    reasons: dict[str, str] = {}
    pool = ThreadPoolExecutor(max_workers=3)
    try:
        f_py = pool.submit(_probe_all_pythons, runner, timeout)
        f_amd = pool.submit(probe_amd_gpus, runner, root, timeout=timeout)
        f_glibc = pool.submit(probe_glibc, runner, root, timeout=timeout)

        nvidia = probe_nvidia_gpus(runner, timeout=timeout)
        driver, why = probe_driver_version(runner, root, timeout=timeout, nvidia=nvidia)
        if why:
            reasons["driver_version"] = why
        topology: dict[str, str] = {}
        if len(nvidia.gpus) >= 2:
            topology, why = probe_topology(runner, timeout=timeout)
            if why:
                reasons["topology"] = why
        elif nvidia.cause:
            reasons["topology"] = _unknown(nvidia.cause)

        os_name, why = probe_os(root)
        if why:
            reasons["os"] = why
        wsl, why = probe_wsl(root)
        if why:
            reasons["wsl"] = why
        arch, why = probe_arch(runner, timeout=timeout)
        if why:
            reasons["arch"] = why

        amd_gpus, amd_cause = f_amd.result()
        gpus = nvidia.gpus + tuple(
            Gpu(len(nvidia.gpus) + g.index, g.name, vendor="amd", gfx=g.gfx) for g in amd_gpus
        )
        why = _gpus_reason(nvidia, amd_cause, bool(gpus), root)
        if why:
            reasons["gpus"] = why
        glibc, why = f_glibc.result()
        if why:
            reasons["glibc"] = why
        pyenv, pythons, why, pyenv_why = f_py.result()
        if why:
            reasons["pythons"] = why
        if pyenv_why:
            reasons["pyenv"] = pyenv_why
    finally:
        # On Ctrl-C do not wait for queued work; running probes end by their timeout.
        pool.shutdown(wait=True, cancel_futures=True)
    return HostFacts(
        driver_version=driver,
        gpus=gpus,
        topology=topology,
        glibc=glibc,
        os=os_name,
        wsl=wsl,
        arch=arch,
        pythons=pythons,
        pyenv=pyenv,
        rocm_version=probe_rocm_version(root),
        reasons=reasons,
        source="host: probes",
        nvidia_failure=None if gpus else nvidia_failure(nvidia, find_pci_gpus(root).get("NVIDIA", 0)),
    )
