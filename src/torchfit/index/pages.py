"""Simple-repository pages, parsed: PEP 503 HTML, PEP 691 JSON, PEP 658/714 metadata.

Pure: bytes or text in, `IndexFile`s out. The parsers raise only `IndexMalformed`;
the client (`index.client`) fetches what they read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit, urlunsplit

from packaging.utils import canonicalize_name

from torchfit._backports import FROZEN
from torchfit.errors import IndexMalformed
from torchfit.inputs import decode_json

JSON_TYPE = "application/vnd.pypi.simple.v1+json"

@dataclass(**FROZEN)
class IndexFile:
    """One file a project page lists.

    `url` is absolute and may carry the index's credentials: never print it
    without `redact`. `metadata` is the PEP 658/714 advertisement: None when the
    page does not advertise a metadata file, else the hashes it gives (possibly
    empty, for `data-core-metadata="true"`).
    """

    filename: str
    url: str
    hashes: Mapping[str, str] = field(default_factory=dict)
    requires_python: str | None = None
    metadata: Mapping[str, str] | None = None
    yanked: bool = False

    @property
    def metadata_url(self) -> str:
        """PEP 658: the core metadata lives at the file's URL plus `.metadata`."""
        return urldefrag(self.url)[0] + ".metadata"


@dataclass(**FROZEN)
class ProjectPage:
    """A project's page: where it was read (after redirects), its format and files."""

    project: str
    url: str
    format: str  # "pep691" | "pep503"
    files: tuple[IndexFile, ...]
    from_cache: bool = False


@dataclass(**FROZEN)
class Fetched:
    """One HTTP answer, after retries and the cache: final URL, status, type, body."""

    url: str
    status: int
    content_type: str
    body: bytes
    from_cache: bool = False


def normalize_name(name: str) -> str:
    """PEP 503 normalized project name: `Torch_Vision` -> `torch-vision` (packaging's rule)."""
    return str(canonicalize_name(name))


def project_url(index_url: str, project: str) -> str:
    """`https://host/simple` + `torch` -> `https://host/simple/torch/` (PEP 503: trailing slash).

    A query string (a mirror's `?token=...`, docs/mirrors.md) stays a query string, after the
    project's path: `https://host/simple?token=X` -> `https://host/simple/torch/?token=X`, as uv
    and pip join it.
    """
    parts = urlsplit(index_url)
    if not parts.query:
        return index_url.rstrip("/") + "/" + normalize_name(project) + "/"
    path = parts.path.rstrip("/") + "/" + normalize_name(project) + "/"
    return urlunsplit(parts._replace(path=path))

# ---------------------------------------------------------------------------
# Pure parsers
# ---------------------------------------------------------------------------


def _join(base: str, href: str, url: str) -> str:
    """urljoin, with the ValueError of a broken href (`http://[`) as IndexMalformed."""
    try:
        joined = urljoin(base, href)
        urlsplit(joined).port  # noqa: B018 - validates the port and IPv6 brackets
        return joined
    except ValueError as exc:
        raise IndexMalformed(url, f"bad file URL {href!r:.80} ({exc})") from None


def _metadata_value(value: Any, url: str) -> Mapping[str, str] | None:
    """PEP 691/714 `core-metadata`: absent/false -> None, true -> {}, {algo: hex} -> as is."""
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    raise IndexMalformed(url, f"'core-metadata' must be a boolean or a table of hashes, not {value!r:.60}")


def parse_project_json(text: str, url: str) -> tuple[IndexFile, ...]:
    """Parse a PEP 691 project page; relative file URLs are resolved against `url`."""
    try:
        doc = decode_json(text)  # an index's page: nesting bounded (inputs.decode_json)
    except ValueError as exc:
        raise IndexMalformed(url, f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise IndexMalformed(url, "a PEP 691 page is a JSON object")
    meta = doc.get("meta")
    version = meta.get("api-version") if isinstance(meta, dict) else None
    if not isinstance(version, str) or not re.match(r"^\d+(\.\d+)*$", version):
        raise IndexMalformed(url, "no meta.api-version (PEP 691)")
    if version.split(".")[0] != "1":
        # PEP 629: a client must refuse a major version it does not know.
        raise IndexMalformed(url, f"api-version {version} is not 1.x")
    raw_files = doc.get("files")
    if not isinstance(raw_files, list):
        raise IndexMalformed(url, "'files' must be a list")
    files = []
    for i, raw in enumerate(raw_files):
        if not isinstance(raw, dict):
            raise IndexMalformed(url, f"files[{i}] is not an object")
        name, href = raw.get("filename"), raw.get("url")
        if not isinstance(name, str) or not isinstance(href, str) or not name:
            raise IndexMalformed(url, f"files[{i}] needs string 'filename' and 'url'")
        hashes = raw.get("hashes", {})
        if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
            raise IndexMalformed(url, f"files[{i}].hashes must map algorithm to hex digest")
        rp = raw.get("requires-python")
        # PEP 714: "core-metadata" is the name; "dist-info-metadata" the PEP 658 original
        # (and some servers emit the HTML attribute's name in JSON).
        meta_raw = next(
            (raw[k] for k in ("core-metadata", "dist-info-metadata", "data-dist-info-metadata") if k in raw),
            None,
        )
        yanked = raw.get("yanked", False)
        files.append(
            IndexFile(
                filename=name,
                url=_join(url, href, url),
                hashes={str(k).lower(): v for k, v in hashes.items()},
                requires_python=rp if isinstance(rp, str) else None,
                metadata=_metadata_value(meta_raw, url),
                yanked=bool(yanked) if not isinstance(yanked, str) else True,
            )
        )
    return tuple(files)


class _AnchorParser(HTMLParser):
    """Collects `<a>` tags (href and data-* attributes) and a `<base href>`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[dict[str, str | None]] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))
        elif tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")


def _html_metadata(value: str | None, url: str) -> Mapping[str, str] | None:
    """`data-core-metadata="sha256=..."` -> {"sha256": ...}; "true" -> {}; absent -> None."""
    if value is None:
        return None
    value = value.strip()
    if value.lower() == "true" or value == "":
        return {}
    algo, sep, digest = value.partition("=")
    if not sep or not algo or not digest:
        raise IndexMalformed(url, f"metadata attribute {value!r:.60} is not 'true' or ALGO=HEX")
    return {algo.lower(): digest}


def off_site_hosts(urls: Iterable[str], index_url: str) -> list[str]:
    """The hosts other than the index's own that `urls` (its files) are on, sorted.

    A mirrored PyTorch page often keeps upstream's absolute links
    (https://download.pytorch.org/whl/...): the mirror then serves the page and upstream the
    files, so an install "from the mirror" still reaches the internet, and fails behind an
    air gap. For a file:// index every http(s) link is off it. Credentials never appear (host names only).
    """
    own = urlsplit(index_url)
    local = own.scheme.lower() == "file"
    hosts = set()
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            continue
        if local or parts.hostname != own.hostname:
            hosts.add(parts.hostname)
    return sorted(hosts)


def format_off_site(where: str, hosts: Sequence[str]) -> str:
    """The one warning line for an index whose files are elsewhere (`where` already redacted)."""
    more = f" (and {len(hosts) - 1} other host{'s' * (len(hosts) > 2)})" if len(hosts) > 1 else ""
    return (f"{where} links its files on {hosts[0]}{more}, not on itself: they are fetched from there "
            "(a mirrored page that kept upstream's absolute URLs?), which an air-gapped site cannot reach")


def parse_project_html(text: str, url: str) -> tuple[IndexFile, ...]:
    """Parse a PEP 503 project page (with PEP 592 yanks and PEP 658/714 metadata)."""
    if text.strip() and "<" not in text:
        raise IndexMalformed(url, "not HTML (no tags at all)")
    parser = _AnchorParser()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # html.parser raises bare AssertionError on some garbage
        raise IndexMalformed(url, f"HTML parser failed ({type(exc).__name__})") from None
    base = _join(url, parser.base, url) if parser.base else url
    files = []
    for attrs in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        absolute = _join(base, href, url)
        path = urlsplit(absolute).path
        filename = unquote(path.rsplit("/", 1)[-1])
        if not filename:
            continue
        _, frag = urldefrag(absolute)
        hashes: dict[str, str] = {}
        if "=" in frag:
            algo, _, digest = frag.partition("=")
            hashes[algo.lower()] = digest
        # PEP 714: prefer data-core-metadata, fall back to the PEP 658 name.
        meta_attr = attrs.get("data-core-metadata")
        if meta_attr is None:
            meta_attr = attrs.get("data-dist-info-metadata")
        files.append(
            IndexFile(
                filename=filename,
                url=absolute,
                hashes=hashes,
                requires_python=attrs.get("data-requires-python") or None,
                metadata=_html_metadata(meta_attr, url),
                yanked="data-yanked" in attrs,
            )
        )
    return tuple(files)


def parse_project_page(body: bytes, content_type: str, url: str) -> tuple[str, tuple[IndexFile, ...]]:
    """Dispatch on Content-Type (sniffing when the server says nothing useful)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise IndexMalformed(url, "body is not UTF-8 text") from None
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == JSON_TYPE or (ctype in ("application/json", "") and text.lstrip().startswith("{")):
        return "pep691", parse_project_json(text, url)
    if ctype in ("text/html", "application/vnd.pypi.simple.v1+html", "application/xhtml+xml", ""):
        return "pep503", parse_project_html(text, url)
    if ctype.startswith("application/vnd.pypi.simple.") :
        raise IndexMalformed(url, f"unsupported simple API content type {ctype}")
    raise IndexMalformed(url, f"content type {ctype or '(none)'} is not a simple-repository page")

