"""Real servers on 127.0.0.1 for the tests, one copy each.

`http_server(answer)` is the tests' HTTP(S) server: each GET recorded, answered by a function;
`RangeFiles` is such an answer that serves files with Range requests (206), counting the bytes sent.
`serve(handler)` is a raw TCP server that hangs: it accepts every connection and hands each to `handler(conn, stop)` in its own
thread; without a handler a connection is held open and never answered (a mirror that hangs).
It yields `http://127.0.0.1:PORT` and closes everything on exit.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

Handler = Callable[[socket.socket, threading.Event], None]


@contextlib.contextmanager
def serve(handler: Handler | None = None) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            held.append(conn)
            if handler is not None:
                threading.Thread(target=handler, args=(conn, stop), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        sock.close()


# --- HTTP ------------------------------------------------------------------------------------

Answer = Callable[[http.server.BaseHTTPRequestHandler], None]


@dataclass
class HttpServer:
    """A server `http_server` started: its base URL, and what was asked of it (each GET's path and
    headers, in order)."""

    url: str
    seen: list[str] = field(default_factory=list)
    headers: list[Message] = field(default_factory=list)


@contextlib.contextmanager
def http_server(answer: Answer | None = None, *, handler: Callable[..., http.server.BaseHTTPRequestHandler] | None = None,
                tls: tuple[str, str] | None = None, http11: bool = False) -> Iterator[HttpServer]:
    """A real HTTP server on 127.0.0.1 in a thread until the block ends (https with `tls`, a
    (certificate, key) pair): the one copy of the tests' server. Each GET is recorded in the
    yielded `HttpServer` and answered by `answer(request)` (`reply` writes a whole response); or
    `handler` is the request handler (e.g. SimpleHTTPRequestHandler bound to a directory)."""
    server = HttpServer("")
    if handler is None:
        assert answer is not None, "http_server needs an answer or a handler"
        respond = answer

        class Answering(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if http11 else "HTTP/1.0"

            def do_GET(self) -> None:
                server.seen.append(self.path)
                server.headers.append(self.headers)
                respond(self)

            def log_message(self, *_args: object) -> None:
                pass

        handler = Answering
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    scheme = "http"
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*tls)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        scheme = "https"
    server.url = f"{scheme}://127.0.0.1:{httpd.server_address[1]}"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


def reply(request: http.server.BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str) -> None:
    """A whole response: the status, `headers` (`Content_Type=` for Content-Type), Content-Length, the body."""
    request.send_response(status)
    for k, v in headers.items():
        request.send_header(k.replace("_", "-"), v)
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    request.wfile.write(body)


class RangeFiles:
    """An `answer` for `http_server`: GET /NAME serves `files[NAME]` (bytes, or a file's path; or,
    with `files` a directory, the file NAME in it), honouring one `Range: bytes=A-B | A- | -N`
    with 206 and Content-Range unless `ranges` is False (then, like a bad range, the whole file,
    200); 404 for any other name. It writes `block` bytes at a time, `pause` s apart (a slow
    mirror), and counts in `sent` the bytes written of each name (a client that hangs up ends it)."""

    def __init__(self, files: Mapping[str, bytes | Path] | Path, *, ranges: bool = True, block: int = 1 << 20,
                 pause: float = 0.0) -> None:
        self.files, self.ranges, self.block, self.pause = files, ranges, block, pause
        self.sent: dict[str, int] = dict.fromkeys(files, 0) if isinstance(files, Mapping) else {}

    @property
    def total(self) -> int:
        """The bytes written of all files."""
        return sum(self.sent.values())

    def _body(self, name: str) -> bytes | Path | None:
        if isinstance(self.files, Mapping):
            return self.files.get(name)
        path = self.files / name
        return path if path.is_file() else None

    def __call__(self, request: http.server.BaseHTTPRequestHandler) -> None:
        name = request.path.lstrip("/").split("?")[0]
        body = self._body(name)
        if body is None:
            return reply(request, 404)
        size = len(body) if isinstance(body, bytes) else body.stat().st_size
        status, start, end = 200, 0, size - 1
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", request.headers.get("Range", ""))
        if self.ranges and m and any(m.groups()):
            a, b = m.groups()
            first, last = (size - int(b), size - 1) if not a else (int(a), int(b) if b else size - 1)
            if max(0, first) <= min(last, size - 1):
                status, start, end = 206, max(0, first), min(last, size - 1)
        request.send_response(status)
        if status == 206:
            request.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        request.send_header("Content-Length", str(end - start + 1))
        request.end_headers()
        self.sent.setdefault(name, 0)
        with io.BytesIO(body) if isinstance(body, bytes) else body.open("rb") as fh:
            fh.seek(start)
            try:
                for at in range(start, end + 1, self.block):
                    chunk = fh.read(min(self.block, end + 1 - at))
                    request.wfile.write(chunk)
                    self.sent[name] += len(chunk)
                    if self.pause:
                        time.sleep(self.pause)
            except OSError:  # the client hung up (it was stopped, or read what it wanted)
                pass
        return None
