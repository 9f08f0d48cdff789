"""Does an index's PEP 658 `.metadata` say what its wheel says? (issue 34, R3)

An index may serve a wheel's core metadata as a file of its own (PEP 658: the wheel's URL
plus `.metadata`), and a resolver that reads it never opens the wheel. When the two
disagree, the plan promises a set the wheel will not install: the wheel is the truth (it
is what is installed and hashed into the lock). Install's closure check catches it after
the install (installer/buildcheck.py); the plan should not promise it.

Where the wheel is a local file (a file:// index, a find-links directory), reading its own
METADATA is a look at the zip's central directory and one member (`wheelmeta.read_wheel_member`,
the one zip reader): every local wheel of the plan that has a `.metadata` beside it is compared,
on what a resolution reads (Name, Version, Requires-Dist, Requires-Python).

Where the wheel is remote (`find_remote_disagreement`), only the wheels uv read through a
`.metadata` are checked: those whose index page advertises one (PEP 658/714, `IndexFile.metadata`);
for the others uv read the wheel itself. The `.metadata` is read as uv read it (its URL, its
advertised hash, at most MAX_METADATA_BYTES), the wheel's own METADATA with HTTP range requests
(`wheelmeta.remote_metadata`: the central directory at the end of the zip, then the one member;
cached under the wheel's sha256), every request under the planning client's timeout and deadline.
A server that does not honour `Range` is not downloaded whole (a CUDA torch wheel is gigabytes):
that wheel is left unchecked with a note, and install checks the wheel it downloads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from typing import TYPE_CHECKING
from urllib.parse import unquote, urldefrag, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.errors import IndexMalformed, IndexUnavailable, WheelFormatError
from torchfit.index.wheelmeta import (
    MAX_METADATA_BYTES,
    NO_RANGES,
    read_wheel_member,
    remote_metadata,
)
from torchfit.inputs import terminal_text
from torchfit.redact import redact, strip_credentials

if TYPE_CHECKING:
    from torchfit.index.client import IndexClient
    from torchfit.index.pages import IndexFile

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
        except OSError:
            continue
        # an unreadable wheel (None) is install's to refuse (it reads the wheel whole)
        found = read_wheel_member(path, "METADATA")
        if found is None or len(text) > MAX_METADATA_BYTES:
            continue
        diff = compare_metadata(found, text.decode("utf-8", "replace"))
        if diff:
            return path, diff
    return None


@dataclass(**FROZEN)
class RemoteMismatch:
    """A remote wheel whose index's `.metadata` disagrees with the wheel: what `find_remote_disagreement` found."""

    name: str
    filename: str
    index: str  # the index whose page advertised the .metadata (may hold credentials: redact to show)
    diff: tuple[str, ...]


def find_remote_disagreement(client: IndexClient, wheels: Sequence[tuple[str, str]], indexes: Sequence[str],
                             note: Callable[[str], None]) -> RemoteMismatch | None:
    """The first of `wheels` ((name, URL) of the plan's remote wheels) that came from a `.metadata`
    which disagrees with the wheel's own METADATA; None when none does. `indexes`: the http(s)
    indexes the plan read (the page that lists a wheel's URL says whether a `.metadata` was
    advertised). `note` hears, once per file server, which wheels could not be checked (no Range).

    The first wheel of each file server is checked first: a server that answers its range request
    with the whole file is not asked about the others (nor are their pages read again: 61 pages,
    0.2 s of a 0.58 s resolve against a local mirror without Range, issue 37)."""
    from torchfit.background import map_in_threads

    remote = [(n, u) for n, u in wheels if urlsplit(u).scheme.lower() in ("http", "https")
              and urlsplit(u).path.endswith(".whl") and not _pypis_own(u)]
    unranged = _Unranged()
    firsts = list({_origin(u): (n, u) for n, u in reversed(remote)}.values())
    rest = [w for w in remote if w not in firsts]
    found = [r for batch in (firsts, rest) for r in map_in_threads(
        lambda w: _check_remote(client, w[0], w[1], indexes, note, unranged), batch, CHECK_WORKERS) if r is not None]
    unranged.tell(note)
    return found[0] if found else None


class _Unranged:
    """File servers that answered a range request with the whole file, and the wheels of each
    left unchecked for it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.servers: dict[str, str] = {}  # scheme://host:port -> the index whose wheel came whole there
        self.wheels: dict[str, list[str]] = {}  # scheme://host:port -> the wheels' file names
        self.unread: set[str] = set()  # servers with wheels whose pages were not read

    def skip(self, url: str) -> bool:
        """Is `url`'s server one that answered a range request whole? (then the wheel is noted, its
        page and files not asked for)"""
        origin = _origin(url)
        with self.lock:
            if origin not in self.servers:
                return False
            self.wheels[origin].append(os.path.basename(urlsplit(url).path))
            self.unread.add(origin)
            return True

    def add(self, url: str, index: str, filename: str) -> None:
        origin = _origin(url)
        with self.lock:
            self.servers.setdefault(origin, index)
            self.wheels.setdefault(origin, []).append(filename)

    def tell(self, note: Callable[[str], None]) -> None:
        for origin, names in self.wheels.items():
            names = sorted(redact(unquote(n)) for n in names)
            what = (f"{names[0]}: its .metadata was not compared with the wheel" if len(names) == 1 else
                    f"{len(names)} wheels' .metadata were not compared with the wheels ({', '.join(names[:3])}"
                    f"{', ...' if len(names) > 3 else ''}{'; where their index serves one' if origin in self.unread else ''})")
            where = redact(origin if origin in self.unread else self.servers[origin])
            it = "wheel is" if len(names) == 1 else "wheels are"
            note(f"{what}: {NO_RANGES} at {where} (the {it} not downloaded whole to plan; "
                 f"install checks the {it.split()[0]} it downloads)")


def _origin(url: str) -> str:
    parts = urlsplit(strip_credentials(url))
    return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}"


# PyPI's file host: PyPI writes a wheel's `.metadata` from the wheel itself at upload (warehouse's
# forklift extracts its METADATA: docs/architecture.md, Contracts), so the two agree by construction
# and PyPI's wheels are not read again (on this machine's PyPI, which sends no cache headers, the
# check re-read 53 project pages per resolve: 1.4 s of a project resolve; issue 37).
PYPI_FILES = "files.pythonhosted.org"


def _pypis_own(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme.lower() == "https" and (parts.hostname or "").lower() == PYPI_FILES


# Wheels checked at once: each is three or four small requests (the page is the planning's own read).
CHECK_WORKERS = 8


def _listing(client: IndexClient, name: str, url: str, indexes: Sequence[str]) -> tuple[str, IndexFile] | None:
    """(the index, its entry) of the page that lists `url` for project `name`; None if none does."""
    want = _same(url)
    for index in indexes:
        try:
            page = client.project_page(index, name)
        except (IndexUnavailable, IndexMalformed):
            continue
        for f in page.files if page else ():
            if _same(f.url) == want:
                return index, f
    return None


def _same(url: str) -> str:
    """A file URL as uv writes it into its lock and a page lists it alike: no fragment, no
    credentials (the page's joined URL carries the index's), the path unquoted."""
    parts = urlsplit(strip_credentials(urldefrag(url)[0]))
    return parts._replace(path=unquote(parts.path)).geturl()


def _check_remote(client: IndexClient, name: str, url: str, indexes: Sequence[str],
                  note: Callable[[str], None], unranged: _Unranged) -> RemoteMismatch | None:
    if unranged.skip(url):
        return None
    listed = _listing(client, name, url, indexes)
    if listed is None or listed[1].metadata is None:
        return None  # no .metadata advertised: uv read the wheel itself
    index, file = listed
    verdict = _agreed_key(file)
    if verdict and client.cache and client.cache.load(verdict):
        return None  # these very bytes (both sha256s) were compared before and agreed
    try:
        served = client.core_metadata(file, probe=False, limit=MAX_METADATA_BYTES)
        own = remote_metadata(client, file, limit=MAX_METADATA_BYTES)
    except (IndexUnavailable, IndexMalformed, WheelFormatError) as exc:
        note(f"{redact(file.filename)}: its .metadata was not compared with the wheel ({terminal_text(str(exc))}); "
             "install checks the wheel it downloads")
        return None
    if own == NO_RANGES:
        unranged.add(url, index, file.filename)
        return None
    if served is None or own is None:
        return None
    diff = compare_metadata(own, served)
    if diff:
        return RemoteMismatch(name, file.filename, index, tuple(diff))
    if verdict and client.cache:
        client.cache.store(verdict, {"url": strip_credentials(file.url), "content_type": "text/plain"}, b"agree")
    return None


def _agreed_key(file: IndexFile) -> str | None:
    """The cache key of "these wheel bytes and these .metadata bytes agree": both named by the
    sha256 the page gives, wherever they are served, so the verdict holds as long as those bytes
    are what the index serves (a changed file is another key). None where the page gives either
    without a sha256 (compared every time)."""
    from torchfit.index.cache import DiskCache

    wheel, meta = file.hashes.get("sha256"), (file.metadata or {}).get("sha256")
    return DiskCache.key("metadata-agrees", f"{wheel} {meta}") if wheel and meta else None
