"""CUDA_* / NCCL_* variables, /etc/nccl.conf, interfaces and /dev/shm on a fake H200 host."""

from __future__ import annotations

import pytest

from tests.doctor.conftest import Host

UUID1 = "GPU-8be0f050-085f-9b7e-21da-1855ef30ef36"  # GPU 1 of the H200 host (nvidia-smi -L)


@pytest.mark.parametrize(
    ("value", "status", "words"),
    [
        (None, "ok", "not set"),
        ("0,1", "ok", "names 2 of 2"),
        (UUID1, "ok", "names 1 of 2"),
        ("GPU-8be0f050", "ok", "names 1 of 2"),  # a unique UUID prefix is accepted by CUDA
        ("0," + UUID1, "fail", "mixes indices and UUIDs"),
        ("2", "fail", "index 2 does not exist"),
        ("", "fail", "hides every GPU"),
        ("GPU-deadbeef", "fail", "no GPU has UUID GPU-deadbeef"),
        ("0,gpu1", "fail", "neither a GPU index"),
    ],
)
def test_cuda_visible_devices(h200: Host, value: str | None, status: str, words: str) -> None:
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    r = h200.doctor(env=env)
    c = r.check("cuda-visible-devices")
    assert c["status"] == status, c
    assert words in c["evidence"]


MIXED_QUERY = (
    "index, name, uuid, pci.bus_id, driver_version, compute_cap, memory.total [MiB], memory.used [MiB], "
    "vbios_version, persistence_mode\n"
    # Two different GPUs on one host (aikitoria/open-gpu-kernel-modules#1 mixes RTX 4090s and an RTX A6000);
    # uuids and bus ids are placeholders in the H200 rows' format.
    "0, NVIDIA RTX A6000, GPU-00000000-0000-0000-0000-00000000a600, 00000000:06:00.0, 580.159.04, 8.6, 49140 MiB, 0 MiB, 94.02.5C.00.02, Disabled\n"
    "1, NVIDIA GeForce RTX 4090, GPU-00000000-0000-0000-0000-000000004090, 00000000:11:00.0, 580.159.04, 8.9, 24564 MiB, 0 MiB, 95.02.3C.00.01, Disabled\n"
)


def test_device_order_with_identical_gpus_is_ok(h200: Host) -> None:
    r = h200.doctor()
    assert r.status("cuda-device-order") == "ok"
    assert "all 2 GPUs are NVIDIA H200" in r.check("cuda-device-order")["evidence"]


def test_device_order_with_mixed_gpus(h200: Host) -> None:
    h200.nvidia_smi(query=MIXED_QUERY)
    r = h200.doctor()
    c = r.check("cuda-device-order")
    assert c["status"] == "warn" and "RTX A6000" in c["evidence"] and "PCI_BUS_ID" in c["fix"]
    r = h200.doctor(env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert r.status("cuda-device-order") == "ok"
    r = h200.doctor(env={"CUDA_DEVICE_ORDER": "PCI"})
    assert r.status("cuda-device-order") == "warn"
    assert "not a value CUDA knows" in r.check("cuda-device-order")["evidence"]


def test_nccl_transports_switched_off(h200: Host) -> None:
    r = h200.doctor(env={"NCCL_P2P_DISABLE": "0"})
    assert r.status("nccl-env-disables") == "ok"
    # NCCL reads the integer (strtol) and acts at 1 only: "y" switches nothing off,
    # the same answer verify gives (compat.ncclenv).
    r = h200.doctor(env={"NCCL_P2P_DISABLE": "y"})
    assert r.status("nccl-env-disables") == "ok"
    r = h200.doctor(env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})
    c = r.check("nccl-env-disables")
    assert c["status"] == "warn"
    assert "NCCL_P2P_DISABLE=1 (environment)" in c["evidence"] and "27 GB/s" in c["evidence"]
    assert "NCCL_SHM_DISABLE=1" in c["evidence"]


def test_nccl_conf_file_is_read(h200: Host) -> None:
    h200.file("/etc/nccl.conf", "# site defaults\nNCCL_IB_DISABLE=1\nNCCL_SOCKET_IFNAME=ib0\n")
    r = h200.doctor()
    c = r.check("nccl-env-disables")
    assert c["status"] == "warn" and "NCCL_IB_DISABLE=1 (/etc/nccl.conf)" in c["evidence"]
    s = r.check("nccl-socket-ifname")
    assert s["status"] == "fail" and "'ib0' (/etc/nccl.conf) matches no interface" in s["evidence"]


@pytest.mark.parametrize(
    ("value", "extra", "status", "words"),
    [
        (None, {}, "ok", "not set"),
        ("eth", {}, "ok", "selects eth0"),
        ("^docker,lo", {}, "ok", "selects eth0"),
        ("ens5", {}, "fail", "Bootstrap : no socket interface found"),
        ("=eth", {}, "fail", "matches no interface"),
        ("lo", {}, "warn", "only loopback"),
        ("lo", {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, "fail", "multi-node job (WORLD_SIZE=16 > LOCAL_WORLD_SIZE=8)"),
    ],
)
def test_nccl_socket_ifname(h200: Host, value: str | None, extra: dict[str, str], status: str, words: str) -> None:
    env = dict(extra)
    if value is not None:
        env["NCCL_SOCKET_IFNAME"] = value
    r = h200.doctor(env=env)
    c = r.check("nccl-socket-ifname")
    assert c["status"] == status, c
    assert words in c["evidence"]


def test_interfaces_unreadable_is_unknown(h200: Host) -> None:
    h200.remove("/sys/class/net")
    r = h200.doctor(env={"NCCL_SOCKET_IFNAME": "eth0"})
    c = r.check("nccl-socket-ifname")
    assert c["status"] == "unknown" and "/sys/class/net does not exist" in c["evidence"]


@pytest.mark.parametrize(
    ("mounts", "status", "words"),
    [
        # This machine's own /dev/shm (Host's default): 24 GB.
        ("tmpfs /dev/shm tmpfs rw,relatime,size=24684096k 0 0\n", "ok", "24,106 MiB"),
        # Docker's default --shm-size (64m), as /proc/mounts shows it inside a container.
        ("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n", "fail", "64 MiB"),
        ("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=524288k 0 0\n", "warn", "512 MiB"),
    ],
)
def test_dev_shm_size(h200: Host, mounts: str, status: str, words: str) -> None:
    h200.file("/proc/mounts", mounts)
    r = h200.doctor()
    c = r.check("dev-shm-size")
    assert c["status"] == status, c
    assert words in c["evidence"]
    if status != "ok":
        assert "--shm-size" in c["fix"]


def test_dev_shm_absent_is_unknown(h200: Host) -> None:
    h200.remove("/dev/shm")
    h200.remove("/proc/mounts")
    r = h200.doctor()
    c = r.check("dev-shm-size")
    assert c["status"] == "unknown" and "/dev/shm does not exist" in c["evidence"]
