"""Fixtures the command tests share with the packages they drive (the precedent: tests/e2e/conftest.py)."""

from tests.doctor.conftest import h200, host  # noqa: F401  (fixtures: fake hosts for `torchfit doctor`)
