"""Read Python package indexes: the one place torchfit speaks HTTP.

`IndexClient` fetches a project's page from a simple repository (PEP 691 JSON when
the server offers it, PEP 503 HTML otherwise) and a wheel's core metadata (PEP 658,
attribute renamed by PEP 714); reading inside a wheel (range requests) is
`torchfit.index.wheelmeta`. Around `requests` it adds what a nightly job against
a CDN needs: a timeout on every request, retries with exponential backoff on 5xx,
429 and connection errors, and a conditional-request cache on disk (ETag /
Last-Modified, under `$XDG_CACHE_HOME/torchfit/http`).

Index URLs may carry credentials (`https://user:TOKEN@mirror/simple`): requests
sends them as Basic auth, and every message, error and cache record passes through
`redact` first. No `requests` exception leaves this module: each becomes an
`IndexUnavailable` or `IndexMalformed` with the URL redacted.

The page parsers (`parse_project_json`, `parse_project_html`) are pure and raise
only `IndexMalformed`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit, urlunsplit

from torchfit._backports import FROZEN
from torchfit.errors import TorchfitError
from torchfit.redact import redact

if TYPE_CHECKING:
    import requests

PYPI_SIMPLE = "https://pypi.org/simple"
# PEP 691 content negotiation: JSON preferred, the HTML forms as fallbacks (the
# q-values are the ones the PEP's own example uses).
ACCEPT_SIMPLE = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01"
)
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
# 5xx that a retry can cure, and 429 (rate limit). 501/505 are not transient.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 60.0


class IndexUnavailable(TorchfitError):
    """A page could not be read: timeout, connection error, HTTP error after retries."""

    reference = "index-unavailable"

    def __init__(self, url: str, why: str, *, hint: str | None = None, kind: str = "http") -> None:
        self.url = redact(url)
        self.why = redact(why)
        # "connect": the host could not be reached at all (DNS, refused, connect
        # timeout): later requests to it will fail the same way. "timeout": it was
        # reached but answered too slowly. "http": it answered with an error.
        self.kind = kind
        super().__init__(f"{self.url}: {self.why}", hint=hint)


class IndexMalformed(TorchfitError):
    """A page was read but is not a simple-repository page torchfit can parse."""

    reference = "index-malformed"

    def __init__(self, url: str, why: str) -> None:
        self.url = redact(url)
        self.why = redact(why)
        super().__init__(f"malformed index page {self.url}: {self.why}")


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
    """PEP 503 normalized project name: `Torch_Vision` -> `torch-vision`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_url(index_url: str, project: str) -> str:
    """`https://host/simple` + `torch` -> `https://host/simple/torch/` (PEP 503: trailing slash)."""
    return index_url.rstrip("/") + "/" + normalize_name(project) + "/"


def strip_credentials(url: str) -> str:
    """The URL without its userinfo: what may be written to disk."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


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
        doc = json.loads(text)
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


# ---------------------------------------------------------------------------
# The cache
# ---------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/torchfit/http` (XDG default `~/.cache`)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "torchfit" / "http"


class _DiskCache:
    """Bodies and their validators, one pair of files per (URL, Accept) key.

    Records hold the URL without credentials; a cache the user cannot write is
    silently skipped (it is an optimisation, never a reason to fail).
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    @staticmethod
    def key(url: str, accept: str) -> str:
        return hashlib.sha256(f"{url}\n{accept}".encode()).hexdigest()

    def load(self, key: str) -> tuple[dict[str, Any], bytes] | None:
        try:
            meta = json.loads((self.root / f"{key}.json").read_text("utf-8"))
            body = (self.root / f"{key}.body").read_bytes()
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or hashlib.sha256(body).hexdigest() != meta.get("sha256"):
            return None
        return meta, body

    def store(self, key: str, meta: dict[str, Any], body: bytes) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            meta = {**meta, "sha256": hashlib.sha256(body).hexdigest()}
            for suffix, data in ((".body", body), (".json", json.dumps(meta).encode())):
                tmp = self.root / f"{key}{suffix}.tmp{os.getpid()}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, self.root / f"{key}{suffix}")
        except OSError:
            pass


# ---------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------


def _short_reason(exc: BaseException) -> str:
    """A one-line cause from a requests/urllib3 exception chain (no pool reprs)."""
    text = str(exc)
    for pattern, reason in (
        (r"Name or service not known|Failed to resolve|NameResolutionError|nodename nor servname|"
         r"Temporary failure in name resolution", "cannot resolve the host name"),
        (r"Connection refused", "connection refused"),
        (r"Connection reset", "connection reset by the server"),
        (r"CERTIFICATE_VERIFY_FAILED|SSLError|certificate verify failed", "TLS certificate verification failed"),
        (r"Network is unreachable", "network is unreachable"),
        (r"RemoteDisconnected|closed connection without response", "the server closed the connection"),
    ):
        if re.search(pattern, text):
            return reason
    return redact(text.splitlines()[0][:160]) if text else type(exc).__name__


class IndexClient:
    """HTTP for indexes: timeouts, retries with backoff, a conditional cache, redaction.

    `timeout` bounds each attempt (connect and read). A failed attempt (timeout,
    connection error, 5xx/429) is retried `retries` times, waiting `backoff * 2**n`
    seconds (or the server's Retry-After, up to 60 s). `cache_dir=None` turns the
    cache off. `observer` receives one redacted line per retry.
    """

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        cache_dir: Path | str | None = None,
        use_cache: bool = True,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        observer: Callable[[str], None] | None = None,
    ) -> None:
        import requests

        if not timeout > 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = max(0.0, backoff)
        if session is None:
            session = requests.Session()
            session.headers["User-Agent"] = _user_agent()
        self.session = session
        self.cache = _DiskCache(Path(cache_dir) if cache_dir else default_cache_dir()) if use_cache else None
        self.sleep = sleep
        self.observer = observer
        self.requests_made = 0

    # -- plumbing ---------------------------------------------------------------

    def _say(self, text: str) -> None:
        if self.observer is not None:
            self.observer(redact(text))

    def _send(self, url: str, headers: Mapping[str, str], *, stream: bool = False) -> requests.Response:
        """One GET with retries; returns the last response (any status but a retryable one).

        `stream`: the body is not read yet (index.wheelmeta reads big bodies in blocks).
        """
        import requests

        last, kind = "", "http"
        attempts = self.retries + 1
        for attempt in range(attempts):
            wait = self.backoff * (2 ** attempt)
            try:
                self.requests_made += 1
                resp = self.session.get(url, headers=dict(headers), timeout=self.timeout, allow_redirects=True,
                                        stream=stream)
            except requests.ConnectTimeout:
                last, kind = f"connection timed out after {self.timeout:g} s", "connect"
            except requests.Timeout:
                last, kind = f"timed out after {self.timeout:g} s", "timeout"
            except requests.ConnectionError as exc:
                last, kind = _short_reason(exc), "connect"
            except requests.RequestException as exc:
                # InvalidURL, TooManyRedirects, ...: retrying will not help.
                raise IndexUnavailable(url, _short_reason(exc)) from None
            else:
                if resp.status_code not in RETRY_STATUSES:
                    return resp
                last, kind = f"HTTP {resp.status_code} {resp.reason or ''}".strip(), "http"
                retry_after = resp.headers.get("Retry-After", "")
                if retry_after.isdigit():
                    wait = min(float(retry_after), MAX_RETRY_AFTER)
            if attempt + 1 < attempts:
                self._say(f"{url}: {last}; retry {attempt + 1}/{self.retries} in {wait:g} s")
                self.sleep(wait)
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        raise IndexUnavailable(
            url, f"{last} ({tries})", kind=kind,
            hint="check the network or the index URL; --timeout raises the per-request limit",
        )

    def get(self, url: str, accept: str = "*/*", *, expect_sha256: str | None = None) -> Fetched:
        """GET `url`, revalidating a cached copy; 404/410 come back as a status, other errors raise.

        With `expect_sha256` (a PEP 658 metadata hash) a cached body that matches is
        used without asking the server at all: its content is pinned by the hash.
        """
        key = _DiskCache.key(url, accept)
        cached = self.cache.load(key) if self.cache else None
        if cached and expect_sha256 and cached[0].get("sha256") == expect_sha256.lower():
            return Fetched(self._final_url(url, cached[0]), 200, cached[0].get("content_type", ""), cached[1], True)
        headers = {"Accept": accept}
        if cached:
            if cached[0].get("etag"):
                headers["If-None-Match"] = cached[0]["etag"]
            if cached[0].get("last_modified"):
                headers["If-Modified-Since"] = cached[0]["last_modified"]
        resp = self._send(url, headers)
        final = resp.url or url
        if resp.status_code == 304 and cached:
            return Fetched(self._final_url(url, cached[0]), 200, cached[0].get("content_type", ""), cached[1], True)
        if resp.status_code in (404, 410):
            return Fetched(final, resp.status_code, "", b"")
        if resp.status_code in (401, 403):
            raise IndexUnavailable(
                final, f"HTTP {resp.status_code}: the index refused the request",
                hint="credentials go in the URL (https://user:TOKEN@host/...) or in ~/.netrc",
            )
        if resp.status_code != 200:
            raise IndexUnavailable(final, f"HTTP {resp.status_code} {resp.reason or ''}".strip())
        body = resp.content
        ctype = resp.headers.get("Content-Type", "")
        if expect_sha256 and hashlib.sha256(body).hexdigest() != expect_sha256.lower():
            raise IndexMalformed(final, "body does not match the sha256 the index advertised")
        etag, modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
        if self.cache and (etag or modified or expect_sha256):
            self.cache.store(key, {
                "url": strip_credentials(url),
                "final_url": strip_credentials(final),
                "etag": etag,
                "last_modified": modified,
                "content_type": ctype,
            }, body)
        return Fetched(final, 200, ctype, body)

    @staticmethod
    def _final_url(url: str, meta: Mapping[str, Any]) -> str:
        """The cached final URL, with the request's credentials put back when the host is the same."""
        final = str(meta.get("final_url") or url)
        req = urlsplit(url)
        fin = urlsplit(final)
        if "@" in req.netloc and "@" not in fin.netloc and req.hostname == fin.hostname:
            return urlunsplit(fin._replace(netloc=req.netloc))
        return final

    # -- the simple API -----------------------------------------------------------

    def project_page(self, index_url: str, project: str) -> ProjectPage | None:
        """The files of `project` under `index_url`, or None when the index has no such page."""
        url = project_url(index_url, project)
        got = self.get(url, ACCEPT_SIMPLE)
        if got.status != 200:
            return None
        fmt, files = parse_project_page(got.body, got.content_type, got.url)
        return ProjectPage(normalize_name(project), got.url, fmt, files, got.from_cache)

    def core_metadata(self, file: IndexFile, *, probe: bool = True) -> str | None:
        """A wheel's METADATA through PEP 658, or None when the index has none for it.

        When the page does not advertise a metadata file, `probe` still tries
        FILE.metadata once (some mirrors drop the attribute but serve the file).
        """
        if file.metadata is None and not probe:
            return None
        expect = (file.metadata or {}).get("sha256")
        got = self.get(file.metadata_url, "*/*", expect_sha256=expect)
        if got.status != 200:
            if file.metadata is not None:
                raise IndexUnavailable(file.metadata_url, f"HTTP {got.status} for advertised metadata")
            return None
        return got.body.decode("utf-8", errors="replace")


def _user_agent() -> str:
    from torchfit import __version__

    return f"torchfit/{__version__} (+matrix check)"
