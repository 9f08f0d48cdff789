"""What the round-4 cases of the planning step share (indexes.py, build.py, export.py): tiny
real wheels and PEP 503 trees (tests/support/wheels.py, this checkout's), a torch tree of
stand-in wheels, and the assumed CPU host."""

from __future__ import annotations

import contextlib
import functools
import http.server
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from _common import Box

from tests.support.wheels import make_wheel, write_index

CPU = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "glibc=2.35", "--assume", "arch=x86_64")


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_a: object) -> None:
        pass

    def handle(self) -> None:
        with contextlib.suppress(ConnectionError):  # a client that stops reading a big body
            super().handle()


def serve_dir(box: Box, directory: Path, handler: type[http.server.SimpleHTTPRequestHandler] = Quiet, *,
              tls: tuple[str, str] | None = None) -> str:
    """The URL of `directory` served by `handler` (https with `tls`) until the case ends."""
    return box.serve(functools.partial(handler, directory=str(directory)), tls=tls)


def stand_in_torch(box: Box) -> Path:
    """box.work/torch/simple: stand-in torch 2.12.0 and 2.13.0 (+cpu) wheels, no code."""
    wheels = [make_wheel(box.work / "torch-wheels", "torch", f"{v}+cpu") for v in ("2.12.0", "2.13.0")]
    return write_index(box.work / "torch", wheels)








def error_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.startswith("torchfit: error:")), text.strip()[-200:])
