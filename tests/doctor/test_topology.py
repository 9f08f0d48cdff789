"""NVLink without P2P, GPU pairs across sockets, and WSL."""

from __future__ import annotations

from tests.doctor.conftest import Host, fixture

WSL_RELEASE = "5.15.153.1-microsoft-standard-WSL2"  # a WSL2 kernel release (Microsoft's WSL kernel)


def test_h200_nvlink_with_p2p_ok(h200: Host) -> None:
    r = h200.doctor()
    c = r.check("nvlink-no-p2p")
    assert c["status"] == "ok" and "NV18" in c["evidence"] and "P2P OK" in c["evidence"]
    assert r.status("gpu-pairs-cross-socket") == "ok"


def test_nvlink_present_but_p2p_not_supported(h200: Host) -> None:
    """The H200 host's NV18 links (topo -m) with the peer matrix a 2x RTX 5090 host printed
    (club-3090#1229: GNS): NVLink that P2P cannot use."""
    h200.nvidia_smi(p2p=fixture("topo-p2p-r-2x5090-gns.txt"))
    r = h200.doctor()
    c = r.check("nvlink-no-p2p")
    assert c["status"] == "fail", c
    assert "GPU0/GPU1 NV18 but P2P GNS (GPU not supported)" in c["evidence"]
    assert "fabricmanager" in c["fix"]


def test_pcie_gpus_without_p2p_are_normal(h200: Host) -> None:
    """club-3090#1229 as captured: 2x RTX 5090 on PCIe (PHB), P2P GNS."""
    h200.nvidia_smi(topo=fixture("topo-m-2x5090-phb.txt"), p2p=fixture("topo-p2p-r-2x5090-gns.txt"))
    r = h200.doctor()
    c = r.check("nvlink-no-p2p")
    assert c["status"] == "ok" and "no NVLink" in c["evidence"] and "GNS" in c["evidence"]


def test_unreadable_topology_is_unknown(h200: Host) -> None:
    h200.nvidia_smi(topo="\x00\x01garbage\n", p2p="")
    r = h200.doctor()
    assert r.status("nvlink-no-p2p") == "unknown"
    assert r.status("gpu-pairs-cross-socket") == "unknown"
    assert "no GPU matrix" in r.check("gpu-pairs-cross-socket")["evidence"]


def test_gpu_pairs_across_sockets(h200: Host) -> None:
    """NVIDIA/go-gpuallocator#17: 8x RTX 4090, every pair SYS."""
    h200.nvidia_smi(topo=fixture("topo-m-8x4090-sys.txt"))
    r = h200.doctor()
    c = r.check("gpu-pairs-cross-socket")
    assert c["status"] == "warn", c
    assert "28 of 28 GPU pair(s)" in c["evidence"] and "SYS" in c["evidence"]
    assert "numactl" in c["fix"]


def _wsl(host: Host) -> None:
    host.file("/proc/sys/kernel/osrelease", WSL_RELEASE + "\n")
    host.file("/proc/version", f"Linux version {WSL_RELEASE} (root@1c602f52c2e4) (gcc (GCC) 11.2.0) #1 SMP\n")


def test_not_wsl(h200: Host) -> None:
    r = h200.doctor()
    c = r.check("wsl")
    assert (c["status"], c["evidence"]) == ("ok", "not WSL")


def test_wsl_with_its_libcuda_and_the_harmless_ldconfig_warning(host: Host) -> None:
    _wsl(host)
    host.file("/usr/lib/wsl/lib/libcuda.so.1", "")
    host.file("/dev/dxg", "")
    host.tool("ldconfig", "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n",
              stderr=fixture("logs/wsl-ldconfig-warning.txt"))
    r = host.doctor()
    c = r.check("wsl")
    assert c["status"] == "ok", c
    assert "no NVLink" in c["evidence"] and "harmless" in c["evidence"]


def test_wsl_warning_in_a_log_is_not_a_failure(host: Host) -> None:
    _wsl(host)
    host.file("/usr/lib/wsl/lib/libcuda.so.1", "")
    host.file("/dev/dxg", "")
    log = host.tmp / "apt.log"
    log.write_text("Setting up libc-bin (2.35-0ubuntu3.8) ...\n" + fixture("logs/wsl-ldconfig-warning.txt"))
    r = host.doctor("--log", str(log))
    assert r.status("wsl") == "ok" and "harmless" in r.check("wsl")["evidence"]
    assert not [c for c in r.data["checks"] if c["area"] == "log" and c["status"] != "ok"]


def test_wsl_without_the_windows_driver(host: Host) -> None:
    _wsl(host)
    r = host.doctor()
    c = r.check("wsl")
    assert c["status"] == "fail"
    assert "/usr/lib/wsl/lib/libcuda.so.1 is missing" in c["evidence"] and "/dev/dxg is missing" in c["evidence"]
    assert "Windows" in c["fix"]


def test_wsl_with_a_linux_driver_installed_inside(host: Host) -> None:
    _wsl(host)
    host.file("/usr/lib/wsl/lib/libcuda.so.1", "")
    host.file("/dev/dxg", "")
    host.tool("ldconfig", "\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n"
                          "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n")
    r = host.doctor()
    c = r.check("wsl")
    assert c["status"] == "fail" and "Linux NVIDIA driver was installed inside WSL" in c["evidence"]


def test_wsl_driver_checks_do_not_expect_a_linux_module(host: Host) -> None:
    """WSL2: nvidia-smi works through the Windows driver; no nvidia module, no /dev/nvidia*."""
    _wsl(host)
    host.nvidia_smi()
    host.file("/usr/lib/wsl/lib/libcuda.so.1", "")
    host.file("/dev/dxg", "")
    host.file("/proc/modules", "hv_vmbus 126976 8 - Live 0x0000000000000000\n")
    host.tool("lspci", "1e3f:00:00.0 3D controller [0302]: Microsoft Corporation Basic Render Driver [1414:008e]\n")
    r = host.doctor()
    for cid in ("nvidia-smi", "gpu-on-pci-bus", "driver-loaded", "driver-module-for-kernel", "dev-nvidia-nodes", "wsl"):
        assert r.status(cid) == "ok", r.check(cid)
    assert "/dev/dxg" in r.check("dev-nvidia-nodes")["evidence"]
