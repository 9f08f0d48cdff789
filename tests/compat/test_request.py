"""compat/request.py: the plain-requirement reader agrees with packaging's Requirement."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import InvalidRequirement, Requirement

from tests.support.cli import bad_input, run_clean
from torchfit.compat.request import PlainRequirement, parse_plain_requirement, parse_requirements
from torchfit.errors import BadInput


def _agrees(text: str) -> None:
    plain = parse_plain_requirement(text)
    if plain is None:
        return  # packaging.requirements decides
    full = Requirement(text)  # a plain requirement is always a valid one
    assert (plain.name, plain.specifier, str(plain)) == (full.name, full.specifier, str(full))
    assert full.url is None and not full.extras and full.marker is None


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("torch==2.13.0", True), ("torch >= 2.4, <2.7", True), ("torchvision", True), ("torch==2.4.*", True),
        ("Torch_Audio~=2.1", True), ("torch==2.13.0+cpu", True), (" torch>=2.4 ", True), ("torch===x", True),
        ("torch==1\r", False), ("torch\n", False), ("torch==1\x0b", False), ("torch[x]>=1", False), ("torch>=2; python_version>'3'", False), ("torch (>=2)", False),
        ("torch @ https://x/t.whl", False), ("torch==", False), ("torch>=2,", False), ("torch>=abc", False),
    ],
)
def test_plain_requirements(text: str, plain: bool) -> None:
    assert (parse_plain_requirement(text) is not None) == plain
    _agrees(text)


_OPS = st.sampled_from(["==", "!=", "<=", ">=", "<", ">", "~=", "===", "= ", "=>"])
_VER = st.text(alphabet="0123456789abcv.*+!-_ \t'\"#$%&/:?^`{|}", max_size=8)
_SPEC = st.builds(lambda o, v, s: f"{o}{s}{v}", _OPS, _VER, st.sampled_from(["", " "]))
_NAME = st.sampled_from(["torch", "torchvision", "Torch_Audio", "a", "x.y-z", "-bad", "torch ", ""])


@settings(max_examples=400, deadline=None)
@given(_NAME, st.lists(_SPEC, max_size=3), st.sampled_from([",", ", ", " ,"]), st.sampled_from(["", " ", "[x]", ";"]))
def test_fuzz_plain_agrees_with_packaging(name: str, specs: list[str], sep: str, tail: str) -> None:
    _agrees(name + sep.join(specs) + tail)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=30), st.text(alphabet="torch=<>!~.,*0123456789 \t\r\n\x0b\x0c[];@()", max_size=30)))
def test_fuzz_any_text(text: str) -> None:
    _agrees(text)
    try:
        reqs = parse_requirements([text])
    except BadInput:
        return
    assert len(reqs) == 1


def test_the_full_parser_still_reads_what_the_plain_one_does_not() -> None:
    with pytest.raises(BadInput, match="extras"):
        parse_requirements(["torch[opt]>=2"])
    with pytest.raises(BadInput, match="markers"):
        parse_requirements(["torch>=2; python_version>'3'"])
    with pytest.raises(BadInput, match="is not a PEP 508 requirement"):
        parse_requirements(["torch=="])
    (req,) = parse_requirements(["torch (>=2.4)"])
    assert str(req.specifier) == ">=2.4"
    (req,) = parse_requirements(["torch>=2.4,<2.7"])
    assert isinstance(req, PlainRequirement)
    with pytest.raises(InvalidRequirement):
        Requirement("torch==")


# --- requirement parts are never dropped (#20 of issue 13) ---------------------------------


@pytest.mark.parametrize("req", ["torch @ https://x/y.whl", "torch[opt-einsum]", 'torch; python_version<"3"'])
def test_requirement_parts_are_not_dropped(req: str) -> None:
    """Defect #20 of the 2026-11 attack (issue 13)."""
    line = bad_input(run_clean("resolve", req, "--assume", "gpu=none"))
    assert "requirement" in line



def test_a_local_label_on_a_family_pin_is_the_variant_and_the_pin_keeps_the_release() -> None:
    from torchfit.compat.project import parse_requirement
    from torchfit.compat.request import split_local_labels

    variants = {"cu126", "cu128", "cpu", "rocm6.4"}
    reqs, cons, variant = split_local_labels(
        [parse_plain_requirement("torch==2.7.1+cu126"), parse_plain_requirement("torchaudio>=2.7,==2.7.1+cu126")],
        [parse_requirement("torchvision==0.22.1+cu126", "c.txt:1"), parse_requirement("numpy==2.0+local", "c.txt:2")],
        None, variants)
    assert [str(r) for r in reqs] == ["torch==2.7.1", "torchaudio==2.7.1,>=2.7"] and variant == "cu126"
    assert [c.text for c in cons] == ["torchvision==0.22.1", "numpy==2.0+local"]  # not the family's: as written
    assert split_local_labels([parse_plain_requirement("torch==2.6.0+rocm6.4")], [], "rocm6.4", variants)[2] == "rocm6.4"
    for bad in (["torch==2.7.1+cu126", "torchaudio==2.7.1+cpu"], ["torch==2.7.1+cu999"]):
        with pytest.raises(BadInput):
            split_local_labels([parse_plain_requirement(t) for t in bad], [], None, variants)
    with pytest.raises(BadInput, match="--variant cpu"):
        split_local_labels([parse_plain_requirement("torch==2.7.1+cu126")], [], "cpu", variants)
