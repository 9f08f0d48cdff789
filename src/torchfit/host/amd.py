"""AMD: GPUs from rocm_agent_enumerator, rocminfo or KFD's sysfs topology, and the
ROCm version under /opt/rocm."""

import glob
import os
import re

from torchfit.compat.facts import Gpu
from torchfit.host._io import DEFAULT_TIMEOUT, _read, _run_tool, _under
from torchfit.runner import Runner

_GFX = re.compile(r"gfx[0-9a-f]+")

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
