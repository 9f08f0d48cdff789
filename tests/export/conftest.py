"""Fixtures of the tests that read recorded index pages (tests/support/indexes.py)."""

from tests.support.indexes import private_cache, rsps

__all__ = ["private_cache", "rsps"]
