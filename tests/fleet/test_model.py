"""The fleet file (fleet/model.py) and `resolve --facts FLEET.json`, without Slurm: a
fleet file is a value, resolved anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import bad_input, run_cli
from tests.support.fleets import fleet_file, node_facts
from torchfit.errors import BadInput
from torchfit.fleet.model import exclude_nodes, fleet_from_json, fleet_to_json, group_nodes


def test_nodes_group_by_signature_in_hostlist_notation() -> None:
    facts = {f"gpu{i:02d}": node_facts("NVIDIA H100 80GB HBM3", "9.0", 8, "580.65.06") for i in range(1, 7)}
    facts["gpu02"] = node_facts("NVIDIA A100-SXM4-80GB", "8.0", 8, "535.183.01")
    facts["gpu07"] = {"driver_version": 5}  # not facts: kept, with why
    fleet = group_nodes(facts)
    assert [(g.hostlist, g.signature.split(",")[0]) for g in fleet.groups] == [
        ("gpu[01,03-06]", "8\u00d7 NVIDIA H100 80GB HBM3 (sm_90)"),
        ("gpu02", "8\u00d7 NVIDIA A100-SXM4-80GB (sm_80)"),
    ]
    assert fleet.missing[0].hostlist == "gpu07" and "not valid" in fleet.missing[0].why
    again = fleet_from_json(json.loads(json.dumps(fleet_to_json(fleet))), "f.json")
    assert again.groups == fleet.groups and again.missing == fleet.missing


def test_exclude_names_only_nodes_the_fleet_has() -> None:
    fleet = group_nodes({f"n{i}": node_facts("TITAN V", "7.0", 1, "580.159.04") for i in range(1, 5)})
    assert exclude_nodes(fleet, ["n[2-3]"]).groups[0].hostlist == "n[1,4]"
    with pytest.raises(BadInput, match="n9: not in the fleet"):
        exclude_nodes(fleet, ["n9"])
    with pytest.raises(BadInput, match="leaves no node"):
        exclude_nodes(fleet, ["n[1-4]"])


@pytest.mark.parametrize("exclude", ["gpu[\u00b2]", "n[0-" + "9" * 5000 + "]"])
def test_exclude_with_a_number_slurm_cannot_read_is_one_line(tmp_path: Path, exclude: str) -> None:
    """Issue 34 H1: `--exclude 'gpu[\u00b2]'` and a 5,000-digit bound were internal errors."""
    path = fleet_file(tmp_path, nodes=4, groups=1)
    line = bad_input(run_cli("resolve", "--facts", str(path), "--exclude", exclude))
    assert "ASCII digits" in line


@pytest.mark.parametrize("data", [
    {"torchfit_fleet": 2, "groups": []},
    {"torchfit_fleet": 1, "groups": [{"nodes": "n[1-", "facts": {}}]},
    {"torchfit_fleet": 1, "groups": [{"nodes": "n1", "facts": {}}, {"nodes": "n[1-2]", "facts": {}}]},
    {"torchfit_fleet": 1, "groups": [], "extra": 1},
    # a group of no nodes was resolved (issue 25, "Fleets")
    {"torchfit_fleet": 1, "groups": [{"nodes": "n1", "facts": node_facts("NVIDIA H100 80GB HBM3", "9.0", 8,
                                                                         "580.65.06")},
                                     {"nodes": "", "facts": node_facts("NVIDIA H100 80GB HBM3", "9.0", 8,
                                                                       "580.65.06")}]},
])
def test_malformed_fleet_files_are_bad_input(tmp_path: Path, data: dict) -> None:
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(data))
    res = run_cli("resolve", "--facts", str(path))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr


def test_resolve_names_the_binding_groups(tmp_path: Path) -> None:
    path = fleet_file(tmp_path, nodes=40, groups=4)
    res = run_cli("resolve", "--facts", str(path), "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    # One reason line per binding group, never per node.
    binding = [r for r in plan["reasons"] if " rules out " in r]
    assert binding and all(r.split(" ")[0].count("[") <= 1 for r in binding)
    assert any(r.startswith("titan[") and "sm_70" in r for r in binding), binding
    assert not any("titan01" in r for r in plan["reasons"])


def test_unknown_nodes_are_refused_by_name_and_can_be_excluded(tmp_path: Path) -> None:
    path = fleet_file(tmp_path, nodes=20, groups=3, missing={"h100-[03-04]": "no answer within 60 s"})
    res = run_cli("resolve", "--facts", str(path))
    assert res.returncode == 1 and "h100-[03-04]: no facts in the fleet file (no answer within 60 s)" in res.stderr
    assert "--exclude h100-[03-04]" in res.stderr
    res = run_cli("resolve", "--facts", str(path), "--exclude", "h100-[03-04]", "--each-group", "--json")
    assert res.returncode == 0, res.stderr
    groups = json.loads(res.stdout)["groups"]
    assert [g["nodes"] for g in groups][:1] == ["h100-[01-02,05-07]"] and all(g["ok"] for g in groups)


def test_exclude_without_a_fleet_file_is_bad_input(tmp_path: Path) -> None:
    res = run_cli("resolve", "--assume", "gpu=sm_90", "--assume", "driver=580.65.06", "--exclude", "n1")
    assert res.returncode == 2 and "--exclude needs a fleet file" in res.stderr


def test_export_writes_the_fleets_stack(tmp_path: Path) -> None:
    path = fleet_file(tmp_path, nodes=30, groups=3)
    res = run_cli("export", "--facts", str(path), "--format", "requirements")
    assert res.returncode == 0, res.stderr
    assert "for h100-[01-10], a100-[01-10], titan[01-10]" in res.stdout and "torch==" in res.stdout


@pytest.mark.parametrize("nodes", ["", " ", ",", ", ,"])
def test_a_group_or_missing_entry_naming_no_node_is_bad_input(tmp_path: Path, nodes: str) -> None:
    facts = node_facts("NVIDIA H100 80GB HBM3", "9.0", 8, "580.65.06")
    for data in ({"torchfit_fleet": 1, "groups": [{"nodes": "n1", "facts": facts}, {"nodes": nodes, "facts": facts}]},
                 {"torchfit_fleet": 1, "groups": [{"nodes": "n1", "facts": facts}],
                  "missing": [{"nodes": nodes, "why": "drained"}]}):
        path = tmp_path / "fleet.json"
        path.write_text(json.dumps(data))
        res = run_cli("resolve", "--facts", str(path))
        assert res.returncode == 2, (nodes, res.stdout, res.stderr)
        assert "'nodes' names no node" in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_distinct_groups_resolve_in_about_linear_time() -> None:
    """Issue 25: a resolvelib identifier per host fact and group made a fleet resolve grow
    about cubically (200 groups 2.8 s, 2,000 past 120 s). 600 groups that all differ now
    take a fraction of a second of CPU (bench/bench_fleet.py --distinct 2000: the figure)."""
    import time

    from tests.support.fleets import distinct_fleet_data
    from torchfit.cache import load_matrix
    from torchfit.compat.request import Request
    from torchfit.compat.resolver import resolve
    from torchfit.fleet.model import fleet_hosts

    matrix = load_matrix()
    hosts = fleet_hosts(fleet_from_json(distinct_fleet_data(600), "distinct.json"), "distinct.json")
    start = time.process_time()
    plan = resolve(hosts, Request(), matrix)
    took = time.process_time() - start
    assert len(plan.hosts) == 600 and plan.variant.startswith("cu")
    assert took < 3.0, f"600 distinct groups took {took:.1f} s of CPU"
