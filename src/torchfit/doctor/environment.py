"""Environment variables and mounts that change what CUDA and NCCL see.

CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER decide which GPUs a process gets and how
they are numbered; NCCL_*_DISABLE and NCCL_SOCKET_IFNAME (from the environment or
/etc/nccl.conf) decide how NCCL moves data; /dev/shm is where NCCL's shared-memory
transport lives. The values are read from this process's environment, which is the
one the user's programs inherit.
"""

from __future__ import annotations

import os

from torchfit.compat.envjudge import (
    DISABLES,
    judge_nccl_disables,
    judge_socket_ifname,
    judge_visible_devices,
)
from torchfit.doctor import parse
from torchfit.doctor.context import Context
from torchfit.doctor.model import Verdict, check, fail, ok, unknown, warn
from torchfit.host import netenv

MIB = 1 << 20


def nccl_setting(ctx: Context, key: str) -> tuple[str | None, str]:
    """A NCCL variable and where it came from (host.netenv: the environment, then the conf files)."""
    return netenv.nccl_setting(ctx.environ, key, ctx.root)


@check("cuda-visible-devices", "environment", "CUDA_VISIBLE_DEVICES names GPUs that exist")
def check_visible_devices(ctx: Context) -> Verdict:
    value = ctx.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = ctx.gpus if value is not None else ()
    # The judgement verify makes before launching ranks, too (compat.envjudge).
    return Verdict(*judge_visible_devices(value, len(gpus) or None, [g.uuid for g in gpus if g.uuid],
                                          ctx.nvidia.cause if value is not None and not gpus else None))


@check("cuda-device-order", "environment", "torch numbers GPUs the way nvidia-smi does")
def check_device_order(ctx: Context) -> Verdict:
    value = ctx.environ.get("CUDA_DEVICE_ORDER")
    if value == "PCI_BUS_ID":
        return ok("CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA numbers GPUs like nvidia-smi")
    gpus = ctx.gpus
    shown = "unset" if value is None else f"{value!r}"
    if value not in (None, "FASTEST_FIRST", "PCI_BUS_ID"):
        return warn(f"CUDA_DEVICE_ORDER={value!r} is not a value CUDA knows (FASTEST_FIRST, PCI_BUS_ID); "
                    "CUDA uses FASTEST_FIRST", "export CUDA_DEVICE_ORDER=PCI_BUS_ID")
    if len(gpus) < 2:
        return ok(f"CUDA_DEVICE_ORDER {shown}; fewer than 2 GPUs, so the order cannot differ")
    names = {g.name for g in gpus}
    if len(names) == 1:
        return ok(f"CUDA_DEVICE_ORDER {shown}; all {len(gpus)} GPUs are {next(iter(names))}, and CUDA's "
                  "FASTEST_FIRST breaks ties by PCI bus ID, so torch and nvidia-smi agree")
    order = ", ".join(f"{g.index}: {g.name}" for g in gpus)
    return warn(
        f"CUDA_DEVICE_ORDER {shown} with mixed GPUs ({order}): CUDA puts the fastest GPU first, so "
        "cuda:0 is not nvidia-smi's GPU 0, and CUDA_VISIBLE_DEVICES indices mean different GPUs",
        "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
    )


@check("nccl-env-disables", "environment", "no NCCL transport is switched off")
def check_nccl_disables(ctx: Context) -> Verdict:
    return Verdict(*judge_nccl_disables({key: nccl_setting(ctx, key) for key in DISABLES}))


def multi_node(ctx: Context) -> str | None:
    """Why this looks like a multi-node job (torchrun/Slurm variables), or None."""
    env = ctx.environ
    try:
        world = int(env.get("WORLD_SIZE", "0"))
        local = int(env.get("LOCAL_WORLD_SIZE", "0"))
        if world and local and world > local:
            return f"WORLD_SIZE={world} > LOCAL_WORLD_SIZE={local}"
    except ValueError:
        pass
    for key in ("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "NNODES", "PET_NNODES"):
        try:
            if int(env.get(key, "0")) > 1:
                return f"{key}={env[key]}"
        except ValueError:
            continue
    return None


@check("nccl-socket-ifname", "environment", "NCCL_SOCKET_IFNAME names an interface this host has")
def check_socket_ifname(ctx: Context) -> Verdict:
    value, where = nccl_setting(ctx, "NCCL_SOCKET_IFNAME")
    ifaces, why = ctx.interfaces if value is not None and value.strip() else ((), None)
    return Verdict(*judge_socket_ifname(value, where, ifaces, why, multi_node(ctx)))


def shm_size(ctx: Context) -> tuple[int | None, str]:
    """The size of /dev/shm in bytes and how it was read."""
    path = ctx.path("/dev/shm")
    if os.path.ismount(path):
        try:
            st = os.statvfs(path)
            return st.f_frsize * st.f_blocks, f"statvfs({'/dev/shm' if ctx.root == '/' else path})"
        except OSError as exc:
            return None, f"statvfs(/dev/shm) failed: {exc.strerror}"
    for mounts in ("/proc/self/mounts", "/proc/mounts"):
        text = ctx.read(mounts)
        if text is not None:
            size = parse.parse_mount_size(text)
            if size is not None:
                return size, f"{mounts} size= option"
    if os.path.isdir(path):
        try:
            st = os.statvfs(path)
            return st.f_frsize * st.f_blocks, f"statvfs of {path} (not a separate mount)"
        except OSError as exc:
            return None, f"statvfs(/dev/shm) failed: {exc.strerror}"
    return None, ctx.why_unreadable("/dev/shm")


@check("dev-shm-size", "environment", "/dev/shm is big enough for NCCL and DataLoader workers")
def check_dev_shm(ctx: Context) -> Verdict:
    size, how = shm_size(ctx)
    if size is None:
        return unknown(f"cannot tell the size of /dev/shm: {how}")
    mib = size / MIB
    fix = ("give the container more shared memory: `docker run --shm-size=16g` (or `--ipc=host`); "
           "Kubernetes: mount an emptyDir with medium: Memory at /dev/shm")
    shown = f"/dev/shm is {mib:,.0f} MiB ({how})"
    if mib <= 64:
        return fail(
            f"{shown}: a container's default; NCCL fails with \"Error while creating shared memory segment\" "
            "and DataLoader workers with \"Bus error\"",
            fix,
        )
    if mib < 1024:
        return warn(f"{shown}: tight for NCCL with several GPUs and for DataLoader workers", fix)
    return ok(shown)
