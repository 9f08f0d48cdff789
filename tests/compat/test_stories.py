"""Resolver tests as data: one file per host story in tests/data/stories/.

Each story has facts (or several [[hosts]]), a request, and the expected outcome,
with a `why` line naming the real failure it guards against.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from tests.conftest import DATA, make_facts
from torchfit.compat.plan import plan_to_json
from torchfit.compat.request import Request, parse_python_spec, parse_requirements, parse_spec
from torchfit.compat.resolver import resolve
from torchfit.compat.versions import Arch, coverage
from torchfit.errors import NoCompatibleSet

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

STORIES = sorted((DATA / "stories").glob("*.toml"))


def _facts(raw: dict[str, Any]) -> Any:
    """A story's host; "3.14.0t" in pythons is a free-threaded interpreter."""
    facts = _plain_facts(raw)
    ft = {v.rstrip("t") for v in raw.get("pythons", []) if v.endswith("t")}
    return replace(facts, pythons=tuple(replace(p, free_threaded=p.version in ft) for p in facts.pythons),
                   wsl=raw.get("wsl", False), l4t=raw.get("l4t"))


def _plain_facts(raw: dict[str, Any]) -> Any:
    return make_facts(
        driver=raw.get("driver") or None,
        gpus=raw.get("gpus", []),
        glibc=raw.get("glibc"),
        pythons=[v.rstrip("t") for v in raw.get("pythons", ["3.12.3"])],
        pyenv=raw.get("pyenv"),
        arch=raw.get("arch", "x86_64"),
        os_name=raw.get("os", "ubuntu:22.04"),
        name=raw.get("name", "this host"),
    )


def _request(raw: dict[str, Any]) -> Request:
    return Request(
        requirements=parse_requirements(raw.get("requirements", [])),
        python=parse_python_spec(raw["python"])[0] if "python" in raw else None,
        cuda=parse_spec(raw["cuda"], "--cuda") if "cuda" in raw else None,
        variant=raw.get("variant"),
        strict_driver=raw.get("strict_driver", False),
        free_threaded=parse_python_spec(raw["python"])[1] if "python" in raw else None,
    )


@pytest.mark.parametrize("path", STORIES, ids=[p.stem for p in STORIES])
def test_story(path: Path, matrix: Any) -> None:
    story = tomllib.loads(path.read_text())
    assert story.get("why"), f"{path.name} needs a why line"
    hosts = [_facts(h) for h in story["hosts"]] if "hosts" in story else [_facts(story["facts"])]
    request = _request(story.get("request", {}))
    exp = story["expect"]
    if exp.get("conflict"):
        with pytest.raises(NoCompatibleSet) as info:
            resolve(hosts, request, matrix)
        text = "\n".join(info.value.conflicts)
        assert info.value.conflicts[0].startswith(hosts[0].name), "host facts come first"
        if "conflict_contains" in exp:
            assert exp["conflict_contains"] in text, text
        if "conflict_not_contains" in exp:
            # The host line is the facts as given; the reasons after it must not say it.
            assert exp["conflict_not_contains"] not in "\n".join(info.value.conflicts[len(hosts):]), text
        if "hint_contains" in exp:
            assert any(exp["hint_contains"] in h for h in info.value.hints), info.value.hints
        if "hint_not_contains" in exp:
            assert not any(exp["hint_not_contains"] in h for h in info.value.hints), info.value.hints
        return
    plan = resolve(hosts, request, matrix)
    out = plan_to_json(plan)
    ctx = f"{story['why']}\n-> {out['torch']} {out['variant']} python {out['python']}"
    if "torch" in exp:
        assert SpecifierSet(exp["torch"]).contains(plan.torch), ctx
    if "variant" in exp:
        assert plan.variant == exp["variant"], ctx
    if "variant_in" in exp:
        assert plan.variant in exp["variant_in"], ctx
    if "variant_not" in exp:
        assert plan.variant not in exp["variant_not"], ctx
    if "variant_prefix" in exp:
        assert plan.variant.startswith(exp["variant_prefix"]), ctx
    if "index_prefix" in exp:
        assert plan.index_url.startswith(exp["index_prefix"]), ctx
    if "cuda" in exp:
        assert plan.cuda == exp["cuda"], ctx
    if "cuda_in" in exp:
        assert plan.cuda in exp["cuda_in"], ctx
    if "cuda_major" in exp:
        assert plan.cuda is not None and plan.cuda.split(".")[0] == exp["cuda_major"], ctx
    if "cudnn_not_prefix" in exp:
        assert plan.cudnn is not None and not plan.cudnn.startswith(exp["cudnn_not_prefix"] + "."), ctx
    if "python" in exp:
        assert plan.python == exp["python"], ctx
    if "python_version" in exp:
        assert plan.python_version == exp["python_version"], ctx
    if "free_threaded" in exp:
        assert plan.free_threaded == exp["free_threaded"], ctx
    if "python_source" in exp:
        assert plan.python_source == exp["python_source"], ctx
    if exp.get("torchvision_set"):
        assert plan.torchvision, ctx
    if "covers" in exp:
        build = next(b for b in matrix.builds if str(b.torch) == plan.torch and b.variant == plan.variant)
        archs = build.arch_for(hosts[0].arch or "x86_64")
        for cc in exp["covers"]:
            assert archs and coverage(Arch.parse(cc), archs).kind == "native", ctx
    for key, field in (("reason_contains", "reasons"), ("warning_contains", "warnings")):
        if key in exp:
            assert any(exp[key] in r for r in out[field]), f"{ctx}\n{out[field]}"
    if "no_warning_contains" in exp:
        assert not any(exp["no_warning_contains"] in w for w in plan.warnings), f"{ctx}\n{plan.warnings}"
    if "ruled_out_contains" in exp:
        assert any(exp["ruled_out_contains"] in r for r in plan.ruled_out), ctx
    if "explain_contains" in exp:
        assert any(exp["explain_contains"] in r for r in plan.ruled_out), f"{ctx}\n" + "\n".join(plan.ruled_out[:10])
    # Invariants every plan keeps, whatever the story.
    assert plan.python_version.startswith(plan.python)
    if plan.python_source == "installed":
        assert any(p.version == plan.python_version for p in hosts[0].pythons)
