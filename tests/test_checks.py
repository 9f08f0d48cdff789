"""checks.py: one verdict type for verify and doctor; a status given as its word is stored as the
Status, and an unknown word is refused where the check is made."""

from __future__ import annotations

import dataclasses

import pytest

from torchfit.checks import Check, Status


def test_a_status_word_becomes_the_status() -> None:
    for word in ("pass", "warn", "fail", "skip", "unknown"):
        check = Check("x", word, "seen")  # type: ignore[arg-type]
        assert check.status is Status(word) and str(check.status) == word and check.status == word
        assert check.failed is (word == "fail")
    assert Check("x", Status.FAIL, "seen") == Check("x", "fail", "seen")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'passed' is not a valid Status"):
        Check("x", "passed", "seen")  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Check("x", "pass", "seen").status = Status.FAIL  # type: ignore[arg-type, misc]
