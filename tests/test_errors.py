"""errors.py's rules, as pip asserts its own: every error's `reference` is kebab-case and is
listed in docs/troubleshooting.md (issue 17); an error is complete when built."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tests.conftest import ROOT
from torchfit.errors import InstallFailed, TorchfitError

KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def _errors(cls: type[TorchfitError] = TorchfitError) -> Iterator[type[TorchfitError]]:
    yield cls
    for sub in cls.__subclasses__():
        yield from _errors(sub)


def test_every_reference_is_kebab_case_and_documented() -> None:
    page = (ROOT / "docs" / "troubleshooting.md").read_text()
    refs = {cls.reference for cls in _errors()}
    assert len(refs) > 15
    assert sorted(r for r in refs if not KEBAB.match(r)) == []
    assert sorted(r for r in refs if f"`{r}`" not in page) == []


def test_the_kebab_check_bites() -> None:
    assert not KEBAB.match("Install_Failed") and not KEBAB.match("install failed") and KEBAB.match("install-failed")


def test_a_lock_that_is_not_whole_keeps_its_hint_with_the_log() -> None:
    """installer/flow.py builds the check-deps error complete: what=, hint= and the install log
    (it used to edit message, args and hint after construction, then clone the error through
    `with_log`, which once dropped that hint)."""
    err = InstallFailed("check-deps", ["python", "<closure worker>"], 1, "torch requires sympy",
                        what="pylock.toml is not whole: torch requires sympy", hint="the lock lost an entry",
                        log_path="/tmp/install.log")
    assert err.message == "pylock.toml is not whole: torch requires sympy"
    assert err.hint == "the lock lost an entry; the full log: /tmp/install.log"
    assert not hasattr(InstallFailed, "with_log")
