"""The test cache and the one CPU-torch environment every suite shares.

Built things that outlive one run (a venv with the real CPU torch wheel, a downloaded NCCL
wheel, compiled fake libraries) live under $TORCHFIT_TEST_CACHE (default
~/.cache/torchfit-tests), keyed by what decides them, each built under a file lock so two
pytest runs at once never build one entry twice. `cpu_torch_env` (the fixture in
tests/conftest.py) is the only builder of the CPU-torch venv: `pip install torch==2.13.0`
takes the local cp311 wheel (about a minute, once).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("TORCHFIT_TEST_CACHE") or Path.home() / ".cache" / "torchfit-tests")
CPU_TORCH = "2.13.0"


def python311() -> str | None:
    """A Python 3.11 (the local torch wheel is cp311), or None."""
    for cand in ("/root/.pyenv/versions/3.11.7/bin/python3", shutil.which("python3.11")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Serialise builders of one cache entry (two pytest runs at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def pip_env() -> dict[str, str]:
    """The environment for a pip that builds a cache entry: this checkout not on its path."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def build_cpu_torch_env() -> Path:
    """A venv prefix with CPU torch 2.13.0 (Python 3.11), built once and cached."""
    py = python311()
    if py is None:
        pytest.skip("needs Python 3.11 (the local torch wheel is cp311)")
    prefix = CACHE / f"venv-torch-{CPU_TORCH}-py311"
    marker = prefix / ".torchfit-complete"
    with locked(CACHE / f".lock-venv-torch-{CPU_TORCH}"):
        if not marker.exists():
            shutil.rmtree(prefix, ignore_errors=True)
            subprocess.run([py, "-m", "venv", str(prefix)], check=True, timeout=300)
            res = subprocess.run(
                [str(prefix / "bin" / "python"), "-m", "pip", "install", "-q", f"torch=={CPU_TORCH}"],
                capture_output=True, text=True, timeout=900, env=pip_env(),
            )
            if res.returncode != 0:
                pytest.fail(f"pip install torch=={CPU_TORCH} failed:\n{res.stderr[-3000:]}")
            marker.write_text(CPU_TORCH + "\n")
    return prefix


def tree_digest(root: Path) -> str:
    """One sha256 over every file under `root` (relative path and bytes; a link's target), e.g.
    an env's torch/: the files byte for byte."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes() if not path.is_symlink() else os.readlink(path).encode())
    return h.hexdigest()
