"""Host probes: what this machine has, read from /proc, /sys, /etc and a few tools.

One module per fact, each with its pure `parse_*` functions next to the `probe_*`
that runs the command: `nvidia` (GPUs, driver, topology), `amd`, `pci`, `system`
(glibc, OS, WSL, arch), `pythons` (interpreters, pyenv). `parse_*` never raise
(the tests fuzz them); `probe_*` do the I/O through the one `Runner` and return a
value plus, when the value is unknown, the reason ("unknown, because nvidia-smi
timed out after 10 s"). `probe_host` here is the only assembler of `HostFacts`. A
missing, hanging or failing tool never gives a traceback, only a None/empty fact
and its reason. `root` relocates /proc, /sys, /etc and /opt so tests can point the
probes at a fake tree. Nothing is cached between calls.
"""

from __future__ import annotations

from torchfit.background import Background
from torchfit.compat.facts import Gpu, HostFacts
from torchfit.compat.judgements import GpuHost, judge_gpu_host
from torchfit.host._io import (
    DEFAULT_TIMEOUT,
    _unknown,
)
from torchfit.host.amd import probe_amd_gpus, probe_rocm_version
from torchfit.host.nvidia import (
    NvidiaProbe,
    probe_driver_version,
    probe_nvidia_gpus,
    probe_topology,
)
from torchfit.host.pci import find_pci_gpus
from torchfit.host.pythons import _probe_all_pythons, probe_uv_pythons
from torchfit.host.system import probe_arch, probe_glibc, probe_l4t, probe_os, probe_wsl
from torchfit.runner import Runner

__all__ = ["nvidia_failure", "probe_gpu_host", "probe_host"]


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


def _gpus_reason(nvidia: NvidiaProbe, amd_cause: str | None, found: bool, on_bus: dict[str, int]) -> str | None:
    if found:
        if nvidia.note:
            return nvidia.note
        if nvidia.cause and not nvidia.missing:
            return f"NVIDIA GPUs unknown, because {nvidia.cause}"
        return None
    parts = [nvidia.cause or "nvidia-smi listed no GPUs"]
    if amd_cause:
        parts.append(f"no AMD GPU found ({amd_cause})")
    if on_bus:
        listed = ", ".join(f"{n} {v}" for v, n in sorted(on_bus.items()))
        parts.append(f"yet the PCI bus shows {listed} GPU(s): is the driver installed and loaded?")
    return _unknown("; ".join(parts))


def probe_host(runner: Runner, root: str = "/", *, timeout: float = DEFAULT_TIMEOUT,
               uv: str | None = None) -> HostFacts:
    """Probe this host (or the tree at `root`) and return its HostFacts.

    Pythons/pyenv, AMD and glibc probes run in daemon threads while nvidia-smi
    (the one that can hang) runs in the calling thread, so Ctrl-C kills it at once
    and waits for no probe (the CLI's boundary kills the children still running).
    `timeout` bounds every command. `uv` (lock.uvbin.find_uv's answer, given by the caller: host/
    does not import lock/) is asked which managed Pythons it can fetch.
    """
    reasons: dict[str, str] = {}
    f_py = Background(_probe_all_pythons, runner, timeout)
    f_uv = Background(probe_uv_pythons, runner, uv, None, timeout=timeout)
    f_amd = Background(probe_amd_gpus, runner, root, timeout=timeout)
    f_glibc = Background(probe_glibc, runner, root, timeout=timeout)
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
    l4t, why = probe_l4t(root)
    if why:
        reasons["l4t"] = why

    amd_gpus, amd_cause = f_amd.result()
    gpus = nvidia.gpus + tuple(
        Gpu(len(nvidia.gpus) + g.index, g.name, vendor="amd", gfx=g.gfx) for g in amd_gpus
    )
    on_bus = {} if gpus else find_pci_gpus(root)  # read once: both reasons below use it
    why = _gpus_reason(nvidia, amd_cause, bool(gpus), on_bus)
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
    uv_pythons, why = f_uv.result()
    if why:
        reasons["uv_pythons"] = why
    return HostFacts(
        driver_version=driver,
        gpus=gpus,
        topology=topology,
        glibc=glibc,
        os=os_name,
        wsl=wsl,
        l4t=l4t,
        arch=arch,
        pythons=pythons,
        pyenv=pyenv,
        uv_pythons=uv_pythons,
        rocm_version=probe_rocm_version(root),
        reasons=reasons,
        source="host: probes",
        nvidia_failure=None if gpus else nvidia_failure(nvidia, on_bus.get("NVIDIA", 0)),
    )
