"""compat/resolver.py: what a plan says about the builds it passed over (defect #17 of issue 13)."""

from __future__ import annotations


def test_mi300x_plan_says_newer_builds_lack_data() -> None:
    """The matrix of 6e0c2fd: ROCm builds after 2.5 with gfx lists "unknown". The plan
    must say that newer builds were refused for missing data, not for incompatibility
    (the data itself is being filled; the explanation must hold for whatever stays unknown).
    Defect #17 of the 2026-11 attack (issue 13)."""
    from dataclasses import replace

    from tests.conftest import make_facts
    from torchfit.compat.matrix import load_matrix
    from torchfit.compat.request import Request
    from torchfit.compat.resolver import resolve

    matrix = load_matrix()
    old = replace(matrix, builds=tuple(
        replace(b, gfx=None) if b.kind == "rocm" and (b.torch.major, b.torch.minor) > (2, 5) else b
        for b in matrix.builds))
    plan = resolve([make_facts(driver=None, gpus=["gfx942"], glibc="2.35", pythons=["3.10.12"])], Request(), old)
    assert plan.torch.startswith("2.5"), plan.torch
    said = " ".join(plan.warnings)
    assert "unknown in the matrix" in said and "not because they were found incompatible" in said

