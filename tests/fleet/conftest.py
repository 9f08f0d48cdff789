"""The session's one test Slurm cluster (tests/support/slurm.py).

On a machine without Slurm the cluster tests skip with one line saying how to get it;
in CI (TORCHFIT_REQUIRE_SLURM=1, set by .ci/run, which installs slurmctld and slurmd)
a missing or broken Slurm is a failure, never a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.slurm import HOW_TO_GET, SlurmCluster, find_slurm


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    tools = find_slurm()
    if tools is None:
        if os.environ.get("TORCHFIT_REQUIRE_SLURM") == "1":
            pytest.fail(f"TORCHFIT_REQUIRE_SLURM=1 but {HOW_TO_GET}")
        pytest.skip(HOW_TO_GET)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"), tools)
    cluster.write()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
