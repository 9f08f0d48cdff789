"""Which packages of a wheels-only answer have a newer release that is a source distribution
only, read from the user's sources (`SourcePackages`: PEP 503/691 pages, find-links);
`compat.wheelonly` judges each file list and says why (issue 33).

One thread per package: the pages are read at once, and a page read before (the
resolver's own reading, the index client's conditional cache) is not read again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit.background import Background
from torchfit.compat.wheelonly import Passed, ReleaseFile, exact_torch_pin, passed_over
from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.project import SourcePackages


def find_passed(reader: SourcePackages, chosen: Mapping[str, Version], tags: Sequence[Tag], python: str,
                specs: Mapping[str, SpecifierSet], *, allow_pre: bool = False,
                companion: Callable[[str], bool] = lambda _name: False) -> list[Passed]:
    """The packages of `chosen` (name -> the version uv answered) passed over for a newer
    release without a wheel for `tags`; each with why its binary is bound to one torch
    (`companion(name)`: companions.toml; else its METADATA's exact torch pin), if it is.
    A source that cannot be read leaves its packages out: uv read it a moment ago, and
    what it could not be asked again is not a reason to build anything."""

    def one(name: str, version: Version) -> Passed | None:
        try:
            files: list[ReleaseFile] = [(v, f.filename, f.requires_python) for v, f in reader.files(name)]
            found = passed_over(name, version, files, tags, python, specs.get(canonicalize_name(name)),
                                allow_pre=allow_pre)
            if found is None:
                return None
            if companion(name):
                return Passed(found.name, found.chosen, found.newer, found.unasked_pre, "companions.toml")
            meta = reader.metadata(name, version)
            pin = exact_torch_pin(meta.requires_dist) if meta is not None else None
            return Passed(found.name, found.chosen, found.newer, found.unasked_pre,
                          f"its METADATA pins {pin}" if pin else None)
        except (IndexUnavailable, IndexMalformed):
            return None

    started = [Background(one, name, version, name=f"newer-{name}") for name, version in chosen.items()]
    return [p for p in (b.result() for b in started) if p is not None]
