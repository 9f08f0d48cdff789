"""compat/versions.py: version codes (nccl.h, cudnn_version.h, cuda), release comparison, and a base
build's label (torchfit adopt)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from torchfit.compat import versions


def test_a_base_build_s_label_and_a_pin_that_differs_only_by_it() -> None:
    """Issue 27, item 2: NVIDIA's `2.8.0a0+5228986.nv25.08` is the 2.8.0 release with a label;
    `torch==2.8.0` refuses it only for that label, `torch==2.9.0` for its release."""
    from packaging.requirements import Requirement

    from torchfit.compat.versions import differs_only_by_label, release_label

    base = "2.8.0a0+5228986.nv25.08"
    assert release_label(base) == "a0+5228986.nv25.08"  # as written, not packaging's "nv25.8"
    assert release_label("2.13.0+cpu") == "+cpu" and release_label("2.8.0") is None
    assert release_label("not a version") is None
    assert differs_only_by_label(Requirement("torch==2.8.0"), base)
    assert differs_only_by_label(Requirement("torch>=2.8.0,<2.9"), base)
    assert not differs_only_by_label(Requirement("torch==2.9.0"), base)
    assert not differs_only_by_label(Requirement("torch>=2.7"), base)  # met: nothing to accept
    assert not differs_only_by_label(Requirement("torch==2.8.0"), "2.8.0")


def test_version_codes() -> None:
    # nccl.h NCCL_VERSION and cudnn_version.h CUDNN_VERSION: two encodings by era.
    assert versions.decode_nccl_code(22809) == (2, 28, 9)
    assert versions.decode_nccl_code(2708) == (2, 7, 8)
    assert versions.decode_cudnn_code(91900) == (9, 19, 0)
    assert versions.decode_cudnn_code(8902) == (8, 9, 2)
    assert versions.decode_cuda_code(11040) == (11, 4)
    assert versions.decode_cuda_code(13000) == (13, 0)
    assert versions.version_text(versions.decode_nccl_code(23007)) == "2.30.7"
    for bad in (0, -1, None, True, "22809", 1.5):
        assert versions.decode_xyz_code(bad) is None
        assert versions.decode_cuda_code(bad) is None


@given(st.integers(min_value=1, max_value=10**7))
def test_xyz_code_round_trips_from_2_9(code: int) -> None:
    out = versions.decode_xyz_code(code)
    assert out is not None
    x, y, z = out
    assert (x * 10000 + y * 100 + z if code >= 10000 else x * 1000 + y * 100 + z) == code


def test_same_release() -> None:
    assert versions.same_release("9.10.2.21", "9.10.2", 3)
    assert versions.same_release("12.8", "12.8.1", 2)
    assert not versions.same_release("12.8", "12.8.1", 3)
    assert versions.same_release("2.28.9+cuda13.0", (2, 28, 9), 3)
    assert not versions.same_release("", "1", 1)
    assert not versions.same_release(None, "1", 1)
