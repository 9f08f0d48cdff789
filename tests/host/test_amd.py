"""host/amd.py: AMD GPUs from rocm_agent_enumerator, rocminfo or the KFD sysfs, through fake tools."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.host.conftest import FUZZ, LINE_TEXT
from tests.support.fakehost import (
    DRIVER_GONE,
    FIXTURES,
    FakeHost,
    fixture,
)
from torchfit.host import probe_host
from torchfit.host.amd import (
    parse_gfx_target_version,
    parse_kfd_properties,
    parse_rocm_agents,
    parse_rocminfo,
    probe_amd_gpus,
)


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



def test_parse_rocm_outputs() -> None:
    assert parse_rocm_agents("gfx000\ngfx942\n gfx90a \ngfx000\n") == ("gfx942", "gfx90a")
    assert parse_rocminfo(fixture(FIXTURES / "amd" / "rocminfo-mi300x.txt")) == (
        ("gfx942", "AMD Instinct MI300X"),
        ("gfx942", "AMD Instinct MI300X"),
    )
    assert parse_kfd_properties("simd_count 0\ngfx_target_version 0\n") is None
    assert parse_kfd_properties("gfx_target_version 90402\n") == "gfx942"


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


@FUZZ
@given(st.integers())
def test_fuzz_gfx_target_version(value: int) -> None:
    out = parse_gfx_target_version(value)
    assert out is None or (out.startswith("gfx") and len(out) >= 6)



@FUZZ
@given(LINE_TEXT)
def test_fuzz_amd_line_parsers(text: str) -> None:
    for parse in (parse_kfd_properties,):
        out = parse(text)
        assert out is None or isinstance(out, str)
    for parse_many in (parse_rocm_agents, parse_rocminfo):
        assert isinstance(parse_many(text), tuple)
