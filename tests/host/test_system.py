"""host/system.py: glibc, the OS, WSL and L4T, from fake files under a root and a fake ldd."""

from __future__ import annotations

import os

from hypothesis import given

from tests.host.conftest import FUZZ, LINE_TEXT
from tests.support.fakehost import (
    H200,
    FakeHost,
    fixture,
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
from torchfit.runner import Runner


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



def test_parse_system_files() -> None:
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


@FUZZ
@given(LINE_TEXT)
def test_fuzz_system_line_parsers(text: str) -> None:
    for parse in (parse_ldd_version, parse_os_release, parse_confstr_glibc):
        out = parse(text)
        assert out is None or isinstance(out, str)
    assert isinstance(parse_wsl(text), bool)
