"""Read Python package indexes: the one place torchfit speaks HTTP.

`IndexClient` fetches a project's page from a simple repository (PEP 691 JSON when
the server offers it, PEP 503 HTML otherwise) and a wheel's core metadata (PEP 658,
attribute renamed by PEP 714); a `file://` tree (a site's mirror on a shared file system)
is read from disk the same way: `DIR/PROJECT/index.html`, a missing file a 404; reading inside a wheel (range requests) is
`torchfit.index.wheelmeta`. Around `requests` it adds what a nightly job against
a CDN needs: a timeout on every request, retries with exponential backoff on 5xx,
429 and connection errors, and a conditional-request cache on disk (ETag /
Last-Modified, under `$XDG_CACHE_HOME/torchfit/http`).

Index URLs may carry credentials (`https://user:TOKEN@mirror/simple`): requests
sends them as Basic auth, and every message, error and cache record passes through
`redact` first. No `requests` exception leaves this module: each becomes an
`IndexUnavailable` or `IndexMalformed` with the URL redacted.

The page parsers live in `index.pages` (pure, raising only `IndexMalformed`) and
the disk cache in `index.cache`.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

from torchfit.background import Background, no_fork, start_quiet
from torchfit.errors import IndexMalformed, IndexUnavailable
from torchfit.index.cache import DiskCache, default_cache_dir
from torchfit.index.pages import (
    Fetched,
    IndexFile,
    ProjectPage,
    normalize_name,
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
# The most bytes of one body torchfit keeps (after Content-Encoding is undone): the
# biggest simple page measured, download.pytorch.org/whl/torch/ as PEP 503 HTML, is a
# few MB; a gzip-bombed page (1 MB on the wire, 3 GB inflated) stops here.
MAX_BODY_BYTES = 64 << 20
# Redirects followed per request, each hop checked (https -> http refused, http(s) only).
MAX_REDIRECTS = 10
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# 5xx that a retry can cure, and 429 (rate limit). 501/505 are not transient.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 60.0

# The overall deadline of one GET: every attempt, the waits between them and reading the
# body. Per-attempt timeouts alone do not bound a request (a server that trickles a byte
# per read timeout, or retries stacking up). Default: 10 per-attempt timeouts, at least
# 300 s (a big range read of a CUDA wheel on a slow link fits); $TORCHFIT_INDEX_DEADLINE
# (seconds) overrides it.
DEADLINE_ENV = "TORCHFIT_INDEX_DEADLINE"
# What to do about a source that cannot be reached, in one place: every command that reads an
# index (resolve through uv, install's own reads, add, export) says the same (issue 35, item 4).
UNREACHABLE_HINT = ("check the URL and the network, or give a reachable mirror with "
                    "--torch-index-url / --index-url (`torchfit docs mirrors`)")
# While a request is in flight longer than this, a line says what is awaited and since when.
NOTICE_EVERY_S = 15.0


def default_deadline(timeout: float) -> float:
    """$TORCHFIT_INDEX_DEADLINE when it is a finite number > 0, else max(300, 10 * timeout)."""
    try:
        value = float(os.environ.get(DEADLINE_ENV, ""))
    except ValueError:
        value = math.nan
    if math.isfinite(value) and 0 < value < 1e7:
        return value
    return max(300.0, 10 * timeout)


def _abort(resp: requests.Response) -> None:
    """Shut the response's socket down (from the deadline timer): a blocked read returns."""
    conn = getattr(resp.raw, "connection", None) or getattr(resp.raw, "_connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)



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


# What one planning run keeps of the pages it read, at most (a page is asked for once per run)
MAX_RUN_MEMO_BYTES = 64 << 20


def _deadline_timer(resp: requests.Response, end: float) -> None:
    """A timer that aborts `resp`'s body at `end` (monotonic), kept on it as `_torchfit_deadline`;
    started with the signals blocked in it (background.start_quiet), and cancelled when the
    response is closed, read or not (a redirect probe closes it unread)."""
    timer = threading.Timer(max(0.0, end - time.monotonic()), _abort, (resp,))
    timer.daemon = True
    start_quiet(timer)
    resp._torchfit_deadline = (end, timer)  # type: ignore[attr-defined]
    given = resp.close

    def close() -> None:
        timer.cancel()
        given()

    resp.close = close  # type: ignore[method-assign]


class _LazySession:
    """The client's requests session, made at the first request that goes out: requests (urllib3,
    charset_normalizer, idna, http.cookiejar: ~100 ms of CPU to import) is not loaded by a run
    whose every page is fresh in the cache (PyPI's are for 600 s; issue 37)."""

    def __init__(self, session: requests.Session | None) -> None:
        self._session = session
        self._lock = threading.Lock()  # the planning's threads share one client

    def get(self) -> requests.Session:
        with self._lock:
            if self._session is None:
                with no_fork():  # requests imports logging, whose fork hooks a spawn would run half
                    import requests

                self._session = requests.Session()
                self._session.headers["User-Agent"] = _user_agent()
            return self._session


class IndexClient:
    """HTTP for indexes: timeouts, retries with backoff, a conditional cache, redaction.

    `timeout` bounds each attempt (connect and read). A failed attempt (timeout,
    connection error, 5xx/429) is retried `retries` times, waiting `backoff * 2**n`
    seconds (or the server's Retry-After, up to 60 s). `cache_dir=None` turns the
    cache off. `progress` hears one redacted line per retry (`Progress.info`), and
    one every 15 s while a request waits, naming the URL and since when.
    `deadline` bounds each GET as a whole (attempts, backoff, body): past it the
    request fails with `IndexUnavailable` (kind "timeout"); default `default_deadline`.
    A body is kept up to `MAX_BODY_BYTES` (decompressed) unless the caller sets its own
    limit. Redirects are followed by hand, at most `MAX_REDIRECTS`, each hop checked:
    only http(s), and never from https to plain http unless `allow_insecure`
    (--allow-insecure-index); credentials of the URL go only to its own host, and over
    plain http only with `allow_insecure`.
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
        deadline: float | None = None,
        honor_max_age: bool = False,
        allow_insecure: bool = False,
    ) -> None:
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout
        self.deadline = deadline if deadline is not None and deadline > 0 else default_deadline(timeout)
        self.retries = max(0, retries)
        self.backoff = max(0.0, backoff)
        self._session = _LazySession(session)
        self.cache = DiskCache(Path(cache_dir) if cache_dir else default_cache_dir()) if use_cache else None
        self.sleep = sleep
        self.progress = progress or Progress()
        self.requests_made = 0
        # Serve a cached body the server called fresh (Cache-Control max-age) without asking:
        # for the project's reads at every resolve. `matrix check` always revalidates.
        self.honor_max_age = honor_max_age
        # honor_max_age (one planning run): a page read once is not asked for again by the same run
        # (planning reads a project's pages while uv solves, then judges them: one request, not two)
        self._read: dict[str, Fetched] = {}
        self._read_bytes = 0
        self.allow_insecure = allow_insecure

    @property
    def session(self) -> requests.Session:
        return self._session.get()

    # -- plumbing ---------------------------------------------------------------

    def _say(self, text: str) -> None:
        self.progress.info(redact(text))

    @contextlib.contextmanager
    def _notices(self, url: str) -> Iterator[None]:
        """A line every NOTICE_EVERY_S while the block runs: what is awaited, since when."""
        since, wall = time.monotonic(), time.strftime("%H:%M:%S")
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(NOTICE_EVERY_S):
                self._say(f"waiting for {url} since {wall} ({time.monotonic() - since:.0f} s; "
                          f"gives up after {self.deadline:g} s)")

        Background(tick, name="torchfit-index-notice")
        try:
            yield
        finally:
            stop.set()

    def _past_deadline(self, url: str, end: float) -> IndexUnavailable:
        return IndexUnavailable(
            url, f"no complete answer within {self.deadline:g} s (the overall deadline of a request)",
            kind="timeout",
            hint=f"check the index; {DEADLINE_ENV}=SECONDS raises the deadline, --timeout the per-attempt limit")

    def _send(self, url: str, headers: Mapping[str, str], *, stream: bool = False,
              limit: int = MAX_BODY_BYTES) -> requests.Response:
        """One GET with retries, all within the deadline; returns the last response (any
        status but a retryable one), its body read (at most `limit` bytes) unless `stream`.

        `stream`: the body is not read yet (index.wheelmeta reads big bodies in blocks,
        through `body`/`iter_body`, which keep to the same deadline).
        """
        end = time.monotonic() + self.deadline
        with self._notices(url):
            resp = self._attempts(url, headers, end)
            _deadline_timer(resp, end)
            if not stream:
                self.body(resp, url, limit)
            return resp

    def body(self, resp: requests.Response, url: str, limit: int | None = MAX_BODY_BYTES) -> bytes:
        """The whole body of a response from `_send`, read within its deadline, at most
        `limit` bytes (IndexMalformed past it: nothing bigger is held in memory)."""
        if resp._content_consumed and isinstance(resp._content, bytes):
            if limit is not None and len(resp._content) > limit:
                raise _too_big(url, limit)
            return resp._content
        data = b"".join(self.iter_body(resp, url, limit=limit))
        resp._content = data
        resp._content_consumed = True
        return data

    def download(self, url: str, fh: BinaryIO, *, limit: int | None = None, start: int = 0,
                 digest: Any = None) -> tuple[int, str]:
        """GET `url` into the open binary file `fh` in blocks (retries, the deadline, redirects
        checked hop by hop, as every page); (bytes, sha256 hex) of the file.
        IndexUnavailable for an HTTP error.

        `start`: `fh` already holds the file's first `start` bytes (an interrupted download,
        positioned at its end) and `digest` their sha256 so far: only the rest is asked for
        (`Range: bytes=START-`, RFC 9110 14.2). A server that answers the whole file (200) is
        written from the beginning again; one that says the range is past the end (416)
        has nothing more to send (the sha256 then says whether the part was whole).

        `limit`: the file's size as its lock gives it: a body that would make the file longer
        is refused at its Content-Length, else where it passes the size, nothing more written
        (IndexUnavailable: a server sending more than the file fills the disk)."""
        import hashlib

        headers = {"Accept": "*/*"}
        if start:
            headers["Range"] = f"bytes={start}-"
        resp = self._send(url, headers, stream=True)
        try:
            resumed = bool(start) and resp.status_code == 206 and resp.headers.get(
                "Content-Range", "").startswith(f"bytes {start}-")
            if start and digest is not None and resp.status_code == 416:
                return start, digest.hexdigest()
            if not resumed and resp.status_code != 200:
                raise IndexUnavailable(url, f"HTTP {resp.status_code} {resp.reason or ''}".strip())
            if resumed and digest is not None:
                n = start
            else:
                if start:
                    fh.seek(0)
                    fh.truncate()
                digest = hashlib.sha256()
                n = 0
            try:
                for block in self.iter_body(resp, url, limit=None if limit is None else max(0, limit - n)):
                    fh.write(block)
                    digest.update(block)
                    n += len(block)
            except IndexMalformed:  # iter_body's only one: past the limit
                raise IndexUnavailable(
                    url, f"sends more than {limit} bytes, the size the lock gives the file; stopped there",
                    hint="the server's file is not the one the lock names: check the lock and the mirror") from None
            return n, digest.hexdigest()
        finally:
            resp.close()

    def iter_body(self, resp: requests.Response, url: str, chunk: int = 1 << 16,
                  limit: int | None = None) -> Iterator[bytes]:
        """The body in blocks, within the request's deadline (IndexUnavailable past it)
        and `limit` bytes after decompression (IndexMalformed past it). Nothing is kept:
        a caller that streams a big body to disk holds one block at a time."""
        import requests

        end, timer = getattr(resp, "_torchfit_deadline", (math.inf, None))
        if resp._content_consumed and isinstance(resp._content, bytes):
            if limit is not None and len(resp._content) > limit:
                raise _too_big(url, limit)
            yield resp._content
            return
        declared = resp.headers.get("Content-Length", "")
        if (limit is not None and declared.isdigit() and int(declared) > limit
                and resp.headers.get("Content-Encoding", "identity").lower() == "identity"):
            resp.close()
            raise _too_big(url, limit, int(declared))
        got = 0
        try:
            for block in resp.iter_content(chunk):
                if time.monotonic() > end:
                    raise self._past_deadline(url, end)
                got += len(block)
                if limit is not None and got > limit:
                    resp.close()
                    raise _too_big(url, limit)
                yield block
        except (requests.RequestException, OSError) as exc:
            if time.monotonic() >= end:
                raise self._past_deadline(url, end) from None
            raise IndexUnavailable(url, f"the body could not be read: {_short_reason(exc)}") from None
        finally:
            if timer is not None:
                timer.cancel()

    def _follow(self, url: str, headers: Mapping[str, str], per: float) -> requests.Response:
        """One attempt: GET `url` and follow its redirects by hand, checking every hop."""
        from urllib.parse import urljoin

        start = urlsplit(url)
        auth = (start.username or "", start.password or "") if start.username or start.password else None
        current = url
        seen = {strip_credentials(url)}
        for _hop in range(MAX_REDIRECTS + 1):
            here = urlsplit(current)
            # The URL's credentials go to its own host only, never over a downgrade, and over
            # plain http only with --allow-insecure-index (every caller refuses http:// first
            # without it; this holds for one that does not: a secret never travels in clear).
            secure = here.scheme == "https" or (here.scheme == start.scheme and self.allow_insecure)
            send_auth: Any = auth if here.hostname == start.hostname and secure else None
            target = current
            if not secure:
                # requests takes a URL's user:password itself, and ~/.netrc's entry when no auth
                # is given: the userinfo goes, and an auth that adds nothing keeps .netrc out.
                target = urlunsplit(here._replace(netloc=here.netloc.rpartition("@")[2]))
                send_auth = _no_credentials
            resp = self.session.get(target, headers=dict(headers), timeout=(per, per), allow_redirects=False,
                                    stream=True, auth=send_auth)
            location = resp.headers.get("Location")
            if resp.status_code not in _REDIRECT_STATUSES or not location:
                return resp
            resp.close()
            nxt = urljoin(current, location)
            parts = urlsplit(nxt)
            scheme = parts.scheme.lower()
            if scheme not in ("http", "https") or not parts.hostname:
                raise IndexUnavailable(url, f"redirected to {redact(nxt)}, which is not an http(s) URL; refused",
                                       kind="redirect")
            if here.scheme.lower() == "https" and scheme == "http" and not self.allow_insecure:
                raise IndexUnavailable(
                    url, f"redirected from https to plain http ({redact(nxt)}); refused: packages and "
                         "credentials would travel unencrypted",
                    hint="fix the mirror's redirect, or pass --allow-insecure-index to follow it", kind="redirect")
            key = strip_credentials(nxt)
            if key in seen:
                raise IndexUnavailable(url, f"redirect loop: {redact(nxt)} was already visited", kind="redirect")
            seen.add(key)
            current = nxt
        raise IndexUnavailable(url, f"more than {MAX_REDIRECTS} redirects; refused", kind="redirect")

    def _attempts(self, url: str, headers: Mapping[str, str], end: float) -> requests.Response:
        import requests

        last, kind = "", "http"
        attempts = self.retries + 1
        tried = 0
        for attempt in range(attempts):
            wait = self.backoff * (2 ** attempt)
            left = end - time.monotonic()
            if left <= 0:
                break
            # Each attempt's connect and read timeouts end at the deadline at the latest.
            per = min(self.timeout, left)
            tried += 1
            try:
                self.requests_made += 1
                resp = self._follow(url, headers, per)
            except requests.ConnectTimeout:
                last, kind = f"connection timed out after {per:g} s", "connect"
            except requests.Timeout:
                last, kind = f"timed out after {per:g} s", "timeout"
            except requests.ConnectionError as exc:
                last, kind = _short_reason(exc), "connect"
            except requests.RequestException as exc:
                # InvalidURL, TooManyRedirects, ...: retrying will not help.
                raise IndexUnavailable(url, _short_reason(exc)) from None
            else:
                if resp.status_code not in RETRY_STATUSES:
                    return resp
                resp.close()
                last, kind = f"HTTP {resp.status_code} {resp.reason or ''}".strip(), "http"
                retry_after = resp.headers.get("Retry-After", "")
                if retry_after.isdigit():
                    wait = min(float(retry_after), MAX_RETRY_AFTER)
            if attempt + 1 < attempts:
                if time.monotonic() + wait >= end:
                    break
                self._say(f"{url}: {last}; retry {attempt + 1}/{self.retries} in {wait:g} s")
                self.sleep(wait)
        if tried < attempts:
            raise IndexUnavailable(
                url, f"{last + '; ' if last else ''}no complete answer within {self.deadline:g} s "
                     f"(the overall deadline of a request, {tried} of {attempts} attempts made)",
                kind="timeout",
                hint=f"{UNREACHABLE_HINT}; {DEADLINE_ENV}=SECONDS raises the deadline")
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        raise IndexUnavailable(
            url, f"{last} ({tries})", kind=kind,
            hint=f"{UNREACHABLE_HINT}; --timeout raises the per-request limit",
        )

    def get(self, url: str, accept: str = "*/*", *, expect_sha256: str | None = None,
            limit: int = MAX_BODY_BYTES) -> Fetched:
        """GET `url`, revalidating a cached copy; 404/410 come back as a status, other errors raise.

        `limit`: the most bytes of body read (IndexMalformed past it), a cached one included.

        With `expect_sha256` (a PEP 658 metadata hash) a cached body that matches is
        used without asking the server at all: its content is pinned by the hash.
        """
        key = DiskCache.key(url, accept)
        again = self._read.get(key) if self.honor_max_age else None
        if again is not None and len(again.body) <= limit:
            return again
        got = self._get(key, url, accept, expect_sha256=expect_sha256, limit=limit)
        if self.honor_max_age and got.status == 200 and self._read_bytes + len(got.body) <= MAX_RUN_MEMO_BYTES:
            self._read[key] = got
            self._read_bytes += len(got.body)
        return got

    def _get(self, key: str, url: str, accept: str, *, expect_sha256: str | None, limit: int) -> Fetched:
        cached = self.cache.load(key) if self.cache else None
        if cached and len(cached[1]) > limit:
            cached = None  # kept under a larger limit: this reader asks again, bounded
        if cached and expect_sha256 and cached[0].get("sha256") == expect_sha256.lower():
            return Fetched(self._final_url(url, cached[0]), 200, cached[0].get("content_type", ""), cached[1], True)
        if cached and self.honor_max_age and float(cached[0].get("fresh_until") or 0) > time.time():
            # Still fresh by the server's own Cache-Control (PyPI: max-age=600), as pip and uv read it.
            return Fetched(self._final_url(url, cached[0]), 200, cached[0].get("content_type", ""), cached[1], True)
        headers = {"Accept": accept}
        if cached:
            if cached[0].get("etag"):
                headers["If-None-Match"] = cached[0]["etag"]
            if cached[0].get("last_modified"):
                headers["If-Modified-Since"] = cached[0]["last_modified"]
        resp = self._send(url, headers, limit=limit)
        final = resp.url or url
        if resp.status_code == 304 and cached:
            fresh = _fresh_until(resp.headers.get("Cache-Control"))
            if self.cache and fresh:
                self.cache.store(key, {**cached[0], "fresh_until": fresh}, cached[1])
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
        body = self.body(resp, url, limit)
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
                "fresh_until": _fresh_until(resp.headers.get("Cache-Control")),
            }, body)
        return Fetched(final, 200, ctype, body)

    @staticmethod
    def _final_url(url: str, meta: Mapping[str, object]) -> str:
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

    def core_metadata(self, file: IndexFile, *, probe: bool = True, limit: int = MAX_BODY_BYTES) -> str | None:
        """A wheel's METADATA through PEP 658, or None when the index has none for it.

        When the page does not advertise a metadata file, `probe` still tries
        FILE.metadata once (some mirrors drop the attribute but serve the file).
        `limit`: its most bytes (IndexMalformed past it).
        """
        if file.metadata is None and not probe:
            return None
        expect = (file.metadata or {}).get("sha256")
        got = self.get(file.metadata_url, "*/*", expect_sha256=expect, limit=limit)
        if got.status != 200:
            if file.metadata is not None:
                raise IndexUnavailable(file.metadata_url, f"HTTP {got.status} for advertised metadata")
            return None
        return got.body.decode("utf-8", errors="replace")


def check_no_downgrade(client: IndexClient, index_url: str, project: str = "torch") -> None:
    """IndexUnavailable when an https index sends `project`'s page, or lists its files, over
    plain http (a redirect, or http:// links): uv and pip would follow either silently and
    fetch the wheels in clear. Nothing for an http:// or file:// index (refused or allowed
    elsewhere); a page the index does not have is left to the installer to report."""
    if urlsplit(index_url).scheme.lower() != "https" or client.allow_insecure:
        return
    page = client.project_page(index_url, project)  # each redirect hop checked by the client
    plain = [f.url for f in page.files if urlsplit(f.url).scheme.lower() == "http"] if page else []
    if plain:
        raise IndexUnavailable(
            index_url, f"lists {len(plain)} {project} file(s) over plain http ({redact(plain[0])}); refused: "
                       "the wheels would travel unencrypted",
            hint="fix the mirror, or pass --allow-insecure-index to install from it anyway")


# Files whose redirects are checked at once (check_file_redirects): each check is one small
# request per hop, so a CUDA plan's few hundred wheel URLs take a second or two, not minutes.
REDIRECT_CHECK_WORKERS = 8


def check_file_redirects(client: IndexClient, urls: Iterable[str]) -> int:
    """IndexUnavailable (kind "redirect") naming the first https file of `urls` whose redirects
    lead to plain http (or elsewhere than http(s), or loop): uv 0.13.9 and pip 23 follow such a
    hop silently when they download it (measured, issue 25), so the file would travel in clear.

    Each https URL is asked for its first byte (`Range: bytes=0-0`, no body read: HEAD is refused
    by some signed-URL stores) and its redirects followed hop by hop by the client's own rule
    (`IndexClient._follow`); at most REDIRECT_CHECK_WORKERS at once. Any other failure (the host
    down, an HTTP error) is left to the installer to report: uv's cache may hold the file. Nothing
    is asked with --allow-insecure-index (`client.allow_insecure`), nor for http://, file:// or
    path URLs (refused or allowed where the sources are judged), nor for the other files of a host
    that did not answer one (issue 34, T1). Returns how many answered, and says it (`client.progress`)."""
    from torchfit.background import map_in_threads

    if client.allow_insecure:
        return 0
    todo = list(dict.fromkeys(u for u in urls if urlsplit(u).scheme.lower() == "https"))
    # A host that did not answer one probe (its name unknown, the connection refused, the
    # deadline past) is not asked again: uv reports it. Probing each of its files in turn took a
    # lock of 4,000 files on a dead host past 120 s (issue 34, T1).
    unreachable: set[str] = set()

    def probe(url: str) -> IndexUnavailable | None:
        host = urlsplit(url).netloc.lower()
        if host in unreachable:
            return None
        try:
            client._send(url, {"Accept": "*/*", "Range": "bytes=0-0"}, stream=True).close()
        except IndexUnavailable as exc:
            if exc.kind == "redirect":
                return exc
            unreachable.add(host)
            return None
        except IndexMalformed:
            return None
        return None

    if not todo:
        return 0
    refused = [exc for exc in map_in_threads(probe, todo, REDIRECT_CHECK_WORKERS) if exc is not None]
    if refused:
        raise refused[0]
    left = sum(urlsplit(u).netloc.lower() in unreachable for u in todo)
    asked = len(todo) - left
    client.progress.info(f"checked the redirects of {asked} file URL{'s' * (asked != 1)}: none to plain http"
                         + (f"; {left} on {len(unreachable)} host(s) that did not answer left to the installer"
                            if left else ""))
    return asked


class LocalIndexClient(IndexClient):
    """An IndexClient that reads `file://` URLs from disk too (`_get_local`): for a reader told
    that its index is a local tree (`matrix check` of a site's mirror); elsewhere a page's
    file:// link goes to requests, which refuses it."""

    def get(self, url: str, accept: str = "*/*", *, expect_sha256: str | None = None,
            limit: int = MAX_BODY_BYTES) -> Fetched:
        if urlsplit(url).scheme.lower() == "file":
            return _get_local(url, limit, expect_sha256)
        return super().get(url, accept, expect_sha256=expect_sha256, limit=limit)


def _get_local(url: str, limit: int, expect_sha256: str | None) -> Fetched:
    """A `file://` URL read from disk as a server would answer it: a directory's (or a URL
    ending in `/`'s) `index.html` (PEP 503 trees as mirrors and `pip download` trees hold
    them), 404 for a missing file; a regular file only, at most `limit` bytes (IndexMalformed
    past it, or for a body that is not the advertised sha256), never blocking
    (`inputs.read_regular`)."""
    import errno
    from urllib.parse import unquote

    from torchfit.inputs import read_regular

    path = unquote(urlsplit(url).path)
    if url.endswith("/") or os.path.isdir(path):
        path = os.path.join(path, "index.html")
    try:
        body = read_regular(path, limit)
    except FileNotFoundError:
        return Fetched(url, 404, "", b"")
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise _too_big(url, limit) from None
        raise IndexUnavailable(url, f"cannot read {path}: {exc.strerror or exc}", kind="local") from None
    if expect_sha256 and hashlib.sha256(body).hexdigest() != expect_sha256.lower():
        raise IndexMalformed(url, "file does not match the sha256 the index advertised")
    return Fetched(url, 200, "text/html" if path.endswith(".html") else "application/octet-stream", body)


def _no_credentials(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """The `auth` of a request that must carry none (plain http without --allow-insecure-index)."""
    return request


def _too_big(url: str, limit: int, declared: int | None = None) -> IndexMalformed:
    size = f"{declared} bytes" if declared is not None else f"more than {limit} bytes"
    return IndexMalformed(url, f"the answer is {size} (decompressed); torchfit reads at most {limit} "
                               "bytes of it (a compression bomb, or not an index?)")


def _fresh_until(cache_control: str | None) -> float | None:
    """The time until which a response may be used without asking again (RFC 9111 max-age)."""
    if not cache_control:
        return None
    directives = [d.strip().lower() for d in cache_control.split(",")]
    if any(d in ("no-cache", "no-store") for d in directives):
        return None
    for d in directives:
        if d.startswith("max-age="):
            try:
                age = float(d.split("=", 1)[1])
            except ValueError:
                return None
            return time.time() + min(age, 3600.0) if age > 0 else None
    return None


def _user_agent() -> str:
    from torchfit import __version__

    return f"torchfit/{__version__} (+matrix check)"


__all__ = ["ACCEPT_SIMPLE", "IndexClient", "check_file_redirects", "check_no_downgrade"]
