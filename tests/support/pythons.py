"""A site's mirror of uv's Pythons, made here (issue 35): a python-build-standalone-style
`install_only` tarball made from pyenv's 3.11.7 (its RUNPATH made $ORIGIN-relative, as
python-build-standalone's are), and a downloads JSON naming it by python-build-standalone's URL
with its sha256, for uv's own mirror settings (UV_PYTHON_INSTALL_MIRROR=file://...,
UV_PYTHON_DOWNLOADS_JSON_URL). Used by tests/installer/test_python_uv.py and
tests/export/test_standalone_pack.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.support.envs import CACHE, locked
from tests.support.wheels import sha256_file

PYENV_311 = Path("/root/.pyenv/versions/3.11.7")
BUILD = "20260101"  # the tarball's python-build-standalone-style release tag
TARBALL = f"cpython-3.11.7+{BUILD}-x86_64-unknown-linux-gnu-install_only.tar.gz"
# The URL uv's mirror setting rewrites: python-build-standalone's releases (uv help python install).
PBS = "https://github.com/astral-sh/python-build-standalone/releases/download"


def _relative_runpath(root: Path, old: bytes) -> None:
    """Rewrite an absolute RUNPATH (pyenv's lib/) in every ELF file under root to $ORIGIN/<rel>.

    The new string is shorter and NUL-padded in place in .dynstr: the ELF layout is unchanged.
    """
    lib = root / "lib"
    for path in root.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if not data.startswith(b"\x7fELF") or old + b"\0" not in data:
            continue
        rel = os.path.relpath(lib, path.parent)
        new = ("$ORIGIN" if rel == "." else f"$ORIGIN/{rel}").encode()
        assert len(new) <= len(old)
        path.chmod(0o755)
        path.write_bytes(data.replace(old + b"\0", new + b"\0" * (len(old) - len(new) + 1)))


def _build_tarball(out: Path) -> None:
    """pyenv's 3.11.7, without site-packages, tests or scripts, as python/{bin,lib,include}."""
    stage = out.parent / "stage"
    shutil.rmtree(stage, ignore_errors=True)
    top = stage / "python"

    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = Path(directory).relative_to(PYENV_311)
        skip = {"__pycache__"}
        if rel == Path("lib/python3.11"):
            skip |= {"test", "site-packages"}
        return skip & set(names)

    for part in ("lib", "include"):
        shutil.copytree(PYENV_311 / part, top / part, ignore=ignore, symlinks=True)
    (top / "lib/python3.11/site-packages").mkdir()
    (top / "bin").mkdir()
    shutil.copy2(PYENV_311 / "bin/python3.11", top / "bin/python3.11")
    for name in ("python3", "python"):
        (top / "bin" / name).symlink_to("python3.11")
    _relative_runpath(top, str(PYENV_311 / "lib").encode())
    # Relocatable: a copy elsewhere runs, with ssl and sqlite3, and loads its own libpython.
    moved = out.parent / "moved"
    shutil.rmtree(moved, ignore_errors=True)
    shutil.copytree(top, moved, symlinks=True)
    code = "import sys, ssl, sqlite3; print(sys.prefix)"
    res = subprocess.run([str(moved / "bin/python3"), "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/nonexistent", "LD_DEBUG": "libs"})
    assert res.returncode == 0 and res.stdout.strip() == str(moved), res.stderr[-2000:]
    assert f"init: {moved}/bin/../lib/libpython3.11.so" in res.stderr, "libpython came from elsewhere"
    shutil.rmtree(moved)
    with tarfile.open(out, "w:gz", compresslevel=1) as tar:
        tar.add(top, arcname="python")
    shutil.rmtree(stage)


def build_python_mirror() -> dict[str, str]:
    """A site's mirror of uv's Pythons: {mirror: file:// URL, json: the downloads list's path}.

    Built once and kept under the test cache (about 35 MB, 10 s), keyed by pyenv's build.
    """
    exe = PYENV_311 / "bin/python3.11"
    if not exe.is_file():
        pytest.skip(f"{exe} is not on this machine")
    st = exe.stat()
    key = hashlib.sha256(f"{exe}:{st.st_size}:{st.st_mtime_ns}:v1".encode()).hexdigest()[:16]
    root = CACHE / f"python-mirror-{key}"
    tarball = root / "mirror" / BUILD / TARBALL
    downloads = root / "downloads.json"
    with locked(CACHE / f"python-mirror-{key}.lock"):
        if not downloads.is_file():
            tarball.parent.mkdir(parents=True, exist_ok=True)
            _build_tarball(tarball)
            # uv's downloads-list format (its own download-metadata.json): one entry per build.
            entry = {"name": "cpython", "arch": {"family": "x86_64", "variant": None}, "os": "linux",
                     "libc": "gnu", "major": 3, "minor": 11, "patch": 7, "prerelease": "",
                     "url": f"{PBS}/{BUILD}/{TARBALL.replace('+', '%2B')}", "sha256": sha256_file(tarball),
                     "variant": None, "build": BUILD}
            downloads.write_text(json.dumps({"cpython-3.11.7-linux-x86_64-gnu": entry}, indent=1))
    return {"mirror": (root / "mirror").as_uri(), "json": str(downloads)}
