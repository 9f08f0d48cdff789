"""What the round-4 cases of the planning step share (indexes.py, build.py, export.py): tiny
real wheels and PEP 503 trees (tests/support/wheels.py, this checkout's), a torch tree of
stand-in wheels, and the assumed CPU host."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import io
import re
import sys
import tarfile
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


def serve_dir(box: Box, directory: Path) -> str:
    return box.serve(functools.partial(Quiet, directory=str(directory)))  # type: ignore[arg-type]


def stand_in_torch(box: Box) -> Path:
    """box.work/torch/simple: stand-in torch 2.12.0 and 2.13.0 (+cpu) wheels, no code."""
    wheels = [make_wheel(box.work / "torch-wheels", "torch", f"{v}+cpu") for v in ("2.12.0", "2.13.0")]
    return write_index(box.work / "torch", wheels)


def lying_metadata(root: Path, wheel: Path, body: bytes) -> Path:
    """A PEP 503 tree over `wheel` whose PEP 658 `.metadata` is `body` (advertised with its hash)."""
    simple = write_index(root, [wheel])
    (root / "files" / (wheel.name + ".metadata")).write_bytes(body)
    name = wheel.name.split("-")[0].replace("_", "-")
    page = simple / name / "index.html"
    page.write_text(re.sub(r'data-core-metadata="sha256=[0-9a-f]+"',
                           f'data-core-metadata="sha256={hashlib.sha256(body).hexdigest()}"', page.read_text()))
    return simple


def hostile_sdist(directory: Path, marker: Path, *, daemon: bool) -> Path:
    """hangpkg-1.0.tar.gz: an in-tree build backend that records its pid in `marker` when asked
    for metadata and, with `daemon`, leaves a setsid'd grandchild holding its pipes (sleeps)."""
    backend = f"""import os, time
def _run():
    open({str(marker)!r}, "a").write(f"{{os.getpid()}}\\n")
    if {daemon!r} and os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open({str(marker)!r}, "a").write(f"{{os.getpid()}}\\n")
            time.sleep(300)
        os._exit(0)
def get_requires_for_build_wheel(config_settings=None):
    return []
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _run()
    d = os.path.join(metadata_directory, "hangpkg-1.0.dist-info")
    os.makedirs(d)
    open(os.path.join(d, "METADATA"), "w").write("Metadata-Version: 2.1\\nName: hangpkg\\nVersion: 1.0\\n")
    return "hangpkg-1.0.dist-info"
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("not built here")
"""
    files = {"pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
                               '[project]\nname = "hangpkg"\ndynamic = ["version", "dependencies"]\n',
             "backend.py": backend}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "hangpkg-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"hangpkg-1.0/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def error_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.startswith("torchfit: error:")), text.strip()[-200:])
