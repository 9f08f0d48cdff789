"""doctor's container-gpu-access check (issue 27, item 3) against fake roots: the 2x H200 host of
tests/data/h200-x2 seen from inside a container, with and without the NVIDIA Container Toolkit's
devices and libraries. The real podman run is in tests/export/test_containerfile.py."""

from __future__ import annotations

import pytest

from tests.doctor.conftest import Host, fixture
from torchfit.host.system import parse_cgroup_engine, parse_containerenv

CHECK = "container-gpu-access"
# podman 4.3.1's /run/.containerenv in a rootful container (podman-run(1): engine, name, id, image).
CONTAINERENV = ('engine="podman-4.3.1"\nname="tf"\nid="0a8df358d284"\nimage="localhost/tf-torch:cpu"\n'
                'imageid="0a8df358d284"\nrootless=0\n')
NO_DRIVER_LIBS = "3 libs found in cache `/etc/ld.so.cache'\n\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n"


def _no_gpus_passed(h200: Host) -> None:
    for node in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"):
        h200.remove(f"/dev/{node}")
    h200.tool("ldconfig", NO_DRIVER_LIBS)
    h200.nvidia_smi(fail_text="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
                    rc=9)


def test_podman_started_without_the_gpus_is_named_with_the_cdi_fix(h200: Host) -> None:
    h200.file("/run/.containerenv", CONTAINERENV)
    _no_gpus_passed(h200)
    c = h200.doctor().check(CHECK)
    assert c["status"] == "fail", c
    assert "in a podman-4.3.1 container (/run/.containerenv) without the GPUs" in c["evidence"]
    assert "2 NVIDIA GPU(s) on the PCI bus" in c["evidence"] and "no driver library" in c["evidence"]
    assert c["fix"].startswith("podman: `podman run --device nvidia.com/gpu=all") and "nvidia-ctk cdi generate" in c["fix"]
    assert "docker run --gpus all" in c["fix"] and "--container-image" in c["fix"]


def test_docker_with_device_nodes_but_no_driver_libraries_fails(h200: Host) -> None:
    h200.file("/.dockerenv")
    h200.tool("ldconfig", NO_DRIVER_LIBS)
    c = h200.doctor().check(CHECK)
    assert c["status"] == "fail", c
    assert "/dev/nvidia0, /dev/nvidia1 are passed in but not the driver's libcuda.so.1" in c["evidence"]
    assert c["fix"].startswith("docker: `docker run --gpus all")


def test_docker_with_the_toolkit_is_ok(host: Host) -> None:
    """The lent H200 machine, itself a docker container given its GPU (files and ldconfig captured there)."""
    host.file("/.dockerenv")
    host.file("/proc/1/cgroup", "0::/process_api/core\n")
    for node in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        host.file(f"/dev/{node}", "", mode=0o666)
    host.tool("ldconfig", fixture("container-h200-docker-ldconfig-p.txt"))
    c = host.doctor().check(CHECK)
    assert c["status"] == "ok", c
    assert c["evidence"] == ("in a docker container (/.dockerenv): /dev/nvidia0 and the host driver's "
                             "/usr/local/nvidia/lib64/libcuda.so.1, /usr/local/nvidia/lib64/libnvidia-ml.so.1 "
                             "are passed in")


def test_kubernetes_seen_in_the_cgroup_and_a_host_are_told_apart(h200: Host) -> None:
    # cgroup v1 under kubelet's cgroupfs driver: /kubepods/<qos>/pod<uid>/<container id> (written
    # from that layout, not captured)
    h200.file("/proc/1/cgroup", "12:memory:/kubepods/burstable/pod8e1c/4b1f9a\n11:cpu:/kubepods/burstable/pod8e1c/4b1f9a\n")
    _no_gpus_passed(h200)
    c = h200.doctor().check(CHECK)
    assert c["status"] == "fail" and "in a kubernetes container (/proc/1/cgroup)" in c["evidence"], c
    assert c["fix"].startswith("Kubernetes: request the GPUs")
    h200.remove("/proc/1/cgroup")
    assert h200.doctor().check(CHECK)["evidence"].startswith("not in a container")


def test_a_cpu_container_on_a_cpu_host_is_ok_with_the_way_to_pass_gpus(host: Host) -> None:
    host.file("/run/.containerenv", CONTAINERENV)
    host.tool("lspci", "00:00.0 Host bridge [0600]: Intel Corporation 440FX - 82441FX PMC [Natoma] [8086:1237]\n")
    host.file("/proc/modules", "ext4 1044480 1 - Live 0x0000000000000000\n")
    c = host.doctor().check(CHECK)
    assert c["status"] == "ok" and "a CPU container" in c["evidence"], c
    assert "nvidia.com/gpu=all" in c["fix"]


@pytest.mark.parametrize(("text", "engine"), [
    ("12:memory:/docker/3f2a9c\n", "docker"),
    ("0::/system.slice/libpod-0a8df358d284.scope\n", "podman"),
    ("11:cpu:/kubepods/besteffort/pod1/abc\n", "kubernetes"),
    ("0::/\n", None),
    ("0::/user.slice/user-1000.slice/session-2.scope\n", None),
    ("", None),
])
def test_parse_cgroup_engine(text: str, engine: str | None) -> None:
    assert parse_cgroup_engine(text) == engine


def test_parse_containerenv() -> None:
    assert parse_containerenv(CONTAINERENV) == "podman-4.3.1"
    assert parse_containerenv("") == "podman"  # rootless podman may leave it empty
