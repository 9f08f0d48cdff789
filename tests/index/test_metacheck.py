"""A PEP 658 `.metadata` that disagrees with its wheel is refused by the plan (issue 34, R3).

The install side (tests/installer/test_project_install.py, the pep658 test) refuses after
installing; here `resolve` itself refuses, before it promises the set, where the wheel is a
local file: liar 1.0's wheel says torch==2.13.0, the `.metadata` beside it says
torch==2.12.0. Real uv, offline, a file:// index and a find-links directory built here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.cli import run_clean
from tests.support.wheels import make_wheel, write_index, write_index_with_metadata

LIE = b"Metadata-Version: 2.1\nName: liar\nVersion: 1.0\nRequires-Dist: torch==2.12.0\n\n"


def test_the_fields_a_resolution_reads_are_compared_normalized() -> None:
    from torchfit.index.metacheck import compare_metadata

    wheel = "Metadata-Version: 2.1\nName: Liar\nVersion: 1.0\nRequires-Dist: torch==2.13.0\nRequires-Python: >=3.9\n"
    same = "Metadata-Version: 2.1\nName: liar\nVersion: 1.0.0\nRequires-Dist: torch ==2.13.0\nRequires-Python: >= 3.9\n"
    assert compare_metadata(wheel, same) == []
    assert compare_metadata(wheel, LIE.decode()) == [
        "Requires-Dist: the wheel says torch==2.13.0, the .metadata says torch==2.12.0",
        "Requires-Python: the wheel says >=3.9, the .metadata says nothing"]


def test_a_local_wheel_whose_pep658_metadata_disagrees_is_refused_by_the_plan_naming_the_file(tmp_path: Path) -> None:
    torch = make_wheel(tmp_path / "wheels", "torch", "2.13.0+cpu", tag="cp312-cp312-manylinux_2_28_x86_64")
    torch_index = write_index(tmp_path / "cpu", [torch]).as_uri()
    wheel = make_wheel(tmp_path / "w", "liar", "1.0", ["torch==2.13.0"])
    index = write_index_with_metadata(tmp_path / "idx", wheel, LIE)
    links = tmp_path / "links"
    links.mkdir()
    shutil.copy(wheel, links / wheel.name)
    (links / (wheel.name + ".metadata")).write_bytes(LIE)
    common = ("resolve", "liar", "torch==2.13.0", "--variant", "cpu", "--python", "3.12", "--offline",
              "--torch-index-url", torch_index, "--json")
    for where in (("--index-url", index.as_uri()), ("--find-links", str(links))):
        proc = run_clean(*common, *where, timeout=240)
        assert proc.returncode == 1, (where, proc.stdout[-2000:], proc.stderr[-2000:])
        err = json.loads(proc.stdout)
        assert err["reference"] == "metadata-mismatch", err
        line = err["error"]
        assert "\n" not in line and line.endswith(wheel.name + ": the index's metadata for it (PEP 658 "
                                                  f"{wheel.name}.metadata) disagrees with the wheel's own METADATA, "
                                                  "so the plan would promise what the wheel does not install: "
                                                  "Requires-Dist: the wheel says torch==2.13.0, the .metadata says "
                                                  "torch==2.12.0"), line
    # the same wheel without the lying file: planned
    (links / (wheel.name + ".metadata")).unlink()
    proc = run_clean(*common, "--find-links", str(links), timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["resolved"]["liar"] == "1.0"
