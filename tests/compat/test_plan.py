"""compat/plan.py: the Plan keeps its Build, and its JSON (the --json contract) brings it back."""

from __future__ import annotations

from tests.conftest import make_facts
from torchfit.compat.plan import plan_from_json, plan_to_json
from torchfit.compat.request import Request
from torchfit.compat.resolver import resolve


def test_the_plan_keeps_its_build_and_json_brings_it_back(matrix) -> None:  # type: ignore[no-untyped-def]
    host = make_facts(driver="580.65.06", gpus=["NVIDIA H200=sm_90"])
    plan = resolve([host], Request(), matrix)
    assert plan.build is not None and str(plan.build.torch) == plan.torch
    data = plan_to_json(plan)
    assert "build" not in data  # not part of the --json contract
    again = plan_from_json(data, matrix)
    assert again.build == plan.build and again == plan
    assert plan_from_json(data).build is None
