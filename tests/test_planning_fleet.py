"""A fleet's project is solved for every group's platform (issue 33, class 8).

A fleet file of an x86_64 group (H100) and an aarch64 group (GH200), planned with a project
through `torchfit resolve --facts FLEET.json`: real uv, offline, against a find-links directory
and a torch index built here (tiny wheels, real file names). decord 0.6.0's files are PyPI's
(tests/data/projects/pypi/decord/files-0.6.0.json: Linux x86_64, macOS x86_64 and Windows
wheels, no sdist): a GH200 group cannot install it, whichever group the fleet file lists first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.fleets import node_facts
from tests.support.wheels import make_wheel, write_index

DECORD = Path(__file__).resolve().parent / "data" / "projects" / "pypi" / "decord" / "files-0.6.0.json"
H100 = (("h100-01", "h100-02"), node_facts("NVIDIA H100 80GB HBM3", "9.0", 8, "580.65.06", "2.35"))
GH200 = (("gh200-01", "gh200-02"), node_facts("NVIDIA GH200 480GB", "9.0", 1, "580.65.06", "2.35", "aarch64"))
T4_470 = (("t4-01", "t4-02"), node_facts("Tesla T4", "7.5", 4, "470.256.02", "2.35"))


def fleet(tmp: Path, *groups: tuple[tuple[str, ...], dict[str, Any]]) -> Path:
    from torchfit.fleet.model import Fleet, Group, fleet_to_json

    path = tmp / ("fleet-" + "-".join(names[0].split("-")[0] for names, _ in groups) + ".json")
    data = fleet_to_json(Fleet(tuple(Group(names, "", facts) for names, facts in groups), (), "test", ""))
    path.write_text(json.dumps(data, indent=1))
    return path


def sources(tmp: Path) -> tuple[Path, Path]:
    """A torch index with torch 2.10.0 cu130 for both architectures (cp312, as the fleet's
    Python 3.12.3), and a find-links directory with decord 0.6.0's Linux wheel, PyPI's name."""
    torch = [make_wheel(tmp / "wheels", "torch", "2.10.0+cu130", tag=f"cp312-cp312-manylinux_2_28_{arch}")
             for arch in ("x86_64", "aarch64")]
    index = write_index(tmp / "cu130", torch)
    files = json.loads(DECORD.read_text("utf-8"))["files"]
    linux = [f["filename"] for f in files if "manylinux" in f["filename"]]
    assert linux == ["decord-0.6.0-py3-none-manylinux2010_x86_64.whl"], linux  # PyPI's one Linux file
    links = tmp / "links"
    make_wheel(links, "decord", "0.6.0", tag=linux[0].removeprefix("decord-0.6.0-").removesuffix(".whl"))
    return index, links


def test_a_fleet_project_is_refused_for_the_group_whose_platform_has_no_wheel_in_either_order(tmp_path: Path) -> None:
    index, links = sources(tmp_path)
    for groups in ((H100, GH200), (GH200, H100)):
        facts = fleet(tmp_path, *groups)
        proc = run_cli("resolve", "--json", "--offline", "--facts", str(facts), "decord==0.6.0",
                       "--find-links", str(links), "--torch-index-url", index.as_uri(), timeout=240)
        assert proc.returncode == 1, (groups[0][0], proc.stdout, proc.stderr)
        err = json.loads(proc.stdout)
        head = err["conflicts"][0]
        assert head.startswith("gh200-[01-02] (aarch64"), (groups[0][0], err["conflicts"])
        assert "decord" in head, head
    # each group alone: the H100 group resolves; the GH200 group is refused on decord
    alone = fleet(tmp_path, H100)
    out = run_cli("resolve", "--json", "--offline", "--facts", str(alone), "decord==0.6.0", "--find-links",
                  str(links), "--torch-index-url", index.as_uri(), timeout=240)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["resolved"]["decord"] == "0.6.0"


def test_a_fleet_project_resolves_for_both_platforms_with_one_set(tmp_path: Path) -> None:
    # decord 0.5.2 has an aarch64 wheel too: unpinned, the fleet's one set is 0.5.2 (not x86_64's 0.6.0)
    index, links = sources(tmp_path)
    make_wheel(links, "decord", "0.5.2", tag="py3-none-manylinux2010_x86_64")
    make_wheel(links, "decord", "0.5.2", tag="py3-none-manylinux2014_aarch64")
    proc = run_cli("resolve", "--json", "--offline", "--facts", str(fleet(tmp_path, H100, GH200)), "decord",
                   "--find-links", str(links), "--torch-index-url", index.as_uri(), timeout=240)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = json.loads(proc.stdout)
    assert out["resolved"]["decord"] == "0.5.2", out["resolved"]
    assert any("aarch64-manylinux_2_35" in r and "x86_64-manylinux_2_35" in r for r in out["reasons"]), out["reasons"]


def test_a_fleet_refusal_names_the_group_whose_driver_rules_out_every_build(tmp_path: Path) -> None:
    # T4s on driver 470 under torch>=2.8: every CUDA build of 2.8 on needs driver >= 525.60.13
    # (CUDA 12.x's minor-version floor); the H100 group runs them. Listed first or second,
    # the T4 group and its driver lead the refusal.
    for groups in ((H100, T4_470), (T4_470, H100)):
        proc = run_cli("resolve", "--json", "--offline", "--facts", str(fleet(tmp_path, *groups)), "torch>=2.8",
                       timeout=120)
        assert proc.returncode == 1, proc.stdout
        err = json.loads(proc.stdout)
        conflicts = err["conflicts"]
        head = conflicts[0]
        assert head.startswith("t4-[01-02]:") and "470.256.02" in head, conflicts[:3]
        assert "rules out every build" in head and "needs driver >= 525.60.13" in head, head
        assert err["hints"][0].startswith("upgrade the NVIDIA driver on t4-[01-02] to >= "), err["hints"][:1]


def test_a_fleet_needs_torch_served_for_every_groups_architecture(tmp_path: Path) -> None:
    # The torch source has torch 2.10.0 cu130 for x86_64 only: the GH200 group could install no
    # torch from it, so the fleet (either order; the family alone or with a project) is refused, naming it.
    wheel = make_wheel(tmp_path / "wheels", "torch", "2.10.0+cu130", tag="cp312-cp312-manylinux_2_28_x86_64")
    index = write_index(tmp_path / "cu130", [wheel])
    links = tmp_path / "links"
    make_wheel(links, "six", "1.16.0")
    for groups, project in (((H100, GH200), ()), ((GH200, H100), ("six", "--find-links", str(links)))):
        proc = run_cli("resolve", "--json", "--offline", "--facts", str(fleet(tmp_path, *groups)), "torch", *project,
                       "--torch-index-url", index.as_uri(), timeout=240)
        assert proc.returncode == 1, proc.stdout
        err = json.loads(proc.stdout)
        assert err["conflicts"][0].startswith("gh200-[01-02] (aarch64"), err["conflicts"][:2]
        assert "no torch wheel for aarch64" in err["conflicts"][0], err["conflicts"][0]
