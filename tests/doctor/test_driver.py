"""Driver triage checks, each against a fake host built from real outputs (tests/data/doctor/)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.doctor.conftest import SRC, Host, capture, fixture
from tests.support.cli import run_cli

DRIVER_CHECKS = ("nvidia-smi", "gpu-on-pci-bus", "driver-loaded", "driver-module-for-kernel",
                 "dev-nvidia-nodes", "nvml-mismatch", "dmesg-nvrm")


def test_healthy_h200_driver_checks_all_ok(h200: Host) -> None:
    r = h200.doctor()
    for cid in DRIVER_CHECKS:
        assert r.status(cid) == "ok", r.check(cid)
    assert "580.159.04" in r.check("driver-loaded")["evidence"]
    assert "2 GPU(s)" in r.check("nvidia-smi")["evidence"]
    assert "/dev/nvidia-uvm" in r.check("dev-nvidia-nodes")["evidence"]


def test_host_without_gpu_has_nothing_to_fix(host: Host) -> None:
    host.tool("lspci", "00:00.0 Host bridge [0600]: Intel Corporation 440FX - 82441FX PMC [Natoma] [8086:1237] (rev 02)\n")
    host.file("/proc/modules", "ext4 1044480 1 - Live 0x0000000000000000\n")
    r = host.doctor()
    for cid in DRIVER_CHECKS:
        assert r.status(cid) in ("ok", "unknown"), r.check(cid)
    assert "no NVIDIA GPU" in r.check("nvidia-smi")["evidence"]
    assert r.status("gpu-on-pci-bus") == "ok"


def _kernel_updated(host: Host, running: str) -> None:
    """negativo17/nvidia-driver#56: dkms built nvidia 396.45 for three Fedora kernels."""
    host.nvidia_smi(fail_text=fixture("nvidia-smi-no-driver.txt"), rc=9)
    host.tool("lspci", fixture("lspci-nn-2x-h200.txt"))
    host.tool("dkms", fixture("dkms-status-fc28.txt"))
    host.tool("dmesg", "")
    host.file("/proc/modules", "ext4 1044480 1 - Live 0x0000000000000000\n")
    host.file("/proc/sys/kernel/osrelease", running + "\n")
    host.file(f"/lib/modules/{running}/kernel/fs/ext4/ext4.ko.xz", "")
    host.file("/lib/modules/4.17.14-202.fc28.x86_64/extra/nvidia.ko.xz", "")


def test_kernel_updated_without_module_rebuilt(host: Host) -> None:
    _kernel_updated(host, "4.17.17-200.fc28.x86_64")
    r = host.doctor()
    assert r.rc == 1
    smi = r.check("nvidia-smi")
    assert smi["status"] == "fail" and "couldn't communicate" in smi["evidence"]
    assert "driver-module-for-kernel" in smi["fix"]
    assert r.status("gpu-on-pci-bus") == "ok"
    loaded = r.check("driver-loaded")
    assert loaded["status"] == "fail" and "2 NVIDIA GPU(s)" in loaded["evidence"]
    mod = r.check("driver-module-for-kernel")
    assert mod["status"] == "fail"
    assert "4.17.17-200.fc28.x86_64" in mod["evidence"]
    assert "nvidia.ko exists for 4.17.14-202.fc28.x86_64" in mod["evidence"]
    assert "396.45" in mod["evidence"] and "dkms install nvidia/396.45 -k 4.17.17-200.fc28.x86_64" in mod["fix"]
    assert r.status("dev-nvidia-nodes") == "ok"  # nothing to say until the module loads


def test_module_built_but_not_loaded_and_nouveau_holds_the_gpu(host: Host) -> None:
    _kernel_updated(host, "4.17.14-202.fc28.x86_64")
    host.file("/proc/modules", "nouveau 2379776 0 - Live 0x0000000000000000\n")
    host.tool("dmesg", fixture("dmesg-probe-not-called.txt"))
    r = host.doctor()
    assert r.status("driver-module-for-kernel") == "ok"
    loaded = r.check("driver-loaded")
    assert loaded["status"] == "fail" and "nouveau" in loaded["evidence"]
    assert "blacklist nouveau" in loaded["fix"]
    dmesg = r.check("dmesg-nvrm")
    assert dmesg["status"] == "fail" and "probe routine was not called" in dmesg["evidence"]


def test_module_dir_not_visible_is_unknown(host: Host) -> None:
    _kernel_updated(host, "4.17.17-200.fc28.x86_64")
    host.remove("/lib/modules")
    r = host.doctor()
    mod = r.check("driver-module-for-kernel")
    assert mod["status"] == "unknown" and "not visible" in mod["evidence"]


def test_nvml_driver_library_mismatch(h200: Host) -> None:
    """tinygrad/open-gpu-kernel-modules#47: userspace 570.124 over an older loaded module."""
    h200.nvidia_smi(fail_text=fixture("nvidia-smi-nvml-mismatch.txt"), rc=18)
    h200.tool("dmesg", fixture("dmesg-api-mismatch.txt"))
    r = h200.doctor()
    assert r.rc == 1
    mm = r.check("nvml-mismatch")
    assert mm["status"] == "fail"
    assert "Driver/library version mismatch" in mm["evidence"] and "570.124" in mm["evidence"]
    assert "580.159.04" in mm["evidence"]  # the module /proc/driver/nvidia/version names
    assert "reboot" in mm["fix"] and "rmmod" in mm["fix"]
    smi = r.check("nvidia-smi")
    assert smi["status"] == "fail" and "nvml-mismatch" in smi["fix"]
    dmesg = r.check("dmesg-nvrm")
    assert dmesg["status"] == "fail" and "API mismatch" in dmesg["evidence"]


def test_nvml_mismatch_seen_from_the_loader_without_nvidia_smi(h200: Host) -> None:
    """A container without nvidia-smi: module 580.159.04, libnvidia-ml 570.124 on the loader path."""
    h200.no_tool("nvidia-smi")
    libdir = h200.tmp / "usrlib"
    libdir.mkdir()
    (libdir / "libnvidia-ml.so.570.124").write_text("")
    (libdir / "libnvidia-ml.so.1").symlink_to("libnvidia-ml.so.570.124")
    h200.tool("ldconfig", f"\tlibnvidia-ml.so.1 (libc6,x86-64) => {libdir}/libnvidia-ml.so.1\n")
    r = h200.doctor()
    mm = r.check("nvml-mismatch")
    assert mm["status"] == "fail", mm
    assert "580.159.04" in mm["evidence"] and "570.124" in mm["evidence"]


def test_lspci_shows_more_gpus_than_nvidia_smi(h200: Host) -> None:
    h200.tool("lspci", fixture("lspci-nn-dgx-h200.txt"))
    r = h200.doctor()
    bus = r.check("gpu-on-pci-bus")
    assert bus["status"] == "fail"
    assert "8 NVIDIA GPU(s)" in bus["evidence"] and "lists only 2" in bus["evidence"]


def test_driver_installed_but_no_gpu_on_the_bus(h200: Host) -> None:
    h200.nvidia_smi(fail_text="No devices were found\n", rc=6)
    h200.tool("lspci", "00:00.0 Host bridge [0600]: Intel Corporation 440FX - 82441FX PMC [Natoma] [8086:1237] (rev 02)\n")
    r = h200.doctor()
    assert r.status("gpu-on-pci-bus") == "fail"
    smi = r.check("nvidia-smi")
    assert smi["status"] == "fail" and "gpu-on-pci-bus" in smi["fix"]


def test_pci_bus_read_from_sysfs_without_lspci(h200: Host) -> None:
    h200.no_tool("lspci")
    for slot in ("0000:00:06.0", "0000:00:07.0"):
        h200.file(f"/sys/bus/pci/devices/{slot}/vendor", "0x10de\n")
        h200.file(f"/sys/bus/pci/devices/{slot}/class", "0x030200\n")
    h200.file("/sys/bus/pci/devices/0000:00:01.0/vendor", "0x8086\n")
    h200.file("/sys/bus/pci/devices/0000:00:01.0/class", "0x060000\n")
    r = h200.doctor()
    bus = r.check("gpu-on-pci-bus")
    assert bus["status"] == "ok" and "/sys/bus/pci/devices: 2 NVIDIA GPU(s)" in bus["evidence"]


def test_nvidia_smi_missing_on_a_gpu_host(host: Host) -> None:
    host.tool("lspci", fixture("lspci-nn-2x-h200.txt"))
    host.file("/proc/modules", "ext4 1044480 1 - Live 0x0000000000000000\n")
    r = host.doctor()
    smi = r.check("nvidia-smi")
    assert smi["status"] == "fail" and "not installed" in smi["evidence"]
    assert r.status("driver-loaded") == "fail"


def test_pci_bus_unreadable_is_unknown(host: Host) -> None:
    r = host.doctor()
    assert r.status("gpu-on-pci-bus") == "unknown"
    assert "lspci not found" in r.check("gpu-on-pci-bus")["evidence"]


def test_missing_nvidia_uvm_node(h200: Host) -> None:
    h200.remove("/dev/nvidia-uvm")
    r = h200.doctor()
    nodes = r.check("dev-nvidia-nodes")
    assert nodes["status"] == "fail" and "/dev/nvidia-uvm" in nodes["evidence"]
    assert "nvidia-modprobe" in nodes["fix"]


def _system_python() -> str | None:
    """An interpreter outside /root that an unprivileged user can run."""
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(cand, os.X_OK):
            return cand
    return None


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_device_nodes_this_user_cannot_open() -> None:
    """/dev/nvidia* mode 0600 root:root and doctor run as uid 65534 (nobody)."""
    py = _system_python()
    if py is None:
        pytest.skip("no system python3 for an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="torchfit-doctor-perm-"))
    try:
        base.chmod(0o755)
        root = base / "root"
        (root / "proc/driver/nvidia").mkdir(parents=True)
        (root / "proc/driver/nvidia/version").write_text(capture("proc-driver-nvidia-version.txt"))
        (root / "dev").mkdir()
        for node in ("nvidiactl", "nvidia-uvm", "nvidia0"):
            (root / "dev" / node).write_text("")
            (root / "dev" / node).chmod(0o600)
        # A copy of the package the unprivileged user can read (the checkout may be private).
        shutil.copytree(SRC / "torchfit", base / "src" / "torchfit", ignore=shutil.ignore_patterns("__pycache__"))
        # ... and of what it imports, from this interpreter's site-packages (the system python3 has
        # none of them: without them the test could only skip).
        import importlib

        for dep in ("packaging", "rich", "pygments", "markdown_it", "mdurl", "resolvelib", "elftools"):
            with contextlib.suppress(ImportError):
                mod = importlib.import_module(dep)
                shutil.copytree(Path(mod.__file__).parent, base / "src" / dep,
                                ignore=shutil.ignore_patterns("__pycache__"))
        for d in [base, *[p for p in base.rglob("*") if p.is_dir()]]:
            d.chmod(0o755)
        for f in (p for p in (base / "src").rglob("*") if p.is_file()):
            f.chmod(0o644)
        setpriv = [str(shutil.which("setpriv")), "--reuid=65534", "--regid=65534", "--clear-groups"]
        env = {"PATH": "/nonexistent", "PYTHONPATH": str(base / "src"), "HOME": str(base)}
        proc = run_cli("doctor", "--json", "--root", str(root), python=py, via=setpriv, base_env=env, timeout=60,
                       cwd=base)
        import json

        try:
            data = json.loads(proc.stdout)
        except ValueError:
            pytest.skip(f"the unprivileged python could not run torchfit: {proc.stderr[-400:]}")
        nodes = next(c for c in data["checks"] if c["id"] == "dev-nvidia-nodes")
        assert nodes["status"] == "fail", nodes
        assert "uid 65534" in nodes["evidence"] and "-rw-------" in nodes["evidence"]
        assert "usermod -aG video" in nodes["fix"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_dmesg_unreadable_is_unknown_with_the_reason(h200: Host) -> None:
    h200.tool("dmesg", stderr="dmesg: read kernel buffer failed: Operation not permitted\n", rc=1)
    r = h200.doctor()
    d = r.check("dmesg-nvrm")
    assert d["status"] == "unknown"
    assert "Operation not permitted" in d["evidence"] and "dmesg_restrict" in d["evidence"]


def test_hung_nvidia_smi_and_a_gpu_off_the_bus(h200: Host) -> None:
    """NVIDIA/NVSentinel#155: the GPU fell off the bus; nvidia-smi hangs."""
    h200.nvidia_smi(sleep=30)
    h200.tool("dmesg", fixture("dmesg-fallen-off-bus.txt"))
    start = time.monotonic()
    r = h200.doctor("--timeout", "1")
    elapsed = time.monotonic() - start
    smi = r.check("nvidia-smi")
    assert smi["status"] == "fail" and "hung" in smi["evidence"]
    d = r.check("dmesg-nvrm")
    assert d["status"] == "fail" and "fallen off the bus" in d["evidence"]
    # The first timeout stops every later nvidia-smi call (topo, banner): not 4 x 1 s + 30 s.
    assert elapsed < 15, elapsed


def test_earlier_xid_with_a_working_driver_is_a_warning(h200: Host) -> None:
    h200.tool("dmesg", fixture("dmesg-fallen-off-bus.txt"))
    r = h200.doctor()
    d = r.check("dmesg-nvrm")
    assert d["status"] == "warn" and "earlier event" in d["evidence"]


def test_runs_under_the_doctors_own_interpreter_only() -> None:
    """The worker never imports torchfit (it runs in other Pythons)."""
    src = (SRC / "torchfit/workers/doctor_worker.py").read_text()
    # torchfit_runtime (its sibling, imported by bare name) is not torchfit.
    assert not re.search(r"^\s*(import|from) torchfit(\.|\s|$)", src, re.M)
    assert "import torchfit_runtime" in src
    assert sys.version_info >= (3, 9)
