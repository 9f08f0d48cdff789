"""`torchfit verify`: prove a torch environment on this host's GPUs, and never hang.

What this module owns: starting the workers (installer/workers/, run by the
TARGET environment's Python), watching their heartbeats, timeouts and killing
every process they started, and turning their raw JSON lines into `Check`s and a
`Report`: inspection (versions that really run, arch coverage, kernels, the
lock), the DDP smoke test under torchrun, the all-reduce bandwidth sweep against
what the topology promises, and the comparison of several nodes. It also writes
the sbatch script of `--slurm`. Rendering is cmd_verify's job.

Two children run for minutes and must be watched while they run (heartbeats,
stall detection), so they are started here with Popen rather than through
`Runner.run`, which blocks until exit; the short nvidia-smi probes use the
Runner. torchrun starts each worker in a session of its own
(torch/distributed/elastic/multiprocessing/subprocess_handler: start_new_session),
so killing torchrun's process group does not reach them: every process whose
command line holds this run's unique work path is killed by pid, and each worker
also ends itself when its parent dies or its deadline passes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchfit._backports import FROZEN
from torchfit.compat.versions import Arch, BuildArch, coverage
from torchfit.errors import BadInput
from torchfit.redact import redact

WORKERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workers")
MIB = 1 << 20
GIB = 1 << 30
# 1 MiB .. 1 GiB in powers of two: the default sweep (11 sizes).
DEFAULT_SIZES = tuple(MIB << k for k in range(11))
# gloo on CPU processes moves ~0.3-1 GB/s here: a 1 GiB sweep would take minutes.
GLOO_SIZES = tuple(MIB << k for k in range(5))
# Below this fraction of what the links promise, bandwidth is a warning. Measured
# on 2x H200 NV18 (DESIGN.md): healthy 1 GiB busbw 322-332 GB/s of a 478 GB/s
# promise (0.67-0.69); NCCL_P2P_DISABLE=1 gives 27 GB/s (0.06).
WARN_FRACTION = 0.4
# The promise is a large-message figure; smaller sweeps measure per-call overhead
# (1 MiB: 22 GB/s on the same machine).
MIN_JUDGED_BYTES = 256 * MIB
DDP_STAGES = (
    "import",
    "device",
    "libraries",
    "init",
    "peers",
    "allreduce",
    "ddp",
    "params",
    "bandwidth",
)
POLL_S = 0.1


# --- value types ----------------------------------------------------------------------


@dataclass(**FROZEN)
class Options:
    """What to verify and how. `python` is the target interpreter (already resolved)."""

    python: str
    env_prefix: str | None = None
    nproc: int | None = None
    backend: str | None = None  # None: nccl when torch sees a GPU, else gloo
    timeout: float = 120.0  # per stage: a process with no progress for this long is stalled
    bandwidth: bool | None = None  # None: on for nccl, off for gloo
    sizes: tuple[int, ...] | None = None
    iters: int | None = None
    warmup: int | None = None
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_id: str = "torchfit-verify"
    master_addr: str | None = None
    master_port: int | None = None
    rdzv_timeout: float = 300.0
    lock: str | None = None
    keep: bool = False


@dataclass(**FROZEN)
class Check:
    """One verdict line: `status` is pass, warn, fail or skip."""

    name: str
    status: str
    summary: str
    detail: tuple[str, ...] = ()
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status, "summary": self.summary}
        if self.detail:
            out["detail"] = list(self.detail)
        if self.hint:
            out["hint"] = self.hint
        return out


@dataclass
class Report:
    """Everything verify found; `to_json()` is the `--json` output."""

    python: str
    env_prefix: str | None
    checks: list[Check] = field(default_factory=list)
    inspection: dict[str, Any] = field(default_factory=dict)
    ddp: dict[str, Any] | None = None
    nodes: list[dict[str, Any]] = field(default_factory=list)
    node_disagreements: list[str] = field(default_factory=list)
    bandwidth: dict[str, Any] | None = None
    lock: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    work_dir: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "fail"]

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def verdict(self) -> str:
        if self.ok:
            warns = [c.name for c in self.checks if c.status == "warn"]
            return "PASS" + (f" (warnings: {', '.join(warns)})" if warns else "")
        first = self.check(self.failed[0])
        why = f": {first.summary}" if first else ""
        return f"FAIL {', '.join(self.failed)}{why}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "verdict": self.verdict(),
            "failed": self.failed,
            "python": self.python,
            "env": self.env_prefix,
            "lock": self.lock,
            "checks": [c.to_json() for c in self.checks],
            "nodes": self.nodes,
            "node_disagreements": self.node_disagreements,
            "bandwidth": self.bandwidth,
            "ddp": self.ddp,
            "inspection": self.inspection,
            "timings": self.timings,
            "work_dir": self.work_dir,
        }


class Observer:
    """Progress of the long steps; the CLI prints it, tests and --json ignore it."""

    def phase(self, name: str, text: str) -> None:
        """A phase starts (inspect, ddp, bandwidth...)."""


# --- small pure helpers -----------------------------------------------------------------

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """ "1M", "1MiB", "512K", "8G", "65536" -> bytes (binary units); BadInput otherwise."""
    m = _SIZE.match(str(text))
    if not m:
        raise BadInput(f"--sizes: {text!r} is not a size like 1M, 64MiB or 1G")
    unit = {"": 1, "k": 1 << 10, "m": MIB, "g": GIB, "t": 1 << 40}[m.group(2).lower()]
    value = int(float(m.group(1)) * unit)
    if value < 4 or value % 4:
        raise BadInput(f"--sizes: {text!r} must be a positive multiple of 4 bytes (float32)")
    return value


def parse_sizes(items: Iterable[str]) -> tuple[int, ...]:
    """Sizes given as separate words or comma lists, sorted and de-duplicated."""
    out = {parse_size(p) for item in items for p in str(item).split(",") if p.strip()}
    if not out:
        raise BadInput("--sizes: give at least one size, e.g. --sizes 1M,1G")
    return tuple(sorted(out))


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def iteration_plan(
    sizes: Sequence[int], iters: int | None = None, warmup: int | None = None
) -> dict[int, tuple[int, int]]:
    """(warmup, timed iterations) per size: more calls where one call is short.

    On 2x H200 a 1 GiB all-reduce takes ~3.3 ms and 1 MiB ~50 us, so the whole
    default sweep is well under a second of collectives; the budget that matters is
    the 30 s of the whole verify (torch import 3.4 s, init 1.4 s, first DDP step 4 s).
    """
    plan = {}
    for n in sizes:
        auto_iters = 50 if n <= 16 * MIB else 20 if n <= 256 * MIB else 10 if n <= GIB else 5
        auto_warm = 5 if n <= GIB else 2
        plan[n] = (auto_warm if warmup is None else warmup, auto_iters if iters is None else iters)
    return plan


def decode_version_code(code: int | None) -> str | None:
    """NCCL / cuDNN integer versions -> "2.28.9".

    NCCL >= 2.9 and cuDNN >= 9 encode major*10000 + minor*100 + patch; earlier
    releases major*1000 + minor*100 + patch (nccl.h NCCL_VERSION_CODE; cudnn.h
    CUDNN_VERSION), e.g. 22809 -> 2.28.9, 2708 -> 2.7.8, 8902 -> 8.9.2.
    """
    if code is None or code < 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def decode_cuda_code(code: int | None) -> str | None:
    """cudaRuntimeGetVersion / cuDriverGetVersion: 13000 -> "13.0", 12080 -> "12.8"."""
    if not code:
        return None
    return f"{code // 1000}.{code % 1000 // 10}"


def format_compiled(value: Any) -> str | None:
    """torch.cuda.nccl.version(): a tuple (2, 28, 9) since torch 1.x-late, an int before."""
    if isinstance(value, (list, tuple)) and value:
        return ".".join(str(v) for v in value)
    if isinstance(value, int):
        return decode_version_code(value)
    return None


def _parts(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"[0-9]+", text or ""))


def same_version(expected: str, actual: str | None, depth: int | None = None) -> bool:
    """Component-wise equality over the components both give (at most `depth`).

    "9.10.2.21" (a wheel version) matches runtime "9.10.2"; "12.8" matches "12.8".
    """
    if actual is None:
        return False
    a, b = _parts(expected), _parts(actual)
    n = min(len(a), len(b), depth or 99)
    return n > 0 and a[:n] == b[:n]


def parse_arch_list(names: Sequence[str]) -> tuple[tuple[BuildArch, ...], tuple[Arch, ...]]:
    """torch.cuda.get_arch_list() -> (SASS entries, PTX-only arches).

    "sm_90" is SASS for 9.0; "compute_90" is PTX for 9.0. An arch with both is one
    BuildArch with ptx=True (the TORCH_CUDA_ARCH_LIST "9.0+PTX" spelling that
    compat.versions.coverage understands); PTX without SASS is kept apart because
    coverage() would count it as native. gfx names (ROCm) are ignored here.
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


def arch_coverage(capability: str, arch_list: Sequence[str]) -> tuple[str, str | None]:
    """How a build's arch list covers one GPU: ("native"|"ptx"|"none", via).

    The rules are compat.versions.coverage's (NVIDIA's binary compatibility), on
    the raw list the worker read from torch.
    """
    gpu = Arch.parse(capability)
    entries, ptx_only = parse_arch_list(arch_list)
    cov = coverage(gpu, entries)
    if cov.kind == "native":
        return "native", cov.via.arch.sm if cov.via else None
    jit = [a for a in ptx_only if a.suffix == "" and a[:2] <= gpu[:2]]
    if cov.kind == "ptx" and cov.via is not None:
        jit.append(cov.via.arch)
    if jit:
        return "ptx", f"compute_{max(jit).major}{max(jit).minor}"
    return "none", None


def parse_nvlink_status(text: str) -> dict[int, list[float]]:
    """`nvidia-smi nvlink -s` -> {gpu index: [GB/s of each active link]}.

    fixtures/h200-x2/nvlink-s.txt: "GPU 0: NVIDIA H200 (UUID: ...)" then lines
    "\t Link 0: 26.562 GB/s"; an inactive link reads "Link 3: <inactive>".
    Never raises; {} for anything else.
    """
    out: dict[int, list[float]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        m = re.match(r"^GPU\s+([0-9]+):", line.strip())
        if m:
            gpu = int(m.group(1))
            out.setdefault(gpu, [])
            continue
        m = re.match(r"^Link\s+[0-9]+:\s*([0-9]+(?:\.[0-9]+)?)\s*GB/s", line.strip())
        if m and gpu is not None:
            out[gpu].append(float(m.group(1)))
    return {g: rates for g, rates in out.items() if rates}


# PCIe usable bandwidth per lane per direction, GB/s, after line encoding:
# gen1/2 8b/10b, gen3-5 128b/130b, gen6 FLIT (PCI-SIG base specifications).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def parse_pcie_query(text: str) -> dict[int, tuple[int, int]]:
    """`nvidia-smi --query-gpu=index,pcie.link.gen.max,pcie.link.width.max
    --format=csv,noheader,nounits` -> {index: (gen, width)}. The max values: the
    current ones drop while a GPU idles."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 3 and all(c.isdigit() for c in cells[:3]):
            out[int(cells[0])] = (int(cells[1]), int(cells[2]))
    return out


def link_promise(
    pair: tuple[int, int],
    topology: Mapping[str, str],
    nvlink: Mapping[int, Sequence[float]],
    pcie: Mapping[int, tuple[int, int]],
) -> tuple[float | None, str]:
    """GB/s per direction that the link between two GPUs promises, and why."""
    i, j = sorted(pair)
    link = topology.get(f"{i}-{j}")
    m = re.fullmatch(r"NV([0-9]+)", link or "")
    if m:
        count = int(m.group(1))
        rates = [r for g in (i, j) for r in nvlink.get(g, ())]
        if not rates:
            return None, f"{link} (per-link rate unknown: nvidia-smi nvlink -s gave nothing)"
        rate = min(rates)
        return count * rate, f"{link} x {rate:g} GB/s per link"
    if link is None:
        return None, f"GPU{i}-GPU{j}: link unknown (nvidia-smi topo -m gave nothing)"
    gens = [pcie.get(g) for g in (i, j)]
    if any(g is None or g[0] not in PCIE_LANE_GBPS for g in gens):
        return None, f"{link} (PCIe link unknown)"
    bw = min(PCIE_LANE_GBPS[g[0]] * g[1] for g in gens if g)
    gen, width = min((g for g in gens if g), key=lambda g: PCIE_LANE_GBPS[g[0]] * g[1])
    return bw, f"{link}: PCIe gen{gen} x{width}"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def bandwidth_causes(
    env: Mapping[str, str], topology: Mapping[str, str], pairs: Sequence[tuple[int, int]]
) -> list[str]:
    """Likely reasons for low all-reduce bandwidth, from what the ranks saw."""
    causes = []
    if _truthy(env.get("NCCL_P2P_DISABLE")):
        causes.append(
            "NCCL_P2P_DISABLE={} is set: NCCL copies through host memory instead of NVLink/PCIe P2P".format(
                env["NCCL_P2P_DISABLE"]
            )
        )
    if _truthy(env.get("NCCL_SHM_DISABLE")):
        causes.append(
            "NCCL_SHM_DISABLE={} is set: with P2P off too, traffic goes through the network stack".format(
                env["NCCL_SHM_DISABLE"]
            )
        )
    if env.get("NCCL_P2P_LEVEL", "").strip().upper() in ("LOC", "0"):
        causes.append("NCCL_P2P_LEVEL={} disables P2P between GPUs".format(env["NCCL_P2P_LEVEL"]))
    for name in (
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_MAX_NCHANNELS",
        "NCCL_MIN_NCHANNELS",
        "NCCL_BUFFSIZE",
    ):
        if env.get(name):
            causes.append(f"{name}={env[name]} overrides NCCL's tuning")
    for i, j in pairs:
        link = topology.get(f"{min(i, j)}-{max(i, j)}")
        if link in ("SYS", "PHB", "NODE"):
            causes.append(
                f"GPU{i}-GPU{j} are linked through {link}: no NVLink, and P2P over that path is often unavailable or slow"
            )
    return causes


def judge_bandwidth(
    rows: Sequence[Mapping[str, Any]],
    promise: float | None,
    promise_source: str,
    causes: Sequence[str],
) -> Check:
    """Peak busbw against the promise: below WARN_FRACTION warns and names causes."""
    if not rows:
        return Check("bandwidth", "skip", "no sweep ran")
    if all(r["busbw"] == 0 for r in rows):
        # busbw = algbw * 2(n-1)/n is 0 for one rank: nothing crossed a link.
        return Check("bandwidth", "skip", "one rank: an all-reduce crosses no link, nothing to measure")
    peak = max(rows, key=lambda r: r["busbw"])
    largest = max(rows, key=lambda r: r["bytes"])
    text = f"peak busbw {peak['busbw']:.1f} GB/s at {format_bytes(peak['bytes'])}"
    if promise is None:
        return Check("bandwidth", "pass", f"{text}; no promise to compare ({promise_source})")
    if largest["bytes"] < MIN_JUDGED_BYTES:
        return Check(
            "bandwidth",
            "pass",
            f"{text}; sizes below {format_bytes(MIN_JUDGED_BYTES)} measure call overhead, not the "
            f"{promise:.0f} GB/s link ({promise_source}): not judged",
        )
    fraction = peak["busbw"] / promise
    text += f" = {fraction:.0%} of the {promise:.0f} GB/s the links promise ({promise_source})"
    if fraction >= WARN_FRACTION:
        return Check("bandwidth", "pass", text)
    why = list(causes) or [
        "no known cause in the environment: run with NCCL_DEBUG=INFO and look for 'via P2P' "
        "(good) or 'via SHM'/'via NET' in the transport lines, and compare with nccl-tests all_reduce_perf"
    ]
    return Check(
        "bandwidth",
        "warn",
        f"{text}: below {WARN_FRACTION:.0%}",
        tuple(f"likely cause: {c}" for c in why),
        hint="unset the variables above, or check the GPUs' P2P status with nvidia-smi topo -p2p r",
    )


# --- lock ---------------------------------------------------------------------------------


def load_lock_expected(path: str) -> tuple[dict[str, str] | None, str | None]:
    """[tool.torchfit] expected = {torch, cuda, cudnn, nccl} of a pylock.toml.

    Tolerant: a missing file is (None, None); an unreadable one (None, why). Keys
    other than the four are ignored; values are kept as text.
    """
    if not os.path.isfile(path):
        return None, None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python < 3.11
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, ValueError) as exc:
        return None, f"{path}: cannot read ({exc})"
    tool = data.get("tool", {}).get("torchfit", {}) if isinstance(data.get("tool"), dict) else {}
    expected = tool.get("expected", {}) if isinstance(tool, dict) else {}
    if not isinstance(expected, dict):
        return None, f"{path}: [tool.torchfit] expected is not a table"
    out = {
        k: str(v)
        for k, v in expected.items()
        if k in ("torch", "cuda", "cudnn", "nccl") and v not in (None, "")
    }
    return out, None


def judge_lock(
    expected: Mapping[str, str], actual: Mapping[str, tuple[str | None, str | None]], path: str
) -> Check:
    """Compare lock values with what runs; a mismatch names the file that runs."""
    bad, good = [], []
    for key in ("torch", "cuda", "cudnn", "nccl"):
        if key not in expected:
            continue
        want = expected[key]
        have, where = actual.get(key, (None, None))
        if key == "torch":
            ok = have is not None and (
                have == want or ("+" not in want and have.split("+")[0] == want)
            )
        else:
            ok = same_version(want, have, depth=3)
        if ok:
            good.append(f"{key} {have}")
        else:
            runs = f" (runs: {where})" if where else ""
            bad.append(f"{key}: lock expects {want}, runs {have or 'nothing'}{runs}")
    if not bad and not good:
        return Check("lock", "skip", f"{path} has no [tool.torchfit] expected versions")
    if bad:
        return Check(
            "lock",
            "fail",
            bad[0],
            tuple(bad[1:]) + tuple(f"matches: {g}" for g in good),
            hint=f"the environment drifted from {path}: reinstall it, or find what overrides the file named above",
        )
    return Check("lock", "pass", f"matches {os.path.basename(path)}: " + ", ".join(good))


# --- judging the inspection -------------------------------------------------------------


def _lines_tail(text: str | None, n: int = 15) -> tuple[str, ...]:
    return tuple(redact(line) for line in (text or "").rstrip().splitlines()[-n:])


def cvd_entries(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [p.strip() for p in value.split(",") if p.strip()]


def judge_inspection(
    insp: Mapping[str, Any],
    backend: str | None,
    expected: Mapping[str, str] | None,
    lock_path: str | None,
    complete: bool = True,
) -> list[Check]:
    """Checks from the inspection worker's facts (merged `fact` lines).

    With `complete=False` (the worker stalled or died) only what it did report is
    judged; the `inspect` check says where it stopped.
    """
    checks: list[Check] = []
    py = insp.get("python") or {}
    checks.append(
        Check(
            "python",
            "pass",
            f"Python {py.get('version')} at {py.get('executable')} (prefix {py.get('prefix')})",
        )
    )
    if not complete and not insp.get("torch") and not insp.get("torch_error"):
        return checks
    if insp.get("torch_error") or not insp.get("torch"):
        err = insp.get("torch_error") or "torch did not report"
        missing = "No module named 'torch'" in err
        checks.append(
            Check(
                "torch",
                "fail",
                f"torch is not installed in {py.get('prefix')}"
                if missing
                else f"import torch failed: {err}",
                () if missing else _lines_tail(insp.get("torch_traceback")),
                hint="install a torch build into this environment (torchfit install), or point --env/--python at one",
            )
        )
        return checks
    torch = insp["torch"]
    libs = insp.get("libs") or {}
    devices = insp.get("devices") or {}
    env = insp.get("env") or {}
    cuda, hip = torch.get("cuda"), torch.get("hip")
    build = f"CUDA {cuda}" if cuda else f"ROCm/HIP {hip}" if hip else "CPU build"
    cudart = decode_cuda_code((libs.get("cudart") or {}).get("code"))
    driver_api = decode_cuda_code((libs.get("cuda_driver_api") or {}).get("code"))
    extra = []
    if cudart:
        extra.append(f"libcudart {cudart} at {(libs.get('cudart') or {}).get('path')}")
    if driver_api:
        extra.append(f"driver supports CUDA {driver_api}")
    checks.append(
        Check(
            "torch",
            "pass",
            f"torch {torch.get('version')} ({build}) from {os.path.dirname(torch.get('file') or '')}",
            tuple(extra),
        )
    )

    count = int(devices.get("count") or 0)
    gpus = devices.get("gpus") or []
    gpu_build = bool(cuda or hip)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    entries = cvd_entries(cvd)
    cvd_text = f"CUDA_VISIBLE_DEVICES={cvd!r}" if cvd is not None else ""
    if not gpu_build:
        if backend == "nccl":
            checks.append(
                Check(
                    "gpus",
                    "fail",
                    f"torch {torch.get('version')} is a CPU build: no GPU and no NCCL for --backend nccl"
                    + (f" ({cvd_text} does not matter to it)" if cvd_text else ""),
                    hint="install a CUDA or ROCm build, or use --backend gloo",
                )
            )
        else:
            checks.append(Check("gpus", "skip", "CPU build of torch: GPU checks skipped"))
    elif count == 0:
        why = devices.get("error") or "torch.cuda.is_available() is False"
        if entries is not None:
            why = (
                f"{cvd_text} hides every GPU ({why})"
                if not entries or entries == ["-1"]
                else f"{cvd_text}: {why}"
            )
        status = "fail" if backend in (None, "nccl") else "warn"
        checks.append(
            Check(
                "gpus",
                status,
                f"torch sees no GPU: {why}",
                hint="check CUDA_VISIBLE_DEVICES and that nvidia-smi lists the GPUs",
            )
        )
    elif entries and len(entries) > count and entries != ["-1"]:
        # CUDA enumerates CUDA_VISIBLE_DEVICES up to the first invalid entry and
        # silently drops the rest (CUDA C Programming Guide, "CUDA Environment Variables").
        checks.append(
            Check(
                "gpus",
                "fail",
                f"{cvd_text} lists {len(entries)} devices but torch sees {count}: an entry is invalid "
                f"and CUDA ignores it and everything after it",
                tuple(_gpu_line(g) for g in gpus),
                hint="use indices or UUIDs that nvidia-smi -L lists",
            )
        )
    else:
        checks.append(
            Check(
                "gpus",
                "pass",
                f"{count} GPU(s) visible" + (f" ({cvd_text})" if cvd_text else ""),
                tuple(_gpu_line(g) for g in gpus),
            )
        )

    if gpu_build and gpus and cuda:
        arch_list = insp.get("arch_list") or []
        rows, worst = [], "native"
        for g in gpus:
            if not g.get("capability"):
                continue
            kind, via = arch_coverage(g["capability"], arch_list)
            rows.append(
                f"GPU {g['index']} {g.get('name')} sm_{g['capability'].replace('.', '')}: "
                + {
                    "native": f"native code ({via})",
                    "ptx": f"PTX only ({via}, JIT-compiled at first use)",
                    "none": "NOT covered",
                }[kind]
            )
            worst = kind if (kind == "none" or (kind == "ptx" and worst == "native")) else worst
        status = {"native": "pass", "ptx": "warn", "none": "fail"}[worst]
        summary = {
            "native": "every GPU has native code in the build",
            "ptx": "a GPU runs only through PTX JIT (slow first start; needs a driver at the toolkit's floor)",
            "none": "a GPU is not covered by the build's arch list",
        }[worst]
        checks.append(
            Check(
                "arch-coverage",
                status,
                summary,
                (*tuple(rows), f"arch list: {' '.join(arch_list)}"),
                hint="install a build whose arch list covers this GPU" if worst == "none" else None,
            )
        )
    elif gpu_build and gpus and hip:
        arch_list = insp.get("arch_list") or []
        rows, uncovered = [], False
        for g in gpus:
            gfx = (g.get("gcn_arch") or "").split(":")[0]
            ok = gfx in arch_list
            uncovered = uncovered or not ok
            rows.append(
                f"GPU {g['index']} {g.get('name')} {gfx}: {'native code' if ok else 'NOT covered'}"
            )
        checks.append(
            Check(
                "arch-coverage",
                "fail" if uncovered else "pass",
                "a GPU is not covered by the build's arch list"
                if uncovered
                else "every GPU has native code in the build",
                tuple(rows),
            )
        )

    if gpu_build and count:
        kernels = insp.get("kernels")
        conv = insp.get("conv")
        if kernels is None:
            if complete:
                checks.append(Check("kernels", "fail", "the kernel test did not report"))
        else:
            bad: list[Any] = [k for k in kernels if not k.get("ok")]
            rows = [
                f"GPU {k['index']}: "
                + (
                    "ok" + (f" ({k['ms']} ms)" if k.get("ms") is not None else "")
                    if k.get("ok")
                    else f"FAILED: {k.get('error')}"
                )
                for k in kernels
            ]
            if conv is not None:
                rows.append(
                    "cuDNN conv2d on GPU 0: "
                    + ("ok" if conv.get("ok") else f"FAILED: {conv.get('error')}")
                )
                if not conv.get("ok"):
                    bad.append(conv)
            checks.append(
                Check(
                    "kernels",
                    "fail" if bad else "pass",
                    f"{len(bad)} kernel test(s) failed"
                    if bad
                    else f"a real kernel ran on each of {count} GPU(s)",
                    tuple(rows),
                )
            )

    checks.append(judge_nccl(torch, libs, env))
    if gpu_build:
        checks.append(judge_cudnn(torch, libs))
    if expected is not None and lock_path:
        actual = runtime_versions(insp)
        checks.append(judge_lock(expected, actual, lock_path))
    return checks


def _gpu_line(g: Mapping[str, Any]) -> str:
    if g.get("error"):
        return f"GPU {g.get('index')}: {g['error']}"
    return f"GPU {g.get('index')}: {g.get('name')} (compute capability {g.get('capability')}, {g.get('memory_mib')} MiB)"


def judge_nccl(torch: Mapping[str, Any], libs: Mapping[str, Any], env: Mapping[str, str]) -> Check:
    """Runtime NCCL (what is mapped) against the NCCL torch was compiled with."""
    nccl = libs.get("nccl") or {}
    runtime = decode_version_code(nccl.get("code"))
    path = nccl.get("path")
    compiled = format_compiled(torch.get("nccl_compiled"))
    others = [p for p in nccl.get("paths") or [] if p != path]
    detail = tuple(f"also mapped: {p}" for p in others)
    if not (torch.get("cuda") or torch.get("hip")):
        mapped = (
            f"; a libnccl {runtime or '(unknown version)'} is mapped from {path} but unused"
            if path
            else ""
        )
        return Check("nccl", "skip", f"CPU build of torch: no NCCL{mapped}", detail)
    if nccl.get("error") and not runtime:
        return Check("nccl", "fail", f"{path}: ncclGetVersion failed ({nccl['error']})", detail)
    if runtime is None:
        return Check(
            "nccl",
            "fail",
            f"no libnccl is mapped into the process (torch compiled against NCCL {compiled})",
            detail,
            hint="the NCCL library did not load: check the nvidia-nccl package in the environment",
        )
    if compiled is None:
        return Check(
            "nccl",
            "warn",
            f"runtime NCCL {runtime} from {path}; torch does not say which NCCL it was compiled with",
            detail,
        )
    if same_version(compiled, runtime, depth=3) and len(_parts(compiled)) >= 3:
        return Check(
            "nccl", "pass", f"runtime NCCL {runtime} from {path} = compiled {compiled}", detail
        )
    preload = env.get("LD_PRELOAD", "")
    # The maps name the file itself (/usr/lib/.../libnccl.so.2.28.3); say which
    # LD_PRELOAD entry (/lib/.../libnccl.so.2) it is, when one resolves to it.
    via = next(
        (
            e
            for e in re.split(r"[:\s]+", preload)
            if e and path and os.path.realpath(e) == os.path.realpath(path)
        ),
        None,
    )
    if via:
        detail = (f"preloaded: LD_PRELOAD={preload}", *detail)
    if "nccl" in preload:
        hint = f"LD_PRELOAD={preload} replaces the NCCL torch was built with; unset it or preload a {compiled}"
    elif env.get("LD_LIBRARY_PATH"):
        hint = f"another libnccl is found first (LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}); remove it from the search path"
    else:
        hint = "another libnccl is loaded before the one torch ships; see `torchfit doctor`"
    return Check(
        "nccl",
        "fail",
        f"runtime NCCL {runtime} from {path}, torch compiled against {compiled}",
        detail,
        hint=hint,
    )


def judge_cudnn(torch: Mapping[str, Any], libs: Mapping[str, Any]) -> Check:
    runtime_code = libs.get("cudnn")
    lib = libs.get("cudnn_lib") or {}
    runtime = decode_version_code(runtime_code) if isinstance(runtime_code, int) else None
    compiled = format_compiled(torch.get("cudnn_compiled"))
    name = "MIOpen" if torch.get("hip") else "cuDNN"
    if runtime is None:
        err = libs.get("cudnn_error")
        return Check(
            "cudnn",
            "fail" if err else "warn",
            f"{name} did not load: {err}"
            if err
            else f"torch reports no {name} (built without it?)",
        )
    where = f" from {lib.get('path')}" if lib.get("path") else ""
    if compiled and _parts(compiled)[:1] != _parts(runtime)[:1]:
        return Check(
            "cudnn",
            "fail",
            f"runtime {name} {runtime}{where}, torch compiled against {compiled} (another major version)",
        )
    text = f"runtime {name} {runtime}{where}" + (f" (compiled {compiled})" if compiled else "")
    return Check("cudnn", "pass", text)


def runtime_versions(insp: Mapping[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    """key -> (version that runs, file that provides it), for the lock comparison."""
    torch = insp.get("torch") or {}
    libs = insp.get("libs") or {}
    cudart = libs.get("cudart") or {}
    cudnn_lib = libs.get("cudnn_lib") or {}
    nccl = libs.get("nccl") or {}
    return {
        "torch": (torch.get("version"), os.path.dirname(torch.get("file") or "") or None),
        "cuda": (decode_cuda_code(cudart.get("code")) or torch.get("cuda"), cudart.get("path")),
        "cudnn": (
            decode_version_code(libs.get("cudnn")) if isinstance(libs.get("cudnn"), int) else None,
            cudnn_lib.get("path"),
        ),
        "nccl": (decode_version_code(nccl.get("code")), nccl.get("path")),
    }


# --- reading worker output ----------------------------------------------------------------


class JsonlTail:
    """Reads a JSON-lines file as it grows; a partial last line waits for its newline."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.buf = ""
        self.records: list[dict[str, Any]] = []
        self.last_seen = 0.0

    def poll(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
                self.offset = fh.tell()
        except OSError:
            return []
        if not chunk:
            return []
        self.buf += chunk
        lines = self.buf.split("\n")
        self.buf = lines.pop()
        new = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                new.append(rec)
        if new:
            self.records.extend(new)
            self.last_seen = time.monotonic()
        return new


def merge_facts(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in records:
        if r.get("kind") == "fact":
            out[r["key"]] = r.get("value")
            if r["key"] == "torch_error":
                out["torch_traceback"] = r.get("traceback")
    return out


def last_stage(records: Sequence[Mapping[str, Any]]) -> tuple[str, Any, float | None]:
    for r in reversed(records):
        if r.get("kind") == "stage":
            return str(r.get("stage")), r.get("step"), r.get("t")
    return "start", None, None


def _tail_file(path: str, n: int = 12) -> tuple[str, ...]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16000))
            text = fh.read()
    except OSError:
        return ()
    return _lines_tail(text, n)


# --- processes -----------------------------------------------------------------------------


def find_pids_with(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (a unique work path)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().decode("utf-8", "replace")
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmd and state != "Z":
            found.append(int(entry))
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid and pid != os.getpgid(0):
            os.killpg(pid, sig)  # a group leader (torchrun, each worker): its children too
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Child:
    """A watched child in its own session; `stop()` ends it and everything it started."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        marker: str,
        out_path: str,
        cwd: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.marker = marker
        self.out_path = out_path
        self.started = time.monotonic()
        self._out = open(out_path, "wb")
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._out,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:  # not an executable (a text file, a wrong architecture)
            raise BadInput(f"{self.argv[0]}: cannot be run ({exc.strerror or exc})") from None
        finally:
            self._out.close()
        self.killed = False

    def poll(self) -> int | None:
        return self.proc.poll()

    def output_tail(self, n: int = 20) -> tuple[str, ...]:
        return _tail_file(self.out_path, n)

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after `grace`, the child's group and every process
        marked with this run's path (torchrun's workers live in other sessions)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = set(find_pids_with(self.marker))
            if self.proc.poll() is None:
                pids.add(self.proc.pid)
            if not pids:
                break
            self.killed = True
            for pid in pids:
                _signal(pid, sig)
            end = time.monotonic() + grace
            while time.monotonic() < end:
                self.proc.poll()
                if not find_pids_with(self.marker) and self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


# --- the inspection ---------------------------------------------------------------------


class Inspection:
    """The one-process inspection, watched: stage heartbeats, a stall timeout."""

    def __init__(self, python: str, work: str, env: Mapping[str, str], timeout: float) -> None:
        self.out = os.path.join(work, "inspect.jsonl")
        open(self.out, "w").close()
        self.tail = JsonlTail(self.out)
        self.timeout = timeout
        self.child = Child(
            [python, os.path.join(WORKERS, "inspect_worker.py"), self.out],
            env,
            self.out,
            os.path.join(work, "inspect.log"),
        )
        self.tail.last_seen = self.child.started
        self.stalled: str | None = None
        self.returncode: int | None = None
        self.seconds = 0.0

    @property
    def facts(self) -> dict[str, Any]:
        return merge_facts(self.tail.records)

    @property
    def done(self) -> bool:
        return any(r.get("kind") == "done" for r in self.tail.records)

    @property
    def finished(self) -> bool:
        return self.returncode is not None or self.stalled is not None

    def devices_known(self) -> bool:
        return any(
            r.get("kind") == "fact" and r.get("key") in ("devices", "torch_error")
            for r in self.tail.records
        )

    def poll(self) -> None:
        if self.finished:
            return
        self.tail.poll()
        code = self.child.poll()
        if code is not None:
            self.tail.poll()
            self.returncode = code
            self.seconds = time.monotonic() - self.child.started
            self.child.stop()  # anything it left behind
            return
        if time.monotonic() - self.tail.last_seen > self.timeout:
            stage, step, _t = last_stage(self.tail.records)
            self.stalled = stage + (f" ({step})" if step else "")
            self.seconds = time.monotonic() - self.child.started
            self.child.stop()
            self.tail.poll()

    def checks(self) -> list[Check]:
        """Checks for a run that did not end in `done`; [] when it did."""
        if self.done:
            return []
        if self.stalled is not None:
            return [
                Check(
                    "inspect",
                    "fail",
                    f"the inspection stalled at stage '{self.stalled}' for {self.timeout:g} s and was killed",
                    self.child.output_tail(),
                    hint="the last stage names what hung (a wedged GPU or driver is the usual cause)",
                )
            ]
        errors = [r for r in self.tail.records if r.get("kind") == "error"]
        if errors:
            e = errors[-1]
            return [
                Check(
                    "inspect",
                    "fail",
                    f"the inspection failed at stage '{e.get('stage')}': {e.get('type')}: {e.get('message')}",
                    _lines_tail(e.get("traceback"), 20),
                )
            ]
        if not self.tail.records:
            return [
                Check(
                    "python",
                    "fail",
                    f"{self.child.argv[0]} did not run the inspection (exit {self.returncode}, no report)",
                    self.child.output_tail(),
                    hint="is it a Python 3.8+ interpreter?",
                )
            ]
        stage, _step, _t = last_stage(self.tail.records)
        return [
            Check(
                "inspect",
                "fail",
                f"the inspection died at stage '{stage}' (exit {_exit_text(self.returncode)})",
                self.child.output_tail(),
            )
        ]


def _exit_text(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return f"{code}, {signal.Signals(-code).name}"
        except ValueError:
            return str(code)
    return str(code)


# --- the DDP run ------------------------------------------------------------------------------


_LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def rdzv_conf(opts: Options) -> str:
    """torchrun's --rdzv-conf: the join timeout, and who hosts the store on loopback.

    c10d makes every agent whose host matches the endpoint try to host the TCP
    store (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py,
    _create_tcp_store); on a loopback endpoint that is every agent, racing for one
    port. There all agents are on this machine, so node rank 0 hosts, the others
    connect. Elsewhere c10d's own choice stands.
    """
    conf = f"join_timeout={int(opts.rdzv_timeout)}"
    host = (opts.rdzv_endpoint or "").rsplit(":", 1)[0]
    if host.startswith(_LOOPBACK):
        conf += f",is_host={1 if opts.node_rank == 0 else 0}"
    return conf


def torchrun_argv(python: str, opts: Options, nproc: int, config_path: str) -> list[str]:
    """`python -m torch.distributed.run ...`: the env's own torchrun, whatever its PATH."""
    argv = [
        python,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(nproc),
        "--max-restarts",
        "0",
    ]
    if opts.nnodes > 1 and opts.rdzv_endpoint:
        argv += [
            "--nnodes",
            str(opts.nnodes),
            "--node-rank",
            str(opts.node_rank),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            opts.rdzv_endpoint,
            "--rdzv-id",
            opts.rdzv_id,
            "--rdzv-conf",
            rdzv_conf(opts),
        ]
    elif opts.nnodes > 1:
        argv += [
            "--nnodes",
            str(opts.nnodes),
            "--node-rank",
            str(opts.node_rank),
            "--master-addr",
            str(opts.master_addr),
            "--master-port",
            str(opts.master_port),
        ]
    else:
        argv += ["--standalone"]
    return [*argv, os.path.join(WORKERS, "ddp_worker.py"), config_path]


_TORCHRUN_FAILURE = re.compile(
    r"rank\s*:\s*([0-9]+)\s*\(local_rank:\s*([0-9]+)\)\s*\n\s*exitcode\s*:\s*(-?[0-9]+)"
)


def parse_torchrun_exitcodes(text: str) -> dict[int, int]:
    """Global rank -> exit code from torchrun's ChildFailedError summary."""
    return {int(m.group(1)): int(m.group(3)) for m in _TORCHRUN_FAILURE.finditer(text)}


@dataclass
class RankState:
    rank: int
    records: list[dict[str, Any]]
    log: str

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def first(self, kind: str) -> dict[str, Any] | None:
        found = self.kind(kind)
        return found[-1] if found else None

    @property
    def done(self) -> bool:
        return self.first("done") is not None

    @property
    def start(self) -> dict[str, Any]:
        return self.first("start") or {}


class DdpRun:
    """torchrun + N workers, watched until they report, fail, stall or exit."""

    def __init__(
        self,
        python: str,
        opts: Options,
        backend: str,
        nproc: int,
        sizes: Sequence[int],
        work: str,
        env: Mapping[str, str],
    ) -> None:
        self.opts = opts
        self.backend = backend
        self.nproc = nproc
        self.results = os.path.join(work, "ddp")
        os.makedirs(self.results, exist_ok=True)
        self.multi = opts.nnodes > 1
        self.launch_limit = opts.timeout + (opts.rdzv_timeout if self.multi else 0)
        stages_budget = opts.timeout * (len(DDP_STAGES) + len(sizes) + 2)
        cfg = {
            "results": self.results,
            "backend": backend,
            # The process group's own timeout is a backstop behind the stall timeout:
            # the orchestrator must see a stall first, or the waiting rank's timeout
            # error would be blamed instead of the rank that never joined.
            "pg_timeout": max(2 * opts.timeout, opts.timeout + 30),
            "deadline": time.time() + self.launch_limit + stages_budget + 60,
            "sizes": list(sizes),
            "plan": {
                str(n): list(p) for n, p in iteration_plan(sizes, opts.iters, opts.warmup).items()
            },
            "ddp_steps": 3,
            "node_rank": opts.node_rank,
            "owner_pid": os.getpid(),
        }
        self.config = os.path.join(self.results, "config.json")
        with open(self.config, "w", encoding="utf-8") as fh:
            json.dump(cfg, fh)
        self.argv = torchrun_argv(python, opts, nproc, self.config)
        self.child = Child(self.argv, env, self.config, os.path.join(work, "torchrun.log"))
        self.tails: dict[str, JsonlTail] = {}
        self.stall: dict[str, Any] | None = None
        self.returncode: int | None = None
        self.after_done_since: float | None = None
        self.seconds = 0.0
        self.finished = False

    def _scan(self) -> None:
        try:
            names = os.listdir(self.results)
        except OSError:
            return
        for name in names:
            if name.startswith("rank-") and name.endswith(".jsonl") and name not in self.tails:
                t = JsonlTail(os.path.join(self.results, name))
                t.last_seen = time.monotonic()
                self.tails[name] = t
        for t in self.tails.values():
            t.poll()

    def _ended(self, t: JsonlTail) -> bool:
        return any(r.get("kind") in ("done", "error", "watchdog") for r in t.records)

    def poll(self) -> None:
        if self.finished:
            return
        self._scan()
        now = time.monotonic()
        code = self.child.poll()
        if code is not None:
            self._scan()
            self.returncode = code
            self._finish()
            return
        tails = list(self.tails.values())
        all_reported = len(tails) >= self.nproc and all(self._ended(t) for t in tails)
        any_error = any(r.get("kind") == "error" for t in tails for r in t.records)
        if all_reported or any_error:
            # torchrun should exit now (or tear the others down after an error);
            # give it a moment, then end it ourselves.
            self.after_done_since = self.after_done_since or now
            if now - self.after_done_since > min(15.0, self.opts.timeout):
                self._finish()
            return
        if len(tails) < self.nproc and now - self.child.started > self.launch_limit:
            self.stall = {
                "stage": "rendezvous" if self.multi else "launch",
                "started": len(tails),
                "age": now - self.child.started,
            }
            self._finish()
            return
        stuck = [t for t in tails if not self._ended(t) and now - t.last_seen > self.opts.timeout]
        if stuck:
            self.stall = {"stage": None, "age": max(now - t.last_seen for t in stuck)}
            self._finish()

    def _finish(self) -> None:
        self.child.stop()
        self._scan()
        if self.returncode is None:
            self.returncode = self.child.proc.returncode
        self.seconds = time.monotonic() - self.child.started
        self.finished = True

    def ranks(self) -> list[RankState]:
        out = []
        for name, t in sorted(self.tails.items()):
            rank = int(name[len("rank-") : -len(".jsonl")])
            out.append(RankState(rank, t.records, os.path.join(self.results, f"rank-{rank}.log")))
        return sorted(out, key=lambda r: r.rank)


def judge_ddp(
    ranks: Sequence[RankState],
    nproc: int,
    stall: Mapping[str, Any] | None,
    torchrun_code: int | None,
    torchrun_tail: Sequence[str],
    timeout: float,
    multi: bool,
    opts_nnodes: int = 1,
) -> tuple[list[Check], list[str]]:
    """Checks from every local rank's report; notes for things that are not failures.

    A rank that reported `done` passed its part whatever its exit code (the gloo
    teardown abort, DESIGN.md); a failed check or an error in any rank's report
    fails the run even when every exit code is 0.
    """
    checks: list[Check] = []
    notes: list[str] = []
    codes = parse_torchrun_exitcodes("\n".join(torchrun_tail))
    if not ranks:
        if stall:
            what = (
                "the other nodes to join the rendezvous"
                if stall["stage"] == "rendezvous"
                else "torchrun to start the workers"
            )
            checks.append(
                Check(
                    "ddp",
                    "fail",
                    f"no rank started: waited {stall['age']:.0f} s for {what}",
                    tuple(torchrun_tail),
                )
            )
        else:
            checks.append(
                Check(
                    "ddp",
                    "fail",
                    f"torchrun exited {_exit_text(torchrun_code)} before any rank started",
                    tuple(torchrun_tail),
                    hint="the lines above are torchrun's own output",
                )
            )
        return checks, notes

    own_error = any(r.first("error") and not _is_victim(r) for r in ranks)
    culprit = find_culprit(ranks, codes)
    if stall is not None and not own_error:
        # We killed them: a missing exit code or a waiting rank's timeout error
        # is our doing, the stall is the finding.
        checks.append(_stall_check(ranks, nproc, stall, timeout, multi))
    elif culprit is not None:
        checks.append(_culprit_check(culprit, ranks, codes))
    elif len(ranks) < nproc:
        checks.append(
            Check(
                "ddp", "fail", f"only {len(ranks)} of {nproc} ranks started", tuple(torchrun_tail)
            )
        )
    else:
        first = ranks[0]
        timing = {x.get("what"): x.get("seconds") for x in first.kind("timing")}
        world = first.start.get("world_size")
        where = f" on {opts_nnodes} nodes" if multi else ""
        here = (
            f"{len(ranks)} rank(s) here, {world} in all{where}"
            if multi
            else f"{len(ranks)} rank(s)"
        )
        checks.append(
            Check(
                "ddp",
                "pass",
                f"{here}: process group initialised, DDP steps trained, every rank reported",
                tuple(
                    f"rank {first.rank} {w}: {s:.2f} s" for w, s in timing.items() if s is not None
                ),
            )
        )
        for r in ranks:
            code = codes.get(r.rank)
            if code not in (None, 0):
                notes.append(
                    f"rank {r.rank} exited {_exit_text(code)} after reporting done: a teardown crash, ignored "
                    "(reports are written before teardown)"
                )
        if torchrun_code not in (0, None) and not notes:
            notes.append(
                f"torchrun exited {_exit_text(torchrun_code)} after every rank reported done: ignored"
            )

    for name, label in (("allreduce", "all-reduce"), ("params", "parameters after DDP steps")):
        results = [(r, c) for r in ranks for c in r.kind("check") if c.get("name") == name]
        if not results:
            continue
        bad = [(r, c) for r, c in results if not c.get("ok")]
        if name == "allreduce":
            rows = tuple(
                f"rank {r.rank}: expected {c.get('expected')}, got {c.get('got')}, {c.get('wrong_elements')} wrong element(s)"
                for r, c in bad
            )
            good = f"all-reduce correct on {len(results)} rank(s)"
        else:
            rows = tuple(
                f"rank {r.rank}: max spread {c.get('spread')}, moved {c.get('moved')}"
                for r, c in bad
            )
            good = f"parameters identical on every rank after {len(results[0][1].get('losses') or [])} DDP steps"
        checks.append(
            Check(
                name,
                "fail" if bad else "pass",
                f"{label} wrong on rank(s) {', '.join(str(r.rank) for r, _ in bad)}"
                if bad
                else good,
                rows,
            )
        )
    return checks, notes


def _short(text: Any, limit: int = 240) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _is_victim(r: RankState) -> bool:
    """An error raised inside a collective: usually a peer that went away."""
    e = r.first("error")
    return e is not None and e.get("step") == "collective"


def find_culprit(ranks: Sequence[RankState], codes: Mapping[int, int]) -> RankState | None:
    """The rank whose failure explains the others, or None when no rank failed.

    When one rank dies, its peers' collectives fail ("Connection reset by peer")
    and torchrun stops the rest, so the lowest failing rank is often a victim (and
    torchrun's own "Root Cause" names the first exit it happened to poll). Order:
    an error raised outside a collective (earliest first); a rank that died without
    reporting (preferring one that was not inside a collective, and one with a
    non-SIGTERM exit code: SIGTERM is torchrun stopping it); then an error inside a
    collective with no other explanation.
    """
    own = [r for r in ranks if r.first("error") and not _is_victim(r)]
    if own:
        return min(own, key=lambda r: (r.first("error") or {}).get("t") or 0.0)
    dead = [r for r in ranks if not r.done and not r.first("error")]
    victims = [r for r in ranks if _is_victim(r)]
    if dead and (victims or any(codes.get(r.rank) not in (None, 0, -15) for r in dead)):
        return min(
            dead,
            key=lambda r: (
                codes.get(r.rank) in (None, -15),
                last_stage(r.records)[1] == "collective",
                r.rank,
            ),
        )
    if victims:
        return min(victims, key=lambda r: (r.first("error") or {}).get("t") or 0.0)
    return None


def _culprit_check(r: RankState, ranks: Sequence[RankState], codes: Mapping[int, int]) -> Check:
    e = r.first("error")
    others = []
    for o in ranks:
        if o is r or o.done:
            continue
        oe = o.first("error")
        if oe is not None:
            why = (
                "in a collective, after a peer failed"
                if _is_victim(o)
                else f"at stage '{oe.get('stage')}'"
            )
            others.append(
                f"rank {o.rank} failed too, {why}: {oe.get('type')}: {_short(oe.get('message'), 160)}"
            )
        else:
            code = codes.get(o.rank)
            others.append(
                f"rank {o.rank} was stopped at stage '{last_stage(o.records)[0]}'"
                + (f" (exit {_exit_text(code)})" if code is not None else "")
            )
    if e is not None:
        return Check(
            "ddp",
            "fail",
            f"rank {r.rank} failed at stage '{e.get('stage')}': {e.get('type')}: {_short(e.get('message'))}",
            _lines_tail(e.get("traceback"), 25) + tuple(others),
        )
    stage, step, _t = last_stage(r.records)
    code = codes.get(r.rank)
    watchdog = r.first("watchdog")
    why = (
        f"its watchdog ended it ({watchdog.get('reason')})"
        if watchdog
        else f"exit {_exit_text(code)}"
        if code is not None
        else "exit code unknown"
    )
    where = f"stage '{stage}'" + (f" ({step})" if step else "")
    return Check(
        "ddp",
        "fail",
        f"rank {r.rank} died at {where} without a Python error ({why})",
        tuple(f"rank {r.rank} log: {line}" for line in _tail_file(r.log, 12)) + tuple(others),
        hint="a signal or a native crash: the log lines above are the end of that rank's stdout/stderr",
    )


def _stall_check(
    ranks: Sequence[RankState],
    nproc: int,
    stall: Mapping[str, Any],
    timeout: float,
    multi: bool = False,
) -> Check:
    """Name the rank and stage that stalled: one that never entered the collective
    is the culprit; ranks waiting inside it are its victims."""
    if stall.get("stage") in ("launch", "rendezvous"):
        return Check(
            "ddp",
            "fail",
            f"only {len(ranks)} of {nproc} local ranks started within {stall['age']:.0f} s "
            f"(stalled at {stall['stage']})",
        )
    waiting: list[tuple[RankState, str, Any]] = []
    stuck: list[tuple[RankState, str, Any]] = []
    for r in ranks:
        if r.done or r.first("error"):
            continue
        stage, step, _t = last_stage(r.records)
        (waiting if step == "collective" else stuck).append((r, stage, step))
    if stuck:
        r, stage, step = stuck[0]
        where = f"stage '{stage}'" + (f" ({step})" if step else "")
        summary = (
            f"rank {r.rank} stalled at {where}"
            + (" before joining the collective" if any(w for w in waiting) else "")
            + f"; killed after {timeout:g} s without progress"
        )
    else:
        r, stage, step = waiting[0]
        summary = f"every rank waited in the '{stage}' collective for {timeout:g} s: the collective itself does not complete; killed"
    detail = tuple(
        f"rank {o.rank}: waiting inside the '{s}' collective" for o, s, _ in waiting
    ) + tuple(
        f"rank {o.rank}: stalled at stage '{s}'" + (f" ({p})" if p else "") for o, s, p in stuck[1:]
    )
    hint = None
    if not stuck:
        hint = (
            "run again with NCCL_DEBUG=INFO; a firewall, a wrong network interface "
            "(NCCL_SOCKET_IFNAME) or a dead link is typical"
        )
        if multi:
            hint = (
                "a rank on another node may have failed or stalled: read that node's report; "
                + hint
            )
    return Check("ddp", "fail", summary, detail + _tail_file(r.log, 8), hint=hint)


# --- several ranks and nodes ----------------------------------------------------------


def parse_driver(info: Mapping[str, Any]) -> str | None:
    from torchfit.host import parse_module_version, parse_nvrm_version

    if info.get("nvrm"):
        found = parse_nvrm_version(str(info["nvrm"]))
        if found:
            return found
    if info.get("nvidia_module"):
        return parse_module_version(str(info["nvidia_module"]))
    return None


COMPARED = ("driver", "torch", "cuda", "cudnn", "nccl")


def peer_row(info: Mapping[str, Any]) -> dict[str, Any]:
    cudnn = info.get("cudnn")
    label = info.get("node_rank")
    return {
        "group": info.get("group_rank", 0),
        "node": label if label is not None else info.get("group_rank", 0),
        "rank": info.get("rank"),
        "host": info.get("hostname"),
        "driver": parse_driver(info) or "none",
        "torch": info.get("torch") or "none",
        "cuda": info.get("cuda") or (f"hip {info['hip']}" if info.get("hip") else "none"),
        "cudnn": decode_version_code(cudnn) if isinstance(cudnn, int) else "none",
        "nccl": decode_version_code(info.get("nccl_code")) or "none",
        "nccl_path": info.get("nccl_path"),
        "env": info.get("env") or {},
    }


def compare_peers(
    peers: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Per-node rows (ranks of a node merged), node disagreements, rank disagreements."""
    rows = [peer_row(p) for p in peers if isinstance(p, Mapping)]
    by_group: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_group.setdefault(int(row["group"] or 0), []).append(row)
    nodes = []
    rank_diffs = []
    for _group, members in sorted(by_group.items(), key=lambda kv: (kv[1][0]["node"], kv[0])):
        node = members[0]["node"]
        merged: dict[str, Any] = {
            "node": node,
            "host": members[0]["host"],
            "ranks": sorted(m["rank"] for m in members),
        }
        for key in (*COMPARED, "nccl_path"):
            values = sorted({str(m[key]) for m in members})
            merged[key] = values[0] if len(values) == 1 else "mixed: " + " / ".join(values)
            if len(values) > 1:
                rank_diffs.append(
                    f"node {node}: ranks disagree on {key}: "
                    + ", ".join(f"rank {m['rank']} {m[key]}" for m in members)
                )
        nodes.append(merged)
    node_diffs = []
    if len(nodes) > 1:
        for key in COMPARED:
            distinct = {n[key] for n in nodes}
            if len(distinct) > 1:
                node_diffs.append(
                    f"{key}: "
                    + ", ".join(f"node {n['node']} ({n['host']}) {n[key]}" for n in nodes)
                )
    if len(nodes) == 1 and not rank_diffs:
        paths = {str(r["nccl_path"]) for r in rows}
        if len(paths) > 1:
            rank_diffs.append("ranks load NCCL from different files: " + ", ".join(sorted(paths)))
    return nodes, node_diffs, rank_diffs


# --- bandwidth facts from nvidia-smi ---------------------------------------------------


def probe_links(timeout: float = 10.0) -> dict[str, Any]:
    """Topology, NVLink rates and PCIe links from nvidia-smi (through the Runner)."""
    from torchfit.errors import ProbeFailed
    from torchfit.host import probe_topology
    from torchfit.runner import Runner, ToolMissing, ToolTimeout

    runner = Runner()
    out: dict[str, Any] = {"topology": {}, "nvlink": {}, "pcie": {}, "uuids": {}, "reason": None}
    if runner.which("nvidia-smi") is None:
        out["reason"] = "nvidia-smi not found"
        return out
    out["topology"], out["reason"] = probe_topology(runner, timeout=timeout)
    queries = {
        "nvlink": ["nvidia-smi", "nvlink", "-s"],
        "pcie": [
            "nvidia-smi",
            "--query-gpu=index,pcie.link.gen.max,pcie.link.width.max",
            "--format=csv,noheader,nounits",
        ],
        "uuids": ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
    }
    for key, argv in queries.items():
        try:
            res = runner.run(argv, timeout=timeout)
        except (ToolMissing, ToolTimeout, ProbeFailed):
            continue
        if res.returncode != 0:
            continue
        if key == "nvlink":
            out[key] = parse_nvlink_status(res.stdout)
        elif key == "pcie":
            out[key] = parse_pcie_query(res.stdout)
        else:
            out[key] = {
                c[1].strip(): int(c[0])
                for c in (line.split(",") for line in res.stdout.splitlines())
                if len(c) == 2 and c[0].strip().isdigit()
            }
    return out


def smi_indices(
    gpus: Sequence[Mapping[str, Any]], uuids: Mapping[str, int], cvd: str | None
) -> list[int]:
    """nvidia-smi indices of the GPUs torch sees (CUDA_VISIBLE_DEVICES renumbers them)."""
    out = []
    for g in gpus:
        u = str(g.get("uuid") or "")
        hit = next(
            (idx for full, idx in uuids.items() if u and full.lower().endswith(u.lower())), None
        )
        if hit is None:
            entries = cvd_entries(cvd)
            i = int(g.get("index", 0))
            if entries and i < len(entries) and entries[i].isdigit():
                hit = int(entries[i])
            else:
                hit = i
        out.append(hit)
    return out


def bandwidth_report(
    rows: Sequence[Mapping[str, Any]],
    links: Mapping[str, Any] | None,
    used: Sequence[int],
    env: Mapping[str, str],
    multi: bool,
    backend: str,
) -> tuple[dict[str, Any], Check]:
    promise: float | None = None
    source = (
        "gloo on CPU processes"
        if backend != "nccl"
        else "several nodes: the network decides"
        if multi
        else "topology unknown"
    )
    pairs = [(a, b) for k, a in enumerate(used) for b in used[k + 1 :]]
    if backend == "nccl" and not multi and links and pairs:
        values = [
            link_promise(
                p, links.get("topology") or {}, links.get("nvlink") or {}, links.get("pcie") or {}
            )
            for p in pairs
        ]
        known = [v for v in values if v[0] is not None]
        if known and len(known) == len(values):
            promise, source = min(known, key=lambda v: v[0] or 0.0)
            source += (
                " (nvidia-smi topo -m, nvlink -s)"
                if "NV" in source
                else " (nvidia-smi topo -m, --query-gpu pcie)"
            )
        else:
            source = next(v[1] for v in values if v[0] is None)
            if links.get("reason"):
                source += f"; {links['reason']}"
    causes = bandwidth_causes(env, (links or {}).get("topology") or {}, pairs) if promise else []
    check = judge_bandwidth(rows, promise, source, causes)
    data = {
        "rows": list(rows),
        "promise_gbps": round(promise, 1) if promise else None,
        "promise_source": source,
        "gpus": list(used),
        "warn_below_fraction": WARN_FRACTION,
        "peak_busbw": max((r["busbw"] for r in rows), default=None),
        "fraction": round(max(r["busbw"] for r in rows) / promise, 3) if promise and rows else None,
    }
    return data, check


# --- the whole run -------------------------------------------------------------------------


def plan_ddp(opts: Options, insp: Mapping[str, Any]) -> tuple[str | None, int, str | None]:
    """(backend, nproc, why not) for the DDP phase, from the inspection's facts."""
    if insp.get("torch_error") or not insp.get("torch"):
        return None, 0, "torch does not import"
    devices = insp.get("devices") or {}
    count = int(devices.get("count") or 0)
    backend = opts.backend or ("nccl" if count else "gloo")
    if backend == "nccl":
        nproc = opts.nproc or count
        if count == 0:
            return backend, 0, "--backend nccl needs GPUs and torch sees none"
        if nproc > count:
            return (
                backend,
                nproc,
                f"--nproc {nproc} but torch sees {count} GPU(s): one process per GPU",
            )
        return backend, nproc, None
    return backend, opts.nproc or 2, None


def sweep_sizes(opts: Options, backend: str) -> tuple[int, ...]:
    # --sizes asks for a sweep even with gloo; --no-bandwidth wins over it.
    wanted = opts.bandwidth if opts.bandwidth is not None else backend == "nccl" or bool(opts.sizes)
    if not wanted:
        return ()
    if opts.sizes:
        return opts.sizes
    return DEFAULT_SIZES if backend == "nccl" else GLOO_SIZES


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    # Unbuffered worker output: a crash's last words must reach the log.
    env["PYTHONUNBUFFERED"] = "1"
    return env


def find_lock(opts: Options, insp: Mapping[str, Any]) -> str | None:
    if opts.lock:
        return opts.lock
    prefix = opts.env_prefix or (insp.get("python") or {}).get("prefix")
    if prefix:
        path = os.path.join(prefix, "pylock.toml")
        if os.path.isfile(path):
            return path
    return None


def verify(opts: Options, observer: Observer | None = None) -> Report:
    """Inspect, run the DDP smoke test (and sweep), judge; kill whatever is left.

    The DDP launch starts as soon as the inspection knows the GPU count, so
    torchrun's start-up overlaps the kernel tests.
    """
    obs = observer or Observer()
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix="torchfit-verify-")
    report = Report(python=opts.python, env_prefix=opts.env_prefix, work_dir=work)
    env = child_env()
    links_box: dict[str, Any] = {}
    prober: threading.Thread | None = None
    if (
        opts.backend != "gloo"
        and opts.bandwidth is not False
        and opts.nnodes == 1
        and shutil.which("nvidia-smi")
    ):
        prober = threading.Thread(target=lambda: links_box.update(probe_links()), daemon=True)
        prober.start()

    obs.phase("inspect", f"inspecting {opts.python}")
    try:
        insp = Inspection(opts.python, work, env, opts.timeout)
    except BadInput:
        shutil.rmtree(work, ignore_errors=True)
        raise
    ddp: DdpRun | None = None
    decided = False
    backend: str | None = None
    nproc = 0
    skip_reason: str | None = None
    sizes: tuple[int, ...] = ()
    try:
        while True:
            insp.poll()
            if not decided and (insp.devices_known() or insp.finished):
                decided = True
                if insp.devices_known():
                    backend, nproc, skip_reason = plan_ddp(opts, insp.facts)
                else:
                    skip_reason = "the inspection stopped before it knew the GPUs"
                if backend is not None and skip_reason is None:
                    sizes = sweep_sizes(opts, backend)
                    obs.phase(
                        "ddp",
                        f"DDP smoke test: {nproc} rank(s) per node, {backend}"
                        + (
                            f", bandwidth sweep {format_bytes(sizes[0])}..{format_bytes(sizes[-1])}"
                            if sizes
                            else ""
                        ),
                    )
                    ddp = DdpRun(opts.python, opts, backend, nproc, sizes, work, env)
            if ddp is not None:
                ddp.poll()
            if insp.finished and decided and (ddp is None or ddp.finished):
                break
            time.sleep(POLL_S)
    finally:
        # Interrupted (Ctrl-C) or not: nothing we started may outlive us.
        insp.child.stop()
        if ddp is not None and not ddp.finished:
            ddp._finish()

    facts = insp.facts
    report.inspection = facts
    report.timings["inspect"] = round(insp.seconds, 2)
    lock_path = find_lock(opts, facts)
    expected = None
    if lock_path:
        expected, lock_error = load_lock_expected(lock_path)
        report.lock = lock_path
        if lock_error:
            report.checks.append(Check("lock", "warn", lock_error))
    if insp.tail.records and (insp.done or facts.get("python")):
        report.checks.extend(
            judge_inspection(facts, opts.backend, expected, lock_path, complete=insp.done)
        )
    report.checks.extend(insp.checks())

    if ddp is None:
        report.checks.append(
            Check(
                "ddp",
                "fail" if skip_reason and backend else "skip",
                f"not run: {skip_reason or 'the inspection did not finish'}",
            )
        )
    else:
        ranks = ddp.ranks()
        checks, notes = judge_ddp(
            ranks,
            nproc,
            ddp.stall,
            ddp.returncode,
            ddp.child.output_tail(40),
            opts.timeout,
            ddp.multi,
            opts.nnodes,
        )
        report.checks.extend(checks)
        report.timings["ddp"] = round(ddp.seconds, 2)
        for r in ranks[:1]:
            for tline in r.kind("timing"):
                report.timings[f"ddp.{tline.get('what')}"] = float(tline.get("seconds") or 0.0)
        peers = next((p["peers"] for r in ranks if (p := r.first("peers"))), None)
        if peers is None:
            peers = [dict(rt["info"]) for r in ranks if (rt := r.first("runtime"))]
        nodes, node_diffs, rank_diffs = compare_peers(peers)
        report.nodes = nodes
        report.node_disagreements = node_diffs
        if peers:
            if ddp.multi:
                report.checks.append(
                    Check(
                        "nodes-agree",
                        "fail" if node_diffs else "pass",
                        f"nodes disagree on {', '.join(d.split(':')[0] for d in node_diffs)}"
                        if node_diffs
                        else f"{len(nodes)} nodes run the same driver, torch, CUDA, cuDNN and NCCL",
                        tuple(node_diffs),
                    )
                )
            same = (
                "the ranks of each node run the same torch, CUDA, cuDNN and NCCL"
                if ddp.multi
                else f"{len(peers)} rank(s) run the same torch, CUDA, cuDNN and NCCL"
                + (
                    f" (NCCL {nodes[0]['nccl']} from {nodes[0]['nccl_path']})"
                    if nodes and nodes[0]["nccl"] != "none"
                    else ""
                )
            )
            report.checks.append(
                Check(
                    "ranks-agree",
                    "fail" if rank_diffs else "pass",
                    rank_diffs[0] if rank_diffs else same,
                    tuple(rank_diffs[1:]),
                )
            )
        bw_rows = next((b["rows"] for r in ranks if (b := r.first("bandwidth"))), None)
        if sizes:
            if prober is not None:
                prober.join(timeout=opts.timeout)
            env_seen = peers[0].get("env", {}) if peers else {}
            if bw_rows:
                used = smi_indices(
                    (facts.get("devices") or {}).get("gpus", [])[:nproc],
                    links_box.get("uuids") or {},
                    (facts.get("env") or {}).get("CUDA_VISIBLE_DEVICES"),
                )
                report.bandwidth, check = bandwidth_report(
                    bw_rows, links_box or None, used, env_seen, ddp.multi, ddp.backend
                )
                report.checks.append(check)
            else:
                report.checks.append(
                    Check("bandwidth", "skip", "the sweep did not run (an earlier stage failed)")
                )
        report.ddp = {
            "backend": ddp.backend,
            "nproc": nproc,
            "nnodes": opts.nnodes,
            "argv": [redact(a) for a in ddp.argv],
            "returncode": ddp.returncode,
            "stall": ddp.stall,
            "notes": notes,
            "ranks": [_rank_json(r) for r in ranks],
        }
    report.timings["total"] = round(time.monotonic() - t0, 2)
    worth_reading = {"ddp", "inspect"} & set(report.failed)
    if not worth_reading and not opts.keep:
        shutil.rmtree(work, ignore_errors=True)
        report.work_dir = None
    return report


def _rank_json(r: RankState) -> dict[str, Any]:
    stage, step, _t = last_stage(r.records)
    err = r.first("error")
    return {
        "rank": r.rank,
        "local_rank": r.start.get("local_rank"),
        "node": r.start.get("group_rank"),
        "host": r.start.get("host"),
        "pid": r.start.get("pid"),
        "done": r.done,
        "last_stage": stage,
        "last_step": step,
        "error": {k: err.get(k) for k in ("stage", "type", "message", "traceback")}
        if err
        else None,
        "checks": {c.get("name"): c.get("ok") for c in r.kind("check")},
        "timings": {x.get("what"): x.get("seconds") for x in r.kind("timing")},
        # What the worker saw: proof that NCCL_*, LD_PRELOAD, CUDA_VISIBLE_DEVICES reached it.
        "env": ((r.first("runtime") or {}).get("info") or {}).get("env"),
        "nccl": {
            "version": decode_version_code(
                ((r.first("runtime") or {}).get("info") or {}).get("nccl_code")
            ),
            "path": ((r.first("runtime") or {}).get("info") or {}).get("nccl_path"),
        },
    }


# --- Slurm -------------------------------------------------------------------------------------


def format_slurm_script(
    nodes: int,
    gpus_per_node: int,
    python: str,
    torchfit_cmd: Sequence[str],
    *,
    partition: str | None = None,
    account: str | None = None,
    time_limit: str = "00:15:00",
    port: int = 29400,
    extra: Sequence[str] = (),
) -> str:
    """An sbatch script: one task per node, each running `torchfit verify` with
    torchrun's c10d rendezvous on the first node of the allocation."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# torchfit verify on {nodes} node(s) x {gpus_per_node} GPU(s): every node inspects itself and",
        "# runs its share of one DDP smoke test; torchrun's c10d rendezvous on the first node joins them,",
        "# and each node prints every node's versions side by side. Submit: sbatch THIS_FILE",
        "#SBATCH --job-name=torchfit-verify",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gpus_per_node}",
        f"#SBATCH --time={time_limit}",
        "#SBATCH --output=torchfit-verify-%j.out",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    lines += [
        "set -euo pipefail",
        "",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f'export TORCHFIT_VERIFY_ENDPOINT="$head_node:${{TORCHFIT_RDZV_PORT:-{port}}}"',
        f"export TORCHFIT_VERIFY_PYTHON={q(python)}",
        f"export TORCHFIT_VERIFY_CMD={q(' '.join(q(c) for c in torchfit_cmd))}",
        f"export TORCHFIT_VERIFY_EXTRA={q(' '.join(q(c) for c in extra))}",
        "",
        "# One task per node; SLURM_NODEID and SLURM_JOB_ID are expanded by each task's shell.",
        "srun --ntasks-per-node=1 --kill-on-bad-exit=0 --label bash -c '",
        '  exec $TORCHFIT_VERIFY_CMD verify --python "$TORCHFIT_VERIFY_PYTHON" \\',
        f'    --nnodes "$SLURM_JOB_NUM_NODES" --node-rank "$SLURM_NODEID" --nproc {gpus_per_node} \\',
        '    --rdzv-endpoint "$TORCHFIT_VERIFY_ENDPOINT" --rdzv-id "torchfit-$SLURM_JOB_ID" $TORCHFIT_VERIFY_EXTRA\'',
        "",
    ]
    return "\n".join(lines)
