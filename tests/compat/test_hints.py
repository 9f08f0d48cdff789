"""Hints that work: every hint printed for a refused host, applied, turns the refusal into a plan.

The hosts are the refused stories of tests/data/stories/ plus a few more refusals
users meet. Each hint is applied here from what it says it changes (the `--assume`
items, the request parts it drops, the `--variant` it asks for, the GPUs each
environment keeps), rebuilt from scratch, not through the resolver's own helper.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.compat.test_stories import STORIES, _facts, _request, tomllib
from tests.conftest import make_facts
from torchfit.compat.facts import apply_assumptions
from torchfit.compat.gpunames import load_gpu_names
from torchfit.compat.request import Request, parse_requirements, parse_spec
from torchfit.compat.resolver import resolve
from torchfit.errors import NoCompatibleSet

REFUSED_STORIES = [p for p in STORIES if tomllib.loads(p.read_text())["expect"].get("conflict")]

MORE = {
    "old-driver-cu130-pinned": ([make_facts(driver="535.183.01", gpus=["sm_90"])], Request(variant="cu130")),
    "centos7-torch-2.15": ([make_facts(glibc=(2, 17), gpus=["sm_80"])],
                           Request(requirements=parse_requirements(["torch==2.15.0"]))),
    "python-3.8-torch-2.15": ([make_facts(gpus=["sm_90"], pythons=["3.8.18"])],
                              Request(requirements=parse_requirements(["torch>=2.15"]))),
    "python-flag-excludes": ([make_facts(gpus=["sm_90"], pythons=["3.12.3"])],
                             Request(python=parse_spec("3.9", "--python"),
                                     requirements=parse_requirements(["torch>=2.12"]))),
    "kepler-pinned-new": ([make_facts(driver="470.256.02", gpus=["Tesla K80=sm_37"])],
                          Request(requirements=parse_requirements(["torch>=2.6"]))),
    "mixed-v100-rtx5090": ([make_facts(gpus=["Tesla V100=sm_70", "NVIDIA GeForce RTX 5090=sm_120"])],
                           Request(requirements=parse_requirements(["torch<2.8"]))),
}


def _refused() -> list[tuple[str, list[Any], Request]]:
    out = []
    for path in REFUSED_STORIES:
        story = tomllib.loads(Path(path).read_text())
        hosts = [_facts(h) for h in story["hosts"]] if "hosts" in story else [_facts(story["facts"])]
        out.append((path.stem, hosts, _request(story.get("request", {}))))
    out += [(name, hosts, req) for name, (hosts, req) in MORE.items()]
    return out


CASES = _refused()


def _apply(remedy: Any, hosts: list[Any], request: Request) -> list[tuple[list[Any], Request]]:
    """The hint's change, rebuilt from its parts as a user would type it."""
    names = load_gpu_names()
    hosts = [apply_assumptions(h, list(remedy.assume), names) for h in hosts]
    reqs = list(request.requirements)
    changes: dict[str, Any] = {}
    for part in remedy.drop:
        if part == "torch":
            reqs = [r for r in reqs if r.name != "torch"]
        elif part == "companions":
            reqs = [r for r in reqs if r.name == "torch"]
        elif part == "strict_driver":
            changes["strict_driver"] = False
        else:
            changes[part] = None
    if remedy.variant:
        changes["variant"] = remedy.variant
    request = replace(request, requirements=tuple(reqs), **changes)
    if not remedy.envs:
        return [(hosts, request)]
    return [([replace(hosts[0], gpus=tuple(g for g in hosts[0].gpus if g.index in env))], request)
            for env in remedy.envs]


@pytest.mark.parametrize("name,hosts,request_", CASES, ids=[c[0] for c in CASES])
def test_every_hint_opens_a_plan(name: str, hosts: list[Any], request_: Request, matrix: Any) -> None:
    with pytest.raises(NoCompatibleSet) as info:
        resolve(hosts, request_, matrix)
    exc = info.value
    assert exc.hints == [r.text for r in exc.remedies], "every hint printed has its change"
    for hint, remedy in zip(exc.hints, exc.remedies):
        for item in remedy.assume:
            assert item.split("=", 1)[1] in hint, f"{hint!r} does not say {item}"
        if remedy.variant:
            assert f"--variant {remedy.variant}" in hint, hint
        if remedy.envs:
            assert "CUDA_VISIBLE_DEVICES=" in hint, hint
        for env_hosts, env_request in _apply(remedy, hosts, request_):
            plan = resolve(env_hosts, env_request, matrix)  # raises if the hint does not work
            assert plan.torch, hint


def test_the_mixed_box_is_told_to_split(matrix: Any) -> None:
    hosts, request = MORE["mixed-v100-rtx5090"]
    with pytest.raises(NoCompatibleSet) as info:
        resolve(hosts, request, matrix)
    assert any("CUDA_VISIBLE_DEVICES=0" in h and "CUDA_VISIBLE_DEVICES=1" in h for h in info.value.hints)
