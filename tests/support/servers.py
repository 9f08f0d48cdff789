"""Real servers on 127.0.0.1 for the tests and scripts/rerun-defects.py, one copy each.

`http_server(answer)` is the tests' HTTP(S) server: each GET recorded, answered by a function.
`serve(handler)` is a raw TCP server that hangs: it accepts every connection and hands each to `handler(conn, stop)` in its own
thread; without a handler a connection is held open and never answered (a mirror that hangs).
It yields `http://127.0.0.1:PORT` and closes everything on exit.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message

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
