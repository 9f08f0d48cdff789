"""host/links.py: NVLink and PCIe link facts from nvidia-smi's outputs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import torchfit.host.links as hlinks
from tests.verify.conftest import H200


def test_nvlink_status_of_the_h200_fixture() -> None:
    links = hlinks.parse_nvlink_status((H200 / "nvlink-s.txt").read_text())
    assert sorted(links) == [0, 1] and links[0] == [26.562] * 18



@given(st.text(max_size=400))
def test_link_parsers_never_raise(text: str) -> None:
    hlinks.parse_nvlink_status(text)
    hlinks.parse_pcie_query(text)
