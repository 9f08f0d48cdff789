"""The matrix loader: the real file validates, and every kind of bad entry names its line."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchfit.compat.matrix import load_matrix, parse_matrix
from torchfit.errors import MatrixError

GOOD = """\
schema = 1
[sources]
"X" = "a test source"
[[cuda]]
version = "12.8"
toolkit_driver = "570.124.06"
mvc_driver = "525.60.13"
source = "X"
[[series]]
torch = ["2.8.0"]
torchvision = ["0.23.0"]
torchaudio = ["2.8.0"]
python = ["3.9", "3.13"]
glibc = "2.28"
pypi = "cu128"
source = { python = "X", glibc = "X", companions = "X", pypi = "X" }
[[series.variant]]
name = "cu128"
cuda = "12.8"
cudnn = "9.10.2.21"
nccl = "2.27.3"
arch = "7.0;8.0;12.0+PTX"
platforms = ["x86_64"]
source = { exists = "X", arch = "X", cudnn = "X", nccl = "X" }
[[series.variant]]
name = "cpu"
platforms = ["x86_64", "aarch64"]
source = { exists = "X" }
"""


def test_good_minimal_matrix_parses() -> None:
    m = parse_matrix(GOOD)
    assert [b.variant for b in m.builds] == ["cu128", "cpu"]
    cu = m.builds[0]
    assert cu.pypi_default and cu.index_url == "https://download.pytorch.org/whl/cu128"
    assert cu.arch is not None and str(cu.arch[-1]) == "12.0+PTX"
    assert str(m.cuda["12.8"].toolkit_driver) == "570.124.06"


@pytest.mark.parametrize(
    ("old", "new", "line", "what"),
    [
        ('arch = "7.0;8.0;12.0+PTX"', 'arch = "7.0;banana"', 17, "not like 9.0"),
        ('source = { exists = "X", arch = "X", cudnn = "X", nccl = "X" }',
         'source = { exists = "X", arch = "Y", cudnn = "X", nccl = "X" }', 17, "not defined in [sources]"),
        ('source = { exists = "X", arch = "X", cudnn = "X", nccl = "X" }',
         'source = { exists = "X", cudnn = "X", nccl = "X" }', 17, "'arch' is stated without a source"),
        ('name = "cu128"', 'name = "cuda12"', 17, "is not cuXYZ"),
        ('cuda = "12.8"\ncudnn', 'cuda = "12.9"\ncudnn', 17, "CUDA 12.9 has no [[cuda]] entry"),
        ('mvc_driver = "525.60.13"', 'mvc_driver = "five"', 4, "not a dotted number"),
        ('torchaudio = ["2.8.0"]', 'torchaudio = []', 9, "one entry per torch release"),
        ('python = ["3.9", "3.13"]', 'python = ["3.9", "py3"]', 9, "not like 3.12"),
        ('platforms = ["x86_64"]', 'platforms = ["sparc"]', 17, "'platforms' must list"),
        ('glibc = "2.28"', 'glibc = 2.28', 9, "'glibc' must be a string"),
        ('pypi = "cu128"', 'pypi = "cu128"\npypi = "cpu"', 16, "not valid TOML"),
    ],
)
def test_bad_entry_names_its_line(old: str, new: str, line: int, what: str) -> None:
    assert old in GOOD
    with pytest.raises(MatrixError) as info:
        parse_matrix(GOOD.replace(old, new, 1), "data/matrix.toml")
    msg = info.value.message
    assert msg.startswith(f"data/matrix.toml:{line}: "), msg
    assert what in msg, msg


def test_missing_sources_table_and_schema() -> None:
    with pytest.raises(MatrixError, match="schema = 1"):
        parse_matrix(GOOD.replace("schema = 1", "schema = 2"))
    with pytest.raises(MatrixError, match=r"\[sources\]"):
        parse_matrix(GOOD.replace('[sources]\n"X" = "a test source"\n', ""))


def test_unknown_facts_become_none() -> None:
    m = parse_matrix(GOOD.replace('arch = "7.0;8.0;12.0+PTX"', 'arch = "unknown"').replace(
        'nccl = "2.27.3"', 'nccl = "unknown"'))
    assert m.builds[0].arch is None and m.builds[0].nccl is None


def test_duplicate_build_is_reported() -> None:
    dup = GOOD + '[[series.variant]]\nname = "cpu"\nplatforms = ["x86_64"]\nsource = { exists = "X" }\n'
    with pytest.raises(MatrixError, match="listed twice"):
        parse_matrix(dup)


def test_missing_file_is_matrix_error(tmp_path: Any) -> None:
    with pytest.raises(MatrixError, match="cannot read"):
        load_matrix(str(tmp_path / "nope.toml"))


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_garbage_only_raises_matrix_error(text: str) -> None:
    with pytest.raises(MatrixError):
        parse_matrix(text)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=len(GOOD) - 1), st.text(min_size=1, max_size=8))
def test_mutated_matrix_never_crashes(pos: int, junk: str) -> None:
    try:
        parse_matrix(GOOD[:pos] + junk + GOOD[pos:])
    except MatrixError as exc:
        assert re.match(r"^matrix\.toml(:\d+)?: ", exc.message)


# --- the real, embedded matrix ---------------------------------------------------------


def test_embedded_matrix_covers_2_0_to_2_15(matrix: Any) -> None:
    releases = {str(v) for v in matrix.releases}
    for must in ("2.0.0", "2.0.1", "2.4.1", "2.6.0", "2.7.1", "2.9.1", "2.11.0", "2.14.1", "2.15.0"):
        assert must in releases


def test_embedded_matrix_facts_from_wheel_metadata(matrix: Any) -> None:
    """Spot checks against the PyPI wheels' METADATA (the default Linux x86_64 wheels: CUDA and the pinned NVIDIA wheels)."""
    by = {(str(b.torch), b.variant): b for b in matrix.builds}
    assert by[("2.8.0", "cu128")].nccl == "2.27.3" and by[("2.8.0", "cu128")].cudnn == "9.10.2.21"
    assert by[("2.11.0", "cu130")].nccl == "2.28.9"
    assert by[("2.0.1", "cu117")].pypi_default
    assert str(by[("2.5.1", "cu124")].glibc) == "2.17"
    assert str(by[("2.7.0", "cu126")].glibc) == "2.28"
    # Requires-Python says >=3.8, but 2.5 ships no cp38 wheel.
    assert (3, 8) not in by[("2.5.0", "cpu")].pythons


def test_every_build_has_sources(matrix: Any) -> None:
    for b in matrix.builds:
        assert "exists" in b.sources, b.label
        if b.arch is not None:
            assert "arch" in b.sources, b.label


# -- evidence labels, cuDNN floors, unknown reasons (issue 11) ------------------------

def test_evidence_labels_are_read_and_weak_ones_derived_from_2ry_keys() -> None:
    text = GOOD.replace('"X" = "a test source"', '"X" = "a test source"\n"R" = "2ry: a third-party scrape"').replace(
        'source = { exists = "X", arch = "X", cudnn = "X", nccl = "X" }',
        'source = { exists = "X", arch = "X", cudnn = "X", nccl = "R" }\nevidence = { arch = "cycle" }')
    b = parse_matrix(text).builds[0]
    assert b.evidence_of("arch") == "cycle"
    assert b.evidence_of("nccl") == "secondary"  # every key of the fact is a 2ry key
    assert b.evidence_of("cudnn") is None  # unlabelled, not guessed


@pytest.mark.parametrize(
    ("evidence", "what"),
    [
        ('evidence = { arch = "rumour" }', "is not one of measured, primary, secondary, cycle"),
        ('evidence = { glibc = "primary" }', "labels a fact with no source.glibc"),
        ('evidence = ["primary"]', "'evidence' must be a string or a table"),
    ],
)
def test_bad_evidence_names_its_own_line(evidence: str, what: str) -> None:
    src = 'source = { exists = "X", arch = "X", cudnn = "X", nccl = "X" }'
    text = GOOD.replace(src, src + "\n" + evidence)
    line = text.splitlines().index(evidence) + 1
    with pytest.raises(MatrixError) as info:
        parse_matrix(text, "m.toml")
    assert info.value.message.startswith(f"m.toml:{line}: "), info.value.message
    assert what in info.value.message


def test_cudnn_floor_table_longest_prefix_wins() -> None:
    text = GOOD.replace("[[series]]", '[[cudnn]]\nversion = "9"\nmin_compute = "5.0"\nsource = "X"\n'
                        '[[cudnn]]\nversion = "8.5"\nmin_compute = "3.5"\nsource = "X"\n[[series]]', 1)
    m = parse_matrix(text)
    assert str(m.cudnn_floor("9.10.2.21").min_compute) == "5.0"  # type: ignore[union-attr]
    assert str(m.cudnn_floor("8.5.0.96").min_compute) == "3.5"  # type: ignore[union-attr]
    assert m.cudnn_floor("8.7.0.84") is None
    assert str(m.highest_cudnn_floor.min_compute) == "5.0"  # type: ignore[union-attr]
    bad = text.replace('min_compute = "3.5"', 'min_compute = "kepler"')
    with pytest.raises(MatrixError, match=r"matrix.toml:\d+: \[\[cudnn\]\]: 'min_compute'"):
        parse_matrix(bad)


def test_unknown_reason_must_explain_an_unknown_fact() -> None:
    from torchfit.compat.matrix import iter_unknowns

    text = GOOD.replace('nccl = "2.27.3"', 'nccl = "unknown"\nunknown = { nccl = "index unreachable" }')
    m = parse_matrix(text)
    found = [u for u in iter_unknowns(m) if u.fact == "nccl"]
    assert [u.reason for u in found] == ["index unreachable"] and "blocks nothing" in found[0].blocks
    with pytest.raises(MatrixError, match="not \"unknown\""):
        parse_matrix(GOOD.replace('nccl = "2.27.3"', 'nccl = "2.27.3"\nunknown = { nccl = "why" }'))


def test_torchaudio_flag_needs_a_source() -> None:
    with pytest.raises(MatrixError, match="'torchaudio' is stated without a source"):
        parse_matrix(GOOD.replace('platforms = ["x86_64"]\n', 'platforms = ["x86_64"]\ntorchaudio = false\n', 1))


def test_real_matrix_rocm_lists_from_2_6_on_are_sourced_and_labelled(matrix: Any) -> None:
    from packaging.version import Version

    rocm = [b for b in matrix.builds if b.kind == "rocm" and b.torch >= Version("2.6")]
    # A list not read yet is "unknown" with its reason (2.15 rocm10.0), never guessed.
    rocm = [b for b in rocm if not (b.gfx is None and b.unknown_why.get("arch"))]
    assert rocm and all(b.gfx is not None for b in rocm)
    assert all(b.evidence_of("arch") in ("secondary", "cycle") for b in rocm)
    assert all("gfx942" in (b.gfx or ()) for b in rocm), "MI300X is in every ROCm list from 2.3 on (audit §3)"
