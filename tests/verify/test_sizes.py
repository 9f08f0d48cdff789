"""verify/sizes.py: --sizes and the default sweep."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import torchfit.verify.sizes as vsizes
from torchfit.errors import BadInput


@pytest.mark.parametrize(
    "text, want",
    [
        ("1M", 1 << 20),
        ("1MiB", 1 << 20),
        ("512k", 512 << 10),
        ("1G", 1 << 30),
        ("8GiB", 8 << 30),
        ("65536", 65536),
    ],
)
def test_parse_size(text: str, want: int) -> None:
    assert vsizes.parse_size(text) == want


@pytest.mark.parametrize("text", ["", "1X", "-1M", "3", "1.1", "M"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(BadInput):
        vsizes.parse_size(text)


def test_parse_sizes_accepts_words_and_commas() -> None:
    assert vsizes.parse_sizes(["1G,1M", "4M", "1M"]) == (1 << 20, 4 << 20, 1 << 30)


@given(st.text(max_size=30))
def test_parse_size_fuzz(text: str) -> None:
    try:
        assert vsizes.parse_size(text) > 0
    except BadInput:
        pass


def test_default_sweep_is_1mib_to_1gib_and_cheap() -> None:
    assert (
        vsizes.DEFAULT_SIZES[0] == 1 << 20
        and vsizes.DEFAULT_SIZES[-1] == 1 << 30
        and len(vsizes.DEFAULT_SIZES) == 11
    )
    plan = vsizes.iteration_plan(vsizes.DEFAULT_SIZES)
    # Bytes moved by the whole default sweep at the measured 2x H200 busbw (~330 GB/s,
    # algbw = busbw for 2 ranks): far below a second, so the 30 s budget is start-up.
    total_bytes = sum(n * (w + i) for n, (w, i) in plan.items())
    assert total_bytes / 330e9 < 1.0
    assert vsizes.iteration_plan([1 << 20], iters=3, warmup=1) == {1 << 20: (1, 3)}

