"""HostFacts: the JSON round trip (detect on a node, resolve on a login node) and --assume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import make_facts
from tests.support.cli import bad_input, run_clean
from torchfit.compat.facts import (
    apply_assumptions,
    facts_from_json,
    facts_to_json,
    parse_assumption,
    parse_facts_file,
)
from torchfit.compat.versions import Arch, BuildArch, Dotted, coverage
from torchfit.errors import BadInput

NAMES = {"NVIDIA GeForce RTX 5090": "12.0", "NVIDIA H100 80GB HBM3": "9.0"}


def test_json_round_trip() -> None:
    facts = make_facts(gpus=["NVIDIA H200=sm_90", "NVIDIA H200=sm_90", "AMD MI300X=gfx942"], pyenv=["3.12.9"])
    data = facts_to_json(facts)
    again = facts_from_json(json.loads(json.dumps(data)), "node.json")
    assert facts_to_json(again) == data
    assert again.source == "file: node.json"
    assert data["gpus"][0]["compute_capability"] == "9.0"
    assert data["gpus"][2]["gfx"] == "gfx942"


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"gpus": 3}', "'gpus' must be a list"),
        ('{"gpus": [{"name": "x", "compute_capability": "banana"}]}', "not like 9.0"),
        ('{"driver_version": 580}', "'driver_version' must be a string"),
        ('{"driver_version": "banana"}', "not a dotted number"),
        ('{"pythons": [{"version": "three"}]}', "not like 3.12"),
        ('{"wsl": "maybe"}', "'wsl' must be true"),
    ],
)
def test_malformed_facts_file(text: str, what: str) -> None:
    with pytest.raises(BadInput, match=what):
        parse_facts_file(text, "node.json")


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(
                        st.sampled_from(["gpus", "driver_version", "pythons", "pyenv", "glibc",
                                         "topology", "name", "compute_capability", "version", "wsl",
                                         "reasons", "installable", "path", "index", "memory_mib"]), c, max_size=5),
                    max_leaves=12))
def test_facts_from_json_garbage_only_bad_input(data: Any) -> None:
    try:
        facts_from_json(data, "fuzz.json")
    except BadInput:
        pass


def test_assume_replaces_and_accumulates() -> None:
    base = make_facts(driver="535.104.05", gpus=["sm_80"], glibc="2.35")
    out = apply_assumptions(
        base,
        ["driver=580.65.06", "gpu=sm_120", 'gpu="NVIDIA GeForce RTX 5090"', "gpu=gfx942", "glibc=2.17",
         "python=3.11", "python=3.12", "os=centos:7", "wsl=yes", "arch=aarch64"],
        NAMES,
    )
    assert out.driver_version == "580.65.06" and out.glibc == "2.17"
    assert [g.compute_capability for g in out.nvidia_gpus] == ["12.0", "12.0"]
    assert out.amd_gpus[0].gfx == "gfx942"
    assert [p.version for p in out.pythons] == ["3.11", "3.12"]
    assert out.os == "centos:7" and out.wsl is True and out.arch == "aarch64"
    assert "assumed" in out.reasons["driver"]
    assert apply_assumptions(base, ["gpu=none"], NAMES).gpus == ()


@pytest.mark.parametrize(
    ("item", "what"),
    [
        ("driver=banana", "not a dotted number"),
        ("colour=red", "unknown key"),
        ("driver", "expected KEY=VALUE"),
        ("gpu=Voodoo 3", "not an arch"),
        ("wsl=maybe", "expected yes or no"),
        ("arch=sparc", "expected x86_64 or aarch64"),
        ("python=three", "not like 3.12"),
    ],
)
def test_bad_assumptions(item: str, what: str) -> None:
    with pytest.raises(BadInput, match=what):
        apply_assumptions(make_facts(), [item], NAMES)


def test_parse_assumption_strips_quotes() -> None:
    assert parse_assumption('gpu="NVIDIA H100 80GB HBM3"') == ("gpu", "NVIDIA H100 80GB HBM3")


# --- version types and the coverage rule -------------------------------------------------


def test_dotted_orders_numerically_and_keeps_spelling() -> None:
    assert Dotted.parse("580.159.04") > Dotted.parse("580.65.06")
    assert Dotted.parse("2.17") < Dotted.parse("2.28")
    assert str(Dotted.parse("560.35.05")) == "560.35.05"


def _list(text: str) -> tuple[BuildArch, ...]:
    return tuple(BuildArch.parse(a) for a in text.split(";"))


@pytest.mark.parametrize(
    ("gpu", "archs", "kind"),
    [
        ("sm_61", "5.0;6.0;7.0", "native"),     # cubin 6.0 runs on 6.1
        ("sm_89", "8.0;8.6;9.0", "native"),     # 8.6 runs on 8.9
        ("sm_120", "8.0;9.0", "none"),          # never across majors
        ("sm_121", "9.0;12.0+PTX", "native"),   # 12.0 cubin on 12.1
        ("sm_103", "9.0;12.0+PTX", "none"),     # 10.3 < 12.0: PTX only JITs forward
        ("sm_120", "9.0+PTX", "ptx"),           # PTX 9.0 JITs for 12.0
        ("sm_90", "9.0a", "native"),            # a-suffix matches exactly
        ("sm_100", "9.0a", "none"),             # ... and only exactly
        ("sm_60", "6.1", "none"),               # 6.1 cubin does not run on 6.0
    ],
)
def test_coverage_rules(gpu: str, archs: str, kind: str) -> None:
    assert coverage(Arch.parse(gpu), _list(archs)).kind == kind


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=12))
def test_arch_parse_garbage(text: str) -> None:
    try:
        Arch.parse(text)
    except BadInput:
        pass


# --- the --facts file through the CLI: keys named, values checked (#19, #27 of issue 13) ---


def _facts(tmp_path: Path, data: dict[str, object]) -> str:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(data))
    return str(path)



def test_unknown_key_in_facts_is_named(tmp_path: Path) -> None:
    """Defect #19 of the 2026-11 attack (issue 13)."""
    line = bad_input(run_clean("resolve", "--facts", _facts(tmp_path, {"driver": "550.54.14", "gpus": []})))
    assert "'driver'" in line and "driver_version" in line


def test_gpu_by_name_alone_gets_its_capability(tmp_path: Path) -> None:
    """Defect #19 of the 2026-11 attack (issue 13)."""
    path = _facts(tmp_path, {"driver_version": "570.124.06", "glibc": "2.39", "arch": "x86_64",
                             "pythons": [{"version": "3.12.3"}],
                             "gpus": [{"name": "NVIDIA GeForce RTX 4090"}]})
    proc = run_clean("resolve", "--facts", path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "sm unknown" not in proc.stdout and json.loads(proc.stdout)["variant"].startswith("cu")


def test_pyenv_installable_must_be_versions(tmp_path: Path) -> None:
    """Defect #19 of the 2026-11 attack (issue 13)."""
    path = _facts(tmp_path, {"pyenv": {"path": "/p", "installable": ["abc", "3.12.99999999999999999999"]}})
    assert "pyenv.installable" in bad_input(run_clean("resolve", "--facts", path))


def test_a_pyenv_object_with_a_typo_is_named_not_dropped(tmp_path: Path) -> None:
    """{"pyenv": {"root": ...}} used to be read as "no pyenv" (and its list never checked).
    Defect #19 of the 2026-11 attack (issue 13)."""
    path = _facts(tmp_path, {"pyenv": {"root": "/r", "installable": ["abc"]}})
    assert "unknown key 'root'" in bad_input(run_clean("resolve", "--facts", path))
    assert "'path'" in bad_input(run_clean("resolve", "--facts", _facts(tmp_path, {"pyenv": {}})))


def test_an_endless_driver_version_from_facts_is_bad_input(tmp_path: Path) -> None:
    """Defect #27 of the 2026-11 attack (issue 13)."""
    bad_input(run_clean("resolve", "--facts", _facts(tmp_path, {"driver_version": ".".join(["1"] * 2001)})))

