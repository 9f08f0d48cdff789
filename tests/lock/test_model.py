"""lock/model.py: the PEP 751 model's accessors read [tool.torchfit] (plan, NCCL pin, request, torch
index, the expected versions, kept as text)."""

from __future__ import annotations

from torchfit.lock.model import Lock
from torchfit.lock.tool import ToolTable


def test_accessors_read_tool_torchfit() -> None:
    lock = Lock(packages=(), tool=ToolTable.from_toml({
        "plan": {"torch": "2.13.0"}, "nccl": {"mechanism": "none"}, "request": {"strict-driver": True},
        "torch-index-url": "https://x/cpu", "expected": {"torch": "2.13.0", "cuda": None, "nccl": 22809, "junk": 1}},
        "test"))
    assert lock.plan() == {"torch": "2.13.0"} and lock.pin() == {"mechanism": "none"}
    assert lock.request() == {"strict-driver": True} and lock.torch_index_url() == "https://x/cpu"
    assert lock.expected() == {"torch": "2.13.0", "nccl": "22809"}
