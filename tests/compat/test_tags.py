"""compat/tags.py: the glibc floor a manylinux tag names, and CUDA arch lists (flags and
TORCH_CUDA_ARCH_LIST entries) as values."""

from __future__ import annotations

from torchfit.compat import tags
from torchfit.compat.versions import Arch, BuildArch, Dotted


def test_manylinux_floors() -> None:
    assert tags.glibc_of_tag("manylinux_2_28_x86_64") == (2, 28)
    assert tags.glibc_of_tag("manylinux2014_aarch64") == (2, 17)
    assert tags.glibc_of_tag("manylinux1_x86_64") == (2, 5)
    assert tags.glibc_of_tag("manylinux2010_x86_64") == (2, 12)
    assert tags.glibc_of_tag("linux_x86_64") is None
    assert tags.glibc_of_tag("macosx_11_0_arm64") is None
    linux = tags.parse_linux_tag("manylinux_2_17_aarch64")
    assert linux is not None and linux.arch == "aarch64" and linux.glibc == Dotted.parse("2.17")


def test_arch_lists() -> None:
    assert tags.parse_arch_flags("sm_50 sm_90a compute_90 nonsense") == (
        BuildArch(Arch(5, 0), False), BuildArch(Arch(9, 0, "a"), False), BuildArch(Arch(9, 0), True))
    entries, ptx_only = tags.parse_arch_list(["sm_80", "sm_90", "compute_90", "compute_100", "gfx90a"])
    assert entries == (BuildArch(Arch(8, 0), False), BuildArch(Arch(9, 0), True))
    assert ptx_only == (Arch(10, 0),)
