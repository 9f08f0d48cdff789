"""data/companions.toml and its reader: the real file validates, bad entries name their line,
and the lookups answer the cases the resolver asks (xformers' torch pin, flash-attn's prebuilt
wheel, PyG's find-links page)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from torchfit.compat.companions import (
    BINDINGS,
    EVIDENCE_LABELS,
    format_sdist_warning,
    load_companions,
    parse_companions,
)
from torchfit.compat.datafiles import read_data_text
from torchfit.errors import CompanionsError

REAL = read_data_text("companions.toml")
V = Version

MINI = """schema = 1
[sources]
"M" = "METADATA of demo-1.0-cp39-abi3-manylinux_2_28_x86_64.whl, read 2026-12-01"
"R" = "demo README @ abc123"

[[package]]
name = "Demo_Pkg"
binding = "metadata-pin"
published = ["pypi", "https://example.invalid/whl/{variant}"]
route = "https://example.invalid/whl/{variant}"
route_kind = "index"
source = { binding = "M", published = "R", route = "R" }

[[package.release]]
version = "1.1"
torch = "==2.9.0"
variants = ["cu126", "cu128"]
pypi = "cu128"
python = ["cp39-abi3"]
source = { exists = "M", torch = "M", variants = "R", pypi = "M", python = "M" }
evidence = { torch = "measured", variants = "primary" }

[[package.release]]
version = "1.0"
torch = "==2.8.0"
variants = ["cu126", "cu128"]
pypi = "cu128"
python = ["cp39-abi3"]
source = { exists = "M", torch = "M", variants = "R", pypi = "M", python = "M" }
"""


def test_the_real_file_validates_and_covers_every_companion() -> None:
    comps = load_companions()
    assert set(comps.packages) == {
        "xformers", "vllm", "torchao", "torchcodec", "torch-tensorrt", "flash-attn", "pyg-lib",
        "torch-scatter", "torch-sparse", "torch-cluster", "bitsandbytes", "triton"}
    for comp in comps.packages.values():
        assert comp.binding in BINDINGS
        assert comp.releases, comp.name
        versions = [r.version for r in comp.releases]
        assert versions == sorted(versions, reverse=True), comp.name
        for rel in comp.releases:
            assert set(rel.evidence.values()) <= set(EVIDENCE_LABELS)
            # every fact stated has a source key, and every key is defined
            for keys in rel.source.values():
                for key in keys.split(";"):
                    assert key.strip() in comps.sources, (rel.origin, key)
    assert load_companions() is comps  # parsed once per process


def test_every_torch_pin_from_24_to_29_is_recorded() -> None:
    """The releases of the last ~18 months: xformers and vllm pin each torch 2.4 ... 2.9+."""
    comps = load_companions()
    for name in ("xformers", "vllm"):
        pinned = {str(r.torch) for r in comps.get(name).releases if r.torch is not None}  # type: ignore[union-attr]
        for torch in ("==2.4.0", "==2.5.1", "==2.6.0", "==2.7.0", "==2.8.0", "==2.9.0"):
            if name == "vllm" and torch in ("==2.4.0", "==2.5.1"):
                continue  # vllm releases since 2024-06 start at torch 2.6 on this record's window
            assert torch in pinned, (name, torch)


def test_xformers_release_that_pins_torch_28() -> None:
    comps = load_companions()
    rels = comps.releases_for("XFormers", torch=V("2.8.0"), variant="cu128", python="3.12")
    assert [str(r.version) for r in rels] == ["0.0.32.post2", "0.0.32.post1"]
    top = rels[0]
    assert str(top.torch) == "==2.8.0" and top.evidence["torch"] == "measured"
    assert top.pypi_variant == "cu128" and top.evidence["pypi"] == "measured"
    assert "cu129" in (top.variants or ())
    assert "xformers-0.0.32.post2-cp39-abi3-manylinux_2_28_x86_64.whl" in comps.sources[top.source["torch"]]
    # the local label of a torch build does not change the answer
    assert comps.releases_for("xformers", torch=V("2.8.0+cu128"), variant="cu128", python="3.12") == rels
    # a variant no build of that release exists for: nothing
    assert comps.releases_for("xformers", torch=V("2.8.0"), variant="cu118", python="3.12") == ()


def test_xformers_routing_sends_other_variants_to_the_pytorch_index() -> None:
    comps = load_companions()
    assert comps.routing("xformers", torch=V("2.8.0"), variant="cu128") is None  # PyPI's wheel is cu128
    assert comps.routing("xformers", torch=V("2.8.0"), variant="cu126") == "https://download.pytorch.org/whl/cu126"
    assert comps.routing("xformers", torch=V("2.8.0"), variant="cu118") is None  # no build at all


def test_flash_attn_prebuilt_for_torch_28_cu12_cxx11abi_cp312() -> None:
    comps = load_companions()
    rels = comps.releases_for("flash-attn", torch=V("2.8.0"), variant="cu128", python="3.12")
    by_version = {str(r.version): r for r in rels}
    assert "2.8.3" in by_version and "2.8.2" not in by_version  # 2.8.2's matrix stops at torch 2.7
    rel = by_version["2.8.3"]
    assert rel.sdist_only
    assert [p.filename for p in rel.prebuilt] == [
        "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"]
    assert rel.prebuilt[0].url == ("https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3/"
                                   "flash_attn-2.8.3%2Bcu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl")
    # torch 2.6 wheels were built without the C++11 ABI: the FALSE wheel is the one
    old = comps.releases_for("flash-attn", torch=V("2.6.0"), variant="cu126", python="3.11")
    assert old[0].prebuilt[0].filename.endswith("torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl")
    # an explicit ABI wins (an NGC image's torch is built with it)
    ngc = comps.releases_for("flash-attn", torch=V("2.6.0"), variant="cu126", python="3.11", cxx11abi=True)
    assert "cxx11abiTRUE" in ngc[0].prebuilt[0].filename
    # torch 2.4 has no cp313 wheel (excluded in the release matrix); nor CUDA 13
    assert not any(r.version == V("2.8.3") for r in comps.releases_for(
        "flash-attn", torch=V("2.4.0"), variant="cu124", python="3.13"))
    assert comps.releases_for("flash-attn", torch=V("2.9.0"), variant="cu130", python="3.12") == ()


def test_format_sdist_warning_names_the_build_and_the_wheel() -> None:
    comps = load_companions()
    rel = comps.releases_for("flash-attn", torch=V("2.8.0"), variant="cu128", python="3.12")[0]
    text = format_sdist_warning(rel)
    assert text.startswith(f"flash-attn {rel.version} has only a source distribution on PyPI")
    assert "nvcc of CUDA 12.0 or newer" in text and "2 hours" in text
    assert rel.prebuilt[0].url in text
    none = format_sdist_warning(dataclasses.replace(rel, prebuilt=()))
    assert "No prebuilt wheel for this torch build is recorded" in none


def test_pyg_routing_url_for_torch_28_cu128() -> None:
    comps = load_companions()
    assert comps.routing("pyg-lib", torch=V("2.8.0"), variant="cu128") == "https://data.pyg.org/whl/torch-2.8.0+cu128.html"
    assert comps.routing("torch-scatter", torch=V("2.8.0"), variant="cu126") == "https://data.pyg.org/whl/torch-2.8.0+cu126.html"
    assert comps.routing("pyg-lib", torch=V("2.8.0"), variant="cu118") is None  # no such page
    rels = comps.releases_for("pyg-lib", torch=V("2.8.0"), variant="cu128", python="3.12")
    assert [str(r.version) for r in rels] == ["0.6.0", "0.5.0"]
    # torch-scatter's PyPI release is an sdist; the page's wheel is what matches
    scatter = comps.releases_for("torch-scatter", torch=V("2.8.0"), variant="cpu", python="3.12")
    assert scatter and not scatter[0].sdist_only and scatter[0].pypi_variant is None


def test_vllm_pypi_binary_is_one_variant_and_triton_follows_torchs_pin() -> None:
    comps = load_companions()
    vllm = comps.releases_for("vllm", torch=V("2.8.0"), variant="cu128", python="3.12")
    assert [str(r.version) for r in vllm] == ["0.11.0", "0.10.2"]
    assert vllm[0].evidence["pypi"] == "cycle"  # inferred, and labelled so
    assert comps.releases_for("vllm", torch=V("2.8.0"), variant="cu126", python="3.12") == ()
    triton = comps.releases_for("triton", torch=V("2.8.0"), variant="cu128", python="3.12")
    assert [str(r.version) for r in triton] == ["3.4.0"]
    assert comps.get("triton").binding == "none"  # type: ignore[union-attr]


def test_binding_none_releases_are_matched_on_torch_alone() -> None:
    comps = load_companions()
    ao = comps.releases_for("torchao", torch=V("2.9.1"), variant="cu128", python="3.12")
    assert V("0.15.0") in [r.version for r in ao]
    assert V("0.16.0") not in [r.version for r in ao]
    bnb = comps.releases_for("bitsandbytes", torch=V("2.13.0"), variant="cu130", python="3.13")
    assert bnb and str(bnb[0].torch) == "<3,>=2.4"


def test_unknown_package_and_python_filters() -> None:
    comps = load_companions()
    assert comps.get("numpy") is None
    assert comps.releases_for("numpy", torch=V("2.8.0"), variant="cpu", python="3.12") == ()
    assert comps.routing("numpy", torch=V("2.8.0"), variant="cpu") is None
    # vllm 0.10.2 requires Python < 3.14
    assert comps.releases_for("vllm", torch=V("2.8.0"), variant="cu128", python="3.14") == ()


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(("old", "new", "message"), [
    ('torch = "==2.8.0"', 'torch = "2.8"', r"is not a version specifier"),
    ('variants = ["cu126", "cu128"]', 'variants = ["cu126", "cuda12"]', r"variant 'cuda12' is not"),
    ('python = ["cp39-abi3"]\nsource = { exists = "M", torch = "M", variants = "R", pypi = "M", python = "M" }\nevidence',
     'python = ["cp39-abi3"]\nsource = { exists = "M", torch = "NOPE", variants = "R", pypi = "M", python = "M" }\nevidence',
     r"source key 'NOPE'"),
])
def test_a_broken_entry_names_its_line(old: str, new: str, message: str) -> None:
    text = MINI.replace(old, new, 1)
    assert text != MINI
    with pytest.raises(CompanionsError) as err:
        parse_companions(text, "companions.toml")
    assert re.search(message, err.value.what)
    # the line of the [[package.release]] header of the release that holds the change
    changed = _line_of(text, new.splitlines()[-1])
    header = max(n for n, line in enumerate(text.splitlines(), 1) if line == "[[package.release]]" and n < changed)
    assert err.value.line == header
    assert err.value.message.startswith(f"companions.toml:{header}: demo-pkg ")


def test_a_broken_release_of_the_real_file_names_its_line() -> None:
    needle = 'version = "0.0.32.post2"'
    line = _line_of(REAL, needle)
    broken = REAL.replace('torch = "==2.8.0"\nvariants = ["cu126", "cu128", "cu129", "rocm6.4"]',
                          'torch = "==2.8.0"\nvariants = ["cu126", "cu128", "cu129", "rocm6.4"]\ncxx11abi = "yes"', 1)
    assert broken != REAL
    with pytest.raises(CompanionsError) as err:
        parse_companions(broken, "companions.toml")
    assert err.value.line == line - 1  # the [[package.release]] header above the version
    assert err.value.message.startswith(f"companions.toml:{line - 1}: xformers 0.0.32.post2: 'cxx11abi'")
    assert err.value.reference == "bad-companions"


def test_releases_out_of_order_and_duplicates_are_refused() -> None:
    swapped = MINI.replace('version = "1.1"', 'version = "0.9"', 1)
    with pytest.raises(CompanionsError, match="newest first"):
        parse_companions(swapped)
    twice = MINI + MINI.split("\n", 5)[5].split("[[package]]", 1)[0] + "[[package]]" + MINI.split("[[package]]", 1)[1]
    with pytest.raises(CompanionsError, match="listed twice"):
        parse_companions(twice)


def test_mini_file_lookups() -> None:
    comps = parse_companions(MINI)
    assert comps.get("demo-pkg") is comps.get("Demo_Pkg")
    assert comps.routing("demo.pkg", torch=V("2.9.0"), variant="cu126") == "https://example.invalid/whl/cu126"
    assert comps.routing("demo-pkg", torch=V("2.9.0"), variant="cu128") is None
    assert [str(r.version) for r in comps.releases_for("demo-pkg", torch=V("2.8.0"), variant="cu126",
                                                       python="3.13")] == ["1.0"]
    assert comps.releases_for("demo-pkg", torch=V("2.8.0"), variant="cu126", python="3.8") == ()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_garbage_raises_only_companions_error(text: str) -> None:
    try:
        parse_companions(text)
    except CompanionsError:
        pass


_VALUES = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.lists(st.text(max_size=8), max_size=3),
                    st.just("unknown"), st.just(["cu128", "cpu"]), st.just(">=2.8,<2.9"))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["version", "torch", "variants", "pypi", "python", "requires_python", "cxx11abi",
                        "sdist_only", "build_needs", "prebuilt", "source", "evidence", "unknown"]), _VALUES)
def test_any_value_in_any_release_field_is_data_not_a_crash(key: str, value: object) -> None:
    """A fuzzed value in a real-looking entry: accepted, or one CompanionsError with a line."""
    import json

    rendered = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
    head, sep, block = MINI.rpartition("[[package.release]]\n")  # the release 1.0
    lines = [ln for ln in block.splitlines() if not ln.startswith(f"{key} =")]
    lines.insert(0 if key == "version" else 1, f"{key} = {rendered}")
    try:
        comps = parse_companions(head + sep + "\n".join(lines))
    except CompanionsError as exc:
        assert exc.line is None or exc.line >= 1
        return
    comps.releases_for("demo-pkg", torch=V("2.8.0"), variant="cu128", python="3.12")
    comps.routing("demo-pkg", torch=V("2.8.0"), variant="cu126")
