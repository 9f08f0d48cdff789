"""Environment variables and mounts that change what CUDA and NCCL see.

CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER decide which GPUs a process gets and how
they are numbered; NCCL_*_DISABLE and NCCL_SOCKET_IFNAME (from the environment or
/etc/nccl.conf) decide how NCCL moves data; /dev/shm is where NCCL's shared-memory
transport lives. The values are read from this process's environment, which is the
one the user's programs inherit.
"""

from __future__ import annotations

import os

from torchfit.compat.ncclenv import is_nccl_switch_on
from torchfit.doctor import parse
from torchfit.doctor.context import Context
from torchfit.doctor.model import Verdict, check, fail, ok, unknown, warn

MIB = 1 << 20


def nccl_setting(ctx: Context, key: str) -> tuple[str | None, str]:
    """A NCCL variable and where it came from: the environment, then NCCL_CONF_FILE,
    ~/.nccl.conf and /etc/nccl.conf (NCCL docs, "Environment Variables")."""
    if key in ctx.environ:
        return ctx.environ[key], "environment"
    home = ctx.environ.get("HOME")
    user = os.path.join(home, ".nccl.conf") if home else None
    for path in [p for p in (ctx.environ.get("NCCL_CONF_FILE"), user, "/etc/nccl.conf") if p]:
        text = ctx.read(path) if path == "/etc/nccl.conf" else _read_plain(path)
        if text is not None:
            values = parse.parse_env_file(text)
            if key in values:
                return values[key], path
    return None, ""


def _read_plain(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(1 << 20)
    except OSError:
        return None


@check("cuda-visible-devices", "environment", "CUDA_VISIBLE_DEVICES names GPUs that exist")
def check_visible_devices(ctx: Context) -> Verdict:
    value = ctx.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return ok("CUDA_VISIBLE_DEVICES is not set: every GPU is visible")
    spec = parse.parse_cuda_visible_devices(value)
    fix = (
        "list GPUs by index (0,1) or by UUID from `nvidia-smi -L`, not both, each once; "
        "unset it to see every GPU"
    )
    if spec.hides_all:
        return fail(f"CUDA_VISIBLE_DEVICES={value!r}: {'; '.join(spec.problems) or 'no usable entry'}; "
                    "torch.cuda.is_available() is False", fix)
    problems = list(spec.problems)
    gpus = ctx.gpus
    if gpus:
        n = len(gpus)
        absent = [i for i in spec.indices if i >= n]
        if absent:
            problems.append(f"index {', '.join(map(str, absent))} does not exist (this host has GPUs 0-{n - 1})")
        uuids = [g.uuid for g in gpus if g.uuid]
        if uuids:
            unknown_ids = [u for u in spec.uuids if u.startswith("GPU-") and not any(x.startswith(u) for x in uuids)]
            if unknown_ids:
                problems.append(f"no GPU has UUID {', '.join(unknown_ids)}")
    if problems:
        return fail(f"CUDA_VISIBLE_DEVICES={value!r}: {'; '.join(problems)}; CUDA hides the named GPU and "
                    "every entry after the first bad one", fix)
    if not gpus:
        return unknown(f"CUDA_VISIBLE_DEVICES={value!r} is well formed; the GPUs it names could not be listed "
                       f"({ctx.nvidia.cause})")
    return ok(f"CUDA_VISIBLE_DEVICES={value!r} names {len(spec.entries)} of {len(gpus)} GPU(s)")


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


# Measured on the 2x H200 host (DESIGN.md): all-reduce 8 GiB busbw 350 GB/s; with
# NCCL_P2P_DISABLE=1 27 GB/s; with P2P and SHM disabled 3.2 GB/s.
_DISABLES = {
    "NCCL_P2P_DISABLE": "GPU-to-GPU transfers fall back to shared memory through the CPU "
                        "(measured on 2x H200 NVLink: 350 -> 27 GB/s all-reduce bus bandwidth)",
    "NCCL_SHM_DISABLE": "intra-node traffic without P2P goes through the network stack "
                        "(measured on 2x H200 with P2P also off: 3.2 GB/s)",
    "NCCL_IB_DISABLE": "multi-node traffic uses TCP sockets instead of InfiniBand/RoCE",
}


@check("nccl-env-disables", "environment", "no NCCL transport is switched off")
def check_nccl_disables(ctx: Context) -> Verdict:
    found = []
    for key, effect in _DISABLES.items():
        value, where = nccl_setting(ctx, key)
        if is_nccl_switch_on(key, value):
            found.append(f"{key}={value} ({where}): {effect}")
    if not found:
        return ok("NCCL_P2P_DISABLE, NCCL_SHM_DISABLE and NCCL_IB_DISABLE are not set")
    return warn(
        "; ".join(found),
        "unset them unless a known hardware problem needs them (a common copy-paste from old "
        "forum answers); check with `torchfit verify` that P2P then works",
    )


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
    if value is None or not value.strip():
        return ok("NCCL_SOCKET_IFNAME is not set: NCCL picks an interface, skipping lo and docker*")
    ifaces, why = ctx.interfaces
    if ifaces is None:
        return unknown(f"NCCL_SOCKET_IFNAME={value!r} ({where}); cannot list interfaces: {why}")
    spec = parse.parse_nccl_ifname(value)
    chosen = parse.match_interfaces(spec, ifaces)
    have = ", ".join(ifaces) or "none"
    if not chosen:
        return fail(
            f"NCCL_SOCKET_IFNAME={value!r} ({where}) matches no interface (this host has: {have}); NCCL fails "
            "with \"Bootstrap : no socket interface found\"",
            "set it to an interface `ip -br addr` shows (a prefix like `eth` matches eth0; `=eth0` matches "
            "exactly; `^docker,lo` excludes), or unset it",
        )
    if set(chosen) == {"lo"}:
        multi = multi_node(ctx)
        if multi:
            return fail(
                f"NCCL_SOCKET_IFNAME={value!r} selects only the loopback interface, but this is a multi-node "
                f"job ({multi}): other nodes cannot reach lo",
                "set it to the interface the nodes share (NVIDIA/nccl#286), or unset it",
            )
        return warn(
            f"NCCL_SOCKET_IFNAME={value!r} selects only loopback: fine on one node, fails across nodes",
            "unset it, or name the interface the nodes share, before running on several nodes",
        )
    return ok(f"NCCL_SOCKET_IFNAME={value!r} ({where}) selects {', '.join(chosen)}")


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
