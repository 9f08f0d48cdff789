"""A real Slurm cluster on 127.0.0.1 for the tests: Debian's slurmctld and one
`slurmd -N NAME` per node, each on its own port (auth/none, state in a temp dir).

Started once per test session (tests/fleet/conftest.py); about a second to come up.
Each node's GPUs come from one fake `nvidia-smi` (first on PATH) that answers with the
node's directory under `smi/`, picked by `$SLURMD_NODENAME` (set by slurmd for every
task and for its HealthCheckProgram); tests/data/fleet/PROVENANCE.md says where each
node's answers come from. Importable without pytest (bench/ uses it too).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from tests.support.fake_smi import NVML_MISMATCH

DATA = Path(__file__).resolve().parents[1] / "data"
H200 = DATA / "h200-x2"
FLEET = DATA / "fleet"
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
HOW_TO_GET = "Slurm is not installed: `apt-get install slurmctld slurmd` (Debian/Ubuntu) runs the cluster tests"

# The argv torchfit's GPU probe runs (host/nvidia.py GPU_FIELDS), as a shell pattern.
_DISPATCH = """#!/bin/sh
# Fake nvidia-smi of the test Slurm cluster: the answers of node $SLURMD_NODENAME.
node="${{SLURMD_NODENAME:-}}"
d="{root}/$node"
if [ -z "$node" ] || [ ! -d "$d" ]; then
  echo "fake nvidia-smi: no node directory for SLURMD_NODENAME='$node'" >&2
  exit 9
fi
echo "$*" >> "$d/calls"
[ -e "$d/hang" ] && exec sleep 600
case "$*" in
  --query-gpu=index,name,compute_cap,*) f=query ;;
  "topo -m") f=topo ;;
  "") f=banner ;;
  *) f=other ;;
esac
[ -e "$d/$f.out" ] || f=default
[ -e "$d/$f.out" ] && cat "$d/$f.out"
if [ -e "$d/$f.rc" ]; then exit "$(cat "$d/$f.rc")"; fi
[ "$f" = default ] && exit 255
exit 0
"""


def find_slurm() -> dict[str, str] | None:
    """Paths of slurmctld, slurmd, srun, sinfo, scontrol; None when any is missing."""
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(SBIN)
    found = {name: shutil.which(name, path=path) for name in ("slurmctld", "slurmd", "srun", "sinfo", "scontrol", "squeue", "scancel")}
    return None if any(v is None for v in found.values()) else {k: str(v) for k, v in found.items()}


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_node_smi(root: Path) -> dict[str, str]:
    """The per-node answers (tests/data/fleet/PROVENANCE.md); {node: what it is}."""
    def node(name: str, files: Mapping[str, str]) -> None:
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        for fname, text in files.items():
            (d / fname).write_text(text, encoding="utf-8")

    h200 = {"query.out": (H200 / "query-gpu.csv").read_text(), "topo.out": (H200 / "topo-m.txt").read_text()}
    node("n1", h200)
    node("n6", h200)
    node("n2", {"query.out": (FLEET / "a100-driver535-query.csv").read_text()})
    node("n3", {"query.out": (FLEET / "titanv-driver580-query.csv").read_text()})
    node("n4", {"hang": ""})
    # NVML_MISMATCH is the whole script: its two lines and exit 18, for every argv.
    lines = [ln[len('echo "'):-1] for ln in NVML_MISMATCH.splitlines() if ln.startswith('echo "')]
    node("n5", {"default.out": "\n".join(lines) + "\n", "default.rc": "18"})
    return {"n1": "2x H200, 580", "n2": "4x A100, 535", "n3": "TITAN V, 580", "n4": "nvidia-smi hangs",
            "n5": "NVML mismatch", "n6": "2x H200, 580"}


class SlurmCluster:
    """slurmctld + one slurmd per node, all ours; `env` is what a client needs."""

    NODES = ("n1", "n2", "n3", "n4", "n5", "n6")

    def __init__(self, base: Path, tools: dict[str, str]) -> None:
        self.base = base
        self.tools = tools
        self.conf = base / "slurm.conf"
        self.bin = base / "bin"  # the fake nvidia-smi, first on PATH
        self.smi = base / "smi"
        self.pids: dict[str, int] = {}
        self.env: dict[str, str] = {}

    def write(self) -> None:
        b = self.base
        for d in ("state", "spool", "log", "bin", "smi"):
            (b / d).mkdir(parents=True, exist_ok=True)
        write_node_smi(self.smi)
        smi = self.bin / "nvidia-smi"
        smi.write_text(_DISPATCH.format(root=self.smi))
        smi.chmod(0o755)
        ports = _free_ports(2 + len(self.NODES))
        lines = [
            f"ClusterName=tf{os.getpid() % 100000}",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={ports[0]}",
            f"SlurmdPort={ports[1]}",
            "AuthType=auth/none",
            "CredType=cred/none",
            "SlurmUser=root" if os.geteuid() == 0 else f"SlurmUser={os.environ.get('USER', 'root')}",
            f"StateSaveLocation={b}/state",
            f"SlurmdSpoolDir={b}/spool/%n",
            f"SlurmctldPidFile={b}/slurmctld.pid",
            f"SlurmdPidFile={b}/slurmd-%n.pid",
            f"SlurmctldLogFile={b}/log/slurmctld.log",
            f"SlurmdLogFile={b}/log/slurmd-%n.log",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "SelectType=select/linear",
            "MpiDefault=none",
            "SchedulerType=sched/builtin",
            "ReturnToService=2",
            "SlurmdTimeout=60",
            "InactiveLimit=0",
            "KillWait=2",
            "MessageTimeout=20",
        ]
        for name, port in zip(self.NODES, ports[2:]):
            lines.append(f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=2 "
                         "State=UNKNOWN")
        lines.append(f"PartitionName=gpu Nodes=n[1-{len(self.NODES)}] Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        path = os.pathsep.join([str(self.bin), os.environ.get("PATH", os.defpath)])
        self.env = {"SLURM_CONF": str(self.conf), "PATH": path}

    def client_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """os.environ with this cluster's SLURM_CONF and the fake nvidia-smi first on PATH,
        and no variables of an allocation the tests themselves may run in."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "NCCL_", "CUDA_"))}
        env.update(self.env)
        env.update(extra or {})
        return env

    def run(self, *argv: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.client_env(), capture_output=True, text=True,
                              timeout=timeout, check=check)

    def start(self, timeout: float = 30.0) -> None:
        env = self.client_env()
        subprocess.run([self.tools["slurmctld"], "-i"], env=env, check=True, timeout=30)
        for name in self.NODES:
            self.start_node(name)
        self.wait_idle(self.NODES, timeout)

    def start_node(self, name: str) -> None:
        subprocess.run([self.tools["slurmd"], "-N", name], env=self.client_env(), check=True, timeout=30)

    def stop_node(self, name: str) -> None:
        self._kill_pidfile(self.base / f"slurmd-{name}.pid")

    def states(self) -> dict[str, str]:
        out = self.run(self.tools["sinfo"], "--noheader", "--Node", "--format=%N %T", check=False).stdout
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def wait_idle(self, nodes: tuple[str, ...], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = self.states()
            if all(states.get(n) == "idle" for n in nodes):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the test Slurm did not come up in {timeout:g} s: {states}; logs in {self.base}/log")

    def reconfigure(self, extra_lines: list[str]) -> None:
        """Append lines to slurm.conf and have slurmctld and the slurmds re-read it."""
        with open(self.conf, "a", encoding="utf-8") as fh:
            fh.write("\n".join(extra_lines) + "\n")
        self.run(self.tools["scontrol"], "reconfigure")

    def node_info(self, name: str) -> str:
        return self.run(self.tools["scontrol"], "show", "node", name).stdout

    def stop(self) -> None:
        jobs = self.run(self.tools["squeue"], "--noheader", "--format=%i", check=False).stdout.split()
        if jobs:
            self.run(self.tools["scancel"], *jobs, check=False)
        self.run(self.tools["scontrol"], "shutdown", check=False, timeout=15)  # slurmctld and every slurmd
        time.sleep(0.5)
        for pidfile in sorted(self.base.glob("slurm*.pid")):
            self._kill_pidfile(pidfile)
        for pid in self.leftovers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def leftovers(self) -> list[int]:
        """Processes still running with this cluster's SLURM_CONF (slurmstepd, tasks), the
        daemons aside: what a job left behind."""
        mark = f"SLURM_CONF={self.conf}".encode()
        daemons = set()
        for pidfile in self.base.glob("slurm*.pid"):
            with contextlib.suppress(OSError, ValueError):
                daemons.add(int(pidfile.read_text().strip()))
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid() or int(entry) in daemons:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if mark not in fh.read().split(b"\0"):
                        continue
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    # slurmctld's own helper ("slurmctld: slurmscriptd") is the daemon, not a job.
                    if fh.read().startswith(b"slurmctld:"):
                        continue
                found.append(int(entry))
            except OSError:
                continue
        return found

    @staticmethod
    def _kill_pidfile(pidfile: Path) -> None:
        try:
            pid = int(pidfile.read_text().strip())
        except (OSError, ValueError):
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            for _ in range(30):
                time.sleep(0.1)
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return


def forged_answer(node: str, record: str, after: float = 0.0) -> str:
    """A sitecustomize.py for the tasks' PYTHONPATH: on `node` only, print `record` (the text
    between fleet.srun's answer markers) instead of torchfit's own answer, and exit; `after`
    seconds first. How the tests play a hostile node (srun hands PYTHONPATH to every task)."""
    return (
        "import os, sys, time\n"
        f"if os.environ.get('SLURMD_NODENAME') == {node!r}:\n"
        f"    time.sleep({after!r})\n"
        f"    sys.stdout.write('torchfit-fleet-node\\n' + {record!r} + '\\ntorchfit-fleet-end\\n')\n"
        "    sys.stdout.flush()\n"
        "    os._exit(0)\n"
    )
