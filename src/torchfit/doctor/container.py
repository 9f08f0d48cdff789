"""Inside a container: were the GPUs passed in, the way the NVIDIA Container Toolkit does it?

A container sees the GPUs only if its runtime was asked to: the toolkit's hook (docker `--gpus`,
podman's CDI `--device nvidia.com/gpu=...`, pyxis/enroot's nvidia hook, Kubernetes' device plugin)
creates the /dev/nvidia* nodes AND mounts the host driver's user-space libraries (libcuda.so.1,
libnvidia-ml.so.1: they must match the host's kernel module, so no image ships them). Started
without it, torch in the container reports no GPU; given the device nodes alone (`--device
/dev/nvidia0`), CUDA finds no libcuda. Both are what users hit, named here with the fix for the
runtime the container is in (NVIDIA Container Toolkit docs: "Running a sample workload", "Support
for Container Device Interface"; enroot's hooks/98-nvidia.sh).
"""

from __future__ import annotations

import glob
import os

from torchfit.doctor.context import Context
from torchfit.doctor.model import Verdict, check, fail, ok

# The driver's libraries the toolkit mounts (CUDA's driver API, which torch needs, and NVML, nvidia-smi's).
DRIVER_LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")
# Where the hooks put them: the distribution's library directories, and the NVIDIA images' own.
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
             "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib")

_FIXES = {
    "podman": "podman: `podman run --device nvidia.com/gpu=all ...` (CDI; generate the spec once on the host: "
              "`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`, NVIDIA Container Toolkit)",
    "docker": "docker: `docker run --gpus all ...` (the NVIDIA Container Toolkit, registered once: "
              "`sudo nvidia-ctk runtime configure --runtime=docker`, then restart docker)",
    "kubernetes": "Kubernetes: request the GPUs in the pod (`resources.limits: nvidia.com/gpu: 1`; the NVIDIA "
                  "device plugin or GPU Operator must run on the node)",
    "enroot": "Slurm pyxis/enroot: `srun --gpus=N --container-image=...` (enroot's nvidia hook, "
              "hooks.d/98-nvidia.sh, needs libnvidia-container-tools on the node; NVIDIA_VISIBLE_DEVICES=void "
              "hides the GPUs)",
}


def _fix(engine: str) -> str:
    """The fixes, the container's own runtime first."""
    key = next((k for k in _FIXES if engine.startswith(k)), "")
    order = [key] if key else []
    order += [k for k in _FIXES if k != key]
    return "; ".join(_FIXES[k] for k in order)


def driver_libraries(ctx: Context) -> list[str]:
    """The driver libraries visible here: `ldconfig -p`'s, else the files in the usual directories."""
    found: dict[str, str] = {}
    for e in ctx.ldconfig[0]:
        if e.soname in DRIVER_LIBS:
            found.setdefault(e.soname, e.path)  # the loader takes the first
    for lib in DRIVER_LIBS:
        if lib not in found:
            for d in _LIB_DIRS:
                if os.path.exists(ctx.path(f"{d}/{lib}")):
                    found[lib] = f"{d}/{lib}"
                    break
    return [f"{found[lib]}" for lib in DRIVER_LIBS if lib in found]


def _host_gpus(ctx: Context) -> str | None:
    """Why the host looks like it has NVIDIA GPUs (what a container still sees of it), or None."""
    if ctx.pci.found:
        return f"{ctx.pci.found} NVIDIA GPU(s) on the PCI bus ({ctx.pci.source})"
    if ctx.nvrm_text is not None:
        return "the host's nvidia driver is loaded (/proc/driver/nvidia/version)"
    if ctx.modules is not None and "nvidia" in ctx.modules:
        return "the host's nvidia module is loaded (/proc/modules)"
    return None


@check("container-gpu-access", "driver", "a container is given the GPUs (NVIDIA Container Toolkit)")
def check_container_gpus(ctx: Context) -> Verdict:
    from torchfit.host.system import probe_container

    engine, seen = probe_container(ctx.root, ctx.environ)
    if engine is None:
        return ok("not in a container (no /run/.containerenv, /.dockerenv, `container` variable or "
                  "container cgroup)")
    where = f"in a {engine} container ({seen})"
    nodes = sorted(os.path.basename(p) for p in glob.glob(ctx.path("/dev/nvidia*")))
    libs = driver_libraries(ctx)
    gpus = [n for n in nodes if n[len("nvidia"):].isdigit()]
    has_cuda = any(p.endswith("/libcuda.so.1") for p in libs)
    if gpus and has_cuda:
        return ok(f"{where}: /dev/{', /dev/'.join(gpus)} and the host driver's {', '.join(libs)} are passed in")
    if gpus:
        return fail(f"{where}: /dev/{', /dev/'.join(gpus)} are passed in but not the driver's libcuda.so.1: "
                    "the devices were given without the NVIDIA Container Toolkit, which mounts the host "
                    "driver's libraries (CUDA finds no driver)", _fix(engine))
    host = _host_gpus(ctx)
    if host is None:
        return ok(f"{where}: no GPU is passed in and none is visible (no /dev/nvidia*, none on the PCI bus): "
                  "a CPU container", "if the host has GPUs, pass them in: " + _fix(engine))
    libs_said = f"; driver libraries: {', '.join(libs)}" if libs else "; no driver library (libcuda.so.1)"
    return fail(f"{where} without the GPUs: no /dev/nvidia0..{libs_said}, while {host}: the runtime was not "
                "asked for the GPUs, or the NVIDIA Container Toolkit's hook is missing", _fix(engine))
