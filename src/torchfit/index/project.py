"""What the project's packages declare, read from the user's sources: `SourcePackages`.

The resolver (`compat.project.PackageIndex`) asks two things of a package: which
releases the sources offer, and a release's Requires-Dist and Requires-Python. Both
are measured from the artifacts: the project pages of the indexes (PEP 503/691,
through `IndexClient`, so timeouts, retries, the conditional cache and redaction
apply), find-links directories and `file://` indexes read from disk, and the release's
core metadata (PEP 658 `.metadata` where the index serves it, else the wheel's
`*.dist-info/METADATA` by range requests, or from the file itself when it is local).
The torch family never goes through here: its builds come from the matrix and the
torch index.

Which file's METADATA: a wheel for Linux on the target arch (or a pure-Python wheel)
first, since that is what the installer would take; a release with only an sdist is
read from the sdist's PKG-INFO when its Metadata-Version is 2.2+ and the field is not
dynamic (PEP 643), else it is reported as `sdist_only` with no requirements.
"""

from __future__ import annotations

import contextlib
import email.parser
import os
import tarfile
import threading
from collections.abc import Callable, Sequence
from urllib.parse import quote, unquote, urlsplit

from packaging.specifiers import SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from torchfit.background import Background
from torchfit.compat.project import PackageMeta
from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.client import IndexClient
from torchfit.index.pages import IndexFile, parse_project_html, project_url
from torchfit.redact import redact

# A METADATA file is a few KB; a hostile one is refused rather than parsed.
MAX_METADATA_BYTES = 4 << 20


class SourcePackages:
    """`compat.project.PackageIndex` over indexes and find-links; one read per page and release."""

    def __init__(self, client: IndexClient, index_urls: Sequence[str], find_links: Sequence[str],
                 arch: str = "x86_64") -> None:
        self.client = client
        self.index_urls = list(index_urls)
        self.find_links = list(find_links)
        self.arch = arch
        self._files: dict[str, list[tuple[Version, IndexFile]]] = {}
        self._meta: dict[tuple[str, Version], PackageMeta | None] = {}
        self._lock = threading.Lock()

    def prefetch(self, wanted: Sequence[tuple[str, SpecifierSet]]) -> None:
        """Read each package's pages and its newest wanted release's METADATA, all at once.

        One thread per package: the resolver's first question about each then finds its
        answer here instead of waiting on the indexes one package after another.
        """
        def one(name: str, spec: SpecifierSet) -> None:
            newest = next((v for v in self.versions(name) if spec.contains(v)), None)
            if newest is not None:
                self.metadata(name, newest)

        for started in [Background(_quietly, one, name, spec) for name, spec in wanted]:
            started.wait()

    # -- releases -----------------------------------------------------------------------
    def versions(self, name: str) -> Sequence[Version]:
        return sorted({v for v, _ in self.files(name)}, reverse=True)

    def files(self, name: str) -> list[tuple[Version, IndexFile]]:
        """Every (version, file) of `name` the sources offer, yanked files left out."""
        key = canonicalize_name(name)
        with self._lock:
            if key in self._files:
                return self._files[key]
        found: list[IndexFile] = []
        for url in self.index_urls:
            found += self._index_files(url, key)
        for link in self.find_links:
            found += self._find_links_files(link, key)
        out = []
        for f in found:
            version = _version_of(f.filename, key)
            if version is not None and not f.yanked:
                out.append((version, f))
        with self._lock:
            self._files[key] = out
        return out

    def _index_files(self, index_url: str, name: str) -> list[IndexFile]:
        if index_url.startswith("file://"):
            page = os.path.join(_local_path(project_url(index_url, name)), "index.html")
            if not os.path.isfile(page):
                return []
            with open(page, encoding="utf-8", errors="replace") as fh:
                text = fh.read(MAX_METADATA_BYTES)
            return list(parse_project_html(text, "file://" + page))
        got = self.client.project_page(index_url, name)
        return list(got.files) if got else []

    def _find_links_files(self, link: str, name: str) -> list[IndexFile]:
        path = _local_path(link) if link.startswith("file://") or "://" not in link else None
        if path is None:  # a find-links page: one HTML page listing files for every project
            got = self.client.get(link, "text/html")
            if got.status != 200:
                raise IndexUnavailable(link, f"HTTP {got.status}")
            files = parse_project_html(got.body.decode("utf-8", errors="replace"), got.url)
        elif os.path.isdir(path):
            files = tuple(IndexFile(n, "file://" + os.path.join(path, n)) for n in sorted(os.listdir(path)))
        else:
            return []
        return [f for f in files if _version_of(f.filename, name) is not None]

    # -- metadata -----------------------------------------------------------------------
    def metadata(self, name: str, version: Version) -> PackageMeta | None:
        key = (canonicalize_name(name), version)
        with self._lock:
            if key in self._meta:
                return self._meta[key]
        files = [f for v, f in self.files(name) if v == version]
        meta = self._read(key[0], version, files)
        with self._lock:
            self._meta[key] = meta
        return meta

    def _read(self, name: str, version: Version, files: list[IndexFile]) -> PackageMeta | None:
        wheels = [f for f in files if f.filename.endswith(".whl")]
        names = tuple(f.filename for f in files)
        for f in sorted(wheels, key=self._wheel_rank):
            text = self._wheel_metadata(f)
            if text is not None:
                return _parse_metadata(name, version, text, f"METADATA of {f.filename} ({redact(f.url)})", names)
        sdists = [f for f in files if not f.filename.endswith(".whl")]
        for f in sdists:
            text = self._sdist_metadata(f)
            if text is not None:
                return _parse_metadata(name, version, text, f"PKG-INFO of {f.filename}", names, sdist_only=True)
        if sdists:
            return PackageMeta(name, version, (), None, f"{sdists[0].filename}: an sdist whose requirements are "
                               "known only after a build", names, sdist_only=True)
        return None

    def _wheel_rank(self, f: IndexFile) -> tuple[int, str]:
        """Wheels for this platform first (Linux on the arch), then pure-Python ones, then the rest."""
        try:
            _, _, _, tags = parse_wheel_filename(f.filename)
        except InvalidWheelFilename:
            return (9, f.filename)
        platforms = {t.platform for t in tags}
        if any(p.startswith(("manylinux", "musllinux", "linux")) and p.endswith(self.arch) for p in platforms):
            return (0, f.filename)
        if "any" in platforms:
            return (1, f.filename)
        return (5, f.filename)

    def _wheel_metadata(self, f: IndexFile) -> str | None:
        if f.url.startswith("file://"):  # the one zip reader, bounded (MAX_METADATA_BYTES)
            from torchfit.index.wheelmeta import read_wheel_member

            return read_wheel_member(f.url, "METADATA")
        try:
            # Bounded like every METADATA read here: PEP 658 files are served apart from the wheel and
            # a hostile index may serve one of any size (issue 25: 12 MB made resolve run past 40 s).
            text = self.client.core_metadata(f, probe=f.metadata is not None, limit=MAX_METADATA_BYTES)
        except (IndexUnavailable, IndexMalformed):
            text = None
        if text is None:
            from torchfit.index.wheelmeta import wheel_metadata

            text = wheel_metadata(self.client, f, limit=MAX_METADATA_BYTES)
        return text

    def _sdist_metadata(self, f: IndexFile) -> str | None:
        """PKG-INFO of a local sdist (Metadata 2.2+ with static requirements), else None."""
        if not f.url.startswith("file://") or not f.filename.endswith(".tar.gz"):
            return None
        try:
            with tarfile.open(_local_path(f.url), "r:gz") as tf:
                member = next((m for m in tf.getmembers() if m.name.count("/") == 1
                               and m.name.endswith("/PKG-INFO") and m.isfile()), None)
                if member is None or member.size > MAX_METADATA_BYTES:
                    return None
                fh = tf.extractfile(member)
                text = fh.read().decode("utf-8", errors="replace") if fh else None
        except (OSError, tarfile.TarError):
            return None
        if text is None:
            return None
        head = email.parser.Parser().parsestr(text, headersonly=True)
        mv = Version(head.get("Metadata-Version", "1.0")) if head.get("Metadata-Version") else Version("1.0")
        dynamic = {d.lower() for d in head.get_all("Dynamic") or []}
        return text if mv >= Version("2.2") and "requires-dist" not in dynamic else None


def torch_source_packages(client: IndexClient, where: str, arch: str, *, flat: bool = False) -> SourcePackages:
    """A torch source (a PEP 503 tree, or a flat directory of wheels: `flat` or found so) read as a
    package source: what uv reads for a package routed there ([tool.uv.sources])."""
    from torchfit.index.torchsource import is_flat

    if flat or is_flat(where):
        return SourcePackages(client, [], [where], arch)
    return SourcePackages(client, [where if "://" in where else "file://" + quote(os.path.abspath(where))], [], arch)


def _quietly(fn: Callable[..., object], *args: object) -> None:
    """A prefetch: what fails here fails again, with its message, when the resolver asks."""
    with contextlib.suppress(Exception):
        fn(*args)


def _parse_metadata(name: str, version: Version, text: str, source: str, files: tuple[str, ...],
                    sdist_only: bool = False) -> PackageMeta:
    head = email.parser.Parser().parsestr(text, headersonly=True)
    return PackageMeta(name, version, tuple(head.get_all("Requires-Dist") or ()),
                       head.get("Requires-Python"), source, files, sdist_only)


def _version_of(filename: str, name: str) -> Version | None:
    """The version of `name`'s file (wheel or sdist), None for another project's or garbage."""
    try:
        if filename.endswith(".whl"):
            got, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            got, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return version if canonicalize_name(got) == name else None


def _local_path(url: str) -> str:
    if url.startswith("file://"):
        return unquote(urlsplit(url).path)
    return os.path.abspath(url)


def read_requires_python(client: IndexClient, files: Sequence[tuple[str, str]]) -> str | None:
    """The Requires-Python of a release, from the METADATA of one of its chosen wheels
    (`files`: (filename, url) pairs as a lock has them): a local wheel's own `*.dist-info/METADATA`,
    a remote one's PEP 658 file. None when no wheel's METADATA could be read (nothing judged)."""
    reader = SourcePackages(client, [], [])
    for filename, url in files:
        if not filename.endswith(".whl"):
            continue
        text = reader._wheel_metadata(IndexFile(filename, url)) if url.startswith("file://") else None
        if text is None and not url.startswith("file://"):
            try:
                text = client.core_metadata(IndexFile(filename, url), probe=True, limit=MAX_METADATA_BYTES)
            except (IndexUnavailable, IndexMalformed):
                text = None
        if text is not None:
            return email.parser.Parser().parsestr(text, headersonly=True).get("Requires-Python")
    return None


def read_requires_pythons(client: Callable[[], IndexClient],
                          releases: Sequence[tuple[str, Sequence[tuple[str, str, str | None]]]]) -> dict[str, str | None]:
    """`read_requires_python` for each (key, files: (filename, url, sha256)), eight at a time;
    `client()` is asked for only when the cache lacks one (a warm resolve imports no HTTP client).

    What a file's METADATA says never changes while its bytes do not: a Requires-Python read is
    kept by the wheel's sha256 (the lock's hash) in the cache, so a warm resolve reads none.
    """
    from torchfit.background import map_in_threads
    from torchfit.cache import read_record, write_record

    known = read_record("requires-python", "by-sha256")
    known = known if isinstance(known, dict) else {}
    out: dict[str, str | None] = {}
    todo = []
    for key, files in releases:
        sha = next((h for f, _, h in files if f.endswith(".whl") and h), None)
        if sha is not None and sha in known and (known[sha] is None or isinstance(known[sha], str)):
            out[key] = known[sha]
        else:
            todo.append((key, files, sha))

    def one(item: tuple[str, Sequence[tuple[str, str, str | None]], str | None]) -> tuple[str, str | None]:
        try:
            return item[0], read_requires_python(client(), [(f, u) for f, u, _ in item[1]])
        except Exception:
            return item[0], None

    if todo:
        got = dict(map_in_threads(one, todo, 8))
        out.update(got)
        fresh = {sha: got[key] for key, _, sha in todo if sha is not None}
        if fresh and len(known) < 50_000:
            write_record("requires-python", "by-sha256", {**known, **fresh})
    return out
