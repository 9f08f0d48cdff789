"""host.probe_host, the one assembler of the host facts, on this machine."""

from __future__ import annotations

import time

import pytest

from torchfit.host import probe_host
from torchfit.runner import Runner


def test_probe_host_on_this_machine_is_fast() -> None:
    if Runner().which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi; the timing bound is for hosts without one")
    probe_host(Runner())  # warm the page cache
    start = time.monotonic()
    facts = probe_host(Runner())
    elapsed = time.monotonic() - start
    assert elapsed < 1.0, elapsed
    assert facts.arch and facts.glibc and facts.pythons
    assert facts.reasons["gpus"].startswith("unknown, because nvidia-smi not found on PATH")

