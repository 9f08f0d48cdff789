"""Which packages of a wheels-only answer have a newer release that is a source distribution
only, read from the user's sources (`SourcePackages`: PEP 503/691 pages, find-links);
`compat.wheelonly` judges each file list and says why (issue 33).

Cheap where nothing was passed over, the common case: a PEP 691 page's `versions` (PEP 700)
says whether any allowed release is newer before its files are read (`maybe_newer`); the
direct requirements' pages are fetched while uv solves (`start_reading`); one thread per
package; a page read before (the index client's conditional cache) is not read again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit.background import Background
from torchfit.compat.wheelonly import (
    Passed,
    ReleaseFile,
    allowed_newer,
    exact_torch_pin,
    passed_over,
)
from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.client import ACCEPT_SIMPLE
from torchfit.index.pages import project_url
from torchfit.index.project import SourcePackages

if TYPE_CHECKING:
    from torchfit.compat.project import ProjectReq


def find_passed(reader: SourcePackages, chosen: Mapping[str, Version], tags: Sequence[Tag], python: str,
                specs: Mapping[str, SpecifierSet], *, allow_pre: bool = False,
                companion: Callable[[str], bool] = lambda _name: False) -> list[Passed]:
    """The packages of `chosen` (name -> the version uv answered) passed over for a newer
    release without a wheel for `tags`; each with why its binary is bound to one torch
    (`companion(name)`: companions.toml; else its METADATA's exact torch pin), if it is.
    A source that cannot be read leaves its packages out: uv read it a moment ago, and
    what it could not be asked again is not a reason to build anything."""

    local = SourcePackages(reader.client, [u for u in reader.index_urls if _is_local(u)],
                           [u for u in reader.find_links if _is_local(u)], reader.arch)

    def one(name: str, version: Version) -> Passed | None:
        try:
            if not maybe_newer(reader, name, version, specs.get(canonicalize_name(name)), allow_pre=allow_pre,
                               local=local):
                return None
            files: list[ReleaseFile] = [(v, f.filename, f.requires_python) for v, f in reader.files(name)]
            found = passed_over(name, version, files, tags, python, specs.get(canonicalize_name(name)),
                                allow_pre=allow_pre)
            if found is None:
                return None
        except (IndexUnavailable, IndexMalformed):
            return None
        if companion(name):
            return replace(found, abi="companions.toml")
        try:
            meta = reader.metadata(name, version)
        except (IndexUnavailable, IndexMalformed):
            meta = None  # its pin unknown: plain uv's choice, as for any package
        pin = exact_torch_pin(meta.requires_dist) if meta is not None else None
        return replace(found, abi=f"its METADATA pins {pin}") if pin else found

    started = [Background(one, name, version, name=f"newer-{name}") for name, version in chosen.items()]
    return [p for p in (b.result() for b in started) if p is not None]


def maybe_newer(reader: SourcePackages, name: str, chosen: Version, spec: SpecifierSet | None, *,
                allow_pre: bool = False, local: SourcePackages | None = None) -> bool:
    """Whether any source lists a release `allowed_newer` than `chosen`, read cheaply: a remote
    index from its PEP 691 page's `versions` (API 1.1, PEP 700: PyPI's page of pydantic lists
    2,027 files, 0.13 s to read as files, measured; its `versions`, a few ms), the local
    sources (`local`: file:// indexes, find-links directories) from their file names. True
    where that cannot be told (an HTML page, a remote find-links page): the files are read."""
    versions: list[Version] = []
    if any(not _is_local(u) for u in reader.find_links):
        return True
    for index in reader.index_urls:
        if _is_local(index):
            continue
        got = reader.client.get(project_url(index, name), ACCEPT_SIMPLE)
        if got.status != 200:
            continue  # no such project there
        if "json" not in got.content_type:
            # a PEP 503 page: the versions of its file names, from the body just read (not a second read
            # of the page, file by file, unless one is newer)
            from torchfit.index.pages import parse_project_html
            from torchfit.index.project import _version_of

            try:
                files = parse_project_html(got.body.decode("utf-8", errors="replace"), got.url)
            except IndexMalformed:
                return True
            versions += [v for f in files if not f.yanked and (v := _version_of(f.filename, canonicalize_name(name)))]
            continue
        try:
            # json.loads, not inputs.decode_json: its nesting bound is a pass over every bracket of
            # the page (0.8 s of PyPI's pydantic-core page); CPython's decoder bounds its own
            # recursion (RecursionError, caught), and the client bounds the body's size
            listed = json.loads(got.body).get("versions")
        except (ValueError, RecursionError, AttributeError):
            return True
        if not isinstance(listed, list):
            return True
        for text in listed:
            with contextlib.suppress(InvalidVersion, TypeError):
                versions.append(Version(text))
    if local is not None:
        versions += local.versions(name)
    return bool(allowed_newer(versions, chosen, spec, allow_pre=allow_pre))


def _is_local(url: str) -> bool:
    return url.startswith("file://") or "://" not in url


def start_reading(reader: SourcePackages, names: Sequence[str]) -> list[Background[None]]:
    """The pages of `names` (the project's direct requirements) fetched now, one thread each,
    while uv solves: what `passed_in_answer` reads of them afterwards is in the client's cache
    (a local source is read when asked: milliseconds)."""
    def one(name: str) -> None:
        with contextlib.suppress(IndexUnavailable, IndexMalformed):  # asked again, and said, if needed
            for index in reader.index_urls:
                if not _is_local(index):
                    reader.client.get(project_url(index, name), ACCEPT_SIMPLE)

    return [Background(one, n, name=f"pages-{n}") for n in dict.fromkeys(names)]


def worth_reading(requirements: Sequence[ProjectReq]) -> list[str]:
    """The direct requirements whose pages can show a release passed over: not the torch
    family (the torch index's), not one pinned to a single release (`x==1.0`: a lock's
    requirements cost no reading), not a direct reference (`x @ URL`: uv takes that file)."""
    out = []
    for r in requirements:
        spec = r.requirement.specifier
        exact = len(spec) == 1 and all(s.operator in ("==", "===") and "*" not in s.version for s in spec)
        if not r.is_family and not exact and not getattr(r.requirement, "url", None):
            out.append(r.name)
    return list(dict.fromkeys(out))


def is_local(reader: SourcePackages) -> bool:
    """Every source of the project's packages is on this machine (file:// indexes, find-links
    directories): reading every page costs milliseconds."""
    return all(_is_local(u) for u in [*reader.index_urls, *reader.find_links])


def passed_in_answer(reader: SourcePackages, answer: Mapping[str, Version], *, python: str, arch: str,
                     glibc: tuple[int, int], free_threaded: bool, requirements: Sequence[ProjectReq],
                     constraints: Sequence[ProjectReq] = (), skip: Collection[str] = (),
                     allow_pre: bool = False) -> list[Passed]:
    """`find_passed` for uv's answer (name -> version, the packages planned from a wheel) on a
    target (CPython `python`, Linux `arch`, `glibc`): the torch family (the torch index's) and
    `skip` (routed there) left out; the user's specifiers are the project's requirements and
    constraints on each name.

    Which pages: every one where the sources are local; else the project's direct requirements
    that allow more than one release (`worth_reading`, read while uv solved: `start_reading`)
    and any pre-release in the answer. A remote index's
    page for every package further down would cost more than the resolve (pydantic-core's PyPI
    page lists 14,859 files: 1.2 s to read, measured): a package further down whose newer
    release has no wheel is not looked for there."""
    from torchfit.cache import load_companions
    from torchfit.compat.matrix import FAMILY_PACKAGES
    from torchfit.compat.tags import target_tags

    specs: dict[str, SpecifierSet] = {}
    for r in [*requirements, *constraints]:
        specs[r.name] = specs.get(r.name, SpecifierSet()) & r.requirement.specifier
    every, direct = is_local(reader), set(worth_reading(requirements))
    urls = {r.name for r in requirements if getattr(r.requirement, "url", None)}
    chosen = {n: v for n, v in answer.items() if n not in FAMILY_PACKAGES and n not in skip and n not in urls
              and (every or n in direct or v.is_prerelease)}
    return find_passed(reader, chosen, target_tags(python, arch, glibc, free_threaded=free_threaded), python, specs,
                       allow_pre=allow_pre,
                       companion=lambda n: load_companions().get(n) is not None)  # read only when one is found
