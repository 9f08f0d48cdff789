"""compat/versions.py: a base build's label (torchfit adopt)."""

from __future__ import annotations


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
