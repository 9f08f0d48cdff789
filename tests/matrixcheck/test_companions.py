"""The companions probe (matrixcheck/companions.py): its pure parsers, the recorded PyPI
METADATA of real releases (tests/data/projects/pypi/) against data/companions.toml, and a
probe of PyPI's recorded pages served by `responses`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from torchfit.compat.companions import load_companions
from torchfit.index.client import IndexClient
from torchfit.matrixcheck.companions import (
    measure_package,
    python_tags,
    torch_requirement,
    variant_of_build,
)

PYPI_DATA = Path(__file__).resolve().parents[1] / "data" / "projects" / "pypi"
RECORDED = sorted(PYPI_DATA.glob("*/*.metadata"))


def _version_of(path: Path) -> str:
    return path.name.split("-")[1]


def test_the_recordings_are_there() -> None:
    names = {p.parent.name for p in RECORDED}
    assert names == {"xformers", "vllm", "torchao", "torchcodec", "trl", "sglang", "deepspeed", "torch"}
    readme = (PYPI_DATA / "README.md").read_text()
    for project in names:
        if project == "torch":  # torch's own METADATA (issue 33, class 9b): each file named with its hashes there
            assert all(p.name.removesuffix(".metadata") in readme for p in (PYPI_DATA / project).glob("*.metadata"))
            continue
        page = json.loads((PYPI_DATA / project / "index.json").read_text())
        assert page["meta"]["api-version"].startswith("1.")
        listed = {f["filename"] for f in page["files"]}
        assert {p.name.removesuffix(".metadata") for p in (PYPI_DATA / project).glob("*.metadata")} <= listed
        if project == "deepspeed":  # its whole page is the fact recorded (its file list: README)
            continue
        for f in page["files"]:
            assert (PYPI_DATA / project / (f["filename"] + ".metadata")).is_file()


# Only the companions.toml packages' recordings: the others (trl, sglang, deepspeed, torch) are the
# resolver tests' and have no companions.toml row to agree with (a case per file, never a skip)
COMPANION_RECORDINGS = [p for p in RECORDED if load_companions().get(p.parent.name) is not None]


@pytest.mark.parametrize("path", COMPANION_RECORDINGS, ids=lambda p: p.name)
def test_recorded_metadata_agrees_with_companions_toml(path: Path) -> None:
    """Each recorded METADATA states the torch that companions.toml records as measured for it."""
    name, version = path.parent.name, _version_of(path)
    text = path.read_text("utf-8")
    rel = next(r for r in load_companions().get(name).releases if str(r.version) == version)  # type: ignore[union-attr]
    req = torch_requirement(text)
    if rel.evidence.get("torch") == "measured":
        assert rel.torch == SpecifierSet(req), rel.origin
    else:
        assert req == "" or name == "torchao"  # torchao 0.3.0 pins; its row is older than the record


def test_torch_requirement_reads_the_linux_pin_only() -> None:
    meta = ("Metadata-Version: 2.1\nName: x\nVersion: 1\n"
            "Requires-Dist: torch==2.8.0; platform_system == 'Linux'\n"
            "Requires-Dist: torch==2.7.0; platform_system == 'Windows'\n"
            "Requires-Dist: torch; extra == 'dev'\n\n")
    assert torch_requirement(meta) == "==2.8.0"
    assert torch_requirement("Metadata-Version: 2.1\nName: x\nVersion: 1\n\n") == ""
    assert torch_requirement("Requires-Dist: torch (==2.3.1)\n\n") == "==2.3.1"


def test_python_tags_of_linux_x86_64_wheels() -> None:
    names = ["xformers-0.0.30-cp310-cp310-manylinux_2_28_x86_64.whl",
             "xformers-0.0.30-cp39-cp39-manylinux_2_28_x86_64.whl",
             "xformers-0.0.30-cp312-cp312-win_amd64.whl",
             "vllm-0.10.2-cp38-abi3-manylinux1_x86_64.whl",
             "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl",
             "garbage.whl", "x-1.0.tar.gz"]
    assert python_tags(names) == ["cp38-abi3", "cp39", "cp310", "py3"]


def test_variant_of_build_records() -> None:
    xf = '{"version": {"cuda": 1208, "torch": "2.8.0+cu128", "python": "3.9.23"}, "env": {}}'
    assert variant_of_build("xformers", xf) == ("2.8.0+cu128", "cu128")
    trt = '__version__ = "2.8.0"\n__cuda_version__ = "12.8"\n__tensorrt_version__ = "10.12.0"\n'
    assert variant_of_build("torch-tensorrt", trt) == ("cuda 12.8", "cu128")
    assert variant_of_build("xformers", "not json") == (None, None)
    assert variant_of_build("vllm", trt) == (None, None)


def test_measure_package_from_recorded_pypi_pages(rsps) -> None:  # type: ignore[no-untyped-def]
    """PyPI's recorded page and METADATA files: each release measured with the torch it pins."""
    for project in ("xformers", "vllm"):
        page = (PYPI_DATA / project / "index.json").read_text()
        rsps.add("GET", f"https://pypi.org/simple/{project}/", body=page,  # type: ignore[attr-defined]
                 content_type="application/vnd.pypi.simple.v1+json")
        for f in json.loads(page)["files"]:
            rsps.add("GET", f["url"] + ".metadata",  # type: ignore[attr-defined]
                     body=(PYPI_DATA / project / (f["filename"] + ".metadata")).read_bytes())
    client = IndexClient()
    xf = measure_package(client, "xformers")
    assert [(m.version, m.torch, m.metadata_via) for m in xf] == [
        ("0.0.35", ">=2.10", "pep658"), ("0.0.32.post2", "==2.8.0", "pep658"),
        ("0.0.29.post3", "==2.6.0", "pep658")]
    assert xf[0].python == ["py39"] and xf[1].python == ["cp39-abi3"]
    assert xf[1].requires_python == ">=3.9"
    assert xf[1].pypi_variant is None and xf[1].notes  # the wheel itself is not served here: said so
    vllm = measure_package(client, "vllm", since="2025-09-01")
    assert [(m.version, m.torch) for m in vllm] == [
        ("0.33.0", "==2.14.0"), ("0.22.1", "==2.11.0"), ("0.22.0", "==2.11.0"), ("0.13.0", "==2.9.0")]
    assert Version(vllm[0].version) > Version("0.10.1.1")
