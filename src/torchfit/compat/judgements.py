"""One judgement per fact, shared by resolve, install, verify and doctor.

Each command used to decide for itself whether "this host has GPUs" and whether
"a CPU torch is right here"; on a host whose driver was broken they disagreed
(resolve planned CPU, doctor failed the host). The functions below are the only
place these two questions are answered; the commands call them and render the
answer their own way, so they cannot disagree again.

- `judge_gpu_host(facts)`: "gpu" (GPUs known), "none" (no GPU, and nothing says
  there is one) or "unknown" (an NVIDIA driver is there but could not list the GPUs:
  NVML mismatch after a driver upgrade, a hung nvidia-smi). Unknown is never
  turned into "none" (docs/resolution.md: "Unknown is not invented").
- `judge_torch_build(host, gpu_build)`: is a torch build (CPU or GPU) right for
  that host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

from torchfit.compat.facts import Gpu, HostFacts, distinct_gpus
from torchfit.errors import GpuFactsUnknown

TIMES = "\u00d7"  # the multiplication sign, as in "8 times NVIDIA H200"
GpuKind = Literal["gpu", "none", "unknown"]

# What to do about a GPU host whose GPUs cannot be read, as commands to paste.
UNKNOWN_GPU_FIX = (
    "run `torchfit doctor` to find the broken layer (a driver upgraded without a reboot gives "
    "an NVML mismatch); or state the GPUs: `--assume gpu=sm_90` (once per GPU); "
    "or ask for a CPU build: `--variant cpu`"
)


class GpuHost(NamedTuple):
    """The answer to "does this host have GPUs?", with the evidence."""

    kind: GpuKind
    summary: str
    cause: str | None = None

    @property
    def fix(self) -> str | None:
        return UNKNOWN_GPU_FIX if self.kind == "unknown" else None


def describe_gpus(gpus: Sequence[Gpu]) -> str:
    """`group_gpus` of the GPUs' labels, computed once per model: "1024x NVIDIA H100 (sm_90)"."""
    models, counts = distinct_gpus(tuple(gpus))
    labels: dict[str, int] = {}
    for g, n in zip(models, counts):
        label = g.label()
        labels[label] = labels.get(label, 0) + n
    return ", ".join(label if n == 1 else f"{n}{TIMES} {label}" for label, n in labels.items())


def group_gpus(labels: list[str]) -> str:
    """["NVIDIA H200 (sm_90)"] * 8 -> "8x NVIDIA H200 (sm_90)" (with U+00D7); order of first sight kept."""
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(label if n == 1 else f"{n}{TIMES} {label}" for label, n in counts.items())


def judge_gpu_host(facts: HostFacts) -> GpuHost:
    """Does `facts`' host have GPUs: "gpu", "none" or "unknown" (driver there, GPUs unreadable)."""
    if facts.gpus:
        return GpuHost("gpu", describe_gpus(facts.gpus))
    if facts.nvidia_failure:
        return GpuHost(
            "unknown",
            f"{facts.name} has an NVIDIA driver, but its GPUs could not be read",
            facts.nvidia_failure,
        )
    return GpuHost("none", f"no GPU on {facts.name}", facts.reasons.get("gpus"))


class BuildVerdict(NamedTuple):
    """Is a torch build right for a host: "ok", "fail" (CPU build on a GPU host) or "unknown"."""

    status: Literal["ok", "fail", "unknown"]
    summary: str
    fix: str | None = None


def judge_torch_build(host: GpuHost, gpu_build: bool, version: str | None = None) -> BuildVerdict:
    """A CPU build is right only on a host with no GPU; on a GPU host it fails, and on a
    host whose GPUs cannot be read it cannot be called right."""
    torch = f"torch {version}" if version else "torch"
    if gpu_build:
        return BuildVerdict("ok", f"{torch} is a GPU build")
    if host.kind == "gpu":
        return BuildVerdict(
            "fail",
            f"{torch} is a CPU-only build on a host with GPUs ({host.summary})",
            "`torchfit resolve` picks the GPU build for this host; `torchfit install --force "
            "--prefix ENV` puts it in the env (a '+cpu' version came from "
            "download.pytorch.org/whl/cpu or a CPU-only pin)",
        )
    if host.kind == "unknown":
        return BuildVerdict(
            "unknown",
            f"{torch} is a CPU-only build; {host.summary} ({host.cause})",
            UNKNOWN_GPU_FIX,
        )
    return BuildVerdict("ok", f"{torch} is a CPU-only build, and this host has no NVIDIA GPU and no AMD GPU")


def refuse_unknown_gpus(hosts: Sequence[HostFacts]) -> None:
    """Raise `GpuFactsUnknown` for the first host whose GPUs are unknown.

    resolve and install (through the resolver) call this before choosing a build:
    such a host would otherwise look GPU-less and get a CPU build silently.
    """
    for host in hosts:
        judged = judge_gpu_host(host)
        if judged.kind == "unknown":
            fix = UNKNOWN_GPU_FIX
            if (host.source or "").startswith("fleet:"):  # a fleet file's group: docs/cluster.md's fix
                fix += f"; or leave those nodes out of the fleet: `--exclude {host.name}`"
            raise GpuFactsUnknown(host.name, judged.cause or "nvidia-smi failed", fix)


def judge_runtime_library(
    name: str, runtime: tuple[int, ...] | None, expected: tuple[int, ...] | None
) -> tuple[Literal["ok", "warn", "fail"], str]:
    """A library torch loads at run time (NCCL, cuDNN) against the version it should be.

    The same verdict in doctor's *-shadowed checks and verify's nccl check: the same
    version is ok; an older major.minor is a failure (torch calls symbols it lacks:
    "undefined symbol: ncclCommResume", pytorch/pytorch#186591); another patch
    release of the same line, or a newer line, runs but is not what was built and
    tested, so a warning. Unknown on either side: a warning, never a pass.
    """
    if runtime is None or expected is None:
        return "warn", f"{name} version unknown (runs {_v(runtime)}, expected {_v(expected)})"
    n = max(3, min(len(runtime), len(expected)))
    if runtime[:n] == expected[:n]:
        return "ok", f"{name} {_v(runtime)} is the one torch expects"
    if runtime[:2] < expected[:2]:
        return "fail", f"{name} {_v(runtime)} runs, older than the {_v(expected)} torch expects"
    return "warn", f"{name} {_v(runtime)} runs, not the {_v(expected)} torch expects"


def _v(parts: tuple[int, ...] | None) -> str:
    return ".".join(str(p) for p in parts) if parts else "unknown"
