"""Before any rank starts: the environment the ranks will get, judged as doctor judges it.

A failure whose cause doctor can name (an NCCL_SOCKET_IFNAME that matches no interface,
a CUDA_VISIBLE_DEVICES naming no GPU) must not reach the ranks as NCCL's raw "invalid
usage ... Last error" (issue 19, measured on an H200): verify says doctor's cause and
fix, with doctor's check id, and does not launch NCCL ranks that cannot start. The
judgement is compat.envjudge's, the facts host.netenv's: the same functions doctor's
environment checks call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from torchfit.checks import Check, Status
from torchfit.compat.envjudge import (
    DISABLES,
    EnvVerdict,
    judge_nccl_disables,
    judge_socket_ifname,
    judge_visible_devices,
)
from torchfit.host.netenv import nccl_setting, probe_interfaces

_STATUS = {"ok": Status.PASS, "warn": Status.WARN, "fail": Status.FAIL, "unknown": Status.UNKNOWN}
NCCL_CHECKS = ("nccl-socket-ifname", "nccl-env-disables")


def host_gpu_count(root: str = "/") -> int | None:
    """The NVIDIA GPUs the driver shows (/proc/driver/nvidia/gpus), None when it shows none."""
    try:
        return len(os.listdir(os.path.join(root, "proc/driver/nvidia/gpus"))) or None
    except OSError:
        return None


def _check(name: str, verdict: EnvVerdict) -> Check:
    return Check(name, _STATUS[verdict.status], verdict.evidence, hint=verdict.fix)


def judge_environment(env: Mapping[str, str], *, nccl: bool, multi_node: str | None,
                      gpu_count: int | None, interfaces: bool = True, root: str = "/") -> list[Check]:
    """doctor's environment checks for the ranks' environment `env`. `nccl`: the run will
    use NCCL (its variables matter); `interfaces`: judge NCCL_SOCKET_IFNAME against this
    host's interfaces (not on a login node, whose interfaces are not the nodes')."""
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    checks = [_check("cuda-visible-devices", judge_visible_devices(
        cvd, gpu_count, (), "the driver lists no GPU here" if cvd is not None and not gpu_count else None))]
    if nccl:
        checks.append(_check("nccl-env-disables",
                             judge_nccl_disables({k: nccl_setting(env, k, root) for k in DISABLES})))
        if interfaces:
            value, where = nccl_setting(env, "NCCL_SOCKET_IFNAME", root)
            ifaces, why = probe_interfaces(root) if value is not None and value.strip() else ((), None)
            checks.append(_check("nccl-socket-ifname", judge_socket_ifname(value, where, ifaces, why, multi_node)))
    return checks


def blocking(checks: list[Check]) -> str | None:
    """Why NCCL ranks must not start (a failed NCCL check), or None."""
    bad = [c for c in checks if c.status == "fail" and c.name in NCCL_CHECKS]
    return f"{bad[0].summary} (doctor's {bad[0].name} check)" if bad else None


def shown(checks: list[Check]) -> list[Check]:
    """What the report lists: the checks that did not pass, or one line saying all passed."""
    worth = [c for c in checks if c.status != "pass"]
    if worth:
        return worth
    names = ", ".join(c.name for c in checks)
    return [Check("environment", Status.PASS, f"doctor's checks of the ranks' environment pass ({names})")]
