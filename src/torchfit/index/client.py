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

The page parsers live in `index.pages` (pure, raising only `IndexMalformed`) and
the disk cache in `index.cache`; their names are re-exported here.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.cache import DiskCache, default_cache_dir
from torchfit.index.pages import (
    JSON_TYPE,
    Fetched,
    IndexFile,
    ProjectPage,
    normalize_name,
    parse_project_html,
    parse_project_json,
    parse_project_page,
    project_url,
)
from torchfit.progress import Progress
from torchfit.redact import redact, strip_credentials

if TYPE_CHECKING:
    import requests

# PEP 691 content negotiation: JSON preferred, the HTML forms as fallbacks (the
# q-values are the ones the PEP's own example uses).
ACCEPT_SIMPLE = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01"
)
# 5xx that a retry can cure, and 429 (rate limit). 501/505 are not transient.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 60.0



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
    cache off. `progress` hears one redacted line per retry (`Progress.info`).
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
        progress: Progress | None = None,
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
        self.cache = DiskCache(Path(cache_dir) if cache_dir else default_cache_dir()) if use_cache else None
        self.sleep = sleep
        self.progress = progress or Progress()
        self.requests_made = 0

    # -- plumbing ---------------------------------------------------------------

    def _say(self, text: str) -> None:
        self.progress.info(redact(text))

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
        key = DiskCache.key(url, accept)
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


__all__ = [
    "ACCEPT_SIMPLE", "JSON_TYPE", "DiskCache", "Fetched", "IndexClient", "IndexFile",
    "IndexMalformed", "IndexUnavailable", "ProjectPage", "default_cache_dir", "normalize_name",
    "parse_project_html", "parse_project_json", "parse_project_page", "project_url",
]
