"""Slurm hostlist notation (fleet/hostlist.py): the pure side; test_cluster.py holds it
to scontrol's own answers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchfit.errors import BadInput
from torchfit.fleet.hostlist import compress_hostlist, expand_hostlist

CASES = [
    (["gpu01", "gpu02", "gpu03", "gpu05", "gpu10"], "gpu[01-03,05,10]"),
    (["n3", "n1", "n2"], "n[1-3]"),
    (["n9", "n10", "n11"], "n[9-11]"),
    (["b1", "a2", "a1"], "a[1-2],b1"),
    (["login", "n1"], "login,n1"),
    (["n7"], "n7"),
    (["x1y", "x2y"], "x1y,x2y"),
]


@pytest.mark.parametrize(("names", "text"), CASES)
def test_compress_and_expand(names: list[str], text: str) -> None:
    assert compress_hostlist(names) == text
    assert sorted(expand_hostlist(text)) == sorted(set(names))


def test_expand_keeps_padding_and_order() -> None:
    assert expand_hostlist("gpu[08-10],login1") == ["gpu08", "gpu09", "gpu10", "login1"]
    assert expand_hostlist("rack1-n[1-2]") == ["rack1-n1", "rack1-n2"]


def test_several_bracket_groups_expand_as_their_product() -> None:
    """Sites name nodes by rack and slot (issue 26, item 6): scontrol expands each group in turn
    (test_cluster.py compares these with scontrol's own answers)."""
    assert expand_hostlist("rack[1-2]-gpu[01-02]") == ["rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"]
    assert expand_hostlist("n[1-2]x[3]") == ["n1x3", "n2x3"]
    assert expand_hostlist("a[9-10]b[1-2]") == ["a9b1", "a9b2", "a10b1", "a10b2"]
    assert expand_hostlist("r[1,3]n[008-010]") == ["r1n008", "r1n009", "r1n010", "r3n008", "r3n009", "r3n010"]


@pytest.mark.parametrize("bad", ["gpu[01-", "gpu]1", "n[3-1]", "n[a-b]", "n[]", "n[1-[2]]", "n[1-99999999]",
                                 "n[1-1000][1-1000][1-10]", "a b", "gpu[1-2]z",
                                 "r[1-2]-n[1-2]-s"])
def test_bad_hostlists_are_one_line_bad_input(bad: str) -> None:
    with pytest.raises(BadInput):
        expand_hostlist(bad)


names = st.lists(
    st.builds(lambda p, n, w: f"{p}{str(n).zfill(w)}", st.sampled_from(["gpu", "n", "node-a", "x"]),
              st.integers(0, 300), st.sampled_from([0, 3])),
    max_size=60,
)


@given(names)
def test_round_trip(names: list[str]) -> None:
    assert sorted(expand_hostlist(compress_hostlist(names))) == sorted(set(names)) if names else True


@given(st.text(max_size=40))
def test_garbage_never_raises_anything_but_bad_input(text: str) -> None:
    try:
        expand_hostlist(text)
    except BadInput:
        pass


@pytest.mark.parametrize("bad", ["gpu[²]", "gpu[\u0661-\u0663]", "gpu[1-\u0663]", "gpu[\uff11]",
                                 "gpu[0-" + "9" * 5000 + "]", "gpu[" + "1" * 19 + "]"])
def test_numbers_are_ascii_digits_of_bounded_width(bad: str) -> None:
    """Issue 34 H1: str.isdigit() took "²" (then int() failed: an internal error), Arabic-Indic
    digits (read as gpu[1-3]) and a 5,000-digit bound (int() refuses past 4,300 digits)."""
    with pytest.raises(BadInput, match="ASCII digits"):
        expand_hostlist(bad)
    assert expand_hostlist("gpu[" + "0" * 17 + "1]") == ["gpu" + "0" * 17 + "1"]


@given(st.text(alphabet=st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=6))
def test_any_non_ascii_digit_is_refused(digits: str) -> None:
    """Only 0-9 are Slurm's digits: every other Unicode number character is bad input."""
    if all(c in "0123456789" for c in digits):
        assert expand_hostlist(f"n[{digits}]") == [f"n{digits}"]
    else:
        with pytest.raises(BadInput):
            expand_hostlist(f"n[{digits}]")
