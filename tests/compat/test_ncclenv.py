"""NCCL's own reading of its on/off variables, shared by verify and doctor."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchfit.compat.ncclenv import is_nccl_switch_on, parse_nccl_int


@pytest.mark.parametrize(
    ("text", "value"),
    [(None, None), ("", None), ("1", 1), ("0", 0), (" 1", 1), ("1abc", 1), ("0x10", 16), ("010", 8),
     ("08", 0), ("-1", -1), ("+2", 2), ("y", 0), ("true", 0), ("yes", 0), ("9" * 30, None)],
)
def test_integers_as_c_strtol_base_0_reads_them(text: str | None, value: int | None) -> None:
    assert parse_nccl_int(text) == value


@pytest.mark.parametrize(
    ("name", "text", "on"),
    [
        ("NCCL_P2P_DISABLE", "1", True),
        ("NCCL_P2P_DISABLE", "y", False),  # verify and doctor used to disagree here
        ("NCCL_P2P_DISABLE", "true", False),
        ("NCCL_P2P_DISABLE", "2", False),  # paths.cc ncclGetLevel: disable == 1
        ("NCCL_P2P_DISABLE", "0x1", True),
        ("NCCL_P2P_DISABLE", None, False),
        ("NCCL_SHM_DISABLE", "1", True),
        ("NCCL_SHM_DISABLE", "2", False),  # shm.cc: ncclParamShmDisable() == 1
        ("NCCL_IB_DISABLE", "2", True),  # IB transport: if (ncclParamIbDisable())
        ("NCCL_IB_DISABLE", "0", False),
    ],
)
def test_nccl_switches(name: str, text: str | None, on: bool) -> None:
    assert is_nccl_switch_on(name, text) is on


def test_verify_gives_nccls_answer() -> None:
    """NCCL_P2P_DISABLE=y is no cause of low bandwidth (doctor: tests/doctor/test_environment)."""
    from torchfit.verify.bandwidth import bandwidth_causes

    for value, on in (("y", False), ("1", True)):
        causes = bandwidth_causes({"NCCL_P2P_DISABLE": value}, {"0-1": "NV18"}, [(0, 1)])
        assert any("NCCL_P2P_DISABLE" in c for c in causes) is on


@given(st.text(max_size=60))
def test_never_raises(text: str) -> None:
    parse_nccl_int(text)
    is_nccl_switch_on("NCCL_P2P_DISABLE", text)
