"""A fleet's answer grows with its reasons, not its groups (issue 34, R6).

A fleet file of 2,000 groups that all differ (tests/support/fleets.py distinct_fleet_data:
the 12 GPU models of KINDS in turn, every group its own driver) resolved fast but printed a
line per group for every per-group note, warning and refusal (2,179 lines for a plan,
17,278 for a refusal). Each reason is now said once, naming its groups ("a, b, c and 164
more groups") and their drivers as a range. Run through the real CLI, offline (the torch
family alone is planned from the matrix).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.cli import run_clean
from tests.support.fleets import KINDS, distinct_fleet_data, node_facts
from torchfit.compat.facts import HostFacts

# The bound: the distinct reasons of these fleets are a few dozen (12 GPU models, a handful of
# rules); their groups are 2,000.
MAX_LINES = 60


def _host(name: str, driver: str) -> HostFacts:
    return replace(HostFacts(), name=name, driver_version=driver)


def test_lines_that_differ_only_in_their_hosts_name_and_driver_are_one_line_naming_them() -> None:
    # imported here, not at the top: the CLI tests below must run (and fail) on code without the module
    from torchfit.compat.hostlines import fold_host_lines

    hosts = [_host(f"g{i:02d}n[1-2]", f"535.{100 + i}.0{i}") for i in range(6)]
    lines = [(h, f"{h.name}: needs driver >= 580 (floor), {h.name} has {h.driver_version}") for h in hosts]
    assert fold_host_lines(lines) == [
        "g00n[1-2], g01n[1-2], g02n[1-2] and 3 more groups: needs driver >= 580 (floor), each has "
        "535.100.00\u2013535.105.05"]
    # the name followed by "has": several groups "have"
    lines = [(h, f"cu130: needs driver >= 580, {h.name} has {h.driver_version}") for h in hosts[:2]]
    assert fold_host_lines(lines) == ["cu130: needs driver >= 580, g00n[1-2], g01n[1-2] have 535.100.00\u2013535.101.01"]


def test_a_reason_of_one_host_keeps_its_line_and_equal_lines_are_said_once() -> None:
    from torchfit.compat.hostlines import fold_host_lines

    a, b = _host("a[1-2]", "580.65.06"), _host("b[1-2]", "535.183.01")
    lines = [(a, "a[1-2]: sm_90 native"), (b, "b[1-2]: sm_80 native"), (a, "PTX JIT"), (b, "PTX JIT")]
    assert fold_host_lines(lines) == ["a[1-2]: sm_90 native", "b[1-2]: sm_80 native", "PTX JIT"]
    # one driver for all: said as it is; `many` rewords a line about several groups
    c = _host("c[1-2]", "580.65.06")
    many = fold_host_lines([(a, "a[1-2]: this group alone, driver 580.65.06"),
                            (c, "c[1-2]: this group alone, driver 580.65.06")],
                           many={"this group alone": "each of these groups alone"})
    assert many == ["a[1-2], c[1-2]: each of these groups alone, driver 580.65.06"]


def test_group_names_are_all_listed_up_to_four_then_counted() -> None:
    from torchfit.compat.hostlines import format_host_names

    assert format_host_names(["a", "b", "c", "d"]) == "a, b, c, d"
    assert format_host_names(["a", "b", "c", "d", "e", "a"]) == "a, b, c and 2 more groups"


def _groups_on(n: int, branches: tuple[str, ...]) -> list[int]:
    """The groups of distinct_fleet_data(n) whose driver is of one of `branches` ("535")."""
    return [i for i in range(n) if KINDS[i % len(KINDS)][4].split(".")[0] in branches]


def test_a_plan_for_2000_distinct_groups_says_each_reason_once_naming_its_groups(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet-2000.json"
    fleet.write_text(json.dumps(distinct_fleet_data(2000)))
    proc = run_clean("resolve", "--offline", "--facts", str(fleet), "torch", timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) < MAX_LINES, (len(lines), proc.stdout[:3000])
    assert lines[0] == "torchfit resolve: the stack for g00000n[1-2], g00001n[1-2], g00002n[1-2] and 1997 more groups"
    # the A100 groups (every 12th from g00001, 167 of them) rule out cu130 once, with their drivers' range
    a100 = [ln for ln in lines if "NVIDIA A100-SXM4-80GB" in ln and "rules out cu130" in ln]
    assert a100 == ["\u2022 g00001n[1-2], g00013n[1-2], g00025n[1-2] and 164 more groups (8\u00d7 NVIDIA "
                    "A100-SXM4-80GB (sm_80), driver 535.100.01\u2013535.266.93) rules out cu130, cu132 (torch "
                    "2.15.0): needs driver >= 580 (CUDA 13.x minor-version-compatibility floor), each has "
                    "535.100.01\u2013535.266.93"], a100
    # each GPU model that rules out cu130 says so once: 12 models, TITAN V by its sm_70, the 580s not at all
    ruling = [ln for ln in lines if "rules out cu130" in ln]
    assert len(ruling) == len({ln.split(" (", 1)[1].split(", driver")[0] for ln in ruling}) == 8, ruling
    # the minor-version-compatibility warning: once, for every group on a 535 or 550 driver
    mvc = [ln for ln in lines if "only through CUDA minor-version compatibility" in ln]
    behind = _groups_on(2000, ("535", "550"))
    assert len(mvc) == 1 and f"and {len(behind) - 3} more groups: cu126 runs on driver 535.100.01" in mvc[0], mvc
    # the variant's and CUDA's why: per GPU architecture and one for every driver, not per group
    cuda = next(ln for ln in lines if ln.lstrip().startswith("CUDA "))
    assert "and 1997 more groups: driver 535.100.01\u2013580.266.99 >= 525.60.13" in cuda, cuda
    assert cuda.count("groups") == 1, cuda
    variant = next(ln for ln in lines if ln.lstrip().startswith("variant "))
    assert variant.count("more groups") == len({k[2] for k in KINDS}), variant  # one per compute capability


@pytest.mark.slow  # ~20 s: the refusal's host checks and hints for 2,000 groups (before and after R6)
def test_a_refusal_for_2000_groups_names_the_groups_that_rule_out_every_build_once(tmp_path: Path) -> None:
    # 1,900 distinct groups that could share a build, and 100 T4 groups on driver 470 (each its own
    # 470.N.02) under torch>=2.8: every CUDA build of 2.8 on needs driver >= 525.60.13
    from torchfit.fleet.model import Fleet, Group, fleet_from_json, fleet_to_json

    base = fleet_from_json(distinct_fleet_data(1900), "distinct.json")
    t4 = tuple(Group((f"t4x{i:03d}-01", f"t4x{i:03d}-02"), "", node_facts("Tesla T4", "7.5", 4, f"470.{i}.02"))
               for i in range(100))
    fleet = tmp_path / "fleet-2000-t4.json"
    fleet.write_text(json.dumps(fleet_to_json(Fleet(base.groups + t4, (), "test", ""))))
    proc = run_clean("resolve", "--offline", "--facts", str(fleet), "torch>=2.8", timeout=240)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.splitlines()  # --json's conflicts and hints are these lines' own strings
    assert len(lines) < MAX_LINES, (len(lines), proc.stderr[:3000])
    conflicts = [re.sub(r"^(torchfit: error: no compatible set: |  - )", "", ln) for ln in lines
                 if not ln.startswith("  hint: ")]
    hints = [ln.removeprefix("  hint: ") for ln in lines if ln.startswith("  hint: ")]
    assert len(conflicts) + len(hints) < MAX_LINES, conflicts
    head = conflicts[0]
    assert head.startswith("t4x000-[01-02], t4x001-[01-02], t4x002-[01-02] and 97 more groups: "
                           "driver 470.0.02\u2013470.99.02, 4\u00d7 Tesla T4 (sm_75)"), head
    assert "each of these groups alone rules out every build within torch>=2.8" in head, head
    assert "needs driver >= 525.60.13" in head, head
    assert hints[0].startswith("upgrade the NVIDIA driver on t4x000-[01-02], t4x001-[01-02], t4x002-[01-02] "
                               "and 97 more groups to >= 525.60.13"), hints[:1]
    # every GPU model's groups are said once, with their facts: 12 lines, not 1,900
    described = [c for c in conflicts[1:] if re.match(r"g\d{5}n\[1-2\], .* more groups: driver ", c)]
    assert len(described) == len(KINDS), described
    # a GPU reason once, for the groups it concerns (the sm_70 ones: TITAN V and V100)
    sm70 = [c for c in conflicts if "cu130 builds of torch 2.11\u20132.15 have no sm_70 code" in c]
    assert len(sm70) == 1 and sm70[0].startswith("g00002n[1-2], g00005n[1-2], g00014n[1-2] and "), sm70
