"""Does an index's PEP 658 `.metadata` say what its wheel says? (issue 34, R3)

An index may serve a wheel's core metadata as a file of its own (PEP 658: the wheel's URL
plus `.metadata`), and a resolver that reads it never opens the wheel. When the two
disagree, the plan promises a set the wheel will not install: the wheel is the truth (it
is what is installed and hashed into the lock). Install's closure check catches it after
the install (installer/buildcheck.py); the plan should not promise it.

Where the wheel is a local file (a file:// index, a find-links directory), reading its own
METADATA is a look at the zip's central directory and one member: every local wheel of the
plan that has a `.metadata` beside it is compared, on what a resolution reads (Name,
Version, Requires-Dist, Requires-Python). A remote wheel is not downloaded for this (a torch
wheel is gigabytes): the plan rests on the index's metadata, and install checks it against
the wheel it downloads (docs/projects.md says so).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from email.parser import HeaderParser
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit.errors import WheelFormatError
from torchfit.index.wheelmeta import MAX_METADATA_BYTES, FileSource, WheelArchive

FIELDS = ("Name", "Version", "Requires-Dist", "Requires-Python")


def _norm(field: str, values: list[str]) -> object:
    """A field's values as a resolver compares them (names canonical, versions and specifiers parsed)."""
    try:
        if field == "Name":
            return {canonicalize_name(v) for v in values}
        if field == "Version":
            return {Version(v) for v in values}
        if field == "Requires-Python":
            return {SpecifierSet(v) for v in values}
        return {str(Requirement(v)) for v in values}
    except (InvalidRequirement, InvalidSpecifier, InvalidVersion):
        return {v.strip() for v in values}


def compare_metadata(wheel: str, served: str) -> list[str]:
    """What the served metadata says otherwise than the wheel's own (pure): one phrase per field
    that differs ("Requires-Dist: the wheel says torch==2.12.0, the .metadata says torch==2.13.0")."""
    ours, theirs = HeaderParser().parsestr(wheel), HeaderParser().parsestr(served)
    out = []
    for field in FIELDS:
        a, b = ours.get_all(field) or [], theirs.get_all(field) or []
        if _norm(field, a) != _norm(field, b):
            only_a = sorted(set(a) - set(b)) or ["nothing"]
            only_b = sorted(set(b) - set(a)) or ["nothing"]
            out.append(f"{field}: the wheel says {', '.join(only_a)}, the .metadata says {', '.join(only_b)}")
    return out


def local_path(location: str) -> str | None:
    """The local file a pylock artifact names (a file:// URL or a path), else None."""
    if location.startswith("file://"):
        return unquote(urlsplit(location).path)
    if "://" in location:
        return None
    return location


def find_disagreement(paths: Iterable[str]) -> tuple[str, list[str]] | None:
    """The first local wheel among `paths` whose `.metadata` beside it disagrees with its own
    METADATA: (the wheel's path, what differs); None when every one agrees or has none."""
    for path in paths:
        served = path + ".metadata"
        if not path.endswith(".whl") or not os.path.isfile(served) or not os.path.isfile(path):
            continue
        try:
            with open(served, "rb") as fh:
                text = fh.read(MAX_METADATA_BYTES + 1)
            src = FileSource(path)
            try:
                found = WheelArchive(src).metadata()
            finally:
                src.close()
        except (OSError, WheelFormatError):
            continue  # an unreadable wheel is install's to refuse (it reads the wheel whole)
        if found is None or len(text) > MAX_METADATA_BYTES:
            continue
        diff = compare_metadata(found[1].decode("utf-8", "replace"), text.decode("utf-8", "replace"))
        if diff:
            return path, diff
    return None
