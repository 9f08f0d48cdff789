"""Opt-in: the real PyPI (`python -m pytest -m online tests/matrix`). The nightly job runs these."""

from __future__ import annotations

import pytest
from packaging.version import Version

from tests.support.cli import run_main
from torchfit.compat.matrix import PYPI_SIMPLE
from torchfit.index.client import IndexClient
from torchfit.matrixcheck.wheels import parse_pins, parse_wheel

pytestmark = pytest.mark.online


def test_pypi_simple_index_for_torch() -> None:
    client = IndexClient(timeout=60, use_cache=False)
    page = client.project_page(PYPI_SIMPLE, "torch")
    assert page is not None and page.format == "pep691"  # PyPI offers PEP 691 JSON
    wheels = [w for w in (parse_wheel(f) for f in page.files) if w is not None]
    wheel = next(w for w in wheels if w.public == Version("2.8.0") and (3, 11) in w.pythons and w.arch == "x86_64")
    assert str(wheel.glibc) == "2.28" and wheel.file.hashes.get("sha256")
    # PEP 658: PyPI serves the METADATA beside the wheel; 2.8.0 is the cu128 build (META 2.8.0)
    metadata = client.core_metadata(wheel.file)
    assert metadata is not None
    assert parse_pins(metadata) == {"cudnn": "9.10.2.21", "nccl": "2.27.3"}


def test_matrix_check_of_a_pypi_default_row(capsys) -> None:
    code, out, err = run_main(capsys, "matrix", "check", "--pypi", "--torch", "2.8.0", "--timeout", "60")
    assert code == 0, out + err
