"""A fake host for the host-probe and runner tests: real subprocesses, fake tools.

Probes are tested the way docs/architecture.md ("Contracts": testing without a GPU) asks: real
subprocesses, with fake tools (nvidia-smi, ldd, pyenv, rocm_agent_enumerator,
interpreters) written into tmp_path and put first on the runner's PATH. The fakes
replay outputs captured on the 2x H200 host (tests/data/h200-x2, see its
PROVENANCE.md) and record the argv they were called with. Nothing that runs a
command is monkeypatched.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from torchfit.host.nvidia import GPU_FIELDS
from torchfit.runner import Runner

FIXTURES = Path(__file__).resolve().parent.parent / "data"


H200 = FIXTURES / "h200-x2"


TOPO = FIXTURES / "topology"



def fixture(path: Path) -> str:
    # newline="" keeps the bytes as captured (tabs, ANSI escapes, blank lines).
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()



QUERY = [f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv,noheader,nounits"]


QUERY_NO_CC = [
    "--query-gpu=index,name,memory.total,uuid,pci.bus_id,driver_version",
    "--format=csv,noheader,nounits",
]


TOPO_M = ["topo", "-m"]


# nvidia-smi's text when the kernel module is not loaded (exit status 9: "NVIDIA
# driver is not loaded", nvidia-smi(1) RETURN VALUE).
DRIVER_GONE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n\n"
)


# One fake tool, configured by JSON: log argv, then replay the rule whose argv
# matches, else answer like the real nvidia-smi does to an unknown option
# (fixtures/h200-x2/nvidia-smi-bad-option.txt, exit 255).
FAKE_TOOL = """
import json, sys, time
CONFIG = json.loads({config!r})
argv = sys.argv[1:]
with open(CONFIG["log"], "a", encoding="utf-8") as fh:
    fh.write(json.dumps(argv) + "\\n")
if CONFIG.get("hang"):
    import subprocess
    # A grandchild in the same process group: the runner must kill it too.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])
    with open(CONFIG["pidfile"], "w") as fh:
        fh.write(str(child.pid))
    time.sleep(1000)
for rule in CONFIG["rules"]:
    if rule["argv"] is None or rule["argv"] == argv:
        sys.stdout.write(rule.get("stdout", ""))
        sys.stderr.write(rule.get("stderr", ""))
        sys.stdout.flush()
        sys.exit(rule.get("rc", 0))
sys.stdout.write(
    "ERROR: Option %s is not recognized. Please run 'nvidia-smi -h'.\\n\\n" % " ".join(argv)
)
sys.exit(255)
"""



class FakeHost:
    """A tmp_path host: bin/ (fake tools, first on PATH), root/ (fake /proc, /sys, /etc)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bin = tmp_path / "bin"
        self.root = tmp_path / "root"
        self.home = tmp_path / "home"
        for d in (self.bin, self.root, self.home):
            d.mkdir()

    def tool(
        self, name: str, rules: list[dict[str, Any]] | None = None, *, hang: bool = False
    ) -> Path:
        config = {
            "log": str(self.tmp / f"{name}.argv"),
            "pidfile": str(self.tmp / f"{name}.grandchild"),
            "rules": rules or [],
            "hang": hang,
        }
        return self.script(name, FAKE_TOOL.format(config=json.dumps(config)))

    def script(self, name: str, body: str, where: Path | None = None) -> Path:
        path = (where or self.bin) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body), encoding="utf-8")
        path.chmod(0o755)
        return path

    def calls(self, name: str) -> list[list[str]]:
        log = self.tmp / f"{name}.argv"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    def file(self, rel: str, text: str) -> Path:
        path = self.root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def runner(self, **kw: Any) -> Runner:
        # /usr/bin and /bin keep real basics (a python3 for probe_pythons); HOME and
        # PYENV_ROOT point away from this machine's real ~/.pyenv.
        path = os.pathsep.join([str(self.bin), "/usr/bin", "/bin"])
        env = {"PATH": path, "HOME": str(self.home), "PYENV_ROOT": str(self.home / ".pyenv")}
        return Runner(env_overrides=env, **kw)

    def h200_smi(self) -> None:
        self.tool(
            "nvidia-smi",
            [
                {"argv": QUERY, "stdout": fixture(H200 / "query-gpu.csv")},
                {"argv": TOPO_M, "stdout": fixture(H200 / "topo-m.txt")},
            ],
        )

    def h200_files(self) -> None:
        self.file("/proc/driver/nvidia/version", fixture(H200 / "proc-driver-nvidia-version.txt"))
        self.file("/etc/os-release", fixture(H200 / "os-release"))
        self.file("/proc/sys/kernel/osrelease", fixture(H200 / "proc-sys-kernel-osrelease.txt"))
        self.tool("ldd", [{"argv": ["--version"], "stdout": fixture(H200 / "ldd-version.txt")}])



def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False

