"""host/nvidia.py: the NVIDIA driver, GPUs and topology through a fake nvidia-smi replaying the
2x H200 captures (the acceptance tests), the parsers by example, and fuzzed."""

from __future__ import annotations

import platform
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.host.conftest import ANY_TEXT, FUZZ, LINE_TEXT
from tests.support.fakehost import (
    DRIVER_GONE,
    FIXTURES,
    H200,
    QUERY,
    QUERY_NO_CC,
    TOPO_M,
    FakeHost,
    alive,
    fixture,
)
from torchfit.compat.versions import Arch
from torchfit.host import probe_host
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
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the hung tool's process group was not killed"


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



@FUZZ
@given(LINE_TEXT)
def test_fuzz_nvidia_line_parsers(text: str) -> None:
    for parse in (parse_nvrm_version, parse_module_version, parse_invalid_field):
        out = parse(text)
        assert out is None or isinstance(out, str)
