"""Real TCP servers on 127.0.0.1 that hang, for the tests and scripts/rerun-defects.py (one copy).

`serve(handler)` accepts every connection and hands each to `handler(conn, stop)` in its own
thread; without a handler a connection is held open and never answered (a mirror that hangs).
It yields `http://127.0.0.1:PORT` and closes everything on exit.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

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
