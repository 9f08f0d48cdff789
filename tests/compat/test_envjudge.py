"""compat/envjudge.py: CUDA_VISIBLE_DEVICES read as the CUDA runtime reads it (indices, UUIDs, where it
stops, duplicates, -1 hiding every GPU)."""

from __future__ import annotations

from torchfit.compat import envjudge


def test_cuda_visible_devices_rules() -> None:
    v = envjudge.parse_cuda_visible_devices("0,GPU-8be0f050")
    assert v.indices == (0,) and v.uuids == ("GPU-8be0f050",) and "mixes" in v.problems[-1]
    v = envjudge.parse_cuda_visible_devices("1,x,0")
    assert v.entries == ("1",) and "every entry after it" in v.problems[0]
    assert envjudge.parse_cuda_visible_devices("-1").hides_all
    assert envjudge.parse_cuda_visible_devices("0,0").problems == ("index 0 is listed twice",)
