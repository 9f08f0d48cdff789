"""lock.closure's judge, the one `install --lock` and `verify --lock` both use (issue 17:
they used to ignore different NCCL wheels, so one env could pass one and fail the other)."""

from __future__ import annotations

from torchfit.lock.closure import judge_closure

ENV = {"python_version": "3.11", "sys_platform": "linux", "platform_machine": "x86_64"}


def answer(nccl_version: str) -> dict[str, object]:
    return {"env": ENV, "dists": [
        ["torch", "2.8.0", ["nvidia-nccl-cu12==2.27.3; platform_system == 'Linux'", "filelock"], True],
        ["nvidia-nccl-cu12", nccl_version, [], True],
        ["filelock", "3.16.1", [], True],
    ]}


def test_an_nccl_wheel_other_than_torchs_pin_is_a_problem_unless_the_pin_overrides_it() -> None:
    assert judge_closure(answer("2.27.3"), nccl_override=False) == []
    problems = judge_closure(answer("2.28.3"), nccl_override=False)
    assert problems and "nvidia-nccl-cu12" in problems[0] and "2.28.3" in problems[0]
    assert judge_closure(answer("2.28.3"), nccl_override=True) == []  # install --nccl 2.28.3, on purpose


def test_a_missing_dependency_is_a_problem_either_way() -> None:
    data = answer("2.27.3")
    data["dists"] = [d for d in data["dists"] if d[0] != "filelock"]  # type: ignore[attr-defined]
    for override in (False, True):
        assert any("filelock" in p for p in judge_closure(data, nccl_override=override))
