"""Driver triage: can anything talk to the GPU, and if not, which layer is broken.

From the bottom up: is there an NVIDIA GPU on the PCI bus (lspci / sysfs), is the
kernel module loaded (/proc/driver/nvidia, /proc/modules), was it built for the
running kernel (/lib/modules/$(uname -r), dkms status), do the /dev/nvidia* nodes
exist and can this user open them, do the kernel module and the userspace NVML
agree, does nvidia-smi answer, and what the kernel log says (dmesg, when readable).
"""

from __future__ import annotations

import os
import stat

from torchfit.doctor import parse
from torchfit.doctor.context import Context
from torchfit.doctor.model import Verdict, check, fail, ok, unknown, warn
from torchfit.text import first_line

RELOAD = (
    "reboot, or (with no process using the GPU) reload the module: "
    "`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`"
)


def gpu_on_bus(ctx: Context) -> bool | None:
    """True/False when lspci or sysfs answered, None when neither could be read."""
    if ctx.gpus:
        return True
    pci = ctx.pci
    return None if pci.found is None else pci.found > 0


def on_wsl(ctx: Context) -> bool:
    """WSL2 has no nvidia kernel module, no /dev/nvidia* and no /lib/modules for it: the
    Windows driver serves the GPU through /dev/dxg (NVIDIA's "CUDA on WSL" guide)."""
    return ctx.wsl[0] is True


WSL_OK = "WSL: the Windows driver serves the GPU through /dev/dxg (see the wsl check)"


def driver_installed(ctx: Context) -> bool:
    return not ctx.smi.missing or ctx.nvrm_text is not None or bool(ctx.modules and "nvidia" in ctx.modules)


@check("nvidia-smi", "driver", "nvidia-smi can talk to the driver")
def check_nvidia_smi(ctx: Context) -> Verdict:
    verdict = _nvidia_smi(ctx)
    judged = ctx.gpu_host  # the judgement resolve and install refuse on
    if judged.kind == "unknown" and verdict.status != "fail":
        return fail(f"{verdict.evidence}; so {judged.summary}", verdict.fix or judged.fix)
    return verdict


def _nvidia_smi(ctx: Context) -> Verdict:
    nv = ctx.nvidia
    if nv.gpus:
        names = ", ".join(sorted({g.name for g in nv.gpus}))
        return ok(f"nvidia-smi lists {len(nv.gpus)} GPU(s) ({names}), driver {nv.driver_version or 'unknown'}")
    smi = ctx.smi
    on_bus = gpu_on_bus(ctx)
    if smi.missing:
        if on_bus:
            return fail(
                f"nvidia-smi is not installed, yet {ctx.pci.source} shows {ctx.pci.found} NVIDIA GPU(s)",
                "install the NVIDIA driver for this GPU (your distribution's nvidia-driver package, "
                "or NVIDIA's CUDA repository `cuda-drivers`); in a container, run it with `--gpus all` "
                "(NVIDIA Container Toolkit)",
            )
        if on_bus is None:
            return unknown(f"nvidia-smi is not installed and the PCI bus could not be read ({ctx.pci.cause})")
        return ok("no NVIDIA GPU on this host (nvidia-smi absent, none on the PCI bus): nothing to check")
    said = parse.head(smi.text, lines=3) or (nv.cause or "")
    if "timed out" in (nv.cause or "") or "timed out" in (smi.cause or ""):
        return fail(
            f"nvidia-smi hung ({nv.cause or smi.cause})",
            "a wedged driver or a GPU that fell off the bus (Xid 79): see the dmesg-nvrm check; "
            "reset the GPU (`nvidia-smi -r`) or reboot",
        )
    low = said.lower()
    if "version mismatch" in low:
        return fail(f"nvidia-smi: {said}", "the kernel module and the driver's libraries differ: see nvml-mismatch")
    if "couldn't communicate with the nvidia driver" in low:
        return fail(
            f"nvidia-smi: {said}",
            "the kernel module is not loaded or not built for this kernel: see driver-loaded and "
            "driver-module-for-kernel",
        )
    if "no devices were found" in low:
        return fail(f"nvidia-smi: {said}", "the driver sees no GPU: see gpu-on-pci-bus and dmesg-nvrm")
    if smi.cause is None and not nv.gpus:
        # It ran and exited 0, but nothing in its answers is a GPU row.
        return unknown(f"nvidia-smi answered, but nothing torchfit could read ({nv.cause or first_line(smi.stdout)!r})")
    return fail(f"nvidia-smi failed: {said or smi.cause}", "see the other driver checks for the layer that is broken")


@check("gpu-on-pci-bus", "driver", "the NVIDIA GPUs are on the PCI bus")
def check_gpu_on_bus(ctx: Context) -> Verdict:
    pci = ctx.pci
    listed = len(ctx.gpus)
    if pci.found is None:
        if listed:
            return ok(f"nvidia-smi lists {listed} GPU(s) (the PCI bus is not readable here: {pci.cause})")
        return unknown(f"cannot read the PCI bus: {pci.cause}")
    shown = f"{pci.source}: {pci.found} NVIDIA GPU(s)"
    if pci.devices:
        shown += f" ({pci.devices[0].slot} {pci.devices[0].description}" + (", ..." if pci.found > 1 else "") + ")"
    if pci.found == 0:
        if listed:
            return ok(f"nvidia-smi lists {listed} GPU(s); {pci.source} shows none (a container without the host's PCI view)")
        if driver_installed(ctx):
            return fail(
                f"the NVIDIA driver is installed but {pci.source} shows no NVIDIA GPU",
                "a VM or container without the GPU passed through, or a GPU that fell off the bus "
                "(see dmesg-nvrm; reseat/reset the GPU or reboot)",
            )
        return ok(f"{pci.source} shows no NVIDIA GPU: a host without one")
    if listed and listed < pci.found:
        return fail(
            f"{shown}, but nvidia-smi lists only {listed}",
            "a GPU is bound to another driver (vfio-pci, nouveau) or fell off the bus: "
            "`lspci -nnk -d 10de:` shows the driver in use; see dmesg-nvrm",
        )
    return ok(shown)


@check("driver-loaded", "driver", "the nvidia kernel module is loaded")
def check_driver_loaded(ctx: Context) -> Verdict:
    version = ctx.kernel_module_version
    modules = ctx.modules
    if on_wsl(ctx):
        return ok(WSL_OK)
    if ctx.nvrm_text is not None or (modules is not None and "nvidia" in modules):
        where = "/proc/driver/nvidia/version" if ctx.nvrm_text is not None else "/proc/modules"
        return ok(f"nvidia kernel module {version or '(version unknown)'} is loaded ({where})")
    on_bus = gpu_on_bus(ctx)
    if modules is None:
        if on_bus is False:
            return ok("no NVIDIA GPU on this host")
        return unknown(f"cannot tell: /proc/driver/nvidia/version is absent and {ctx.why_unreadable('/proc/modules')}")
    if on_bus is False:
        return ok("no NVIDIA GPU on this host, and no nvidia module loaded")
    nouveau = " The open-source nouveau driver is loaded and holds the GPU." if "nouveau" in modules else ""
    fix = "load it: `sudo modprobe nvidia` (if that fails, see driver-module-for-kernel and dmesg-nvrm)"
    if nouveau:
        fix = ("blacklist nouveau (`echo 'blacklist nouveau' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf`, "
               "`sudo update-initramfs -u`), then reboot")
    return fail(
        "the nvidia kernel module is not loaded (no /proc/driver/nvidia/version, no 'nvidia' in /proc/modules)"
        + (f" although {ctx.pci.source} shows {ctx.pci.found} NVIDIA GPU(s)." if on_bus else ".") + nouveau,
        fix,
    )


def find_nvidia_ko(ctx: Context, release: str) -> list[str]:
    """nvidia.ko files (any compression) under /lib/modules/RELEASE, at most a few levels deep."""
    base = ctx.path(f"/lib/modules/{release}")
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        depth = dirpath[len(base):].count(os.sep)
        if depth >= 6:
            dirnames[:] = []
        for name in filenames:
            if name.split(".ko")[0] == "nvidia" and ".ko" in name:
                found.append(os.path.join("/lib/modules", release, os.path.relpath(os.path.join(dirpath, name), base)))
        if len(found) > 3:
            break
    return found


@check("driver-module-for-kernel", "driver", "the nvidia module is built for the running kernel")
def check_module_for_kernel(ctx: Context) -> Verdict:
    release = ctx.kernel_release
    if on_wsl(ctx):
        return ok(WSL_OK)
    if ctx.nvrm_text is not None or (ctx.modules is not None and "nvidia" in ctx.modules):
        return ok(f"the module is loaded, so it was built for the running kernel ({release or 'release unknown'})")
    if gpu_on_bus(ctx) is False:
        return ok("no NVIDIA GPU on this host")
    if release is None:
        return unknown(f"cannot read the running kernel's release: {ctx.why_unreadable('/proc/sys/kernel/osrelease')}")
    if not os.path.isdir(ctx.path(f"/lib/modules/{release}")):
        return unknown(f"/lib/modules/{release} is not visible here (in a container the host's modules are not)")
    kos = find_nvidia_ko(ctx, release)
    dkms = ctx.tool(["dkms", "status"])
    entries = [e for e in parse.parse_dkms_status(dkms.stdout) if e.module.startswith("nvidia")]
    built_for = sorted({e.kernel for e in entries if e.kernel and "installed" in e.status})
    dkms_note = ""
    if entries:
        dkms_note = f"; dkms status: nvidia {entries[0].version} built for {', '.join(built_for) or 'no kernel'}"
    elif dkms.missing:
        dkms_note = "; dkms is not installed"
    if kos:
        return ok(f"{kos[0]} exists for the running kernel {release} (it is not loaded: see driver-loaded){dkms_note}")
    others = []
    try:
        for other in sorted(os.listdir(ctx.path("/lib/modules"))):
            if other != release and find_nvidia_ko(ctx, other):
                others.append(other)
    except OSError:
        pass
    seen = f"; nvidia.ko exists for {', '.join(others)}" if others else ""
    version = entries[0].version if entries else "<version>"
    return fail(
        f"the running kernel {release} has no nvidia module in /lib/modules/{release}{seen}{dkms_note}: "
        "the kernel was updated without rebuilding the driver",
        f"rebuild it for this kernel: `sudo dkms install nvidia/{version} -k {release}` (needs the headers: "
        f"`linux-headers-{release}` / `kernel-devel-{release}`), or install your distribution's prebuilt "
        "module package for this kernel; or boot the kernel it was built for",
    )


@check("dev-nvidia-nodes", "driver", "/dev/nvidia* exist and this user can open them")
def check_dev_nodes(ctx: Context) -> Verdict:
    loaded = ctx.nvrm_text is not None or (ctx.modules is not None and "nvidia" in ctx.modules)
    if on_wsl(ctx):
        return ok(WSL_OK)
    if not loaded and not ctx.gpus:
        if gpu_on_bus(ctx) is False:
            return ok("no NVIDIA GPU on this host")
        return ok("the driver is not loaded (see driver-loaded); device nodes come with it")
    count = len(ctx.gpus) or (ctx.pci.found or 1)
    wanted = ["/dev/nvidiactl", "/dev/nvidia-uvm"] + [f"/dev/nvidia{i}" for i in range(count)]
    missing, denied, seen = [], [], []
    for node in wanted:
        path = ctx.path(node)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            missing.append(node)
            continue
        except OSError as exc:
            denied.append(f"{node} ({exc.strerror})")
            continue
        mode = stat.filemode(st.st_mode)
        seen.append(f"{node} {mode}")
        if not os.access(path, os.R_OK | os.W_OK):
            denied.append(f"{node} ({mode}, owner uid {st.st_uid} gid {st.st_gid})")
    if missing:
        fix = "create them: `sudo nvidia-modprobe -c 0 -u` (or `sudo modprobe nvidia-uvm`)"
        if "/dev/nvidia-uvm" in missing:
            fix += "; without /dev/nvidia-uvm CUDA fails to initialise ('CUDA unknown error')"
        fix += "; in a container, start it with `--gpus all` (NVIDIA Container Toolkit)"
        return fail(f"missing: {', '.join(missing)}", fix)
    if denied:
        return fail(
            f"this user (uid {os.getuid()}) cannot open: {', '.join(denied)}",
            "add the user to the group that owns them (often `video`): `sudo usermod -aG video $USER`, "
            "then log in again; or fix the mode in the driver's udev rule / NVreg_DeviceFileMode",
        )
    return ok(", ".join(seen[:4]) + (", ..." if len(seen) > 4 else ""))


@check("nvml-mismatch", "driver", "the kernel module and the driver's libraries are the same version")
def check_nvml_mismatch(ctx: Context) -> Verdict:
    kmod = ctx.kernel_module_version
    said = ctx.smi.text if not ctx.smi.missing else ""
    mismatch = parse.parse_nvml_mismatch(said)
    lib_version = mismatch.library_version
    if lib_version is None:
        for entry in ctx.ldconfig[0]:
            if entry.soname == "libnvidia-ml.so.1":
                lib_version = parse.parse_libnvidia_ml_version(os.path.realpath(entry.path))
                if lib_version:
                    break
    if mismatch.found:
        detail = f"nvidia-smi: {parse.head(said, lines=2)}"
        if kmod:
            detail += f"; the loaded kernel module is {kmod}"
        if lib_version:
            detail += f", the libraries are {lib_version}"
        return fail(detail + ": the driver's userspace was updated and the running module was not", RELOAD)
    if kmod and lib_version and not lib_version.startswith(kmod) and not kmod.startswith(lib_version):
        return fail(
            f"the loaded kernel module is {kmod} but libnvidia-ml on the loader path is {lib_version}",
            RELOAD,
        )
    if kmod and ctx.gpus:
        return ok(f"nvidia-smi works with kernel module {kmod}")
    if kmod:
        return ok(f"kernel module {kmod}" + (f", libnvidia-ml {lib_version}" if lib_version else "") + "; no mismatch reported")
    if ctx.smi.missing and gpu_on_bus(ctx) is False:
        return ok("no NVIDIA driver on this host")
    return ok("nvidia-smi reports no driver/library mismatch")


@check("dmesg-nvrm", "driver", "the kernel log shows no NVIDIA driver errors")
def check_dmesg(ctx: Context) -> Verdict:
    res = ctx.tool(["dmesg"])
    if res.cause:
        extra = ""
        if "not permitted" in res.text.lower():
            extra = " (reading the kernel log needs root here: `sudo dmesg`, or `sysctl kernel.dmesg_restrict=0`)"
        return unknown(f"cannot read the kernel log: {res.cause}{extra}")
    hits = parse.parse_dmesg(res.stdout)
    if not hits:
        return ok("no NVRM errors, Xid events or module-signing rejections in dmesg")
    fatal = [h for h in hits if h.kind != "xid" or parse.is_fatal_xid(h.xid)]
    shown = " | ".join(h.line for h in (fatal or hits)[:3])
    kinds = {h.kind for h in fatal}
    if fatal and ctx.gpus:
        # The log keeps lines until reboot; the driver answering now means the
        # event was survived (a reset, a module reload), so it is history to know.
        return warn(
            f"dmesg: {shown} (nvidia-smi answers now, so this is an earlier event)",
            "if it recurs, see NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors)",
        )
    if "api-mismatch" in kinds:
        return fail(f"dmesg: {shown}", "userspace and kernel module differ: " + RELOAD)
    if "fallen-off-bus" in kinds:
        return fail(f"dmesg: {shown}", "the GPU fell off the bus (Xid 79): check power and seating, reset (`nvidia-smi -r`) or reboot; report repeated events to the vendor")
    if "unsigned-module" in kinds:
        return fail(
            f"dmesg: {shown}",
            "Secure Boot rejects the unsigned nvidia module: enroll the DKMS signing key "
            "(`sudo mokutil --import /var/lib/dkms/mok.pub`, then reboot) or disable Secure Boot",
        )
    if kinds & {"probe-failed", "init-failed"}:
        return fail(f"dmesg: {shown}", "another driver (nouveau, vfio-pci) holds the GPU, or its firmware failed to load; see the lines above")
    if fatal:
        return fail(f"dmesg: {shown}", "see NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors) for this Xid")
    return warn(f"dmesg: {shown}", "past Xid events; if they repeat, see NVIDIA's XID catalogue")
