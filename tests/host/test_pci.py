"""host/pci.py: a PCI function's vendor and class say which GPUs the bus holds."""

from __future__ import annotations

from hypothesis import given

from tests.host.conftest import FUZZ, LINE_TEXT
from torchfit.host.pci import parse_pci_vendor


def test_parse_pci_vendor() -> None:
    assert parse_pci_vendor("0x10de\n", "0x030200\n") == "NVIDIA"
    assert parse_pci_vendor("0x10de", "0x068000") is None  # NVSwitch
    assert parse_pci_vendor("0x1002", "0x038000") == "AMD"


@FUZZ
@given(LINE_TEXT)
def test_fuzz_pci_line_parsers(text: str) -> None:
    assert parse_pci_vendor(text, text) in (None, "NVIDIA", "AMD")
