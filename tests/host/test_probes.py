"""Host probes, the subprocess runner and URL redaction.

Probes are tested the way DESIGN.md ("Testing without a GPU") asks: real
subprocesses, with fake tools (nvidia-smi, ldd, pyenv, rocm_agent_enumerator,
interpreters) written into tmp_path and put first on the runner's PATH. The fakes
replay outputs captured on the 2x H200 host (tests/data/h200-x2, see its
PROVENANCE.md) and record the argv they were called with. Nothing that runs a
command is monkeypatched. Every parser is fuzzed with hypothesis.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchfit.host.pythons as pythons_mod
from torchfit.compat.gpunames import find_capability, load_gpu_names, parse_gpu_names
from torchfit.compat.versions import Arch
from torchfit.errors import MatrixError, ProbeFailed, ToolMissing, ToolTimeout
from torchfit.host import probe_host
from torchfit.host.amd import (
    parse_gfx_target_version,
    parse_kfd_properties,
    parse_rocm_agents,
    parse_rocminfo,
    probe_amd_gpus,
)
from torchfit.host.nvidia import (
    GPU_FIELDS,
    parse_invalid_field,
    parse_module_version,
    parse_nvrm_version,
    parse_query_gpu,
    parse_topology,
    probe_driver_version,
    probe_nvidia_gpus,
)
from torchfit.host.pci import parse_pci_vendor
from torchfit.host.pythons import (
    parse_pyenv_install_list,
    parse_pyenv_version,
    parse_pyenv_versions,
    parse_python_version,
    probe_pyenv,
    probe_pythons,
)
from torchfit.host.system import (
    parse_confstr_glibc,
    parse_ldd_version,
    parse_os_release,
    parse_wsl,
    probe_glibc,
    probe_l4t,
    probe_os,
    probe_wsl,
)
from torchfit.redact import redact
from torchfit.runner import Runner, RunResult

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


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# --- the acceptance tests: H200 through a fake nvidia-smi -----------------------------


def test_h200_host_from_captured_outputs(host: FakeHost) -> None:
    host.h200_smi()
    host.h200_files()
    facts = probe_host(host.runner(), root=str(host.root))

    assert [g.name for g in facts.gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert [g.compute_capability for g in facts.gpus] == ["9.0", "9.0"]
    assert [g.index for g in facts.gpus] == [0, 1]
    assert facts.gpus[0].memory_mib == 143771
    assert facts.gpus[0].uuid == "GPU-6d813363-5bf2-a0dd-1143-049efd4e9536"
    assert facts.gpus[1].pci_bus_id == "00000000:00:07.0"
    assert facts.driver_version == "580.159.04"
    assert dict(facts.topology) == {"0-1": "NV18"}
    assert facts.glibc == "2.39"
    assert facts.os == "ubuntu:24.04"
    assert facts.wsl is False
    assert facts.arch in ("x86_64", "aarch64", platform.machine())
    for fact in ("driver_version", "gpus", "topology", "glibc", "os", "wsl", "arch"):
        assert fact not in facts.reasons, facts.reasons
    # The argv each probe ran: one GPU query, one topology query, nothing else.
    assert host.calls("nvidia-smi") == [QUERY, TOPO_M]
    assert host.calls("ldd") == [["--version"]]


def test_driver_from_nvidia_smi_when_proc_and_sys_are_absent(host: FakeHost) -> None:
    host.h200_smi()
    facts = probe_host(host.runner(), root=str(host.root))
    assert facts.driver_version == "580.159.04"
    assert "driver_version" not in facts.reasons
    # The GPU query already carried driver_version: no second nvidia-smi call for it.
    assert host.calls("nvidia-smi") == [QUERY, TOPO_M]


def test_driver_from_sys_module_when_proc_is_absent(host: FakeHost) -> None:
    host.file("/sys/module/nvidia/version", fixture(H200 / "sys-module-nvidia-version.txt"))
    found, why = probe_driver_version(host.runner(), str(host.root))
    assert (found, why) == ("580.159.04", None)
    assert host.calls("nvidia-smi") == []  # files first, no tool needed


def test_driver_unknown_says_why(host: FakeHost) -> None:
    found, why = probe_driver_version(host.runner(), str(host.root))
    assert found is None
    assert why is not None and why.startswith("unknown, because no NVIDIA kernel module is loaded")
    assert "nvidia-smi not found on PATH" in why


def test_hanging_nvidia_smi_is_cut_off_and_reported(host: FakeHost) -> None:
    host.tool("nvidia-smi", hang=True)
    host.h200_files()
    start = time.monotonic()
    facts = probe_host(host.runner(), root=str(host.root), timeout=1.0)
    elapsed = time.monotonic() - start
    assert elapsed < 4.0, elapsed
    assert facts.gpus == ()
    assert "nvidia-smi timed out after 1 s" in facts.reasons["gpus"]
    assert facts.reasons["topology"] == "unknown, because nvidia-smi timed out after 1 s"
    # The driver is still known: the kernel module's file needs no tool.
    assert facts.driver_version == "580.159.04"
    assert host.calls("nvidia-smi") == [QUERY]  # not retried, topology not attempted
    grandchild = int((host.tmp / "nvidia-smi.grandchild").read_text())
    deadline = time.monotonic() + 2
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the hung tool's process group was not killed"


def test_old_driver_without_compute_cap_uses_the_name_table(host: FakeHost) -> None:
    bad_field = fixture(H200 / "query-gpu-bad-field.txt").replace(
        "compute_capability_bogus", "compute_cap"
    )
    host.tool(
        "nvidia-smi",
        [
            {"argv": QUERY, "stdout": bad_field, "rc": 2},
            {"argv": QUERY_NO_CC, "stdout": fixture(H200 / "query-gpu-no-compute-cap.csv")},
            {"argv": TOPO_M, "stdout": fixture(H200 / "topo-m.txt")},
        ],
    )
    facts = probe_host(host.runner(), root=str(host.root))
    assert [g.compute_capability for g in facts.gpus] == ["9.0", "9.0"]
    assert facts.gpus[0].memory_mib == 143771
    assert facts.driver_version == "580.159.04"
    assert "gpus" not in facts.reasons
    assert host.calls("nvidia-smi") == [QUERY, QUERY_NO_CC, TOPO_M]


def test_old_driver_unknown_gpu_name_is_reported(host: FakeHost) -> None:
    rows = (
        "0, Tesla K80, 11441, GPU-0d3e6f36-8f5c-4a7e-9b2d-3c4e5f6a7b8c, 00000000:04:00.0,"
        " 470.82.01\n"
        "1, NVIDIA Mystery Accelerator, 81920, GPU-11111111-2222-3333-4444-555555555555,"
        " 00000000:05:00.0, 470.82.01\n"
    )
    host.tool(
        "nvidia-smi",
        [
            {
                "argv": QUERY,
                "stdout": 'Field "compute_cap" is not a valid field to query.\n\n',
                "rc": 2,
            },
            {"argv": QUERY_NO_CC, "stdout": rows},
        ],
    )
    nv = probe_nvidia_gpus(host.runner())
    assert [g.compute_capability for g in nv.gpus] == ["3.7", None]
    assert nv.driver_version == "470.82.01"
    assert nv.note is not None and "NVIDIA Mystery Accelerator" in nv.note and "--assume" in nv.note


def test_garbage_from_nvidia_smi_is_a_reason_not_a_crash(host: FakeHost) -> None:
    host.tool(
        "nvidia-smi", [{"argv": None, "stdout": "\x00\x1b[31m;;,,\nGPU 0: ???\n\ufffd garbage\n"}]
    )
    facts = probe_host(host.runner(), root=str(host.root))
    assert facts.gpus == ()
    assert facts.reasons["gpus"].startswith("unknown, because nvidia-smi listed no GPUs")
    assert host.calls("nvidia-smi") == [QUERY]


def test_nvidia_smi_that_cannot_reach_the_driver(host: FakeHost) -> None:
    host.tool("nvidia-smi", [{"argv": None, "stdout": DRIVER_GONE, "rc": 9}])
    facts = probe_host(host.runner(), root=str(host.root))
    assert facts.gpus == ()
    assert facts.reasons["gpus"].startswith(
        "unknown, because nvidia-smi failed: NVIDIA-SMI has failed because it couldn't"
        " communicate with the NVIDIA driver."
    )
    assert "no AMD GPU found" in facts.reasons["gpus"]


def test_partial_nvidia_smi_failure_keeps_the_gpus_it_listed(host: FakeHost) -> None:
    first = fixture(H200 / "query-gpu.csv").splitlines(keepends=True)[0]
    lost = "Unable to determine the device handle for GPU 00000000:00:07.0: GPU is lost.\n"
    host.tool("nvidia-smi", [{"argv": QUERY, "stdout": first + lost, "rc": 15}])
    nv = probe_nvidia_gpus(host.runner())
    assert [g.index for g in nv.gpus] == [0]
    assert nv.cause is None
    assert nv.note == (
        "nvidia-smi listed 1 GPU(s) but exited with status 15: Unable to determine the"
        " device handle for GPU 00000000:00:07.0: GPU is lost."
    )


def test_no_nvidia_smi_and_a_gpu_on_the_pci_bus(host: FakeHost) -> None:
    host.file("/sys/bus/pci/devices/0000:00:06.0/vendor", "0x10de\n")
    host.file("/sys/bus/pci/devices/0000:00:06.0/class", "0x030200\n")
    host.file("/sys/bus/pci/devices/0000:00:00.0/vendor", "0x8086\n")  # host bridge
    host.file("/sys/bus/pci/devices/0000:00:00.0/class", "0x060000\n")
    facts = probe_host(host.runner(), root=str(host.root))
    why = facts.reasons["gpus"]
    assert why.startswith("unknown, because nvidia-smi not found on PATH")
    assert "PCI bus shows 1 NVIDIA GPU(s)" in why
    assert "nvidia-smi not found on PATH" in facts.reasons["driver_version"]
    assert facts.reasons["topology"] == "unknown, because nvidia-smi not found on PATH"


def test_one_gpu_needs_no_topology(host: FakeHost) -> None:
    one = fixture(H200 / "query-gpu.csv").splitlines(keepends=True)[0]
    host.tool("nvidia-smi", [{"argv": QUERY, "stdout": one}])
    facts = probe_host(host.runner(), root=str(host.root))
    assert len(facts.gpus) == 1
    assert dict(facts.topology) == {}
    assert "topology" not in facts.reasons
    assert host.calls("nvidia-smi") == [QUERY]


def test_unreadable_topology_is_a_reason(host: FakeHost) -> None:
    host.tool(
        "nvidia-smi",
        [
            {"argv": QUERY, "stdout": fixture(H200 / "query-gpu.csv")},
            {"argv": TOPO_M, "stdout": "topology not available in this container\n"},
        ],
    )
    facts = probe_host(host.runner(), root=str(host.root))
    assert len(facts.gpus) == 2
    assert facts.reasons["topology"].startswith("unknown, because nvidia-smi topo -m printed no")


# --- AMD ------------------------------------------------------------------------------


def test_amd_from_rocm_agent_enumerator(host: FakeHost) -> None:
    host.tool("rocm_agent_enumerator", [{"argv": [], "stdout": "gfx000\ngfx942\ngfx942\n"}])
    host.file("/opt/rocm/.info/version", "6.2.0-66\n")
    facts = probe_host(host.runner(), root=str(host.root))
    assert [(g.vendor, g.gfx) for g in facts.gpus] == [("amd", "gfx942"), ("amd", "gfx942")]
    assert "gpus" not in facts.reasons  # nvidia-smi is simply absent: not a problem here
    assert facts.rocm_version == "6.2.0"


def test_amd_from_rocminfo_under_opt_rocm(host: FakeHost) -> None:
    # Not on PATH, but in <root>/opt/rocm/bin, where ROCm installs it.
    host.tool(
        "rocminfo", [{"argv": [], "stdout": fixture(FIXTURES / "amd" / "rocminfo-mi300x.txt")}]
    )
    (host.bin / "rocminfo").rename(host.root / "rocminfo")
    (host.root / "opt/rocm/bin").mkdir(parents=True)
    (host.root / "rocminfo").rename(host.root / "opt/rocm/bin/rocminfo")
    gpus, why = probe_amd_gpus(host.runner(), str(host.root))
    assert why is None
    assert [(g.name, g.gfx) for g in gpus] == [("AMD Instinct MI300X", "gfx942")] * 2


def test_amd_from_kfd_sysfs(host: FakeHost) -> None:
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    host.file(f"{nodes}/0/properties", "cpu_cores_count 96\nsimd_count 0\ngfx_target_version 0\n")
    host.file(
        f"{nodes}/1/properties", "cpu_cores_count 0\nsimd_count 1216\ngfx_target_version 90402\n"
    )
    host.file(f"{nodes}/10/properties", "simd_count 440\ngfx_target_version 90010\n")
    host.file(f"{nodes}/2/properties", "simd_count 80\ngfx_target_version 110000\n")
    gpus, why = probe_amd_gpus(host.runner(), str(host.root))
    assert why is None
    assert [g.gfx for g in gpus] == ["gfx942", "gfx1100", "gfx90a"]  # node order 1, 2, 10


def test_no_amd_tools_says_which_sources_were_tried(host: FakeHost) -> None:
    gpus, why = probe_amd_gpus(host.runner(), str(host.root))
    assert gpus == ()
    assert why == (
        "rocm_agent_enumerator not found; rocminfo not found;"
        " /sys/class/kfd is absent (no amdgpu kernel driver)"
    )


def test_amd_host_with_a_broken_nvidia_smi_reports_it(host: FakeHost) -> None:
    host.tool("rocm_agent_enumerator", [{"argv": [], "stdout": "gfx000\ngfx90a\n"}])
    host.tool("nvidia-smi", [{"argv": None, "stdout": DRIVER_GONE, "rc": 9}])
    facts = probe_host(host.runner(), root=str(host.root))
    assert [g.gfx for g in facts.gpus] == ["gfx90a"]
    assert facts.reasons["gpus"].startswith("NVIDIA GPUs unknown, because nvidia-smi failed")


# --- glibc, OS, WSL, arch -------------------------------------------------------------


def test_glibc_here_from_confstr() -> None:
    found, why = probe_glibc(Runner())
    assert why is None
    assert found == os.confstr("CS_GNU_LIBC_VERSION").split()[1]


def test_glibc_musl(host: FakeHost) -> None:
    musl = "musl libc (x86_64)\nVersion 1.2.4\nDynamic Program Loader\n"
    host.tool("ldd", [{"argv": ["--version"], "stderr": musl, "rc": 1}])
    found, why = probe_glibc(host.runner(), str(host.root))
    assert found is None
    assert why == "unknown, because this system's C library is not glibc (musl libc (x86_64))"


def test_glibc_without_ldd(host: FakeHost) -> None:
    runner = Runner(env_overrides={"PATH": str(host.bin)})
    found, why = probe_glibc(runner, str(host.root))
    assert (found, why) == (None, "unknown, because ldd not found on PATH")


def test_os_and_wsl_from_root(host: FakeHost) -> None:
    assert probe_os(str(host.root)) == (
        None,
        "unknown, because /etc/os-release and /usr/lib/os-release are absent",
    )
    host.file(
        "/usr/lib/os-release",
        'NAME="CentOS Linux"\nVERSION="7 (Core)"\nID="centos"\nVERSION_ID="7"\n',
    )
    assert probe_os(str(host.root)) == ("centos:7", None)
    wsl, why = probe_wsl(str(host.root))
    assert wsl is None and why is not None
    host.file("/proc/version", "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@1234) ...\n")
    assert probe_wsl(str(host.root)) == (True, None)
    host.file("/proc/version", "Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103)\n")
    host.file("/proc/sys/kernel/osrelease", "6.8.0-49-generic\n")
    assert probe_wsl(str(host.root)) == (False, None)


# --- Pythons and pyenv ----------------------------------------------------------------


def _fake_python(host: FakeHost, path: Path, prints: str, *, sleep: float = 0) -> Path:
    body = f"""
    import sys, time
    time.sleep({sleep})
    assert sys.argv[1:] == ["-c", {pythons_mod._PY_VERSION_CODE!r}], sys.argv
    print({prints!r})
    """
    return host.script(path.name, body, where=path.parent)


def test_pythons_on_path(host: FakeHost) -> None:
    a = host.tmp / "a"
    b = host.tmp / "b"
    real = _fake_python(host, host.tmp / "opt" / "python3.12", "3.12.9")
    a.mkdir()
    b.mkdir()
    (a / "python3.12").symlink_to(real)
    (a / "python3").symlink_to(real)  # same interpreter twice in one dir
    (b / "python3.12").symlink_to(real)  # and again in another dir
    _fake_python(host, a / "python3.10", "not a version")
    _fake_python(host, b / "python3.9", "3.9.20", sleep=30)  # hangs: left out
    _fake_python(host, b / "python3.13", "3.13.1")
    _fake_python(host, b / "python3-config", "3.13.1")  # not an interpreter name
    runner = Runner(env_overrides={"PATH": f"{a}{os.pathsep}{b}"})
    start = time.monotonic()
    found, why = probe_pythons(runner, timeout=1.0)
    assert time.monotonic() - start < 4.0
    assert why is None
    assert [(p.version, p.path, p.source) for p in found] == [
        ("3.12.9", str(a / "python3.12"), "path"),
        ("3.13.1", str(b / "python3.13"), "path"),
    ]


def test_pythons_prefer_the_host_interpreter_over_a_venv_link(host: FakeHost) -> None:
    real = _fake_python(host, host.tmp / "usr" / "bin" / "python3.12", "3.12.3")
    venv = host.tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {real.parent}\n")
    (venv / "bin" / "python3.12").symlink_to(real)
    runner = Runner(env_overrides={"PATH": f"{venv / 'bin'}{os.pathsep}{real.parent}"})
    found, _ = probe_pythons(runner)
    assert [p.path for p in found] == [str(real)]


def test_no_python_on_path(host: FakeHost) -> None:
    found, why = probe_pythons(Runner(env_overrides={"PATH": str(host.bin)}))
    assert found == ()
    assert why == "unknown, because no working python3 or python3.X on PATH"


def _fake_pyenv(host: FakeHost, *, install_list: str | None = None) -> Path:
    pyenv_root = host.home / ".pyenv"
    for v in ("3.11.7", "3.12.1"):
        _fake_python(host, pyenv_root / "versions" / v / "bin" / f"python{v[:4]}", v)
    (pyenv_root / "versions" / "3.12.1" / "envs" / "myenv").mkdir(parents=True)
    shims = pyenv_root / "shims"
    _fake_python(host, shims / "python3.12", "3.12.1")  # must not be run
    bare = "3.11.7\n3.12.1\n3.12.1/envs/myenv\nmyenv\npypy3.10-7.3.15\n3.13.0t\nsystem\n"
    host.tool(
        "pyenv",
        [
            {"argv": ["root"], "stdout": f"{pyenv_root}\n"},
            {"argv": ["--version"], "stdout": fixture(FIXTURES / "pyenv" / "version.txt")},
            {"argv": ["versions", "--bare"], "stdout": bare},
            {
                "argv": ["install", "--list"],
                "stdout": install_list
                if install_list is not None
                else fixture(FIXTURES / "pyenv" / "install-list.txt"),
            },
        ],
    )
    return shims


def test_pyenv_and_its_pythons(host: FakeHost) -> None:
    shims = _fake_pyenv(host)
    runner = Runner(
        env_overrides={
            "PATH": f"{shims}{os.pathsep}{host.bin}",
            "HOME": str(host.home),
            "PYENV_ROOT": str(host.home / ".pyenv"),
        }
    )
    facts = probe_host(runner, root=str(host.root))
    pyenv_root = host.home / ".pyenv"
    assert facts.pyenv is not None
    assert facts.pyenv.path == str(pyenv_root)
    assert facts.pyenv.version == "2.6.30"
    inst = facts.pyenv.installable
    assert "3.12.1" in inst and "3.14.4" in inst and "2.7.18" in inst
    # Final CPython releases and their free-threaded builds ("3.13.0t"), nothing else.
    assert not [v for v in inst if not v.removesuffix("t").replace(".", "").isdigit()]
    assert "3.13.0t" in inst
    assert len(inst) == len(set(inst))
    assert [(p.version, p.source) for p in facts.pythons] == [
        ("3.11.7", "pyenv"),
        ("3.12.1", "pyenv"),
    ]
    assert facts.pythons[1].path == str(pyenv_root / "versions/3.12.1/bin/python3.12")
    assert "pythons" not in facts.reasons and "pyenv" not in facts.reasons
    assert sorted(host.calls("pyenv")) == [
        ["--version"],
        ["install", "--list"],
        ["root"],
        ["versions", "--bare"],
    ]


def test_pyenv_without_install_list(host: FakeHost) -> None:
    _fake_pyenv(host, install_list="")
    pyenv, pythons, why = probe_pyenv(host.runner())
    assert pyenv is not None and pyenv.installable == ()
    assert len(pythons) == 2
    assert why is not None and "`pyenv install --list` gave no CPython release" in why


def test_pyenv_found_outside_path_via_pyenv_root(host: FakeHost) -> None:
    shims = _fake_pyenv(host)
    (host.home / ".pyenv" / "bin").mkdir()
    (host.bin / "pyenv").rename(host.home / ".pyenv" / "bin" / "pyenv")
    # Found through $PYENV_ROOT/bin, and through ~/.pyenv/bin when PYENV_ROOT is unset.
    for pyenv_root in (str(host.home / ".pyenv"), ""):
        env = {"PATH": str(shims), "HOME": str(host.home), "PYENV_ROOT": pyenv_root}
        pyenv, _, _ = probe_pyenv(Runner(env_overrides=env))
        assert pyenv is not None and pyenv.version == "2.6.30"


def test_no_pyenv(host: FakeHost) -> None:
    facts = probe_host(host.runner(), root=str(host.root))
    assert facts.pyenv is None
    assert facts.reasons["pyenv"].startswith("unknown, because pyenv not found on PATH")


@pytest.mark.skipif(
    not os.path.isdir(os.path.expanduser("~/.pyenv/versions")), reason="needs pyenv"
)
def test_real_pyenv_on_this_machine() -> None:
    pyenv, pythons, _ = probe_pyenv(Runner())
    assert pyenv is not None
    assert "3.12.1" in pyenv.installable
    assert pythons and all(
        p.source == "pyenv" and p.path and os.path.exists(p.path) for p in pythons
    )


def test_probe_host_on_this_machine_is_fast() -> None:
    if Runner().which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi; the timing bound is for hosts without one")
    probe_host(Runner())  # warm the page cache
    start = time.monotonic()
    facts = probe_host(Runner())
    elapsed = time.monotonic() - start
    assert elapsed < 1.0, elapsed
    assert facts.arch and facts.glibc and facts.pythons
    assert facts.reasons["gpus"].startswith("unknown, because nvidia-smi not found on PATH")


# --- parsers: examples ----------------------------------------------------------------


def test_parse_nvrm_version_variants() -> None:
    assert parse_nvrm_version(fixture(H200 / "proc-driver-nvidia-version.txt")) == "580.159.04"
    old = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  Wed Oct 27 21:21:55 UTC 2021\n"
        "GCC version:  gcc version 9.3.0 (Ubuntu 9.3.0-17ubuntu1~20.04)\n"
    )
    assert parse_nvrm_version(old) == "470.82.01"
    arm = (
        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  560.35.03  Release Build"
        "  (dvs-builder@U16-I3-B03-4-3)\n"
    )
    assert parse_nvrm_version(arm) == "560.35.03"
    assert parse_nvrm_version("GCC version: 9.3\n") is None
    assert parse_module_version(fixture(H200 / "sys-module-nvidia-version.txt")) == "580.159.04"
    assert parse_module_version("580.159.04 junk") is None


def test_parse_query_gpu_cells() -> None:
    text = (
        "0, NVIDIA A100-SXM4-80GB, 8.0, 81920 MiB, GPU-aaa, 00000000:07:00.0, 535.183.01\n"
        "1, NVIDIA A100-SXM4-80GB, [N/A], [Not Supported], [N/A], 00000000:0F:00.0, 535.183.01\n"
        "No devices were found\n"
        "x, broken, 8.0, 1, u, p, 1.2\n"
    )
    smi = parse_query_gpu(text)
    assert smi.driver_version == "535.183.01"
    assert [(g.index, g.compute_capability, g.memory_mib, g.uuid) for g in smi.gpus] == [
        (0, "8.0", 81920, "GPU-aaa"),
        (1, None, None, None),
    ]
    no_cc = fixture(H200 / "query-gpu-no-compute-cap.csv")
    fields = ("index", "name", "memory.total", "uuid", "pci.bus_id", "driver_version")
    assert [g.compute_capability for g in parse_query_gpu(no_cc, fields).gpus] == [None, None]
    assert parse_query_gpu(no_cc).gpus == ()  # wrong field count: not misread


def test_parse_invalid_field() -> None:
    assert (
        parse_invalid_field(fixture(H200 / "query-gpu-bad-field.txt")) == "compute_capability_bogus"
    )
    assert (
        parse_invalid_field('Field "compute_cap" is not a valid field to query.\n') == "compute_cap"
    )
    assert parse_invalid_field(fixture(H200 / "query-gpu.csv")) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("h200-x2/topo-m.txt", {"0-1": "NV18"}),
        (
            "topology/4gpu-nvlink-pairs-spaces.txt",
            {"0-1": "NV12", "0-2": "SYS", "0-3": "SYS", "1-2": "SYS", "1-3": "SYS", "2-3": "NV12"},
        ),
        (
            "topology/4gpu-pcie-mlx5.txt",
            {"0-1": "PIX", "0-2": "SYS", "0-3": "SYS", "1-2": "SYS", "1-3": "SYS", "2-3": "PHB"},
        ),
        (
            "topology/dgx-8gpu-nv18-nic.txt",
            {f"{i}-{j}": "NV18" for i in range(8) for j in range(i + 1, 8)},
        ),
    ],
)
def test_parse_topology_fixtures(name: str, expected: dict[str, str]) -> None:
    assert parse_topology(fixture(FIXTURES / name)) == expected


def test_parse_topology_edges() -> None:
    assert parse_topology("") == {}
    assert parse_topology(fixture(H200 / "nvidia-smi-bad-option.txt")) == {}
    one = (
        "\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \t0-31\t0\t\tN/A\n"
    )
    assert parse_topology(one) == {}
    # A capture cut after GPU1's row: the pairs with GPU2 come from GPU2's... absent row,
    # so only what the lower half of the rows we have can tell.
    cut = "\tGPU0\tGPU1\tGPU2\tCPU Affinity\nGPU1\tNV4\t X \tPIX\t0-7\nGPU2\tSYS\tPIX\t X \t0-7\n"
    assert parse_topology(cut) == {"0-1": "NV4", "0-2": "SYS", "1-2": "PIX"}
    # The legend's "X = Self" and "NV# = ..." lines are never rows.
    assert parse_topology(fixture(H200 / "topo-m.txt").split("Legend")[1]) == {}


def test_parse_small_things() -> None:
    assert parse_ldd_version(fixture(H200 / "ldd-version.txt")) == "2.39"
    assert (
        parse_ldd_version("ldd (GNU libc) 2.17\nCopyright (C) 2012 Free Software Foundation\n")
        == "2.17"
    )
    assert parse_ldd_version("musl libc (x86_64)\nVersion 1.2.4\n") is None
    assert parse_confstr_glibc("glibc 2.39") == "2.39"
    assert parse_confstr_glibc(None) is None
    assert parse_os_release(fixture(H200 / "os-release")) == "ubuntu:24.04"
    assert parse_os_release('NAME="Arch Linux"\nID=arch\nBUILD_ID=rolling\n') == "arch"
    assert parse_os_release("ID='rhel'\nVERSION_ID='8.10'\n") == "rhel:8.10"
    assert parse_os_release("NAME=nothing\n") is None
    assert parse_wsl("5.15.153.1-microsoft-standard-WSL2") is True
    assert parse_wsl("4.4.0-19041-Microsoft") is True
    assert parse_wsl(fixture(H200 / "proc-sys-kernel-osrelease.txt")) is False
    assert parse_python_version("3.12.1\n") == "3.12.1"
    assert parse_python_version("Python 3.12.1") is None
    assert parse_pyenv_version(fixture(FIXTURES / "pyenv" / "version.txt")) == "2.6.30"
    assert parse_pyenv_versions(fixture(FIXTURES / "pyenv" / "versions-bare.txt"))[-1] == "3.13.0"
    listed = parse_pyenv_install_list(
        "Available versions:\n  3.12.1\n  3.13.0rc2\n  3.13.0t\n  3.14-dev\n  3.14.0a1\n"
        "  pypy3.10-7.3.15\n  anaconda3-2024.06-1\n  miniforge3-24.3.0-0\n  3.13.0\n"
    )
    assert listed == ("3.12.1", "3.13.0t", "3.13.0")  # 3.13.0t: pyenv builds free-threaded CPython
    assert parse_rocm_agents("gfx000\ngfx942\n gfx90a \ngfx000\n") == ("gfx942", "gfx90a")
    assert parse_rocminfo(fixture(FIXTURES / "amd" / "rocminfo-mi300x.txt")) == (
        ("gfx942", "AMD Instinct MI300X"),
        ("gfx942", "AMD Instinct MI300X"),
    )
    assert parse_kfd_properties("simd_count 0\ngfx_target_version 0\n") is None
    assert parse_kfd_properties("gfx_target_version 90402\n") == "gfx942"
    assert parse_pci_vendor("0x10de\n", "0x030200\n") == "NVIDIA"
    assert parse_pci_vendor("0x10de", "0x068000") is None  # NVSwitch
    assert parse_pci_vendor("0x1002", "0x038000") == "AMD"


@pytest.mark.parametrize(
    ("value", "gfx"),
    [
        (90402, "gfx942"),
        (90010, "gfx90a"),
        (90008, "gfx908"),
        (100300, "gfx1030"),
        (110000, "gfx1100"),
        (120001, "gfx1201"),
        (0, None),
        (-5, None),
        (91600, None),
    ],
)
def test_parse_gfx_target_version(value: int, gfx: str | None) -> None:
    assert parse_gfx_target_version(value) == gfx


# --- parsers: fuzzing -----------------------------------------------------------------

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOPO_TOKENS = st.sampled_from(
    [
        "GPU0",
        "GPU1",
        "GPU2",
        "GPU10",
        "NIC0",
        "mlx5_0",
        " X ",
        "X",
        "NV18",
        "NV#",
        "PIX",
        "PXB",
        "PHB",
        "NODE",
        "SYS",
        "CPU Affinity",
        "NUMA Affinity",
        "GPU NUMA ID",
        "0-31",
        "N/A",
        "",
        "\x1b[4m",
        "\x1b[0m",
        "\x1b[",
        "Legend:",
        "GPU",
        "٣",
        "GPU٣",
    ]
)
TOPO_TEXT = st.lists(
    st.lists(TOPO_TOKENS, max_size=12).map(lambda cells: "\t".join(cells)), max_size=12
).map("\n".join)
CSV_TEXT = st.lists(
    st.lists(
        st.sampled_from(
            [
                "0",
                "1",
                "NVIDIA H200",
                "9.0",
                "sm_90",
                "12.0a",
                "[N/A]",
                "143771",
                "143771 MiB",
                "GPU-x",
                "00000000:00:06.0",
                "580.159.04",
                "",
                "²",
                "٣",
                "1e9",
                "-1",
                "99999999999999999999",
            ]
        ),
        max_size=9,
    ).map(", ".join),
    max_size=6,
).map("\n".join)
ANY_TEXT = st.one_of(st.text(), st.binary().map(lambda b: b.decode("latin-1")))


@FUZZ
@given(st.one_of(ANY_TEXT, TOPO_TEXT))
def test_fuzz_parse_topology(text: str) -> None:
    links = parse_topology(text)
    assert isinstance(links, dict)
    for pair, link in links.items():
        i, j = (int(x) for x in pair.split("-"))
        assert i < j and link and link != "X"


@FUZZ
@given(st.one_of(ANY_TEXT, CSV_TEXT), st.sampled_from([GPU_FIELDS, GPU_FIELDS[:2], ("index",), ()]))
def test_fuzz_parse_query_gpu(text: str, fields: tuple[str, ...]) -> None:
    smi = parse_query_gpu(text, fields)
    for g in smi.gpus:
        assert g.index >= 0 and g.name
        if g.compute_capability is not None:
            Arch.parse(g.compute_capability)
    assert smi.driver_version is None or isinstance(smi.driver_version, str)


def _check_line_parsers(text: str) -> None:
    for parse in (
        parse_nvrm_version,
        parse_module_version,
        parse_ldd_version,
        parse_os_release,
        parse_python_version,
        parse_pyenv_version,
        parse_invalid_field,
        parse_kfd_properties,
        parse_confstr_glibc,
    ):
        out = parse(text)
        assert out is None or isinstance(out, str)
    assert isinstance(parse_wsl(text), bool)
    for parse_many in (
        parse_pyenv_versions,
        parse_pyenv_install_list,
        parse_rocm_agents,
        parse_rocminfo,
    ):
        assert isinstance(parse_many(text), tuple)
    assert parse_pci_vendor(text, text) in (None, "NVIDIA", "AMD")


@FUZZ
@given(ANY_TEXT)
def test_fuzz_line_parsers(text: str) -> None:
    _check_line_parsers(text)


@FUZZ
@given(
    st.lists(
        st.sampled_from(
            [
                "NVRM version: ",
                "ID=",
                "VERSION_ID=",
                "ldd ",
                "GLIBC ",
                "gfx_target_version ",
                "Agent 1",
                "Name: gfx942",
                "Device Type: CPU",
                "  3.12.1",
                '"',
                "'",
                "\\",
                "90402",
                "=",
                "580.159.04",
                " ",
                "\n",
                "\t",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_fuzz_line_parsers_near_misses(text: str) -> None:
    _check_line_parsers(text)


@FUZZ
@given(st.integers())
def test_fuzz_gfx_target_version(value: int) -> None:
    out = parse_gfx_target_version(value)
    assert out is None or (out.startswith("gfx") and len(out) >= 6)


# --- GPU name table -------------------------------------------------------------------


def test_gpu_table_covers_the_common_parts() -> None:
    table = load_gpu_names()
    for cc in table.values():
        Arch.parse(cc)
    expect = {
        "Tesla K80": "3.7",
        "Tesla P100-SXM2-16GB": "6.0",
        "Tesla V100-SXM2-32GB": "7.0",
        "Tesla T4": "7.5",
        "NVIDIA A100-SXM4-80GB": "8.0",
        "NVIDIA A100 80GB PCIe": "8.0",
        "NVIDIA A10": "8.6",
        "NVIDIA A10G": "8.6",
        "NVIDIA A30": "8.0",
        "NVIDIA A40": "8.6",
        "NVIDIA L4": "8.9",
        "NVIDIA L40S": "8.9",
        "NVIDIA H100 80GB HBM3": "9.0",
        "NVIDIA H200": "9.0",
        "NVIDIA GH200 480GB": "9.0",
        "NVIDIA B200": "10.0",
        "NVIDIA GB200": "10.0",
        "NVIDIA GeForce RTX 2080 Ti": "7.5",
        "NVIDIA GeForce RTX 3090": "8.6",
        "NVIDIA GeForce RTX 4090": "8.9",
        "NVIDIA GeForce RTX 5090": "12.0",
        "GeForce GTX 1080 Ti": "6.1",
        "TITAN V": "7.0",
        "NVIDIA RTX A6000": "8.6",
        "NVIDIA RTX 6000 Ada Generation": "8.9",
        "Quadro RTX 6000": "7.5",
        "Orin (nvgpu)": "8.7",
        "NVIDIA Thor": "11.0",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition": "12.0",
        "NVIDIA GB10": "12.1",
    }
    got = {name: find_capability(name, table) for name in expect}
    assert got == expect
    assert find_capability("NVIDIA A1000", table) is None  # "A10" must not cover it
    assert find_capability("", table) is None


def test_gpu_table_bad_entry_names_its_line() -> None:
    with pytest.raises(MatrixError) as err:
        parse_gpu_names('[capability]\n"NVIDIA H200" = "9.0"\n"Bad GPU" = "ninety"\n', "gpus.toml")
    assert err.value.line == 3 and "Bad GPU" in err.value.what


# --- the runner -----------------------------------------------------------------------


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_runner_runs_argv_without_a_shell(tmp_path: Path) -> None:
    runner = Runner(env_overrides={"TF_A": "runner", "TF_B": "runner"})
    code = (
        "import os, sys; print(sys.argv[1]); print(os.getcwd()); print(sys.stdin.read());"
        " print(os.environ['TF_A'], os.environ['TF_B'])"
    )
    res = runner.run(
        [*_py(code), "$(echo hi); rm -rf x"],
        timeout=30,
        cwd=tmp_path,
        input="from stdin",
        env={"TF_B": "call"},
    )
    assert isinstance(res, RunResult) and res.ok
    assert res.stdout.splitlines() == [
        "$(echo hi); rm -rf x",
        str(tmp_path),
        "from stdin",
        "runner call",
    ]
    assert res.argv[0] == sys.executable and res.duration_s > 0


def test_runner_nonzero_exit_is_a_result() -> None:
    res = Runner().run(_py("import sys; sys.stderr.write('boom'); sys.exit(3)"), timeout=30)
    assert (res.returncode, res.stderr, res.ok) == (3, "boom", False)
    with pytest.raises(ProbeFailed) as err:
        res.check()
    assert err.value.code == 3


def test_runner_missing_tool_uses_the_runners_path(host: FakeHost) -> None:
    with pytest.raises(ToolMissing) as err:
        Runner().run(["torchfit-no-such-tool"], timeout=5)
    assert isinstance(err.value, ProbeFailed)
    assert err.value.message == "torchfit-no-such-tool not found on PATH"
    host.script("torchfit-no-such-tool", "print('here')")
    res = Runner(env_overrides={"PATH": str(host.bin)}).run(["torchfit-no-such-tool"], timeout=30)
    assert res.stdout == "here\n"
    assert Runner(env_overrides={"PATH": str(host.bin)}).which("torchfit-no-such-tool")


def test_runner_timeout_kills_the_process_group(host: FakeHost) -> None:
    host.tool("wedged", hang=True)
    runner = Runner(env_overrides={"PATH": str(host.bin)})
    secret_arg = "--index-url=https://user:s3cret@pypi.example/simple"
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        runner.run(["wedged", secret_arg], timeout=0.5)
    assert time.monotonic() - start < 3.0
    assert isinstance(err.value, ProbeFailed)
    assert "s3cret" not in str(err.value)
    assert (
        str(err.value)
        == "wedged --index-url=https://user:***@pypi.example/simple timed out after 0.5 s"
    )
    grandchild = int((host.tmp / "wedged.grandchild").read_text())
    deadline = time.monotonic() + 2
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_runner_bad_path_and_bad_cwd(tmp_path: Path) -> None:
    with pytest.raises(ToolMissing) as err:
        Runner().run([str(tmp_path / "nope")], timeout=5)
    assert err.value.message == f"{tmp_path / 'nope'} not found"
    with pytest.raises(ProbeFailed) as err2:
        Runner().run(_py("pass"), timeout=5, cwd=tmp_path / "gone")
    assert not isinstance(err2.value, ToolMissing)
    assert "working directory" in err2.value.message


def test_runner_demands_a_timeout() -> None:
    for bad in (0, -1, None):
        with pytest.raises(ValueError):
            Runner().run(_py("pass"), timeout=bad)  # type: ignore[arg-type]


def test_runner_escalates_to_sigkill() -> None:
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " print('ready', flush=True); time.sleep(1000)"
    )
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        Runner(kill_grace=0.3).run(_py(code), timeout=0.5)
    assert time.monotonic() - start < 3.0
    assert err.value.stdout == "ready\n"


def test_runner_check_redacts() -> None:
    res = Runner().run(
        _py(
            "import sys; sys.stderr.write("
            "'401 from https://__token__:pypi-AgEIcHlw@upload.example/x'); sys.exit(1)"
        ),
        timeout=30,
    )
    with pytest.raises(ProbeFailed) as err:
        res.check()
    assert "pypi-AgEIcHlw" not in str(
        err.value
    ) and "https://__token__:***@upload.example/x" in str(err.value)


# --- redaction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:pass@host/simple", "https://user:***@host/simple"),
        (
            "pip install --index-url https://ghp_abc123@host/x torch",
            "pip install --index-url https://***@host/x torch",
        ),
        ("git+ssh://git@github.com/o/r.git", "git+ssh://***@github.com/o/r.git"),
        (
            "a https://u:p@h1 and http://v:q@h2:8080/?x=@y",
            "a https://u:***@h1 and http://v:***@h2:8080/?x=@y",
        ),
        ("https://u:p@ss@host/x", "https://u:***@host/x"),
        ("'https://u:p@h/x'", "'https://u:***@h/x'"),
        ("mail me at someone@example.com", "mail me at someone@example.com"),
        ("https://host/path@v1", "https://host/path@v1"),
        ("no urls here", "no urls here"),
    ],
)
def test_redact_examples(text: str, expected: str) -> None:
    assert redact(text) == expected


USERINFO = st.text(
    st.characters(blacklist_characters="/?#@\"'<>", blacklist_categories=("Zs", "Cc", "Zl", "Zp")),
    min_size=1,
)


@FUZZ
@given(USERINFO, USERINFO)
def test_fuzz_redact_hides_passwords(user: str, secret: str) -> None:
    user = user.replace(":", "")
    if not user:
        user = "u"
    out = redact(f"see https://{user}:{secret}@index.example/simple for details")
    assert out == f"see https://{user}:***@index.example/simple for details"


@FUZZ
@given(st.text())
def test_fuzz_redact_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def test_l4t_from_nv_tegra_release(host: FakeHost) -> None:
    """A Jetson says its L4T release in /etc/nv_tegra_release (JetPack 6.2: R36.4.3);
    absent means not a Jetson (no reason), a file that does not parse is unknown with why."""
    assert probe_l4t(str(host.root)) == (None, None)
    host.file("/etc/nv_tegra_release",
              "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8\n")
    assert probe_l4t(str(host.root)) == ("R36.4.3", None)
    host.file("/etc/nv_tegra_release", "garbage\n")
    l4t, why = probe_l4t(str(host.root))
    assert l4t is None and why is not None and "nv_tegra_release" in why


def test_free_threaded_interpreters_are_marked() -> None:
    """A free-threaded build answers "3.13.2t" (sysconfig Py_GIL_DISABLED) and is kept,
    marked, in the facts; this interpreter (a GIL build) answers its plain version."""
    import subprocess
    import sys

    from torchfit.host.pythons import _PY_VERSION_CODE, python_install

    out = subprocess.run([sys.executable, "-c", _PY_VERSION_CODE], capture_output=True, text=True, check=True)
    mine = parse_python_version(out.stdout)
    assert mine == ".".join(str(n) for n in sys.version_info[:3])
    assert python_install(mine, sys.executable, "path").free_threaded is False
    ft = python_install(parse_python_version("3.13.2t\n") or "", "/usr/bin/python3.13t", "path")
    assert (ft.version, ft.free_threaded, ft.label) == ("3.13.2", True, "3.13.2t")
    assert parse_pyenv_versions("3.12.1\n3.13.0t\nsystem\n") == ("3.12.1", "3.13.0t")
