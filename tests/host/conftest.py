"""The host tests' fixture (a FakeHost in tmp_path) and the parsers' fuzzing strategies."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.support.fakehost import FakeHost


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


ANY_TEXT = st.one_of(st.text(), st.binary().map(lambda b: b.decode("latin-1")))


# Text near what the line parsers look for: their keys, separators and quotes.
NEAR_MISS = st.lists(
        st.sampled_from(
            [
                "NVRM version: ",
                "ID=",
                "VERSION_ID=",
                "ldd ",
                "GLIBC ",
                "gfx_target_version ",
                "Agent 1",
                "Name: gfx942",
                "Device Type: CPU",
                "  3.12.1",
                '"',
                "'",
                "\\",
                "90402",
                "=",
                "580.159.04",
                " ",
                "\n",
                "\t",
            ]
        ),
        max_size=30,
    ).map("".join)
# Every line parser takes any text (arbitrary or nearly right) and returns None or a value.
LINE_TEXT = st.one_of(ANY_TEXT, NEAR_MISS)
