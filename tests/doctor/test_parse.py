"""The pure parsers: real outputs in, values out; hypothesis garbage in, never an exception."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.doctor.conftest import fixture
from torchfit import text
from torchfit.compat import envjudge, ncclenv, tags, versions
from torchfit.compat.versions import Arch
from torchfit.doctor import parse
from torchfit.doctor.logs import parse_log
from torchfit.workers.torchfit_runtime import lib_kind

TEXT = st.text(max_size=400) | st.sampled_from([
    fixture("h200-ldconfig-p.txt"), fixture("lspci-nn-dgx-h200.txt"), fixture("dkms-status-fc28.txt"),
    fixture("dmesg-api-mismatch.txt"), fixture("h200-nvidia-smi.txt"), fixture("nvidia-smi-nvml-mismatch.txt"),
])


def _garbled(text: str) -> st.SearchStrategy[str]:
    """A real output, cut anywhere and with random text spliced in."""
    return st.builds(lambda cut, junk, at: text[:cut] + junk + text[at:], st.integers(0, len(text)), st.text(max_size=40),
                     st.integers(0, len(text)))


STR_PARSERS = [
    parse.parse_lspci, parse.parse_proc_modules, parse.parse_dkms_status, parse.parse_dmesg, parse.parse_smi_banner,
    parse.parse_nvml_mismatch, parse.parse_libnvidia_ml_version, parse.parse_ldconfig, lib_kind,
    parse.version_from_filename, parse.parse_found_version, parse.parse_wheel_tags, tags.glibc_of_tag,
    tags.parse_arch_flags, envjudge.parse_cuda_visible_devices, ncclenv.parse_nccl_ifname, parse.parse_mount_size,
    ncclenv.parse_env_file, parse.parse_osrelease, parse.dotted, text.first_line, parse.head,
    text.strip_ansi, text.tail, parse.looks_like_lspci, parse_log,
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(STR_PARSERS), TEXT | _garbled(fixture("h200-ldconfig-p.txt")) | _garbled(fixture("dmesg-fallen-off-bus.txt")))
def test_string_parsers_never_raise(fn, text: str) -> None:  # type: ignore[no-untyped-def]
    fn(text)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_version_decoders_never_raise(code: int) -> None:
    for fn in (versions.decode_nccl_code, versions.decode_cudnn_code, versions.decode_cuda_code):
        got = fn(code)
        assert got is None or all(isinstance(p, int) for p in got)


ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.floats(allow_nan=True),
                   lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner), max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(ANY)
def test_torch_version_values_never_raise(value: object) -> None:
    parse.parse_cudnn_tuple(value)
    parse.parse_nccl_tuple(value)
    tags.parse_arch_flags(value)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60), st.lists(st.text(max_size=12), max_size=6))
def test_interface_matching_never_raises(value: str, names: list[str]) -> None:
    ncclenv.match_interfaces(ncclenv.parse_nccl_ifname(value), tuple(names))


def test_real_outputs() -> None:
    entries = parse.parse_ldconfig(fixture("h200-ldconfig-p.txt"))
    assert entries[0] == parse.LdEntry("libnccl.so.2", "libc6,x86-64", "/lib/x86_64-linux-gnu/libnccl.so.2")
    assert len(parse.parse_lspci(fixture("lspci-nn-dgx-h200.txt"))) == 8
    assert parse.parse_smi_banner(fixture("h200-nvidia-smi.txt")) == ("580.159.04", "13.0")
    assert parse.parse_smi_banner(fixture("nvidia-smi-470-banner.txt")) == ("470.86", "11.4")
    assert parse.parse_nvml_mismatch(fixture("nvidia-smi-nvml-mismatch.txt")) == (True, "570.124")
    kinds = [h.kind for h in parse.parse_dmesg(fixture("dmesg-fallen-off-bus.txt"))]
    assert "fallen-off-bus" in kinds and "probe-failed" in kinds
    assert [h.kind for h in parse.parse_dmesg(fixture("dmesg-api-mismatch.txt"))] == ["api-mismatch"]
    dkms = parse.parse_dkms_status(fixture("dkms-status-fc28.txt"))
    assert dkms[2] == parse.DkmsEntry("nvidia", "396.45", "4.17.14-202.fc28.x86_64", "installed")
    assert parse.parse_dkms_status("nvidia/580.65.06, 6.8.0-45-generic, x86_64: installed")[0].kernel == "6.8.0-45-generic"


def test_versions_and_tags() -> None:
    assert versions.decode_nccl_code(22809) == (2, 28, 9) and versions.decode_nccl_code(2708) == (2, 7, 8)
    assert versions.decode_cudnn_code(91900) == (9, 19, 0) and versions.decode_cudnn_code(8902) == (8, 9, 2)
    assert versions.decode_cuda_code(11040) == (11, 4) and versions.decode_cuda_code(13000) == (13, 0)
    assert parse.parse_found_version("is too old (found version 11040). Please") == 11040
    assert parse.version_from_filename("/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3") == (2, 28, 3)
    assert parse.version_from_filename("/lib/x86_64-linux-gnu/libnccl.so.2") is None
    assert parse.parse_wheel_tags("Tag: cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64\n") == (
        "manylinux_2_17_x86_64", "manylinux2014_x86_64")
    assert tags.glibc_of_tag("manylinux1_x86_64") == (2, 5) and tags.glibc_of_tag("linux_x86_64") is None
    flags = tags.parse_arch_flags("sm_50 sm_90a compute_90 nonsense")
    assert [(str(b.arch), b.ptx) for b in flags] == [("5.0", False), ("9.0a", False), ("9.0", True)]
    assert flags[1].arch == Arch(9, 0, "a")


def test_nccl_ifname_rules() -> None:
    ifaces = ("docker0", "eth0", "ib0", "lo")
    assert ncclenv.match_interfaces(ncclenv.parse_nccl_ifname("^docker,lo"), ifaces) == ("eth0", "ib0")
    assert ncclenv.match_interfaces(ncclenv.parse_nccl_ifname("=eth"), ifaces) == ()
    assert ncclenv.match_interfaces(ncclenv.parse_nccl_ifname("eth,ib"), ifaces) == ("eth0", "ib0")
    assert parse.parse_mount_size("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n") == 64 << 20
