"""Tiny real wheels and real PEP 503 indexes for project tests (issue 18), in one place.

`make_wheel` writes a valid wheel (METADATA with Requires-Dist/Requires-Python, WHEEL,
RECORD with sha256, one module) that pip and uv install; `make_sdist` a source
distribution whose PKG-INFO uv reads without a build; `write_index` lays out a
PEP 503 tree over wheels (links with #sha256=, PEP 658 `.metadata` files beside them
when asked); `serve_dir` serves a directory on 127.0.0.1 with the standard library's
HTTP server, so the index is read over real HTTP. Hostile ones (issue 25):
`write_index_with_metadata` (a PEP 658 `.metadata` that is not the wheel's), `hostile_sdist`
(a build backend that records that it ran and may leave a daemon holding its pipes).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import http.server
import io
import re
import tarfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from tests.support.servers import http_server


def record_digest(data: bytes) -> str:
    """A RECORD line's hash field for `data`: sha256=<urlsafe base64, no padding> (PEP 376)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def sha256_file(path: Path) -> str:
    """A file's sha256, hex (what an index's #sha256= and a lock carry), read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def metadata_text(name: str, version: str, requires: Sequence[str] = (), requires_python: str | None = None) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n\n"


def make_wheel(directory: Path, name: str, version: str, requires: Sequence[str] = (),
               requires_python: str | None = None, tag: str = "py3-none-any",
               files: dict[str, bytes] | None = None) -> Path:
    """A real wheel `name-version-TAG.whl` in `directory`; `files`: its package files (path ->
    bytes) in place of the one module `NAME_mod/__init__.py`."""
    directory.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {
        **(files or {f"{dist}_mod/__init__.py": f"VERSION = {version!r}\n".encode()}),
        f"{info}/METADATA": metadata_text(name, version, requires, requires_python).encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: torchfit-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
    }
    record = "".join(f"{path},{record_digest(data)},{len(data)}\n" for path, data in files.items()) + f"{info}/RECORD,,\n"
    path = directory / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name_in_zip, data in files.items():
            zf.writestr(name_in_zip, data)
        zf.writestr(f"{info}/RECORD", record)
    return path


def make_sdist(directory: Path, name: str, version: str, requires: Sequence[str] = (),
               requires_python: str | None = None, *, metadata_version: str = "2.2") -> Path:
    """A real sdist `name-version.tar.gz` in `directory` whose PKG-INFO states its requirements
    statically (Metadata-Version 2.2+, no `Dynamic:` field: PEP 643), so uv reads them without a
    build (uv 0.13.10, measured); its setup.py fails if a build is ever run."""
    head = metadata_text(name, version, requires, requires_python).replace(
        "Metadata-Version: 2.1", f"Metadata-Version: {metadata_version}", 1)
    files = {"PKG-INFO": head, "setup.py": f"raise SystemExit('{name} {version}: this build must not run')\n"}
    return write_sdist(directory, f"{name.replace('-', '_')}-{version}", files)


def write_sdist(directory: Path, base: str, files: dict[str, str]) -> Path:
    """`directory/BASE.tar.gz` holding `files` (name -> text) under `BASE/`: the sdist layout."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for member, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{base}/{member}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def metadata_bomb(path: Path, mib: int) -> Path:
    """A torch wheel at `path` whose METADATA is `mib` MiB (a header, then zeros: 2 MB on disk for
    1.9 GiB), its size declared truly in both zip headers: only a bound on what a METADATA may
    be stops a reader from inflating it whole."""
    info = zipfile.ZipInfo("torch-2.13.0+cu128.dist-info/METADATA")
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/__init__.py", b"")
        with zf.open(info, "w", force_zip64=True) as fh:
            fh.write(b"Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cu128\n\n")
            block = b"\0" * (1 << 20)
            for _ in range(mib):
                fh.write(block)
    return path


def write_index(root: Path, wheels: Sequence[Path], *, pep658: bool = True) -> Path:
    """root/simple/<project>/index.html over `wheels` (copied under root/files); returns root/simple."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[str]] = {}
    for wheel in wheels:
        data = wheel.read_bytes()
        (files / wheel.name).write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        attrs = ""
        if pep658:
            with zipfile.ZipFile(wheel) as zf:
                meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
                body = zf.read(meta)
            (files / (wheel.name + ".metadata")).write_bytes(body)
            attrs = f' data-core-metadata="sha256={hashlib.sha256(body).hexdigest()}"'
        project = canonicalize_name(wheel.name.split("-")[0])
        href = f"../../files/{wheel.name.replace('+', '%2B')}#sha256={digest}"
        projects.setdefault(project, []).append(f'<a href="{href}"{attrs}>{wheel.name}</a>')
    simple = root / "simple"
    for project, links in projects.items():
        (simple / project).mkdir(parents=True, exist_ok=True)
        (simple / project / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (simple / "index.html").write_text(
        "<html><body>\n" + "\n".join(f'<a href="{p}/">{p}</a>' for p in sorted(projects)) + "\n</body></html>\n")
    return simple


def write_index_with_metadata(root: Path, wheel: Path, body: bytes) -> Path:
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
    return write_sdist(directory, "hangpkg-1.0", files)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class Trickle(_Quiet):
    """Serves wheels 4 KiB every 0.1 s (40 KB/s): an install that takes a while, for signals."""

    def copyfile(self, source: Any, outputfile: Any) -> None:
        if not self.path.endswith(".whl"):
            return super().copyfile(source, outputfile)
        while block := source.read(4096):
            outputfile.write(block)
            time.sleep(0.1)
        return None


@contextlib.contextmanager
def serve_dir(directory: Path, handler_class: type[http.server.SimpleHTTPRequestHandler] = _Quiet, *,
              tls: tuple[str, str] | None = None) -> Iterator[str]:
    """`http://127.0.0.1:PORT` serving `directory` until the block ends (`https://` with `tls`, a
    (certificate, key) pair: tests/support/tls.make_certs makes one)."""
    with http_server(handler=functools.partial(handler_class, directory=str(directory)), tls=tls) as server:
        yield server.url
